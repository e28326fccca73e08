/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "heap-ring.h"

#define ENTRY_HEADER 8u

static uint64_t align8(uint64_t v) {
        return (v + 7u) & ~(uint64_t) 7u;
}

size_t heap_ring_total_size(uint64_t data_size) {
        uint64_t n = HEAP_RING_MIN_DATA;
        while (n < data_size && n < HEAP_RING_MAX_DATA)
                n <<= 1;
        return (size_t) (HEAP_RING_HEADER + n);
}

static bool pow2(uint64_t v) {
        return v && !(v & (v - 1));
}

int heap_ring_format(void *mem, size_t total, struct heap_ring *ret) {
        if (total <= HEAP_RING_HEADER || !pow2(total - HEAP_RING_HEADER))
                return -EINVAL;
        memset(mem, 0, sizeof(struct heap_ring_header));
        struct heap_ring_header *h = mem;
        h->data_size = total - HEAP_RING_HEADER;
        __atomic_store_n(&h->magic, HEAP_RING_MAGIC, __ATOMIC_RELEASE);
        return heap_ring_attach(mem, total, ret);
}

int heap_ring_attach(void *mem, size_t total, struct heap_ring *ret) {
        struct heap_ring_header *h = mem;
        if (total <= HEAP_RING_HEADER || __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != HEAP_RING_MAGIC ||
            h->data_size != total - HEAP_RING_HEADER || !pow2(h->data_size))
                return -EPROTO;
        *ret = (struct heap_ring) { .h = h, .data = (uint8_t *) mem + HEAP_RING_HEADER, .size = h->data_size };
        return 0;
}

static void lock(struct heap_ring_header *h) {
        if (__atomic_exchange_n(&h->lock, 1, __ATOMIC_ACQUIRE) == 0)
                return;
        __atomic_fetch_add(&h->lock_waits, 1, __ATOMIC_RELAXED);
        for (unsigned spins = 0;; spins++) {
                if (__atomic_load_n(&h->lock, __ATOMIC_RELAXED) == 0 &&
                    __atomic_exchange_n(&h->lock, 1, __ATOMIC_ACQUIRE) == 0)
                        return;
                if (spins >= 64) {
                        /* The holder may be descheduled: let it run. */
                        struct timespec ts = { .tv_nsec = 1000 };
                        nanosleep(&ts, NULL);
                } else {
#if defined(__x86_64__) || defined(__i386__)
                        __builtin_ia32_pause();
#endif
                }
        }
}

static void unlock(struct heap_ring_header *h) {
        __atomic_store_n(&h->lock, 0, __ATOMIC_RELEASE);
}

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Room for need bytes at head (with the padding a wrap takes): where the
 * entry goes, or NULL. Under the lock. */
static uint8_t *room(struct heap_ring *r, uint64_t need) {
        uint64_t head = r->h->head, tail = __atomic_load_n(&r->h->tail, __ATOMIC_ACQUIRE);
        uint64_t pos = head & (r->size - 1), to_end = r->size - pos, used = head - tail;
        uint64_t pad = to_end < need ? to_end : 0;
        /* Back to the start early while the reader keeps up, so that a
         * large ring touches no more of its pages than its backlog
         * needs. */
        if (!pad && pos >= HEAP_RING_REWIND_AT && used + need <= pos / 2)
                pad = to_end;
        if (used + pad + need > r->size)
                return NULL;
        if (pad) {
                uint32_t hdr[2] = { (uint32_t) pad, HEAP_RING_PAD };
                memcpy(r->data + pos, hdr, sizeof(hdr));
                __atomic_store_n(&r->h->head, head + pad, __ATOMIC_RELEASE);
                pos = 0;
        }
        return r->data + pos;
}

/* Maps the data's pages in [from, to) (offsets, multiples of the page
 * size or the end) for writing, outside the lock: a writer that gets
 * there first takes its page's fault itself. */
static void populate(struct heap_ring *r, uint64_t from, uint64_t to) {
#ifdef MADV_POPULATE_WRITE
        /* The program's errno is its own (this runs inside its malloc). */
        int saved = errno;
        /* A kernel without it (EINVAL): not asked again. Out of memory, or
         * a signal in between: the faults will say so or do it. */
        if (madvise(r->data + from, to - from, MADV_POPULATE_WRITE) < 0 && errno == EINVAL)
                __atomic_store_n(&r->populate_refused, true, __ATOMIC_RELAXED);
        errno = saved;
#else
        (void) from;
        (void) to;
        __atomic_store_n(&r->populate_refused, true, __ATOMIC_RELAXED);
#endif
}

