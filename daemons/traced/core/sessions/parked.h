/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Plugins whose host is not running (traced.conf's [plugins] hosts=lazy),
 * as the sessions layer keeps them. The supervisor names each with the
 * data sources it offers (CONTROL_PLUGIN_PARKED, what traced-plugin-host
 * --print-data-sources printed); QueryServiceState lists those data
 * sources while the plugin's host is not serving; a session whose config
 * names one asks, through the service's start_plugin_host callback (the
 * supervisor's CONTROL_START_PLUGIN), for the host, once per plugin until
 * that host was handed over or ended. Its data sources join the session
 * when the host registers them (session_on_data_source_registered).
 *
 * A host started so that has served no data source instance (none in a
 * session that runs) for the plugin's idle_usec is stopped again: the
 * service's stop_plugin_host callback asks the supervisor
 * (CONTROL_STOP_PLUGIN). It is looked at every idle_usec / 2 while such a
 * host runs (nothing wakes the core while none does), so it stops between
 * idle_usec and 1.5 x idle_usec after its last instance ended. From the
 * request on, a session does not set up instances on it (it is retiring);
 * one that names its data sources asks for a new host, which the
 * supervisor starts once the old one exited.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct traced_service;

struct parked_data_source {
        char *name;
        bool will_notify_on_stop;
        bool handles_incremental_state_clear;
        /* A DataSourceDescriptor as the host will send it, for
         * QueryServiceState. */
        uint8_t *descriptor;
        size_t descriptor_size;
};

struct parked_plugin {
        char *plugin;
        struct parked_data_source *data_sources;
        size_t n_data_sources;
        pid_t host_pid; /* its host was handed over (0: none runs) */
        bool requested; /* asked for, not handed over yet */
        bool retiring;  /* asked to stop host_pid */
        uint64_t idle_usec; /* 0: its host is never stopped */
        uint64_t idle_since; /* CLOCK_MONOTONIC, 0: serving (or not looked at) */
};

/* The supervisor named plugin as parked: text is its list (control.h).
 * Replaces what was known of it. -EBADMSG for a bad list (nothing kept). */
int parked_set(struct traced_service *svc, const char *plugin, const char *text, uint64_t idle_usec);
/* Plugin's host pid was handed over / ended (by pid; pid 0 with plugin:
 * the supervisor refused to start it). */
void parked_host_adopted(struct traced_service *svc, const char *plugin, pid_t pid);
void parked_host_exited(struct traced_service *svc, const char *plugin, pid_t pid);
/* Whether pid is a plugin host asked to stop (no new instance on it). */
bool parked_host_retiring(const struct traced_service *svc, pid_t pid);
/* The parked plugin (its host not running, or retiring) offering data source name,
 * or NULL. */
const struct parked_plugin *parked_find(const struct traced_service *svc, const char *ds_name);
/* Asks for the host of the parked plugin offering ds_name, unless asked
 * already. Returns the plugin's name when its host is to come (asked now
 * or before), NULL when none is parked for it. */
const char *parked_request(struct traced_service *svc, const char *ds_name);
/* The parked plugins, for QueryServiceState (their data sources listed
 * while host_pid is 0). */
const struct parked_plugin *parked_list(const struct traced_service *svc, size_t *ret_n);
void parked_free(struct traced_service *svc);
