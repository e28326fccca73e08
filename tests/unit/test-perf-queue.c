/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The perf plugin's queue from the ring reader to the worker: its bounds
 * in items and bytes, with nobody consuming and with a consumer. */

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "perf-queue.h"

#define DEFAULT_FOOTPRINT (64ull << 20) /* max_enqueued_footprint_kb's default */

static struct perf_item *new_item(enum perf_item_kind kind, size_t len) {
        struct perf_item *it = perf_item_new(kind, len);
        cr_assert_not_null(it);
        return it;
}

/* Pushes one item; returns whether the queue took it (freed if not). */
static bool push(struct perf_queue *q, enum perf_item_kind kind, size_t len) {
        struct perf_item *it = new_item(kind, len);
        int r = perf_queue_push(q, it);
        if (r < 0) {
                cr_assert_eq(r, -ENOBUFS);
                free(it);
                return false;
        }
        return true;
}

static size_t pop_all(struct perf_queue *q) {
        size_t n = 0;
        perf_queue_publish(q);
        while (perf_queue_items(q) > 0) {
                free(perf_queue_pop(q));
                n++;
        }
        return n;
}

Test(perf_queue, item_bound_follows_the_footprint) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, DEFAULT_FOOTPRINT), 0);
        cr_assert_eq(q.max_items, PERF_QUEUE_MAX_ITEMS, "the default footprint leaves the fixed bound");
        perf_queue_done(&q);
        cr_assert_eq(perf_queue_init(&q, 16 * 1024), 0);
        cr_assert_eq(q.max_items, 16 * 1024 / PERF_ITEM_FOOTPRINT, "one item per footprint share");
        perf_queue_done(&q);
        cr_assert_eq(perf_queue_init(&q, 1), 0);
        cr_assert_eq(q.max_items, 1, "never less than one");
        perf_queue_done(&q);
        cr_assert_eq(perf_queue_init(&q, UINT64_MAX), 0);
        cr_assert_eq(q.max_items, PERF_QUEUE_MAX_ITEMS);
        perf_queue_done(&q);
}

/* The loop thread outrunning a stuck worker: notes (0 bytes each) stop at
 * the item bound whether they sit in the batch or were handed over. */
Test(perf_queue, notes_stop_at_the_item_bound) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, DEFAULT_FOOTPRINT), 0);
        size_t taken = 0, refused = 0, pushes = 3 * q.max_items + 17;
        for (size_t k = 0; k < pushes; k++) {
                if (push(&q, PERF_ITEM_NOTE, 0))
                        taken++;
                else
                        refused++;
                /* A drain hands its batch over every so many records. */
                if (k % 1000 == 999)
                        perf_queue_publish(&q);
                cr_assert_leq(perf_queue_items(&q), q.max_items);
        }
        cr_assert_eq(taken, q.max_items, "%zu notes taken, the bound is %zu", taken, q.max_items);
        cr_assert_eq(refused, pushes - q.max_items);
        cr_assert_not(perf_queue_room(&q, PERF_ITEM_NOTE, 0));
        cr_assert_not(perf_queue_room(&q, PERF_ITEM_SAMPLE, 1));
        cr_assert_not(perf_queue_congested(&q), "notes alone never congest the queue");
        cr_assert_eq(pop_all(&q), taken);
        cr_assert(perf_queue_room(&q, PERF_ITEM_NOTE, 0), "room again once the worker took them");
        cr_assert(push(&q, PERF_ITEM_NOTE, 0));
        perf_queue_done(&q);
}

/* The same without a single hand-over: one drain's batch alone is bounded. */
Test(perf_queue, one_batch_is_bounded_too) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, 16 * 1024), 0);
        size_t taken = 0;
        for (size_t k = 0; k < 10 * q.max_items; k++)
                taken += push(&q, PERF_ITEM_NOTE, 0);
        cr_assert_eq(taken, q.max_items);
        cr_assert_eq(pop_all(&q), taken);
        perf_queue_done(&q);
}

/* Samples to unwind meet the byte bound first; notes of the samples it
 * refuses still go in, up to the item bound. */
Test(perf_queue, samples_meet_the_byte_bound_notes_the_item_bound) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, 64 * 1024), 0);
        size_t samples = 0, notes = 0;
        for (size_t k = 0; k < 4 * q.max_items; k++) {
                if (push(&q, PERF_ITEM_SAMPLE, 1000))
                        samples++;
                else
                        notes += push(&q, PERF_ITEM_NOTE, 0);
        }
        cr_assert_eq(samples, 64 * 1024 / 1000, "%zu samples of 1000 bytes in 64 KiB", samples);
        cr_assert_eq(samples + notes, q.max_items);
        cr_assert_eq(pop_all(&q), samples + notes);
        perf_queue_done(&q);
}

