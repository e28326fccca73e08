/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "traced/plugin.h"

struct plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        char tracefs[256];
        struct ftrace_session *sessions;
};

void plugin_log(struct plugin *pl, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* linux.ftrace */
int ftrace_session_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
void ftrace_session_stop(struct plugin *pl, uint64_t instance_id);
void ftrace_session_flush(struct plugin *pl, uint64_t instance_id);
void ftrace_sessions_free(struct plugin *pl);

/* linux.process_stats: one ProcessTree of every process and thread. */
int process_stats_dump(struct plugin *pl, uint64_t instance_id);

#include "encode.h"
