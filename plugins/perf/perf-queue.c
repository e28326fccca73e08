/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "perf-queue.h"

_Static_assert(sizeof(struct perf_item) <= PERF_ITEM_FOOTPRINT, "an item's header fits its footprint");

int perf_queue_init(struct perf_queue *q, uint64_t max_bytes) {
        *q = (struct perf_queue) { .max_bytes = max_bytes };
        q->batch_tailp = &q->batch_head;
        q->done_tailp = &q->done_head;
        q->tailp = &q->head;
        q->max_items =
                (size_t) MIN(MAX(max_bytes / PERF_ITEM_FOOTPRINT, (uint64_t) 1), (uint64_t) PERF_QUEUE_MAX_ITEMS);
        int r = pthread_mutex_init(&q->mu, NULL);
        if (r != 0)
                return -r;
        r = pthread_cond_init(&q->cv, NULL);
        if (r != 0) {
                pthread_mutex_destroy(&q->mu);
                return -r;
        }
        return 0;
}

/* The arena's items go with the arena. */
static void free_items(struct perf_queue *q, struct perf_item *it) {
        for (struct perf_item *next; it; it = next) {
                next = it->next;
                if (!perf_arena_holds(&q->arena, it))
                        free(it);
        }
}

int perf_queue_use_arena(struct perf_queue *q, size_t bytes) {
        if (q->arena.size)
                return -EBUSY;
        return perf_arena_init(&q->arena, bytes);
}

void perf_queue_done(struct perf_queue *q) {
        free_items(q, q->head);
        free_items(q, q->batch_head);
        free_items(q, q->done_head);
        free_items(q, q->back);
        for (size_t c = 0; c < PERF_POOL_CLASSES; c++)
                free_items(q, q->pool[c]);
        q->head = q->batch_head = q->done_head = q->back = NULL;
        perf_arena_done(&q->arena);
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
}

struct perf_item *perf_item_new(enum perf_item_kind kind, size_t len) {
        return perf_item_new_room(kind, len, 0);
}

struct perf_item *perf_item_new_room(enum perf_item_kind kind, size_t len, size_t room) {
        if (len > UINT32_MAX || room > UINT32_MAX)
                return NULL;
        size_t cap = sizeof(struct perf_item) + len + room;
        if (cap > UINT32_MAX)
                return NULL;
        struct perf_item *it = malloc(cap);
        if (it)
                *it = (struct perf_item) { .kind = (uint8_t) kind, .len = (uint32_t) len, .cap = (uint32_t) cap };
        return it;
}

struct perf_item *perf_queue_item_new(struct perf_queue *q, enum perf_item_kind kind, size_t len, size_t room) {
        size_t size = sizeof(struct perf_item) + len + room;
        if (q->arena.size && len <= UINT32_MAX && size <= UINT32_MAX - PERF_ARENA_ALIGN) {
                size_t n = (size + PERF_ARENA_ALIGN - 1) / PERF_ARENA_ALIGN * PERF_ARENA_ALIGN;
                struct perf_item *it = perf_arena_take(&q->arena, n);
                if (it) {
                        *it = (struct perf_item) { .kind = (uint8_t) kind, .len = (uint32_t) len, .cap = (uint32_t) n };
                        return it;
                }
        }
        size_t c = (size + PERF_POOL_STEP - 1) / PERF_POOL_STEP - 1;
        if (size < PERF_POOL_STEP || c >= PERF_POOL_CLASSES || len > UINT32_MAX)
                return perf_item_new_room(kind, len, room);
        /* The item's own size, or a step or two more. */
        struct perf_item *it = NULL;
        for (size_t k = c; k < MIN(c + 3, (size_t) PERF_POOL_CLASSES) && !it; k++)
                if ((it = q->pool[k])) {
                        q->pool[k] = it->next;
                        __atomic_fetch_sub(&q->pool_bytes, (uint64_t) (k + 1) * PERF_POOL_STEP, __ATOMIC_RELAXED);
                }
        /* New ones in whole steps, to come back in their class. */
        if (!it) {
                if (!(it = malloc((c + 1) * PERF_POOL_STEP)))
                        return NULL;
                it->cap = (uint32_t) ((c + 1) * PERF_POOL_STEP);
        }
        *it = (struct perf_item) { .kind = (uint8_t) kind, .len = (uint32_t) len, .cap = it->cap };
        return it;
}

/* The class of an item of the pool's sizes, or -1. */
static int pool_class(const struct perf_item *it) {
        size_t n = it->cap / PERF_POOL_STEP;
        return n == 0 ? -1 : (int) MIN(n, (size_t) PERF_POOL_CLASSES) - 1;
}

