/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Supervision of plugin hosts: one traced-plugin-host process per plugin
 * found in the plugin directory, restarted with backoff when it dies; a
 * plugin the host refuses (exit 78) is reported and not restarted. */

#include <systemd/sd-event.h>

struct plugins;

/* disabled: plugin names (file names without .so) not to run. */
int plugins_start(sd_event *event, const char *plugin_dir, const char *host_binary, const char *producer_socket,
                  char *const *disabled, unsigned n_disabled, struct plugins **ret);
void plugins_stop(struct plugins *p);
