/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The perf plugin: data source linux.perf (perf_event sampling with
 * callstacks unwound and symbolized on the machine). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf-ds.h"

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        int r = plugin_check_host(api);
        if (r < 0)
                return r;
        struct perf_plugin *pl = calloc(1, sizeof(*pl));
        if (!pl)
                return -ENOMEM;
        pl->api = api;
        pl->host = host;
        r = api->register_data_source(host, "linux.perf",
                                      TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP |
                                              TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR);
        if (r < 0) {
                free(pl);
                return r;
        }
        *ret = pl;
        return 0;
}

static void destroy(void *state) {
        struct perf_plugin *pl = state;
        perf_sessions_free(pl);
        free(pl);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        struct perf_plugin *pl = state;
        if (strcmp(ds, "linux.perf") != 0)
                return;
        int r = perf_session_start(pl, id, cfg, n);
        if (r < 0 && r != -EINVAL)
                plugin_log_start_failed(pl, "linux.perf", id, r);
}

/* Samples drained at the stop are written before the service hears that
 * the instance stopped: acknowledged by hand, after the last commit. */
static void stop(void *state, uint64_t id) {
        struct perf_plugin *pl = state;
        perf_session_stop(pl, id);
        (void) pl->api->notify_stopped(pl->host, id);
}

static void flush(void *state, uint64_t id) {
        perf_session_flush(state, id);
}

static void clear_incremental_state(void *state, uint64_t id) {
        perf_session_clear(state, id);
}

/* CAP_PERFMON (38): system-wide perf_event_open with kernel callchains;
 * the plugin host grants CAP_SYS_ADMIN (21) instead on kernels older than
 * CAP_PERFMON. CAP_SYSLOG (34): real addresses in /proc/kallsyms, to name
 * kernel frames. CAP_SYS_PTRACE (19): /proc/PID/maps and /proc/PID/root of
 * other users' processes (ptrace read access is what the kernel checks
 * there; CAP_DAC_READ_SEARCH is not enough), and their memory through
 * process_vm_readv(2): CPython's frames and code objects. CAP_IPC_LOCK (14): rings
 * beyond perf_event_mlock_kb per CPU (the default 2 or 4 MiB rings on a
 * machine with many CPUs, or larger ring_buffer_pages). CAP_DAC_READ_SEARCH
 * (2): the binaries and libraries of the processes it samples, to
 * symbolize them, wherever they lie (the host runs as traced's plugin
 * user, and a root-only directory is no less profiled). CAP_BPF (39): the
 * program that walks CPython's frames as each sample is taken (without
 * it they are read from the process after the sample, by the ptrace
 * access above). */
PLUGIN_DEFINE_CLEARING("perf",
                       TRACED_CAP(38) | TRACED_CAP(34) | TRACED_CAP(19) | TRACED_CAP(14) | TRACED_CAP(2) | TRACED_CAP(39))
