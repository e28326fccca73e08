/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ftrace plugin: data sources linux.ftrace, linux.frozen_ftrace,
 * linux.process_stats and linux.inode_file_map. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ftrace-ds.h"
#include "inode-map.h"
#include "kprobes.h"
#include "tracefs.h"

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        int r = plugin_check_host(api);
        if (r < 0)
                return r;
        struct plugin *pl = calloc(1, sizeof(*pl));
        if (!pl)
                return -ENOMEM;
        pl->api = api;
        pl->host = host;
        r = tracefs_find(pl->tracefs, sizeof(pl->tracefs));
        if (r < 0) {
                plugin_log(pl, TRACED_LOG_WARNING, "tracefs not found and not mountable (%s); linux.ftrace disabled",
                           strerror(-r));
                pl->tracefs[0] = '\0';
        } else {
                r = tracefs_remove_stale_instances(pl->tracefs);
                if (r > 0)
                        plugin_log(pl, TRACED_LOG_INFO, "removed %d stale ftrace instance(s)", r);
                ftrace_root_recover(pl);
                r = kprobe_remove_stale(pl->tracefs);
                if (r > 0)
                        plugin_log(pl, TRACED_LOG_INFO, "removed %d stale kprobe(s)", r);
                r = api->register_data_source(host, "linux.ftrace", TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP);
                if (r >= 0)
                        r = api->register_data_source(host, "linux.frozen_ftrace",
                                                      TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP);
                if (r >= 0) /* its input is linux.ftrace's events */
                        r = api->register_data_source(host, "linux.inode_file_map", 0);
                if (r < 0) {
                        free(pl);
                        return r;
                }
        }
        r = api->register_data_source(host, "linux.process_stats", TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR);
        if (r < 0) {
                free(pl);
                return r;
        }
        *ret = pl;
        return 0;
}

static void destroy(void *state) {
        struct plugin *pl = state;
        ftrace_sessions_free(pl);
        inode_map_free_all(pl);
        frozen_free_all(pl);
        process_stats_free_all(pl);
        free(pl);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        struct plugin *pl = state;
        int r = 0;
        if (strcmp(ds, "linux.ftrace") == 0)
                r = ftrace_session_start(pl, id, cfg, n);
        else if (strcmp(ds, "linux.frozen_ftrace") == 0)
                r = frozen_start(pl, id, cfg, n);
        else if (strcmp(ds, "linux.process_stats") == 0)
                r = process_stats_start(pl, id, cfg, n);
        else if (strcmp(ds, "linux.inode_file_map") == 0)
                r = inode_map_start(pl, id, cfg, n);
        if (r < 0)
                plugin_log_start_failed(pl, ds, id, r);
}

static void stop(void *state, uint64_t id) {
        if (!process_stats_stop(state, id) && !inode_map_stop(state, id) && !frozen_stop(state, id))
                ftrace_session_stop(state, id);
}

static void flush(void *state, uint64_t id) {
        ftrace_session_flush(state, id);
        process_stats_flush(state, id);
        inode_map_flush(state, id);
        frozen_flush(state, id);
}

/* Only linux.process_stats keeps state a reader needs from before (the
 * processes it described); linux.ftrace's bundles each stand alone. */
static void clear_incremental_state(void *state, uint64_t id) {
        process_stats_clear(state, id);
}

/* The host runs as traced's plugin user: CAP_DAC_OVERRIDE (1) to read and
 * write tracefs (root's, mode 0700 and 0640) and its state file under
 * /run/traced-plugins (root's 0700), and for linux.inode_file_map's scans
 * of directories of every owner; CAP_SYS_ADMIN (21) for tracefs;
 * CAP_SYSLOG (34) for the addresses in /proc/kallsyms (symbolize_ksyms). */
PLUGIN_DEFINE_CLEARING("ftrace", TRACED_CAP(1) | TRACED_CAP(21) | TRACED_CAP(34))