/* Process events, mappings, losses and throttles are never refused, even
 * past the item bound; at twice the bound the queue says it is congested. */
Test(perf_queue, bookkeeping_goes_past_the_bound_until_congested) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, 16 * 1024), 0);
        for (size_t k = 0; k <= q.max_items && push(&q, PERF_ITEM_NOTE, 0); k++)
                ;
        cr_assert_eq(perf_queue_items(&q), q.max_items);
        static const enum perf_item_kind kinds[] = { PERF_ITEM_RECORD, PERF_ITEM_LOST, PERF_ITEM_THROTTLE };
        size_t k = 0;
        while (!perf_queue_congested(&q)) {
                cr_assert(push(&q, kinds[k % 3], 64), "bookkeeping item %zu refused", k);
                k++;
                cr_assert_leq(perf_queue_items(&q), 2 * q.max_items);
        }
        cr_assert_eq(k, q.max_items);
        cr_assert(push(&q, PERF_ITEM_FLUSH, 0), "a flush is never refused");
        cr_assert(push(&q, PERF_ITEM_STOP, 0), "nor a stop");
        cr_assert_not(push(&q, PERF_ITEM_NOTE, 0));
        cr_assert_eq(pop_all(&q), 2 * q.max_items + 2);
        cr_assert_not(perf_queue_congested(&q));
        perf_queue_done(&q);
}

/* What is left at the end is freed with the queue (checked under ASan). */
Test(perf_queue, done_frees_what_is_left) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, 16 * 1024), 0);
        for (int k = 0; k < 100; k++)
                cr_assert(push(&q, PERF_ITEM_SAMPLE, 100));
        perf_queue_publish(&q);
        for (int k = 0; k < 10; k++)
                cr_assert(push(&q, PERF_ITEM_NOTE, 0));
        perf_queue_done(&q);
}

/* A worker taking items while the loop thread pushes: every item taken is
 * popped once, in order, and the queue never holds more than its bound. */
struct consumer {
        struct perf_queue *q;
        uint64_t popped, last_seq;
        bool in_order;
};

static void *consume(void *userdata) {
        struct consumer *c = userdata;
        for (;;) {
                struct perf_item *it = perf_queue_pop(c->q);
                bool stop = it->kind == PERF_ITEM_STOP;
                if (!stop) {
                        c->in_order &= it->count > c->last_seq;
                        c->last_seq = it->count;
                        c->popped++;
                }
                free(it);
                if (stop)
                        return NULL;
        }
}

Test(perf_queue, with_a_consumer) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, 16 * 1024), 0);
        struct consumer c = { .q = &q, .in_order = true };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, consume, &c), 0);
        uint64_t taken = 0, refused = 0;
        for (uint64_t k = 1; k <= 200000; k++) {
                struct perf_item *it = new_item(PERF_ITEM_NOTE, 0);
                it->count = k;
                if (perf_queue_push(&q, it) < 0) {
                        free(it);
                        refused++;
                } else
                        taken++;
                cr_assert_leq(perf_queue_items(&q), q.max_items);
                if (k % 64 == 0)
                        perf_queue_publish(&q);
        }
        cr_assert(push(&q, PERF_ITEM_STOP, 0));
        perf_queue_publish(&q);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert_eq(c.popped, taken, "%llu popped, %llu taken (%llu refused)", (unsigned long long) c.popped,
                     (unsigned long long) taken, (unsigned long long) refused);
        cr_assert(c.in_order);
        cr_assert_eq(perf_queue_items(&q), 0);
        perf_queue_done(&q);
}

/* A sample's extra bytes (its Python frames, after the record) count
 * toward the byte bound as its record does, and leave with it. */
Test(perf_queue, extra_bytes_count_toward_the_byte_bound) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, 16 * 1024), 0);
        struct perf_item *it = new_item(PERF_ITEM_SAMPLE, 1024);
        it->extra = 14 * 1024;
        cr_assert_eq(perf_queue_push(&q, it), 0);
        cr_assert_eq(q.batch_bytes, 15 * 1024);
        cr_assert_not(push(&q, PERF_ITEM_SAMPLE, 2048), "past the bound with the extra bytes");
        cr_assert(push(&q, PERF_ITEM_SAMPLE, 1024));
        perf_queue_publish(&q);
        free(perf_queue_pop(&q));
        cr_assert_eq(q.queued_bytes, 1024, "the extra bytes left with their item");
        cr_assert_eq(pop_all(&q), 1);
        perf_queue_done(&q);
}

/* The worker's items of the pool's sizes come back to the reader for its
 * next copies (after a hand-over each way); small ones are freed. */
