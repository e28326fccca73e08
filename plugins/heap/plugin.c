/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The heap plugin: data source android.heapprofd (native heap profiles of
 * processes running with libtraced-heap.so preloaded; traced-heap(7)). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "heap-ds.h"

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        int r = plugin_check_host(api);
        if (r < 0)
                return r;
        struct heap_plugin *pl = calloc(1, sizeof(*pl));
        if (!pl)
                return -ENOMEM;
        *pl = (struct heap_plugin) { .api = api, .host = host, .state_fd = -1, .listen_fd = -1 };
        r = api->register_data_source(host, HEAP_DS_NAME,
                                      TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP |
                                              TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR);
        if (r < 0) {
                free(pl);
                return r;
        }
        /* The state page exists from the plugin's first load on (a host
         * started only to say what the plugin offers makes it too), so
         * processes started later can watch it. Without it they cannot
         * be profiled until they fork: said, not fatal. */
        r = heap_server_setup(pl);
        if (r < 0)
                plugin_log(pl, TRACED_LOG_INFO, HEAP_DS_NAME ": no state page in %s yet: %s", pl->dir,
                           strerror(-r));
        /* A host started again (the last one was killed): processes still
         * writing into its rings look again, and leave them. */
        heap_server_bump(pl);
        *ret = pl;
        return 0;
}

static void destroy(void *state) {
        struct heap_plugin *pl = state;
        heap_instances_free(pl);
        heap_server_free(pl);
        free(pl);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        if (strcmp(ds, HEAP_DS_NAME) == 0)
                heap_instance_start(state, id, cfg, n);
}

/* The last dump is written before the service hears the instance stopped. */
static void stop(void *state, uint64_t id) {
        struct heap_plugin *pl = state;
        heap_instance_stop(pl, id);
        (void) pl->api->notify_stopped(pl->host, id);
}

static void flush(void *state, uint64_t id) {
        heap_instance_flush(state, id);
}

static void clear_incremental_state(void *state, uint64_t id) {
        heap_instance_clear(state, id);
}

/* CAP_SYS_PTRACE (19): the profiled processes' /proc/PID/maps and their
 * files through /proc/PID/root, whoever runs them (as linux.perf). The
 * samples themselves come from the processes, through their rings.
 * CAP_DAC_READ_SEARCH (2): their binaries and libraries, to unwind and
 * symbolize, wherever they lie. */
PLUGIN_DEFINE_CLEARING("heap", TRACED_CAP(19) | TRACED_CAP(2))