void perf_queue_item_free(struct perf_queue *q, struct perf_item *it) {
        if (perf_arena_holds(&q->arena, it))
                perf_arena_unused(&q->arena, it, it->cap);
        else
                free(it);
}

struct perf_item *perf_queue_item_grow(struct perf_queue *q, struct perf_item *it, size_t size) {
        if (it->cap >= size)
                return it;
        if (size > UINT32_MAX || size < sizeof(*it) + it->len)
                return NULL;
        struct perf_item *grown;
        if (perf_arena_holds(&q->arena, it)) {
                /* A new item (from the arena if it has room, after it) and
                 * the old one given back. */
                grown = perf_queue_item_new(q, (enum perf_item_kind) it->kind, it->len,
                                            size - sizeof(*it) - it->len);
                if (!grown)
                        return NULL;
                uint32_t cap = grown->cap;
                memcpy(grown, it, sizeof(*it) + it->len);
                grown->cap = cap;
                perf_queue_item_free(q, it);
                return grown;
        }
        if (!(grown = realloc(it, size)))
                return NULL;
        grown->cap = (uint32_t) size;
        return grown;
}

void perf_queue_done_with(struct perf_queue *q, struct perf_item *it) {
        if (perf_arena_holds(&q->arena, it)) {
                perf_arena_give_back(&q->arena, it, it->cap);
                return;
        }
        int c = pool_class(it);
        uint64_t size = (uint64_t) (c + 1) * PERF_POOL_STEP;
        if (c < 0 || __atomic_load_n(&q->pool_bytes, __ATOMIC_RELAXED) + size > PERF_POOL_MAX_BYTES) {
                free(it);
                return;
        }
        __atomic_fetch_add(&q->pool_bytes, size, __ATOMIC_RELAXED);
        it->next = NULL;
        *q->done_tailp = it;
        q->done_tailp = &it->next;
}

static uint64_t queued_bytes(const struct perf_queue *q) {
        return __atomic_load_n(&q->queued_bytes, __ATOMIC_RELAXED) + q->batch_bytes;
}

size_t perf_queue_items(const struct perf_queue *q) {
        return __atomic_load_n(&q->queued_items, __ATOMIC_RELAXED) + q->batch_items;
}

bool perf_queue_congested(const struct perf_queue *q) {
        return perf_queue_items(q) >= 2 * q->max_items;
}

bool perf_queue_room(const struct perf_queue *q, enum perf_item_kind kind, size_t len) {
        switch (kind) {
        case PERF_ITEM_SAMPLE:
                return perf_queue_items(q) < q->max_items && queued_bytes(q) + len <= q->max_bytes;
        case PERF_ITEM_NOTE:
                return perf_queue_items(q) < q->max_items;
        default:
                return true;
        }
}

int perf_queue_push(struct perf_queue *q, struct perf_item *it) {
        if (!perf_queue_room(q, (enum perf_item_kind) it->kind, (size_t) it->len + it->extra))
                return -ENOBUFS;
        it->next = NULL;
        *q->batch_tailp = it;
        q->batch_tailp = &it->next;
        q->batch_bytes += (uint64_t) it->len + it->extra;
        q->batch_items++;
        return 0;
}

void perf_queue_publish(struct perf_queue *q) {
        if (!q->batch_head)
                return;
        pthread_mutex_lock(&q->mu);
        *q->tailp = q->batch_head;
        q->tailp = q->batch_tailp;
        __atomic_store_n(&q->queued_bytes, q->queued_bytes + q->batch_bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&q->queued_items, q->queued_items + q->batch_items, __ATOMIC_RELAXED);
        pthread_cond_signal(&q->cv);
        struct perf_item *back = q->back;
        q->back = NULL;
        pthread_mutex_unlock(&q->mu);
        for (struct perf_item *next; back; back = next) {
                next = back->next;
                int c = pool_class(back);
                back->next = q->pool[c];
                q->pool[c] = back;
        }
        q->batch_head = NULL;
        q->batch_tailp = &q->batch_head;
        q->batch_bytes = 0;
        q->batch_items = 0;
}

struct perf_item *perf_queue_pop(struct perf_queue *q) {
        pthread_mutex_lock(&q->mu);
        /* What the worker is done with goes back under the same lock. */
        if (q->done_head) {
                *q->done_tailp = q->back;
                q->back = q->done_head;
                q->done_head = NULL;
                q->done_tailp = &q->done_head;
        }
        while (!q->head)
                pthread_cond_wait(&q->cv, &q->mu);
        struct perf_item *it = q->head;
        q->head = it->next;
        if (!q->head)
                q->tailp = &q->head;
        __atomic_store_n(&q->queued_bytes, q->queued_bytes - it->len - it->extra, __ATOMIC_RELAXED);
        __atomic_store_n(&q->queued_items, q->queued_items - 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&q->mu);
        return it;
}
