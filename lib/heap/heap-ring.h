/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The ring a profiled process writes its samples into and the plugin
 * reads: a memfd the plugin creates and formats, mapped by both. A header
 * page, then a power of two of data bytes. Writers (any thread of the
 * process) take a spin lock only to reserve their entry (marked
 * HEAP_RING_BUSY) by moving `head`, then copy it in unlocked and commit it
 * by marking it HEAP_RING_DATA: a thread that copies a large stack, or is
 * descheduled while it does, holds up no other writer. The one reader
 * stops at an entry not yet committed, and publishes what it consumed by
 * moving `tail`. An entry that would not fit before the end of the data
 * wraps: the bytes to the end become a padding entry (as they do when a
 * writer goes back to the start early, HEAP_RING_REWIND_AT).
 *
 * Each entry: a uint32_t length (the whole entry, a multiple of 8, header
 * included), a uint32_t kind (HEAP_RING_BUSY, HEAP_RING_DATA or
 * HEAP_RING_PAD), then the payload. The reader checks every length against
 * the ring: a process that scribbles over its ring costs its own profile,
 * nothing else.
 *
 * No allocation and no libc call but nanosleep, clock_gettime and madvise
 * on the writer's side: it runs inside malloc.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_RING_MAGIC 0x474e4952u /* "RING" */
#define HEAP_RING_HEADER 4096u
#define HEAP_RING_MIN_DATA 4096u
#define HEAP_RING_MAX_DATA (1ull << 30)

enum { HEAP_RING_DATA = 1, HEAP_RING_PAD = 2, HEAP_RING_BUSY = 3 };

struct heap_ring_header {
        uint32_t magic;
        uint32_t lock;
        uint64_t data_size;
        uint64_t head; /* bytes ever reserved (writers, under the lock) */
        uint64_t tail; /* bytes ever consumed (the reader) */
        /* Written by the process, read by the plugin. */
        uint64_t dropped;         /* entries that found the ring full */
        uint64_t timeouts;        /* of those, after waiting block_timeout_us */
        uint64_t lock_waits;      /* times a writer found the lock taken */
        uint64_t blocked_ns;      /* time writers waited for room */
        /* Set by the writer that found the ring past half full, and told
         * the reader (heap-wire.h); cleared by the reader once it read. */
        uint32_t wake_pending;
};

/* A writer whose entry would start this far or further into the data,
 * with a backlog of at most half the bytes behind it, pads the rest of
 * the data and starts again at its beginning: a ring the reader keeps up
 * with stays within the pages and cache lines its backlog needs, however
 * large it is (the rest absorbs a burst). */
#define HEAP_RING_REWIND_AT (1u << 20)

/* The writers map the data's pages in runs of this many bytes, a run
 * ahead of the head, on the ring's first pass (MADV_POPULATE_WRITE): a
 * page fault each, for every page the first time round, is what a process
 * joining a session pays most for at first (about 10 us a page under a
 * hypervisor that shadows page tables; a run in one call, less than
 * half). */
#define HEAP_RING_POPULATE_RUN (256u << 10)

struct heap_ring {
        struct heap_ring_header *h;
        uint8_t *data;
        uint64_t size; /* data bytes */
        /* Writers' (under the lock): data bytes from the start already
         * mapped on the first pass; the kernel refused to (no
         * MADV_POPULATE_WRITE before Linux 5.14): they fault in. */
        uint64_t populated;
        bool populate_refused;
};

/* The memfd size for a ring of (at least) data_size data bytes: a power
 * of two between the bounds, plus the header. */
size_t heap_ring_total_size(uint64_t data_size);

/* Formats total bytes at mem (the plugin, on a new memfd) and attaches. */
int heap_ring_format(void *mem, size_t total, struct heap_ring *ret);
/* Attaches to a formatted ring of total bytes: -EPROTO when it is not one. */
int heap_ring_attach(void *mem, size_t total, struct heap_ring *ret);

/* Writer: room for an entry of payload bytes. Returns where to write it,
 * reserved until heap_ring_end_write commits it, or NULL when the ring has
 * no room (counted in dropped): at once, or after waiting up to timeout_us
 * when block is set (counted in timeouts too). */
void *heap_ring_begin_write(struct heap_ring *r, uint32_t payload, bool block, uint32_t timeout_us);
/* Commits the entry begin_write returned (at). */
void heap_ring_end_write(struct heap_ring *r, void *at);

/* Reader: the next entry's payload and its size, or NULL when there is
 * none (or the next is not committed yet); -EBADMSG in *ret_error (and
 * NULL) when the ring is corrupt. Each
 * entry read is consumed by heap_ring_consume, which frees all that was
 * read so far. */
const void *heap_ring_read(struct heap_ring *r, uint64_t *pos, uint32_t *ret_size, int *ret_error);
void heap_ring_consume(struct heap_ring *r, uint64_t pos);
/* Bytes written and not consumed. */
uint64_t heap_ring_used(const struct heap_ring *r);
/* Writer, after an entry: true once each time the ring passes half full,
 * for the writer to wake the reader. */
bool heap_ring_wants_wake(struct heap_ring *r);
/* Reader: it read; the next writer past half full wakes it again. */
void heap_ring_woken(struct heap_ring *r);
