/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The journald plugin: data source linux.systemd_journald (the systemd
 * journal's entries, read with sd-journal). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journald-ds.h"

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        int r = plugin_check_host(api);
        if (r < 0)
                return r;
        struct journald_plugin *pl = calloc(1, sizeof(*pl));
        if (!pl)
                return -ENOMEM;
        pl->api = api;
        pl->host = host;
        r = api->register_data_source(host, JOURNALD_DS_NAME, TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP);
        if (r < 0) {
                free(pl);
                return r;
        }
        *ret = pl;
        return 0;
}

static void destroy(void *state) {
        struct journald_plugin *pl = state;
        journald_sessions_free(pl);
        free(pl);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t n) {
        struct journald_plugin *pl = state;
        if (strcmp(ds, JOURNALD_DS_NAME) != 0)
                return;
        int r = journald_session_start(pl, id, cfg, n);
        if (r < 0 && r != -EINVAL)
                plugin_log_start_failed(pl, JOURNALD_DS_NAME, id, r);
}

/* The last entries and the counts are written at the stop, before the
 * service hears that the instance stopped. */
static void stop(void *state, uint64_t id) {
        struct journald_plugin *pl = state;
        journald_session_stop(pl, id);
        (void) pl->api->notify_stopped(pl->host, id);
}

static void flush(void *state, uint64_t id) {
        journald_session_flush(state, id);
}

/* CAP_DAC_READ_SEARCH (2): the plugin host runs as traced's plugin user,
 * and the journal's files belong to root (0640 root:systemd-journal, the
 * users' journals too). It reads, never writes; the SELinux domain
 * (traced_journald_host_t) narrows it to the journal. */
PLUGIN_DEFINE("journald", TRACED_CAP(2))
