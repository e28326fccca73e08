/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Parsers of the /proc files linux.sys_stats polls. Each takes the file's
 * text (buf, len; need not be NUL-terminated) and appends its fields to
 * out, a SysStats message under construction; item, where a parser takes
 * one, is a scratch writer for nested messages. Neither is allocated once
 * their buffers have grown to a poll's size, so a steady poll allocates
 * nothing. Lines the parser
 * does not recognise are skipped; each returns the number of entries (or
 * values) it appended.
 */

#include <stddef.h>
#include <stdint.h>

#include "basic/pbw.h"
#include "counters.h"

/* SysStats field numbers. */
enum {
        SYS_STATS_MEMINFO = 1,
        SYS_STATS_VMSTAT = 2,
        SYS_STATS_CPU_STAT = 3,
        SYS_STATS_NUM_FORKS = 4,
        SYS_STATS_NUM_IRQ_TOTAL = 5,
        SYS_STATS_NUM_IRQ = 6,
        SYS_STATS_NUM_SOFTIRQ_TOTAL = 7,
        SYS_STATS_NUM_SOFTIRQ = 8,
        SYS_STATS_COLLECTION_END = 9,
        SYS_STATS_DEVFREQ = 10,
        SYS_STATS_CPUFREQ_KHZ = 11,
        SYS_STATS_BUDDY_INFO = 12,
        SYS_STATS_DISK_STAT = 13,
        SYS_STATS_PSI = 14,
        SYS_STATS_THERMAL_ZONE = 15,
        SYS_STATS_CPUIDLE_STATE = 16,
};

/* SysStatsConfig.StatCounters, as bits of a mask (1 << value). */
enum {
        STAT_CPU_TIMES = 1,
        STAT_IRQ_COUNTS = 2,
        STAT_SOFTIRQ_COUNTS = 3,
        STAT_FORK_COUNT = 4,
};

/* SysStats.PsiSample.PsiResource: CPU, IO, MEMORY "some"; "full" is the
 * next value. */
enum {
        PSI_CPU_SOME = 1,
        PSI_IO_SOME = 3,
        PSI_MEMORY_SOME = 5,
};

/* /proc/meminfo ("MemFree:  123 kB"): the selected keys, in kB. */
size_t parse_meminfo(const char *buf, size_t len, struct key_set *keys, struct pbw *out);
/* /proc/vmstat ("nr_free_pages 123"). */
size_t parse_vmstat(const char *buf, size_t len, struct key_set *keys, struct pbw *out);
/* /proc/stat: per-CPU times (in ns, from ticks of ns_per_tick), interrupt
 * and softirq counts, forks, as mask (bits 1 << STAT_*) selects. Returns
 * the number of CPU lines. */
size_t parse_stat(const char *buf, size_t len, uint32_t mask, uint64_t ns_per_tick, struct pbw *out,
                  struct pbw *item);
/* /proc/pressure/{cpu,io,memory}: the total= of "some" and "full" lines. */
size_t parse_psi(const char *buf, size_t len, uint32_t resource_some, struct pbw *out, struct pbw *item);
/* /proc/buddyinfo: free blocks per order, per node and zone. */
size_t parse_buddyinfo(const char *buf, size_t len, struct pbw *out, struct pbw *item);
/* /proc/diskstats: sectors and times of reads, writes, discards, flushes. */
size_t parse_diskstats(const char *buf, size_t len, struct pbw *out, struct pbw *item);

/* The unsigned decimal at the start of the n bytes at s (spaces before it
 * skipped; stops at the first other character): 0 when there is none. */
uint64_t parse_u64(const char *s, size_t n);