void *heap_ring_begin_write(struct heap_ring *r, uint32_t payload, bool block, uint32_t timeout_us) {
        uint64_t need = align8((uint64_t) payload + ENTRY_HEADER);
        if (need > r->size / 2) {
                __atomic_fetch_add(&r->h->dropped, 1, __ATOMIC_RELAXED);
                return NULL;
        }
        lock(r->h);
        uint8_t *at = room(r, need);
        if (!at && block) {
                uint64_t start = now_ns(), deadline = start + (uint64_t) timeout_us * 1000u;
                while (!at) {
                        unlock(r->h);
                        struct timespec ts = { .tv_nsec = 100000 };
                        nanosleep(&ts, NULL);
                        uint64_t t = now_ns();
                        lock(r->h);
                        at = room(r, need);
                        if (!at && t >= deadline) {
                                __atomic_fetch_add(&r->h->timeouts, 1, __ATOMIC_RELAXED);
                                break;
                        }
                }
                __atomic_fetch_add(&r->h->blocked_ns, now_ns() - start, __ATOMIC_RELAXED);
        }
        if (!at) {
                unlock(r->h);
                __atomic_fetch_add(&r->h->dropped, 1, __ATOMIC_RELAXED);
                return NULL;
        }
        uint32_t hdr[2] = { (uint32_t) need, HEAP_RING_BUSY };
        memcpy(at, hdr, sizeof(hdr));
        /* Reserved: the reader sees it, and waits for its commit. */
        __atomic_store_n(&r->h->head, r->h->head + need, __ATOMIC_RELEASE);
        uint64_t from = 0, to = 0, end = (uint64_t) (at - r->data) + need;
        if (end + HEAP_RING_POPULATE_RUN > r->populated && r->populated < r->size &&
            !__atomic_load_n(&r->populate_refused, __ATOMIC_RELAXED)) {
                /* The run that holds the entry's end and the next one. */
                from = r->populated;
                to = (end + 2 * (uint64_t) HEAP_RING_POPULATE_RUN - 1) & ~((uint64_t) HEAP_RING_POPULATE_RUN - 1);
                if (to > r->size)
                        to = r->size;
                r->populated = to;
        }
        unlock(r->h);
        if (to > from)
                populate(r, from, to);
        return at + ENTRY_HEADER;
}

void heap_ring_end_write(struct heap_ring *r, void *at) {
        (void) r;
        uint32_t *kind = (uint32_t *) ((uint8_t *) at - ENTRY_HEADER) + 1;
        __atomic_store_n(kind, HEAP_RING_DATA, __ATOMIC_RELEASE);
}

const void *heap_ring_read(struct heap_ring *r, uint64_t *pos, uint32_t *ret_size, int *ret_error) {
        *ret_error = 0;
        uint64_t head = __atomic_load_n(&r->h->head, __ATOMIC_ACQUIRE);
        for (;;) {
                if (*pos == head)
                        return NULL;
                if (head - *pos > r->size || (*pos & 7u)) {
                        *ret_error = -EBADMSG;
                        return NULL;
                }
                uint64_t off = *pos & (r->size - 1);
                uint32_t hdr[2];
                hdr[0] = __atomic_load_n((uint32_t *) (r->data + off), __ATOMIC_RELAXED);
                hdr[1] = __atomic_load_n((uint32_t *) (r->data + off) + 1, __ATOMIC_ACQUIRE);
                if (hdr[0] < ENTRY_HEADER || (hdr[0] & 7u) || hdr[0] > r->size - off || hdr[0] > head - *pos ||
                    (hdr[1] != HEAP_RING_DATA && hdr[1] != HEAP_RING_PAD && hdr[1] != HEAP_RING_BUSY)) {
                        *ret_error = -EBADMSG;
                        return NULL;
                }
                if (hdr[1] == HEAP_RING_BUSY)
                        return NULL; /* its writer is still copying it in */
                *pos += hdr[0];
                if (hdr[1] == HEAP_RING_PAD)
                        continue;
                *ret_size = hdr[0] - ENTRY_HEADER;
                return r->data + off + ENTRY_HEADER;
        }
}

void heap_ring_consume(struct heap_ring *r, uint64_t pos) {
        __atomic_store_n(&r->h->tail, pos, __ATOMIC_RELEASE);
}

uint64_t heap_ring_used(const struct heap_ring *r) {
        return __atomic_load_n(&r->h->head, __ATOMIC_ACQUIRE) - __atomic_load_n(&r->h->tail, __ATOMIC_ACQUIRE);
}

bool heap_ring_wants_wake(struct heap_ring *r) {
        return heap_ring_used(r) > r->size / 2 && !__atomic_exchange_n(&r->h->wake_pending, 1, __ATOMIC_ACQ_REL);
}

void heap_ring_woken(struct heap_ring *r) {
        __atomic_store_n(&r->h->wake_pending, 0, __ATOMIC_RELEASE);
}
