/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Parsers of the /proc files linux.sys_stats polls. Each takes the file's
 * text (buf, len; need not be NUL-terminated) and writes its fields into
 * out, a SysStats message being written (straight into the trace
 * writer's shared memory: a poll allocates nothing). Lines the parser
 * does not recognise are skipped; each returns the number of entries (or
 * values) it wrote.
 */

#include <stddef.h>
#include <stdint.h>

#include "counters.h"
#include "traced/pbzero/perfetto/config/sys_stats/sys_stats_config.pbw.h"
#include "traced/pbzero/perfetto/trace/sys_stats/sys_stats.pbw.h"

/* /proc/meminfo ("MemFree:  123 kB"): the selected keys, in kB. */
size_t parse_meminfo(const char *buf, size_t len, struct key_set *keys, SysStats *out);
/* /proc/vmstat ("nr_free_pages 123"). */
size_t parse_vmstat(const char *buf, size_t len, struct key_set *keys, SysStats *out);
/* /proc/stat: per-CPU times (in ns, from ticks of ns_per_tick), interrupt
 * and softirq counts, forks, as mask (bits 1 << SysStatsConfig_STAT_*) selects.
 * Returns the number of CPU lines. */
size_t parse_stat(const char *buf, size_t len, uint32_t mask, uint64_t ns_per_tick, SysStats *out);
/* /proc/pressure/{cpu,io,memory}: the total= of "some" and "full" lines
 * (resource_some: the resource's SOME value; FULL is the next one). */
size_t parse_psi(const char *buf, size_t len, SysStats_PsiSample_PsiResource resource_some, SysStats *out);
/* /proc/buddyinfo: free blocks per order, per node and zone. */
size_t parse_buddyinfo(const char *buf, size_t len, SysStats *out);
/* /proc/diskstats: sectors and times of reads, writes, discards, flushes. */
size_t parse_diskstats(const char *buf, size_t len, SysStats *out);

/* The unsigned decimal at the start of the n bytes at s (spaces before it
 * skipped; stops at the first other character): 0 when there is none. */
uint64_t parse_u64(const char *s, size_t n);
