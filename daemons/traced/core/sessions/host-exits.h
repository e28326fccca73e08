/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the service learns when one of traced's plugin hosts ends, and
 * what it tells the sessions and consumers of it.
 *
 * A plugin host that crashes, is killed by the supervisor's watchdog or
 * exits takes its data source instances with it. Two things reach the
 * core, in either order: the host's connection closes (the producer port
 * calls session_on_producer_gone, which hands every instance still
 * running to host_exits_instance_lost), and the supervisor says how the
 * host ended (CONTROL_PLUGIN_EXITED, core.c calls sessions_host_exited).
 * Each lost instance becomes one error of its session (TraceStats'
 * traced_data_source_errors, kind KIND_INSTANCE_LOST) naming the producer,
 * the data source and how its host ended, and one line of the log. An
 * instance whose host's end is not told within HOST_EXITS_WAIT_USEC, or
 * whose session ends first, is reported as lost with "closed its
 * connection". Nothing is reported while the service itself stops.
 *
 * A plugin its host refused (exit status 78) is kept with the host's
 * reason for QueryServiceState (traced_failed_plugins).
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ds_instance;
struct producer;
struct session;
struct traced_service;

/* How long a lost instance waits for the supervisor's word on its host. */
#define HOST_EXITS_WAIT_USEC 1000000u
/* Plugins refused kept for QueryServiceState. */
#define HOST_EXITS_MAX_FAILED 64

struct host_failed_plugin {
        char *plugin;
        char *reason;
};

/* Instance i of session s was lost with its producer p (a plugin host),
 * before it started or after. */
void host_exits_instance_lost(struct session *s, const struct producer *p, const struct ds_instance *i,
                              bool before_start);
/* The supervisor says plugin host pid (of plugin) ended: cause is how
 * (control_exit_describe); refused with the host's reason (may be empty).
 * pid 0: the supervisor refused the plugin without starting its host. */
void sessions_host_exited(struct traced_service *svc, pid_t pid, const char *plugin, const char *cause, bool refused,
                          const char *reason);
/* s ends: its losses still waiting for a cause are reported now. */
void host_exits_settle_session(struct session *s);
/* The plugins refused so far, oldest first. */
const struct host_failed_plugin *host_exits_failed_plugins(const struct traced_service *svc, size_t *ret_n);
void host_exits_free(struct traced_service *svc);
