/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sysstats plugin: data sources linux.sys_stats, linux.system_info and
 * linux.sysfs_power. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sysstats.h"

static const char *const data_sources[] = { "linux.sys_stats", "linux.system_info", "linux.sysfs_power" };

uint64_t sysstats_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

struct traced_writer *sysstats_writer(struct sysstats_plugin *pl, uint64_t id) {
        struct plugin_instance *lists[] = { pl->sys_stats, pl->system_info, pl->power };
        for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
                struct plugin_instance *in = plugin_instance_find(lists[i], id);
                if (in)
                        return ((struct sysstats_instance *) in)->writer;
        }
        return NULL;
}

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        int r = plugin_check_host(api);
        if (r < 0)
                return r;
        struct sysstats_plugin *pl = calloc(1, sizeof(*pl));
        if (!pl)
                return -ENOMEM;
        pl->api = api;
        pl->host = host;
        for (size_t i = 0; i < sizeof(data_sources) / sizeof(data_sources[0]); i++) {
                r = api->register_data_source(host, data_sources[i], 0);
                if (r < 0) {
                        free(pl);
                        return r;
                }
        }
        *ret = pl;
        return 0;
}

static void destroy(void *state) {
        struct sysstats_plugin *pl = state;
        sys_stats_free_all(pl);
        system_info_free_all(pl);
        power_free_all(pl);
        free(pl);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        struct sysstats_plugin *pl = state;
        int r = 0;
        if (strcmp(ds, "linux.sys_stats") == 0)
                r = sys_stats_start(pl, id, cfg, n);
        else if (strcmp(ds, "linux.system_info") == 0)
                r = system_info_start(pl, id, cfg, n);
        else if (strcmp(ds, "linux.sysfs_power") == 0)
                r = power_start(pl, id);
        if (r < 0 && r != -EINVAL)
                plugin_log_start_failed(pl, ds, id, r);
}

static void stop(void *state, uint64_t id) {
        struct sysstats_plugin *pl = state;
        if (!sys_stats_stop(pl, id) && !system_info_stop(pl, id))
                (void) power_stop(pl, id);
}

static void flush(void *state, uint64_t id) {
        struct sysstats_plugin *pl = state;
        struct traced_writer *w = sysstats_writer(pl, id);
        if (w)
                (void) pl->api->flush_writer(w);
}

/* Nothing but world-readable /proc and sysfs files: no capability. */
PLUGIN_DEFINE("sysstats", 0)
