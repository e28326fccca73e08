/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sequence map of a session: (producer, writer) to the
 * trusted_packet_sequence_id its packets carry in this trace. */

#include <stdlib.h>

#include "core/sessions/session-internal.h"

static size_t seq_slot(uint16_t producer_id, uint16_t writer_id, size_t cap) {
        uint32_t key = (uint32_t) producer_id << 16 | writer_id;
        return (size_t) ((key * 2654435761u) >> 7) & (cap - 1);
}

static struct sequence_map *seq_lookup(struct sequence_map *table, size_t cap, uint16_t producer_id,
                                       uint16_t writer_id) {
        for (size_t i = seq_slot(producer_id, writer_id, cap);; i = (i + 1) & (cap - 1))
                if (table[i].sequence_id == 0 ||
                    (table[i].producer_id == producer_id && table[i].writer_id == writer_id))
                        return &table[i];
}

uint32_t session_sequence_id(struct session *s, uint16_t producer_id, uint16_t writer_id, bool *ret_first) {
        /* Called for every packet read: a hash table keeps it O(1) however
         * many writers there are. */
        if (s->seq_cap > 0) {
                struct sequence_map *m = seq_lookup(s->seqs, s->seq_cap, producer_id, writer_id);
                if (m->sequence_id != 0) {
                        if (ret_first)
                                *ret_first = !m->seen;
                        m->seen = true;
                        return m->sequence_id;
                }
        }
        if ((s->n_seqs + 1) * 4 > s->seq_cap * 3) {
                size_t cap = s->seq_cap ? s->seq_cap * 2 : 64;
                struct sequence_map *t = calloc(cap, sizeof(*t));
                if (!t)
                        return 0;
                for (size_t i = 0; i < s->seq_cap; i++)
                        if (s->seqs[i].sequence_id != 0)
                                *seq_lookup(t, cap, s->seqs[i].producer_id, s->seqs[i].writer_id) = s->seqs[i];
                free(s->seqs);
                s->seqs = t;
                s->seq_cap = cap;
        }
        struct sequence_map *m = seq_lookup(s->seqs, s->seq_cap, producer_id, writer_id);
        *m = (struct sequence_map) {
                .producer_id = producer_id,
                .writer_id = writer_id,
                .sequence_id = s->next_sequence_id++,
                .seen = true,
        };
        s->n_seqs++;
        if (ret_first)
                *ret_first = true;
        return m->sequence_id;
}

void session_sequence_unsee(struct session *s, uint16_t producer_id, uint16_t writer_id) {
        if (s->seq_cap == 0)
                return;
        struct sequence_map *m = seq_lookup(s->seqs, s->seq_cap, producer_id, writer_id);
        if (m->sequence_id != 0)
                m->seen = false;
}
