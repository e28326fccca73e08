/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/hash.h"
#include "basic/hashmap.h"
#include "basic/macro.h"

enum {
        SLOT_EMPTY = 0,
        SLOT_USED,
        SLOT_REMOVED,
};

#define MIN_CAP 64u
/* What one slot costs: the key and value, and its state byte. */
#define SLOT_BYTES (sizeof(struct hashmap_slot) + 1)
/* No object may be larger than PTRDIFF_MAX bytes. */
#define MAX_CAP ((size_t) PTRDIFF_MAX / SLOT_BYTES)

/* Used slots and tombstones stay at most three quarters of the table, so
 * that every probe sequence meets an empty slot. */
static bool over_load(size_t used, size_t cap) {
        return used * 4 > cap * 3;
}

static size_t home(uint64_t key, size_t cap) {
        return (size_t) hash_u64(key) & (cap - 1);
}

void hashmap_clear(struct hashmap *m) {
        free(m->slots);
        *m = (struct hashmap){};
}

/* Moves every entry into a new table of cap slots (cap is a power of
 * two holding them under the load limit). */
static int rebuild(struct hashmap *m, size_t cap) {
        if (cap > MAX_CAP)
                return -ENOMEM;
        struct hashmap_slot *slots = malloc(cap * SLOT_BYTES);
        if (!slots)
                return -ENOMEM;
        uint8_t *state = (uint8_t *) (slots + cap);
        memset(state, SLOT_EMPTY, cap);
        for (size_t i = 0; i < m->cap; i++) {
                if (m->state[i] != SLOT_USED)
                        continue;
                size_t k = home(m->slots[i].key, cap);
                while (state[k] != SLOT_EMPTY)
                        k = (k + 1) & (cap - 1);
                state[k] = SLOT_USED;
                slots[k] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->state = state;
        m->cap = cap;
        m->n_removed = 0;
        return 0;
}

int hashmap_reserve(struct hashmap *m, size_t n) {
        if (n > MAX_CAP)
                return -ENOMEM;
        n = MAX(n, m->n);
        if (m->cap && !over_load(n + m->n_removed, m->cap))
                return 0;
        size_t cap = MAX((size_t) MIN_CAP, m->cap);
        while (over_load(n, cap))
                cap *= 2;
        return rebuild(m, cap);
}

/* The slot holding key, or SIZE_MAX. */
static size_t find(const struct hashmap *m, uint64_t key) {
        if (m->cap == 0)
                return SIZE_MAX;
        for (size_t i = home(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
                if (m->state[i] == SLOT_EMPTY)
                        return SIZE_MAX;
                if (m->state[i] == SLOT_USED && m->slots[i].key == key)
                        return i;
        }
}

bool hashmap_get(const struct hashmap *m, uint64_t key, uint64_t *ret_value) {
        size_t i = find(m, key);
        if (i == SIZE_MAX)
                return false;
        if (ret_value)
                *ret_value = m->slots[i].value;
        return true;
}

int hashmap_put(struct hashmap *m, uint64_t key, uint64_t value) {
        size_t i = SIZE_MAX, tomb = SIZE_MAX;
        if (m->cap > 0)
                for (i = home(key, m->cap); m->state[i] != SLOT_EMPTY; i = (i + 1) & (m->cap - 1)) {
                        if (m->state[i] == SLOT_REMOVED) {
                                if (tomb == SIZE_MAX)
                                        tomb = i;
                        } else if (m->slots[i].key == key) {
                                m->slots[i].value = value;
                                return 0;
                        }
                }
        if (tomb != SIZE_MAX) {
                /* A tombstone taken back: the load does not change. */
                i = tomb;
                m->n_removed--;
        } else if (m->cap == 0 || over_load(m->n + m->n_removed + 1, m->cap)) {
                size_t cap = m->cap == 0 ? MIN_CAP : (m->n + 1) * 2 > m->cap ? m->cap * 2 : m->cap;
                int r = rebuild(m, cap);
                if (r < 0)
                        return r;
                for (i = home(key, m->cap); m->state[i] != SLOT_EMPTY; i = (i + 1) & (m->cap - 1))
                        ;
        }
        m->state[i] = SLOT_USED;
        m->slots[i] = (struct hashmap_slot){.key = key, .value = value};
        m->n++;
        return 1;
}

bool hashmap_remove(struct hashmap *m, uint64_t key, uint64_t *ret_value) {
        size_t i = find(m, key);
        if (i == SIZE_MAX)
                return false;
        if (ret_value)
                *ret_value = m->slots[i].value;
        m->state[i] = SLOT_REMOVED;
        m->n--;
        m->n_removed++;
        return true;
}

bool hashmap_next(const struct hashmap *m, size_t *iter, uint64_t *ret_key, uint64_t *ret_value) {
        for (size_t i = *iter; i < m->cap; i++)
                if (m->state[i] == SLOT_USED) {
                        if (ret_key)
                                *ret_key = m->slots[i].key;
                        if (ret_value)
                                *ret_value = m->slots[i].value;
                        *iter = i + 1;
                        return true;
                }
        *iter = m->cap;
        return false;
}
