/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.sys_stats's configuration (SysStatsConfig), as the poller uses it. */

#include <stddef.h>
#include <stdint.h>

/* Periods below this are raised to it (as upstream does). */
#define SYS_STATS_MIN_PERIOD_MS 10u
#define MAX_SELECTED 512

/* The sources, in SysStatsConfig's order of their periods. */
enum {
        SRC_MEMINFO,
        SRC_VMSTAT,
        SRC_STAT,
        SRC_DEVFREQ,
        SRC_CPUFREQ,
        SRC_BUDDYINFO,
        SRC_DISKSTAT,
        SRC_PSI,
        SRC_THERMAL,
        SRC_CPUIDLE,
        SRC_GPUFREQ, /* accepted, not sampled */
        SRC_SLAB,    /* accepted, not sampled */
        N_SOURCES,
};

struct sys_stats_config {
        uint32_t period_ms[N_SOURCES]; /* 0: off */
        uint32_t tick_ms;              /* the smallest period; 0: nothing to poll */
        uint32_t ticks[N_SOURCES];     /* period in ticks; 0: off */
        uint32_t clamped;              /* bit per source raised to the minimum */
        uint32_t stat_mask;            /* bits 1 << StatCounters value */
        uint32_t meminfo_ids[MAX_SELECTED], vmstat_ids[MAX_SELECTED];
        size_t n_meminfo_ids, n_vmstat_ids; /* 0: all */
};

/* From a serialized DataSourceConfig. -EBADMSG when malformed, -EDOM when
 * a period is not a multiple of the smallest one. */
int sys_stats_parse_config(const uint8_t *config, size_t size, struct sys_stats_config *ret);
