/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ring the perf plugin's stack copies come from: room taken and given
 * back in order, over many turns of the ring, never overlapping what is
 * still held; room not needed after all; a ring with no room. */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "perf-arena.h"

#define RING (64u * 1024u)

struct held {
        uint8_t *p;
        size_t n;
        uint8_t mark;
};

static void fill(const struct held *h) {
        memset(h->p, h->mark, h->n);
}

static void check(const struct held *h) {
        for (size_t k = 0; k < h->n; k++)
                cr_assert_eq(h->p[k], h->mark, "byte %zu of room %p (%zu bytes) was overwritten", k, (void *) h->p,
                             h->n);
}

/* Random sizes, up to half the ring, taken and given back in order over
 * some thousand turns of the ring: each piece lies in the ring, aligned,
 * and keeps what was written into it until it is given back. */
Test(perf_arena, room_held_is_never_handed_out_twice) {
        struct perf_arena a;
        cr_assert_eq(perf_arena_init(&a, RING), 0);
        cr_assert_eq(a.size, RING);
        struct held q[256];
        size_t head = 0, tail = 0, taken = 0, refused = 0;
        uint8_t mark = 0;
        srand(7);
        for (size_t step = 0; step < 400000; step++) {
                if (rand() % 2 && head - tail < 256) {
                        size_t n = ((size_t) rand() % (RING / 2 / PERF_ARENA_ALIGN) + 1) * PERF_ARENA_ALIGN;
                        uint8_t *p = perf_arena_take(&a, n);
                        if (!p) {
                                refused++;
                                cr_assert_gt(head, tail, "an empty ring refused %zu bytes", n);
                                continue;
                        }
                        cr_assert(perf_arena_holds(&a, p) && perf_arena_holds(&a, p + n - 1));
                        cr_assert_eq((uintptr_t) p % PERF_ARENA_ALIGN, 0);
                        struct held *h = &q[head++ % 256];
                        *h = (struct held) { .p = p, .n = n, .mark = ++mark };
                        fill(h);
                        taken += n;
                } else if (tail < head) {
                        struct held *h = &q[tail++ % 256];
                        check(h);
                        perf_arena_give_back(&a, h->p, h->n);
                }
                cr_assert_leq(perf_arena_used(&a), RING);
        }
        while (tail < head) {
                check(&q[tail % 256]);
                perf_arena_give_back(&a, q[tail % 256].p, q[tail % 256].n);
                tail++;
        }
        cr_assert_eq(perf_arena_used(&a), 0, "%llu bytes not back", (unsigned long long) perf_arena_used(&a));
        cr_assert_gt(taken, 1000u * RING, "the ring turned %zu times only", taken / RING);
        cr_assert_gt(refused, 0, "the ring was never full: the test does not look at the edges");
        perf_arena_done(&a);
}

/* With everything back, the next room is the ring's beginning (its pages
 * warm), and all of the ring can be taken again at once. */
Test(perf_arena, starts_again_at_the_beginning_when_all_is_back) {
        struct perf_arena a;
        cr_assert_eq(perf_arena_init(&a, RING), 0);
        void *x = perf_arena_take(&a, 4096), *y = perf_arena_take(&a, 8192);
        cr_assert(x == a.base && y == a.base + 4096);
        perf_arena_give_back(&a, x, 4096);
        perf_arena_give_back(&a, y, 8192);
        cr_assert_eq(perf_arena_used(&a), 0);
        void *z = perf_arena_take(&a, RING);
        cr_assert_eq(z, a.base, "the whole ring, from its beginning");
        cr_assert_null(perf_arena_take(&a, PERF_ARENA_ALIGN), "and nothing more");
        perf_arena_give_back(&a, z, RING);
        cr_assert_eq(perf_arena_used(&a), 0);
        perf_arena_done(&a);
}

/* Room not needed after all: the last taken is back at once; an older one
 * is passed over when the worker gives back the room after it. */
Test(perf_arena, room_not_needed_comes_back) {
        struct perf_arena a;
        cr_assert_eq(perf_arena_init(&a, RING), 0);
        void *x = perf_arena_take(&a, 1024);
        perf_arena_unused(&a, x, 1024);
        cr_assert_eq(perf_arena_used(&a), 0);
        cr_assert_eq(perf_arena_take(&a, 2048), x, "the same room again");
        void *y = perf_arena_take(&a, 1024);
        perf_arena_unused(&a, x, 2048); /* not the last: a hole */
        cr_assert_eq(perf_arena_used(&a), 3072);
        perf_arena_give_back(&a, y, 1024);
        cr_assert_eq(perf_arena_used(&a), 0, "the hole went with the room after it");
        perf_arena_done(&a);
}

/* Sizes the ring cannot give: more than it has free in one piece, more
 * than the ring, not a multiple of the alignment, none. */
Test(perf_arena, no_room_is_refused) {
        struct perf_arena a;
        cr_assert_eq(perf_arena_init(&a, RING), 0);
        void *x = perf_arena_take(&a, 40 * 1024);
        cr_assert_not_null(x);
        cr_assert_null(perf_arena_take(&a, 40 * 1024), "24 KiB left");
        cr_assert_null(perf_arena_take(&a, RING + PERF_ARENA_ALIGN));
        cr_assert_null(perf_arena_take(&a, 100));
        cr_assert_null(perf_arena_take(&a, 0));
        void *y = perf_arena_take(&a, 24 * 1024);
        cr_assert_not_null(y, "what is left, to the end of the ring");
        perf_arena_give_back(&a, x, 40 * 1024);
        /* The room at the beginning is back; the tail end is not. */
        void *z = perf_arena_take(&a, 40 * 1024);
        cr_assert_eq(z, a.base);
        perf_arena_give_back(&a, y, 24 * 1024);
        perf_arena_give_back(&a, z, 40 * 1024);
        cr_assert_eq(perf_arena_used(&a), 0);
        perf_arena_done(&a);
        struct perf_arena none = {};
        cr_assert_null(perf_arena_take(&none, 64), "no ring, no room");
        cr_assert_not(perf_arena_holds(&none, &none));
}