Test(perf_queue, large_items_come_back_for_reuse) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, DEFAULT_FOOTPRINT), 0);
        struct perf_item *big = perf_queue_item_new(&q, PERF_ITEM_RECORD, 33000, 100);
        struct perf_item *small = perf_queue_item_new(&q, PERF_ITEM_RECORD, 200, 0);
        cr_assert(big && small);
        cr_assert_eq(big->len, 33000);
        cr_assert_eq(perf_queue_push(&q, big), 0);
        cr_assert_eq(perf_queue_push(&q, small), 0);
        perf_queue_publish(&q);
        struct perf_item *a = perf_queue_pop(&q), *b = perf_queue_pop(&q);
        cr_assert(a == big && b == small);
        perf_queue_done_with(&q, a);
        perf_queue_done_with(&q, b); /* freed: ASan would see it otherwise */
        cr_assert_eq(q.pool_bytes, 9 * PERF_POOL_STEP, "%llu", (unsigned long long) q.pool_bytes);
        /* The worker hands it back as it takes the next item, the reader
         * gets it as it hands over its next batch. */
        cr_assert_eq(perf_queue_push(&q, perf_item_new(PERF_ITEM_TICK, 0)), 0);
        perf_queue_publish(&q);
        free(perf_queue_pop(&q));
        cr_assert_null(q.pool[8]);
        cr_assert_eq(perf_queue_push(&q, perf_item_new(PERF_ITEM_TICK, 0)), 0);
        perf_queue_publish(&q);
        cr_assert_eq(q.pool[8], big);
        /* A copy of the same size, or a step smaller, takes it again. */
        struct perf_item *again = perf_queue_item_new(&q, PERF_ITEM_SAMPLE, 30000, 0);
        cr_assert_eq(again, big);
        cr_assert_eq(again->kind, PERF_ITEM_SAMPLE);
        cr_assert_eq(again->len, 30000);
        cr_assert_eq(again->extra, 0);
        cr_assert_eq(q.pool_bytes, 0);
        /* Two steps too small for it: a new one. */
        perf_queue_done_with(&q, again);
        free(perf_queue_pop(&q));
        cr_assert_eq(perf_queue_push(&q, perf_item_new(PERF_ITEM_TICK, 0)), 0);
        perf_queue_publish(&q);
        struct perf_item *other = perf_queue_item_new(&q, PERF_ITEM_RECORD, 20000, 0);
        cr_assert_neq(other, big);
        free(other);
        perf_queue_done(&q);
}

/* The pool keeps PERF_POOL_MAX_BYTES at most: the rest is freed. */
Test(perf_queue, the_pool_is_bounded) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, DEFAULT_FOOTPRINT), 0);
        size_t n = PERF_POOL_MAX_BYTES / (16 * PERF_POOL_STEP) + 8;
        for (size_t k = 0; k < n; k++)
                perf_queue_done_with(&q, perf_queue_item_new(&q, PERF_ITEM_RECORD, 16 * PERF_POOL_STEP - 200, 0));
        cr_assert_leq(q.pool_bytes, PERF_POOL_MAX_BYTES);
        cr_assert_geq(q.pool_bytes, PERF_POOL_MAX_BYTES - 16 * PERF_POOL_STEP);
        perf_queue_done(&q);
}

/* Copies from the arena (perf-arena.h) with a worker taking them as they
 * come: each copy reaches the worker with the bytes the loop thread wrote
 * (no room handed out twice while held) and its room comes back. While
 * the worker keeps up, every copy comes from the arena (room that did not
 * come back would run it dry); when the loop thread runs ahead, the
 * copies it has no room for come from malloc and go back the same way. */
struct checker {
        struct perf_queue *q;
        uint64_t popped, bad, in_arena, done; /* done: atomic */
};

static void *check_copies(void *userdata) {
        struct checker *c = userdata;
        for (;;) {
                struct perf_item *it = perf_queue_pop(c->q);
                if (it->kind == PERF_ITEM_STOP) {
                        free(it);
                        return NULL;
                }
                for (uint32_t k = 0; k < it->len; k++)
                        c->bad += it->rec[k] != (uint8_t) (it->count + k);
                c->in_arena += perf_arena_holds(&c->q->arena, it);
                c->popped++;
                perf_queue_done_with(c->q, it);
                __atomic_fetch_add(&c->done, 1, __ATOMIC_RELEASE);
        }
}

