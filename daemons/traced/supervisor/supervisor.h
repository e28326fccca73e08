/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* traced's privileged part: starts the service core in its own process
 * with no capabilities (as an unprivileged user when started as root) and
 * one plugin host per plugin, connects each host to the core through a
 * socketpair, restarts hosts that crash or hang. SIGTERM stops the core
 * first, which finishes every session (flushed, stopped, its file
 * written, its consumer told) while the plugin hosts still serve; then the
 * hosts are stopped (a core that takes longer than CORE_STOP_KILL_MS
 * is killed). SIGHUP re-reads the configuration: the trace directory and
 * the plugin watchdog change at once, sessions go on; a bad file is
 * reported and the old configuration stays. The sessions directory is
 * read at start and at each SIGHUP and the whole set of resident
 * sessions sent to the core (a bad session file is reported and skipped). If the core dies, traced exits
 * with an error (systemd restarts the whole service). */

#include <stdint.h>
#include <sys/types.h>

#include "supervisor/config.h"
#include "core/core.h"
#include "supervisor/plugins.h"

struct supervisor_options {
        struct core_options core;
        bool drop_user; /* switch the core to uid/gid (started as root) */
        uid_t uid;
        gid_t gid;
        bool plugins; /* run plugin hosts */
        struct plugins_options plugin;
        /* traced.conf: re-read on SIGHUP (config is replaced only by a
         * good file). */
        const char *config_path;
        struct traced_config *config;
        /* --sessions-dir: the resident sessions' directory whatever
         * traced.conf says ("" for none); NULL: traced.conf's. */
        const char *sessions_dir;
};

/* Returns the exit status for main(). */
int supervisor_run(struct supervisor_options *o);
