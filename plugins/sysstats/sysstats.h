/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The sysstats plugin: linux.sys_stats (sys-stats.c: /proc and sysfs
 * counters polled on the plugin's loop), linux.system_info (system-info.c:
 * the CpuInfo packet once at start) and linux.sysfs_power (power.c:
 * battery counters). Each data source instance has a writer of its own.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/plugin-common.h"

struct sysstats_plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        /* Instances of each data source, by instance id. */
        struct plugin_instance *sys_stats, *system_info, *power;
};

/* What every instance starts with: its place in a list, and its writer. */
struct sysstats_instance {
        struct plugin_instance inst; /* first */
        struct sysstats_plugin *pl;
        struct traced_writer *writer;
};

/* CLOCK_BOOTTIME in nanoseconds: the packets' clock. */
uint64_t sysstats_now_ns(void);

int sys_stats_start(struct sysstats_plugin *pl, uint64_t id, const uint8_t *config, size_t size);
bool sys_stats_stop(struct sysstats_plugin *pl, uint64_t id);
void sys_stats_free_all(struct sysstats_plugin *pl);

int system_info_start(struct sysstats_plugin *pl, uint64_t id, const uint8_t *config, size_t size);
bool system_info_stop(struct sysstats_plugin *pl, uint64_t id);
void system_info_free_all(struct sysstats_plugin *pl);

int power_start(struct sysstats_plugin *pl, uint64_t id);
bool power_stop(struct sysstats_plugin *pl, uint64_t id);
void power_free_all(struct sysstats_plugin *pl);

/* The writer of instance id, whichever data source it is; NULL if none. */
struct traced_writer *sysstats_writer(struct sysstats_plugin *pl, uint64_t id);
