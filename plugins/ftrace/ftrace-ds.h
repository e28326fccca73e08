/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/plugin-common.h"
#include "traced/plugin.h"

struct plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        char tracefs[256];
        struct plugin_instance *sessions;    /* of struct ftrace_session */
        struct plugin_instance *ps_sessions; /* of struct ps_session */
        struct plugin_instance *inode_maps;  /* of struct inode_map (inode-map.h) */
        struct inode_cache *inode_cache;     /* shared by the inode_maps */
        struct plugin_instance *frozen;      /* of struct frozen (frozen-ds.c) */
};

/* linux.ftrace */
int ftrace_session_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
void ftrace_session_stop(struct plugin *pl, uint64_t instance_id);
void ftrace_session_flush(struct plugin *pl, uint64_t instance_id);
void ftrace_sessions_free(struct plugin *pl);
/* Puts back the root instance's state left changed by a session whose
 * process died, unless a live session holds the root. */
void ftrace_root_recover(struct plugin *pl);

/* linux.frozen_ftrace (frozen-ds.c) */
int frozen_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
/* False if instance_id is not a frozen_ftrace instance. */
bool frozen_stop(struct plugin *pl, uint64_t instance_id);
void frozen_flush(struct plugin *pl, uint64_t instance_id);
void frozen_free_all(struct plugin *pl);

/* linux.process_stats */
struct ps_session;
int process_stats_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
/* False if instance_id is not a process_stats instance. */
bool process_stats_stop(struct plugin *pl, uint64_t instance_id);
void process_stats_flush(struct plugin *pl, uint64_t instance_id);
/* ClearIncrementalState: every live process described again, the first
 * packet after it marked as following a cleared state. */
void process_stats_clear(struct plugin *pl, uint64_t instance_id);
void process_stats_free_all(struct plugin *pl);
/* The process_stats instance of a tracing session, if there is one: the
 * ftrace side reports the pids it sees, described at the end of each
 * drain. */
struct ps_session *process_stats_for_session(struct plugin *pl, uint64_t tracing_session_id);
void process_stats_note_pid(struct ps_session *ps, int32_t pid);
/* pid exec'd or renamed itself: describe it again (new cmdline, name). */
void process_stats_redescribe(struct ps_session *ps, int32_t pid);
void process_stats_resolve_pending(struct ps_session *ps);

#include "encode.h"
