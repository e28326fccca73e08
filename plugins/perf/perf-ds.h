/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.perf: one sampler per data source instance. */

#include <stddef.h>
#include <stdint.h>

#include "common/plugin-common.h"
#include "traced/plugin.h"

struct perf_plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        struct plugin_instance *sessions; /* of struct perf_session */
};

int perf_session_start(struct perf_plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
void perf_session_stop(struct perf_plugin *pl, uint64_t instance_id);
void perf_session_flush(struct perf_plugin *pl, uint64_t instance_id);
/* The service's ClearIncrementalState: the worker forgets what it interned
 * before its next packet, and emits it again as samples need it. */
void perf_session_clear(struct perf_plugin *pl, uint64_t instance_id);
void perf_sessions_free(struct perf_plugin *pl);
