/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.systemd_journald instances: each opens the journal (sd-journal)
 * with its config's matches, positioned at its start (less the look-back),
 * and writes every new entry when the journal's inotify descriptor wakes
 * the plugin's loop. */

#include "common/plugin-common.h"

#define JOURNALD_DS_NAME "linux.systemd_journald"

struct journald_plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        struct plugin_instance *sessions;
};

/* Returns 0, -EINVAL for a config refused (logged), or another negative
 * errno. */
int journald_session_start(struct journald_plugin *pl, uint64_t id, const uint8_t *config, size_t size);
/* Writes what the journal holds for the instance, and its counts. */
void journald_session_flush(struct journald_plugin *pl, uint64_t id);
/* The same, then logs the counts and frees the instance. */
void journald_session_stop(struct journald_plugin *pl, uint64_t id);
void journald_sessions_free(struct journald_plugin *pl);
