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

struct key_set {
        struct hashmap by_hash; /* FNV-1a of the key -> counter number */
        const char *(*name)(uint32_t id);
};

/* Selects the counters in ids (n of them; n == 0: every counter). Numbers
 * out of range are left out and counted in *ret_unknown (may be NULL).
 * 0 or -ENOMEM. */
int key_set_init(struct key_set *s, bool vmstat, const uint32_t *ids, size_t n, size_t *ret_unknown);
void key_set_done(struct key_set *s);
/* The number of the counter named by the n bytes at key, 0 when it is not
 * selected. */
uint32_t key_set_find(const struct key_set *s, const char *key, size_t n);
