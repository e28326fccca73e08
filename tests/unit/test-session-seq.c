/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The session's (producer, writer) -> trusted_packet_sequence_id map. */

#include <criterion/criterion.h>
#include <stdlib.h>

#include "core/sessions/session-internal.h"

Test(session_seq, ids_are_distinct_stable_and_first_is_reported_once) {
        struct session s = { .next_sequence_id = SERVICE_SEQUENCE_ID + 1 };
        enum { N_PRODUCERS = 40, N_WRITERS = 150 };
        static uint32_t ids[N_PRODUCERS][N_WRITERS];
        bool first;

        for (unsigned p = 0; p < N_PRODUCERS; p++)
                for (unsigned w = 0; w < N_WRITERS; w++) {
                        ids[p][w] = session_sequence_id(&s, (uint16_t) (p + 1), (uint16_t) (w + 1), &first);
                        cr_assert(first, "(%u, %u) was seen before", p + 1, w + 1);
                        cr_assert_gt(ids[p][w], SERVICE_SEQUENCE_ID, "collides with the service's own sequence");
                }
        cr_assert_eq(s.n_seqs, (size_t) N_PRODUCERS * N_WRITERS);
        /* Every id is new: they were handed out in order. */
        for (unsigned p = 0; p < N_PRODUCERS; p++)
                for (unsigned w = 0; w < N_WRITERS; w++)
                        cr_assert_eq(ids[p][w], SERVICE_SEQUENCE_ID + 1 + p * N_WRITERS + w);
        /* Asking again, in another order, gives the same ids, not first. */
        for (unsigned w = 0; w < N_WRITERS; w++)
                for (unsigned p = N_PRODUCERS; p-- > 0;) {
                        cr_assert_eq(session_sequence_id(&s, (uint16_t) (p + 1), (uint16_t) (w + 1), &first),
                                     ids[p][w]);
                        cr_assert_not(first);
                }
        /* Writer ids that hash alike across producers stay apart. */
        uint32_t a = session_sequence_id(&s, 0x8000, 1, &first);
        uint32_t b = session_sequence_id(&s, 1, 0x8000, &first);
        cr_assert_neq(a, b);
        cr_assert_eq(session_sequence_id(&s, 0x8000, 1, NULL), a);
        free(s.seqs);
}