Test(perf_queue, copies_from_the_arena_reach_the_worker_whole) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, DEFAULT_FOOTPRINT), 0);
        cr_assert_eq(perf_queue_use_arena(&q, 1u << 20), 0);
        cr_assert_eq(perf_queue_use_arena(&q, 1u << 20), -EBUSY);
        struct checker c = { .q = &q };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, check_copies, &c), 0);
        uint64_t taken = 0, refused = 0, lockstep_from_arena = 0;
        srand(3);
        for (uint64_t k = 1; k <= 40000; k++) {
                bool lockstep = k <= 20000;
                size_t len = (size_t) rand() % 40000 + 1;
                struct perf_item *it = perf_queue_item_new(&q, PERF_ITEM_RECORD, len, 0);
                cr_assert_not_null(it);
                lockstep_from_arena += lockstep && perf_arena_holds(&q.arena, it);
                it->kind = PERF_ITEM_SAMPLE;
                it->count = k;
                for (size_t b = 0; b < len; b++)
                        it->rec[b] = (uint8_t) (k + b);
                /* Now and then one not handed over after all. */
                if (k % 97 == 0) {
                        perf_queue_item_free(&q, it);
                        lockstep_from_arena -= lockstep;
                        continue;
                }
                if (perf_queue_push(&q, it) < 0) {
                        /* At the queue's bounds: the loop thread counts
                         * such a sample and frees its copy. Only when it
                         * runs ahead of a worker that a load beside
                         * slowed down. */
                        cr_assert(!lockstep, "copy %llu refused with 16 at most in flight", (unsigned long long) k);
                        perf_queue_item_free(&q, it);
                        refused++;
                } else
                        taken++;
                if (k % 16 == 0) {
                        perf_queue_publish(&q);
                        /* The first half waits for the worker each time:
                         * 16 copies of 40 KB at most in flight. */
                        while (lockstep && __atomic_load_n(&c.done, __ATOMIC_ACQUIRE) < taken)
                                sched_yield();
                }
        }
        cr_assert_eq(perf_queue_push(&q, perf_item_new(PERF_ITEM_STOP, 0)), 0);
        perf_queue_publish(&q);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert_eq(c.popped, taken);
        cr_assert_eq(taken + refused, 40000 - 40000 / 97);
        cr_assert_eq(c.bad, 0, "%llu bytes of the copies changed before the worker read them",
                     (unsigned long long) c.bad);
        cr_assert_eq(lockstep_from_arena, 20000 - 20000 / 97, "%llu copies of the worker's pace from the arena",
                     (unsigned long long) lockstep_from_arena);
        cr_assert_gt(c.in_arena, lockstep_from_arena);
        cr_assert_eq(perf_arena_used(&q.arena), 0, "all the room is back");
        perf_queue_done(&q);
}

/* A copy from the arena that needs more room (a sample's Python frames)
 * moves to a larger one with its header and record; the old room is not
 * lost. One from malloc grows in place as before. */
Test(perf_queue, an_arena_copy_grows_into_a_new_one) {
        struct perf_queue q;
        cr_assert_eq(perf_queue_init(&q, DEFAULT_FOOTPRINT), 0);
        cr_assert_eq(perf_queue_use_arena(&q, 64 * 1024), 0);
        struct perf_item *it = perf_queue_item_new(&q, PERF_ITEM_RECORD, 1000, 0);
        cr_assert(perf_arena_holds(&q.arena, it));
        it->kind = PERF_ITEM_SAMPLE;
        it->pid = 42;
        memset(it->rec, 0xab, 1000);
        cr_assert_eq(perf_queue_item_grow(&q, it, 512), it, "room enough: the same item");
        struct perf_item *grown = perf_queue_item_grow(&q, it, sizeof(*it) + 5000);
        cr_assert(grown && grown != it && perf_arena_holds(&q.arena, grown));
        cr_assert_geq(grown->cap, sizeof(*it) + 5000);
        cr_assert(grown->kind == PERF_ITEM_SAMPLE && grown->pid == 42 && grown->len == 1000);
        for (size_t b = 0; b < 1000; b++)
                cr_assert_eq(grown->rec[b], 0xab);
        cr_assert_eq(perf_queue_push(&q, grown), 0);
        perf_queue_publish(&q);
        perf_queue_done_with(&q, perf_queue_pop(&q));
        cr_assert_eq(perf_arena_used(&q.arena), 0, "the first room went back with the second");
        /* Larger than the arena: from malloc, grown by realloc. */
        struct perf_item *big = perf_queue_item_new(&q, PERF_ITEM_RECORD, 100 * 1024, 0);
        cr_assert(big && !perf_arena_holds(&q.arena, big));
        big = perf_queue_item_grow(&q, big, sizeof(*big) + 200 * 1024);
        cr_assert(big && big->cap >= sizeof(*big) + 200 * 1024);
        perf_queue_item_free(&q, big);
        perf_queue_done(&q);
}
