/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "u64map.h"

static size_t slot_of(uint64_t key, size_t cap) {
        key ^= key >> 33;
        key *= 0xff51afd7ed558ccdULL;
        key ^= key >> 33;
        key *= 0xc4ceb9fe1a85ec53ULL;
        key ^= key >> 33;
        return (size_t) key & (cap - 1);
}

void u64map_clear(struct u64map *m) {
        free(m->keys);
        free(m->values);
        free(m->used);
        *m = (struct u64map) {};
}

bool u64map_get(const struct u64map *m, uint64_t key, uint32_t *ret_value) {
        if (m->cap == 0)
                return false;
        for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
                if (!m->used[i])
                        return false;
                if (m->keys[i] == key) {
                        *ret_value = m->values[i];
                        return true;
                }
        }
}

static void put_slot(struct u64map *m, uint64_t key, uint32_t value) {
        size_t i = slot_of(key, m->cap);
        while (m->used[i] && m->keys[i] != key)
                i = (i + 1) & (m->cap - 1);
        if (!m->used[i]) {
                m->used[i] = 1;
                m->keys[i] = key;
                m->n++;
        }
        m->values[i] = value;
}

int u64map_put(struct u64map *m, uint64_t key, uint32_t value) {
        if ((m->n + 1) * 4 > m->cap * 3) {
                size_t cap = m->cap ? m->cap * 2 : 64;
                struct u64map g = {
                        .keys = malloc(cap * sizeof(uint64_t)),
                        .values = malloc(cap * sizeof(uint32_t)),
                        .used = calloc(cap, 1),
                        .cap = cap,
                };
                if (!g.keys || !g.values || !g.used) {
                        u64map_clear(&g);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < m->cap; i++)
                        if (m->used[i])
                                put_slot(&g, m->keys[i], m->values[i]);
                u64map_clear(m);
                *m = g;
        }
        put_slot(m, key, value);
        return 0;
}
