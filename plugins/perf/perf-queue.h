/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The queue from linux.perf's loop thread, which reads the rings (the one
 * producer), to its worker thread (the one consumer). The loop thread
 * gathers items in a batch of its own and hands the batch over once per
 * drain: one lock and one wake-up per drain, not per sample.
 *
 * Two bounds, both counting the batch with what was handed over:
 *
 *   bytes  the record copies of samples waiting to be unwound
 *          (max_enqueued_footprint_kb);
 *   items  everything queued, the 0-byte notes of skipped samples
 *          included. Each item costs the worker at least one packet to
 *          write, so this bound is what keeps the time the worker needs to
 *          get through a full queue (and a flush or a stop waits for that)
 *          short.
 *
 * A sample (to unwind) or a note of one is refused at either bound that
 * applies to it; the caller keeps it and counts it. The kernel's
 * bookkeeping (process events, maps, losses, throttles) is never refused:
 * without it later stacks unwind wrong, or a kernel loss goes unreported.
 * It counts toward the item bound, so samples give way first, and once
 * the queue holds twice the item bound it is congested: the loop thread
 * then leaves the rest of the records in the kernel's rings for later,
 * where any overflow is counted by the kernel as lost records. */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf-arena.h"

enum perf_item_kind {
        PERF_ITEM_SAMPLE,   /* a sample record, to unwind */
        PERF_ITEM_NOTE,     /* a sample written without unwinding (0 bytes) */
        PERF_ITEM_RECORD,   /* a process event or mapping (comm, fork, exit, mmap2) */
        PERF_ITEM_LOST,     /* records the kernel lost */
        PERF_ITEM_THROTTLE, /* the kernel throttled a CPU's event */
        PERF_ITEM_TICK,     /* the read period: the worker reads the kernel's notes on processes */
        PERF_ITEM_FLUSH,
        PERF_ITEM_STOP,
};

struct perf_item {
        struct perf_item *next;
        uint8_t kind;
        uint8_t reason; /* NOTE: a SampleSkipReason, or 0 for a sample without stack */
        uint16_t misc;  /* NOTE: the record's misc (cpu mode) */
        uint32_t cpu, pid, tid;
        uint64_t time, count; /* NOTE, SAMPLE: timebase count; LOST: records lost; THROTTLE: throttles */
        uint32_t len;   /* the record's bytes */
        uint32_t extra; /* SAMPLE: bytes after the record, from PERF_ITEM_EXTRA(len): its thread's Python frames */
        uint32_t cap;   /* bytes allocated, header included */
        uint8_t rec[];
};

/* Where an item's extra bytes start in rec (8-byte aligned). */
#define PERF_ITEM_EXTRA(len) (((size_t) (len) + 7u) & ~(size_t) 7u)

/* What one item takes of the plugin's memory besides its record bytes
 * (its header and the allocator's share), and so how many items a
 * footprint of a given size stands for. */
#define PERF_ITEM_FOOTPRINT 64u
/* The item bound, whatever the footprint. A note costs the worker a few
 * microseconds, ASan or not: a queue of notes at this bound is written
 * out in well under a second, far from the plugin host's watchdog (10 s
 * by default) and from the 5 s a flush waits. Samples to unwind cost
 * more, but the byte bound holds them back first (their stack copies),
 * and at the stop they are written without unwinding after 3 s. */
#define PERF_QUEUE_MAX_ITEMS (1u << 16)

/* Items of at least PERF_POOL_STEP bytes (the copies of samples) are not
 * freed once the worker is done with them but come back to the loop
 * thread, in the same hand-overs as the batches, for the next copies: a
 * sample costs no malloc and free of tens of KiB (glibc's bins sorted,
 * its heap trimmed and grown again page by page). Sizes are counted in
 * steps, up to PERF_POOL_CLASSES steps; the pool keeps PERF_POOL_MAX_BYTES
 * at most, and frees the rest. */
#define PERF_POOL_STEP 4096u
#define PERF_POOL_CLASSES 32u
#define PERF_POOL_MAX_BYTES (4u << 20)

