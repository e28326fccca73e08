/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A hash map from uint64_t keys to uint64_t values: the one general table
 * of the tree (values may be indexes, counts or pointers cast through
 * uintptr_t; a set is a map whose values are ignored).
 *
 * Layout: open addressing with linear probing over a power-of-two number
 * of slots, keys spread by hash_u64. A removed entry leaves a tombstone,
 * so that nothing moves on removal: the entry an iteration just returned
 * (or any other) may be removed without disturbing that iteration. The
 * table is rebuilt when used slots and tombstones pass three quarters of
 * it: at twice the size when live entries pass half of it, else at the
 * same size (the tombstones dropped). Lookups never allocate.
 *
 * A zero-initialised struct hashmap is an empty map. It owns one
 * allocation, released by hashmap_clear. Errors are negative errno:
 * -ENOMEM when an allocation fails or a size would overflow; the map is
 * then unchanged. Not thread-safe: callers serialise. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hashmap_slot {
        uint64_t key;
        uint64_t value;
};

struct hashmap {
        struct hashmap_slot *slots;
        uint8_t *state;   /* per slot: empty, used or removed (in the same allocation as slots) */
        size_t cap;       /* 0 or a power of two */
        size_t n;         /* entries */
        size_t n_removed; /* tombstones */
};

/* Frees the table; the map is empty and usable again. */
void hashmap_clear(struct hashmap *m);

static inline size_t hashmap_size(const struct hashmap *m) {
        return m->n;
}

/* Makes room for n entries in all: inserting up to that many allocates
 * nothing until the next removal. 0 or -ENOMEM. */
int hashmap_reserve(struct hashmap *m, size_t n);

/* true when key is present, with its value in *ret_value (if not NULL). */
bool hashmap_get(const struct hashmap *m, uint64_t key, uint64_t *ret_value);

/* Inserts key or replaces its value: 1 when added, 0 when replaced,
 * -ENOMEM. Iterations in progress are void after an insertion. */
int hashmap_put(struct hashmap *m, uint64_t key, uint64_t value);

/* Removes key: true when it was present, its value in *ret_value (if not
 * NULL). Never allocates nor fails. */
bool hashmap_remove(struct hashmap *m, uint64_t key, uint64_t *ret_value);

/* Iteration, in no particular order: start with *iter = 0; each call
 * returns the next entry (key and value in the ret_ pointers that are not
 * NULL) and true, or false at the end. */
bool hashmap_next(const struct hashmap *m, size_t *iter, uint64_t *ret_key, uint64_t *ret_value);

/* The pointer stored under key (NULL when absent: maps of pointers keep
 * no NULL values). */
static inline void *hashmap_get_ptr(const struct hashmap *m, uint64_t key) {
        uint64_t v;
        return hashmap_get(m, key, &v) ? (void *) (uintptr_t) v : NULL;
}

static inline int hashmap_put_ptr(struct hashmap *m, uint64_t key, void *p) {
        return hashmap_put(m, key, (uint64_t) (uintptr_t) p);
}
