/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/prefault.h"
#include "perf-arena.h"

int perf_arena_init(struct perf_arena *a, size_t size) {
        *a = (struct perf_arena) {};
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        if (size == 0 || size > SIZE_MAX - page)
                return -EINVAL;
        size = (size + page - 1) / page * page;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return -errno;
        (void) prefault_write(p, size);
        a->base = p;
        a->size = size;
        return 0;
}

void perf_arena_done(struct perf_arena *a) {
        if (a->size)
                munmap(a->base, a->size);
        *a = (struct perf_arena) {};
}

static uint64_t floor_of(const struct perf_arena *a) {
        return __atomic_load_n(&a->floor, __ATOMIC_RELAXED);
}

uint64_t perf_arena_used(const struct perf_arena *a) {
        return a->head - MAX(__atomic_load_n(&a->tail, __ATOMIC_ACQUIRE), floor_of(a));
}

void *perf_arena_take(struct perf_arena *a, size_t n) {
        if (!a->size || n == 0 || n > a->size || n % PERF_ARENA_ALIGN)
                return NULL;
        /* Acquire: the worker's reads of the room it gave back are done.
         * Room before the floor is back too, whatever the worker says. */
        uint64_t tail = MAX(__atomic_load_n(&a->tail, __ATOMIC_ACQUIRE), floor_of(a));
        uint64_t at = a->head;
        size_t pos = (size_t) (at % a->size);
        /* Everything back: start again at the beginning, where the pages
         * are warm. The worker's tail passes the rest of the ring when it
         * gives back what comes next; until then the floor stands for it. */
        if (at == tail && pos != 0) {
                at += a->size - pos, pos = 0;
                tail = at;
                /* Read by the worker for the room taken after it, which the
                 * queue's lock hands over. */
                __atomic_store_n(&a->floor, at, __ATOMIC_RELAXED);
        }
        /* Room in one piece: past the end, the rest of the ring is a pad. */
        if (pos + n > a->size)
                at += a->size - pos, pos = 0;
        if (at + n - tail > a->size)
                return NULL;
        a->last = a->base + pos;
        a->last_head = a->head;
        a->head = at + n;
        return a->last;
}

void perf_arena_unused(struct perf_arena *a, void *p, size_t n) {
        (void) n;
        /* The last taken: as if it never was. Older room is a hole the
         * tail passes over when the worker gives back what follows it. */
        if (p == a->last) {
                /* (Not before the floor: a start again at the beginning
                 * stands, everything before it being back.) */
                a->head = MAX(a->last_head, floor_of(a));
                a->last = NULL;
        }
}

void perf_arena_give_back(struct perf_arena *a, const void *p, size_t n) {
        /* Where the room ends, as a position: the first past the tail with
         * that offset in the ring (what is taken and not back spans the
         * ring at most). The tail counts from the floor when the head
         * started again there since (the room at p was taken after that:
         * a start again waits for everything to be back). */
        uint64_t end = (uint64_t) ((const uint8_t *) p - a->base) + n;
        uint64_t t = MAX(a->worker_tail, floor_of(a));
        uint64_t v = t - t % a->size + end;
        if (v <= t)
                v += a->size;
        a->worker_tail = v;
        /* Release: the worker's reads of the room come before its reuse. */
        __atomic_store_n(&a->tail, v, __ATOMIC_RELEASE);
}
