/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* /etc/traced/traced.conf: INI, parsed with libinih.
 *
 *   [plugins]
 *   enabled = yes|no          run plugins at all (default yes)
 *   directory = PATH          where they are (default the built-in one)
 *   disable = NAME[, NAME...] plugins (file names without .so) not to run
 *   watchdog_sec = SECONDS    a plugin host silent this long is killed and
 *                             restarted (default 10, 0 = never)
 *   in_process = yes|no       run plugins as threads of traced (debugging)
 *   hosts = eager|lazy        start every plugin host with traced (eager,
 *                             the default), or each when a session first
 *                             names one of its data sources (lazy)
 *   idle_stop_sec = SECONDS   hosts=lazy: a host started for a session that
 *                             served no data source this long is stopped
 *                             (default 60, 0 = never)
 *   start_timeout_sec = SECONDS  at the service's start, sessions wait this
 *                             long at most for the plugin hosts to register
 *                             their data sources (default 10, 0 = no wait)
 *
 *   [service]
 *   user = NAME|UID           the service core's user when started as root
 *   trace_directory = PATH    where TraceConfig.output_path may point
 *                             (default /var/lib/traced/traces; empty: none)
 *   trusted_data_sources = PATTERN[, PATTERN...]
 *                             data source names (NAME or PREFIX*) only the
 *                             plugin hosts, root and trusted_users may
 *                             register (default linux.*, traced.*)
 *   trusted_users = NAME|UID[, ...]  users who may register them too
 *   producer_sockets = ADDRESS[,ADDRESS...]  producer sockets when traced
 *                             binds its own (the syntax of
 *                             PERFETTO_PRODUCER_SOCK_NAME; TCP and vsock
 *                             only when listed)
 *   relay_endpoint_on = ADDRESS[,...]  of those, where the RelayPort is
 *   sessions_directory = PATH  resident sessions' TraceConfig files
 *                             (default /etc/traced/sessions.d; empty: none)
 *   max_use = SIZE            the closed files of rotating sessions in the
 *                             trace directory take at most SIZE (oldest
 *                             removed first; default none)
 *   keep_free = SIZE          rotation leaves SIZE free on the file system
 *                             it writes to (removing the session's oldest
 *                             files, else stopping it; default none)
 *                             SIZE: bytes, or with K, M, G, T (1024-based)
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TRACED_CONFIG_MAX_DISABLED 32
#define TRACED_CONFIG_MAX_TRUSTED 32

struct traced_config {
        bool plugins_enabled;
        char *plugin_dir;
        char *disabled[TRACED_CONFIG_MAX_DISABLED];
        unsigned n_disabled;
        unsigned watchdog_sec;
        unsigned start_timeout_sec;
        bool plugins_in_process;
        bool plugin_hosts_lazy; /* hosts = lazy */
        unsigned idle_stop_sec;
        char *user; /* NULL: the default */
        char *plugin_user; /* NULL: the default */
        bool plugin_user_required; /* refuse a plugin that user cannot run */
        char *trace_dir; /* NULL: the default */
        bool no_trace_dir;
        char *trusted_data_sources[TRACED_CONFIG_MAX_TRUSTED];
        unsigned n_trusted_data_sources;
        bool trusted_data_sources_set; /* false: the default */
        uid_t trusted_uids[TRACED_CONFIG_MAX_TRUSTED];
        unsigned n_trusted_uids;
        char *producer_sockets; /* NULL: the default */
        char *relay_endpoint_on;
        char *sessions_dir; /* NULL: the default */
        bool no_sessions_dir;
        uint64_t max_use, keep_free; /* 0: none */
};

/* Data source names reserved for the suite's own plugins by default. */
#define TRACED_CONFIG_DEFAULT_TRUSTED_DATA_SOURCES { "linux.*", "traced.*" }

#define TRACED_CONFIG_DEFAULT_TRACE_DIR "/var/lib/traced/traces"

#define TRACED_CONFIG_DEFAULT_SESSIONS_DIR SYSCONFDIR "/traced/sessions.d"
/* The sessions directory, or NULL when there are no resident sessions. */
const char *traced_config_sessions_directory(const struct traced_config *cfg);

/* The trace directory, or NULL when the service writes no output_path. */
const char *traced_config_trace_directory(const struct traced_config *cfg);

#define TRACED_CONFIG_DEFAULT_WATCHDOG_SEC 10u
#define TRACED_CONFIG_MAX_WATCHDOG_SEC 3600u
#define TRACED_CONFIG_DEFAULT_START_TIMEOUT_SEC 10u
#define TRACED_CONFIG_MAX_START_TIMEOUT_SEC 600u
#define TRACED_CONFIG_DEFAULT_IDLE_STOP_SEC 60u
#define TRACED_CONFIG_MAX_IDLE_STOP_SEC 86400u

/* Reads path into cfg (defaults for what it does not set). A missing
 * file is not an error (0). On a bad file returns -EINVAL and *ret_error
 * names the line and the field. */
int traced_config_load(const char *path, struct traced_config *cfg, char **ret_error);
void traced_config_done(struct traced_config *cfg);
bool traced_config_plugin_disabled(const struct traced_config *cfg, const char *name);
