/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An open-addressing hash map from uint64_t keys to uint32_t values, for
 * the report's interning tables and call tree (the tree has no other
 * dependency that offers one; glib would be the only candidate). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map {
        uint64_t *keys;
        uint32_t *values;
        uint8_t *used;
        size_t cap; /* a power of two, or 0 */
        size_t n;
};

void u64map_clear(struct u64map *m);
/* true with *ret_value set when key is present. */
bool u64map_get(const struct u64map *m, uint64_t key, uint32_t *ret_value);
/* Inserts or replaces; 0 or -ENOMEM. */
int u64map_put(struct u64map *m, uint64_t key, uint32_t value);
