/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The kernel's names of the counters SysStats carries by number: the
 * MeminfoCounters and VmstatCounters enums of
 * protos/perfetto/common/sys_stats_counters.proto. The vmstat names are
 * generated from that file at build time (vmstat-keys.h: the enum name
 * without VMSTAT_, in lower case, is the kernel's key); the meminfo names
 * are the kernel's spelling, listed in counters.c.
 *
 * A key set maps the names a config selected to their numbers, for the
 * parsers: built once when a data source starts, looked up without
 * allocating.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/hashmap.h"

#define MEMINFO_COUNTERS_MAX 38u
#define VMSTAT_COUNTERS_MAX 188u

/* The kernel's key of counter id, NULL for 0 and numbers out of range. */
const char *meminfo_key_name(uint32_t id);
const char *vmstat_key_name(uint32_t id);

/* A line of the last text parsed: its key (at names + off, len bytes) and
 * the counter it selects (0: none). */
struct key_line {
        uint32_t off;
        uint32_t len;
        uint32_t id;
};

struct key_set {
        struct hashmap by_hash; /* FNV-1a of the key -> counter number */
        const char *(*name)(uint32_t id);
        /* The keys of the last text, in order: the kernel writes these
         * files in the same order every time, so the next text is matched
         * line by line against them and looked up only where it differs. */
        struct key_line *lines;
        size_t n_lines, cap_lines;
        char *names;
        size_t n_names, cap_names;
};

/* Selects the counters in ids (n of them; n == 0: every counter). Numbers
 * out of range are left out and counted in *ret_unknown (may be NULL).
 * 0 or -ENOMEM. */
int key_set_init(struct key_set *s, bool vmstat, const uint32_t *ids, size_t n, size_t *ret_unknown);
void key_set_done(struct key_set *s);
/* The number of the counter named by the n bytes at key, 0 when it is not
 * selected. */
uint32_t key_set_find(const struct key_set *s, const char *key, size_t n);
/* Line i of the next text starts with key (n bytes): its counter (0 when
 * not selected), from the last text's line i when the key is the same,
 * else looked up and remembered for line i (lines after i are forgotten).
 * -ENOMEM when it cannot be remembered (the counter is still returned in
 * *ret_id). */
int key_set_line(struct key_set *s, size_t i, const char *key, size_t n, uint32_t *ret_id);
/* The text just parsed had n lines. */
void key_set_end(struct key_set *s, size_t n);
