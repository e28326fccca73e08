/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Runs one producer plugin on an sd-event loop: loads and checks the
 * shared object, gives it the host services table, and connects it to the
 * tracing service as an ordinary producer with its own shared memory
 * buffer. Used by traced-plugin-host (one plugin per process) and by
 * traced --plugins-in-process (one thread per plugin). */

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include <systemd/sd-event.h>

struct plugin_runner;

/* dlopens path (RTLD_NOW|RTLD_LOCAL) and checks its descriptor. A plugin
 * that cannot be used is -ENOEXEC with the reason in why. */
int plugin_runner_load(const char *path, struct plugin_runner **ret, char *why, size_t why_size);
const char *plugin_runner_name(const struct plugin_runner *r);
const char *plugin_runner_version(const struct plugin_runner *r);
uint64_t plugin_runner_capabilities(const struct plugin_runner *r);

/*
 * Connects to the service (through socket_fd when > 0, which is taken,
 * else socket_path, else the default) and calls the plugin's create().
 * -ECONNREFUSED and friends: the service is not there; -ENOEXEC: create()
 * failed (the reason in why). When the service goes away later the loop
 * is left with sd_event_exit(event, 1).
 */
int plugin_runner_start(struct plugin_runner *r, sd_event *event, int socket_fd, const char *socket_path,
                        char *why, size_t why_size);
/*
 * Calls the plugin's create() with no service behind it, writes to out one
 * line per data source it registers ("NAME", then " will_notify_on_stop"
 * and " handles_incremental_state_clear" when its descriptor says so) and
 * destroys it. event is given to
 * create() for its sources and never run. -ENOEXEC: create() failed (the
 * reason in why).
 */
int plugin_runner_list_data_sources(struct plugin_runner *r, sd_event *event, FILE *out, char *why,
                                    size_t why_size);
/* Runs event until it exits (sd_event_loop's return values), keeping the
 * most CPU one turn of it took; each data source's stop logs that since
 * its start. */
int plugin_runner_loop(struct plugin_runner *r, sd_event *event);
/* Destroys the plugin instance and the connection. */
struct plugin_runner *plugin_runner_free(struct plugin_runner *r);
static inline void plugin_runner_freep(struct plugin_runner **r) {
        plugin_runner_free(*r);
}
