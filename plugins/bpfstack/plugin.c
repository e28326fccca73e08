/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The bpfstack plugin: data source linux.bpf_stack (on-CPU and off-CPU
 * stacks collected by BPF programs). */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpfstack-ds.h"
#include "common/libbpf-log.h"

#define DS_NAME "linux.bpf_stack"

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        int r = plugin_check_host(api);
        if (r < 0)
                return r;
        struct bpfstack_plugin *pl = calloc(1, sizeof(*pl));
        if (!pl)
                return -ENOMEM;
        pl->api = api;
        pl->host = host;
        r = api->register_data_source(host, DS_NAME,
                                      TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP |
                                              TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR);
        if (r < 0) {
                free(pl);
                return r;
        }
        libbpf_log_to(api, host);
        *ret = pl;
        return 0;
}

static void destroy(void *state) {
        struct bpfstack_plugin *pl = state;
        bpfstack_sessions_free(pl);
        libbpf_log_to(NULL, NULL);
        free(pl);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        struct bpfstack_plugin *pl = state;
        if (strcmp(ds, DS_NAME) != 0)
                return;
        int r = bpfstack_session_start(pl, id, cfg, n);
        if (r < 0 && r != -EINVAL && r != -EOPNOTSUPP)
                plugin_log_start_failed(pl, DS_NAME, id, r);
}

/* Stacks drained at the stop are written before the service hears that
 * the instance stopped: acknowledged by hand, after the last commit. */
static void stop(void *state, uint64_t id) {
        bpfstack_session_stop(state, id);
}

static void flush(void *state, uint64_t id) {
        bpfstack_session_flush(state, id);
}

static void clear_incremental_state(void *state, uint64_t id) {
        bpfstack_session_clear(state, id);
}

/* CAP_BPF (39): load programs and maps. CAP_PERFMON (38): perf_event
 * programs, cpu-clock events on every CPU, bpf_get_stackid and kernel
 * addresses; the plugin host grants CAP_SYS_ADMIN (21) instead on kernels
 * older than CAP_BPF/CAP_PERFMON. CAP_SYSLOG (34): real addresses in
 * /proc/kallsyms, to name kernel frames. The host runs as traced's plugin
 * user: CAP_SYS_PTRACE (19) for /proc/PID/maps and /proc/PID/root of the
 * processes it unwinds (ptrace read access), CAP_DAC_READ_SEARCH (2) for
 * their binaries and libraries wherever they lie. */
PLUGIN_DEFINE_CLEARING("bpfstack", TRACED_CAP(39) | TRACED_CAP(38) | TRACED_CAP(34) | TRACED_CAP(19) | TRACED_CAP(2))
