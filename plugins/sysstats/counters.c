/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "counters.h"

/* Index: MeminfoCounters number. */
static const char *const meminfo_keys[MEMINFO_COUNTERS_MAX + 1] = {
        [1] = "MemTotal",       [2] = "MemFree",          [3] = "MemAvailable",    [4] = "Buffers",
        [5] = "Cached",         [6] = "SwapCached",       [7] = "Active",          [8] = "Inactive",
        [9] = "Active(anon)",   [10] = "Inactive(anon)",  [11] = "Active(file)",   [12] = "Inactive(file)",
        [13] = "Unevictable",   [14] = "Mlocked",         [15] = "SwapTotal",      [16] = "SwapFree",
        [17] = "Dirty",         [18] = "Writeback",       [19] = "AnonPages",      [20] = "Mapped",
        [21] = "Shmem",         [22] = "Slab",            [23] = "SReclaimable",   [24] = "SUnreclaim",
        [25] = "KernelStack",   [26] = "PageTables",      [27] = "CommitLimit",    [28] = "Committed_AS",
        [29] = "VmallocTotal",  [30] = "VmallocUsed",     [31] = "VmallocChunk",   [32] = "CmaTotal",
        [33] = "CmaFree",       [34] = "Gpu",             [35] = "Zram",           [36] = "Misc",
        [37] = "ION_heap",      [38] = "ION_heap_pool",
};

/* Index: VmstatCounters number (generated from the .proto). */
static const char *const vmstat_keys[VMSTAT_COUNTERS_MAX + 1] = {
#include "vmstat-keys.h"
};

const char *meminfo_key_name(uint32_t id) {
        return id < ELEMENTSOF(meminfo_keys) ? meminfo_keys[id] : NULL;
}

const char *vmstat_key_name(uint32_t id) {
        return id < ELEMENTSOF(vmstat_keys) ? vmstat_keys[id] : NULL;
}

static int add(struct key_set *s, uint32_t id) {
        const char *k = s->name(id);
        if (!k)
                return 0;
        return hashmap_put(&s->by_hash, fnv1a64_str(k), id) < 0 ? -ENOMEM : 1;
}

int key_set_init(struct key_set *s, bool vmstat, const uint32_t *ids, size_t n, size_t *ret_unknown) {
        uint32_t max = vmstat ? VMSTAT_COUNTERS_MAX : MEMINFO_COUNTERS_MAX;
        size_t unknown = 0;
        *s = (struct key_set) { .name = vmstat ? vmstat_key_name : meminfo_key_name };
        for (uint32_t id = 1; n == 0 && id <= max; id++)
                if (add(s, id) < 0)
                        goto oom;
        for (size_t i = 0; i < n; i++) {
                int r = add(s, ids[i]);
                if (r < 0)
                        goto oom;
                if (r == 0)
                        unknown++;
        }
        if (ret_unknown)
                *ret_unknown = unknown;
        return 0;
oom:
        key_set_done(s);
        return -ENOMEM;
}

void key_set_done(struct key_set *s) {
        hashmap_clear(&s->by_hash);
        free(s->lines);
        free(s->names);
        s->lines = NULL;
        s->names = NULL;
        s->n_lines = s->cap_lines = s->n_names = s->cap_names = 0;
}

uint32_t key_set_find(const struct key_set *s, const char *key, size_t n) {
        uint64_t id;
        if (!hashmap_get(&s->by_hash, fnv1a64(key, n), &id))
                return 0;
        /* A 64-bit hash collision with an unselected key is checked away. */
        const char *k = s->name((uint32_t) id);
        return strncmp(k, key, n) == 0 && k[n] == '\0' ? (uint32_t) id : 0;
}

int key_set_line(struct key_set *s, size_t i, const char *key, size_t n, uint32_t *ret_id) {
        if (i < s->n_lines) {
                const struct key_line *l = &s->lines[i];
                if (l->len == n && memcmp(s->names + l->off, key, n) == 0) {
                        *ret_id = l->id;
                        return 0;
                }
                /* The layout changed from here on (a kernel that added a
                 * key, or a hand-made text): relearn the rest. */
                s->n_names = s->lines[i].off;
                s->n_lines = i;
        }
        *ret_id = key_set_find(s, key, n);
        if (i != s->n_lines || n > UINT32_MAX - s->n_names)
                return 0;
        if (GREEDY_REALLOC(s->lines, s->cap_lines, s->n_lines + 1) < 0 ||
            GREEDY_REALLOC(s->names, s->cap_names, s->n_names + n) < 0)
                return -ENOMEM;
        memcpy(s->names + s->n_names, key, n);
        s->lines[s->n_lines++] = (struct key_line) { .off = (uint32_t) s->n_names, .len = (uint32_t) n, .id = *ret_id };
        s->n_names += n;
        return 0;
}

void key_set_end(struct key_set *s, size_t n) {
        if (n < s->n_lines) {
                s->n_names = s->lines[n].off;
                s->n_lines = n;
        }
}
