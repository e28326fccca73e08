/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The memory of the sample copies that wait for the worker: one ring,
 * mapped for writing when the session starts.
 *
 * The loop thread (the one producer) takes room at the head; the worker
 * (the one consumer) gives it back in the order it was taken, as it is
 * done with each copy. Room taken and never handed over (a sample the
 * queue refused) is given back at once when it was the last taken, and
 * otherwise with the next room the worker gives back. When everything
 * taken is back, the next room starts again at the ring's beginning, so a
 * worker that keeps up keeps reusing the same few hundred KiB.
 *
 * Why not malloc: a copy of 4 to 64 KiB came from malloc, and the
 * worker's pool took most back for the next copies; but each new page
 * (the queue's first second, a copy of a size the pool had none of,
 * glibc trimming its heap and growing it again) costs a page fault, and a
 * page touched for the first time costs 10 to 13 us on a virtual machine
 * with shadow page tables (5 to 7 us when mapped in one call, with
 * MADV_POPULATE_WRITE). Here the pages are mapped once, in one call.
 *
 * Positions are counted in bytes since the start (64-bit, never
 * wrapping): head - tail is what is taken and not back. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room is taken in multiples of this (the items' alignment). */
#define PERF_ARENA_ALIGN 64u

struct perf_arena {
        uint8_t *base;
        size_t size; /* 0: no arena */
        /* the loop thread's */
        uint64_t head;
        void *last;         /* the last room taken */
        uint64_t last_head; /* the head before it */
        uint64_t floor;     /* where the head last started again at the ring's beginning */
        /* the worker's: how far room is back (read by the loop thread) */
        uint64_t tail;
        uint64_t worker_tail; /* its own copy of it */
};

/* A ring of size bytes (rounded up to whole pages), its pages mapped for
 * writing now (best effort: a kernel without MADV_POPULATE_WRITE leaves
 * them to fault in). 0, or a negative errno. */
int perf_arena_init(struct perf_arena *a, size_t size);
void perf_arena_done(struct perf_arena *a);

static inline bool perf_arena_holds(const struct perf_arena *a, const void *p) {
        return a->size && (const uint8_t *) p >= a->base && (const uint8_t *) p < a->base + a->size;
}

/* Loop thread: n bytes (a multiple of PERF_ARENA_ALIGN), or NULL when the
 * ring has not that much room in one piece. */
void *perf_arena_take(struct perf_arena *a, size_t n);
/* Loop thread: the n bytes at p, taken and not handed over, are not
 * needed after all. */
void perf_arena_unused(struct perf_arena *a, void *p, size_t n);
/* Worker: done with the n bytes at p (the oldest it holds). */
void perf_arena_give_back(struct perf_arena *a, const void *p, size_t n);
/* Loop thread: bytes taken and not back (pads at the ring's end
 * included). */
uint64_t perf_arena_used(const struct perf_arena *a);