struct perf_queue {
        /* the loop thread's batch */
        struct perf_item *batch_head, **batch_tailp;
        uint64_t batch_bytes;
        size_t batch_items;
        /* the loop thread's pool: pool[c] holds items with room for at
         * least (c + 1) steps */
        struct perf_item *pool[PERF_POOL_CLASSES];
        /* the worker's items done with, not handed back yet */
        struct perf_item *done_head, **done_tailp;
        /* what the pool holds everywhere (both threads; atomic) */
        uint64_t pool_bytes;

        /* handed over (under mu; the two sizes are also read without it) */
        pthread_mutex_t mu;
        pthread_cond_t cv;
        struct perf_item *head, **tailp;
        uint64_t queued_bytes;
        size_t queued_items;
        struct perf_item *back; /* the worker's done items, for the loop thread's pool */

        uint64_t max_bytes;
        size_t max_items;
        /* where the loop thread's copies come from first, when set up
         * (perf_queue_use_arena); the pool's and malloc's otherwise */
        struct perf_arena arena;
};

/* max_bytes: the byte bound; the item bound follows from it (one item per
 * PERF_ITEM_FOOTPRINT bytes, at least one, at most PERF_QUEUE_MAX_ITEMS). */
int perf_queue_init(struct perf_queue *q, uint64_t max_bytes);
/* Frees whatever is still queued or batched. */
void perf_queue_done(struct perf_queue *q);
/* Copies of bytes or less come from a ring of that size (perf-arena.h)
 * while it has room. 0, or a negative errno (the queue then works as
 * before, from malloc). */
int perf_queue_use_arena(struct perf_queue *q, size_t bytes);

/* An item with room for len record bytes, zeroed but for kind and len;
 * NULL when out of memory. Freed with free(). */
struct perf_item *perf_item_new(enum perf_item_kind kind, size_t len);
/* The same with room bytes more, unused, past the record (for extra bytes
 * to come without a copy). */
struct perf_item *perf_item_new_room(enum perf_item_kind kind, size_t len, size_t room);

/* Loop thread: as perf_item_new_room, from the arena, or from the pool
 * when the item is of its sizes. Given back with perf_queue_item_free
 * (not handed over) or perf_queue_done_with (the worker's), never free(). */
struct perf_item *perf_queue_item_new(struct perf_queue *q, enum perf_item_kind kind, size_t len, size_t room);
/* Loop thread: it (of perf_queue_item_new, or perf_item_new), not handed
 * over, is not needed. */
void perf_queue_item_free(struct perf_queue *q, struct perf_item *it);
/* Loop thread: it with room for size bytes in all (header included): it
 * when it has, else a copy of its header and record bytes in a new item
 * (it is then freed), or NULL when out of memory (it is then unchanged). */
struct perf_item *perf_queue_item_grow(struct perf_queue *q, struct perf_item *it, size_t size);
/* Worker: it is done with; back to the arena, kept for the pool, or
 * freed. */
void perf_queue_done_with(struct perf_queue *q, struct perf_item *it);

/* Loop thread: whether an item of that kind and record length would be
 * taken now. */
bool perf_queue_room(const struct perf_queue *q, enum perf_item_kind kind, size_t len);
/* Loop thread. Adds it to the batch, or returns -ENOBUFS when a bound
 * refuses it (it then stays the caller's). */
int perf_queue_push(struct perf_queue *q, struct perf_item *it);
/* Loop thread: hands the batch to the worker. */
void perf_queue_publish(struct perf_queue *q);
/* Loop thread: items batched and queued (the worker's side read without
 * the lock: a bound, not an exact figure). */
size_t perf_queue_items(const struct perf_queue *q);
/* Loop thread: bookkeeping has filled the queue to twice its item bound;
 * leave the rings alone until the worker catches up. */
bool perf_queue_congested(const struct perf_queue *q);

/* Worker: the next item, waiting for one. */
struct perf_item *perf_queue_pop(struct perf_queue *q);
