/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the producer plugins (ftrace, perf, bpfstack, sysstats) share on top of the
 * plugin ABI: a printf-style log over the host's log callback, the checks
 * and entry point every plugin.c writes, and a list of data source
 * instances by id. Linked into each plugin .so; it sees nothing but
 * include/traced/plugin.h and lib/.
 *
 * A plugin's state keeps the host as the two members `api` and `host`: the
 * macros below take any such state.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "profiling/cpus.h"
#include "traced/plugin.h"

/* One message through the host's log callback (cut at 1 KiB). */
void plugin_host_log(const struct traced_host_api *api, struct traced_host *host, int level, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
#define plugin_log(pl, level, ...) plugin_host_log((pl)->api, (pl)->host, (level), __VA_ARGS__)

/* The start of a data source instance failed with r (negative errno). */
#define plugin_log_start_failed(pl, ds, id, r)                                                                         \
        plugin_log((pl), TRACED_LOG_ERR, "%s instance %llu failed to start: %s", (ds), (unsigned long long) (id),      \
                   strerror(-(r)))

/* What instance id of data source ds could not do, through the host to the
 * service (and its consumer and trace) when the host takes such reports,
 * and to the log: field is the config field at fault, with the value when
 * it helps; the message is formatted (cut at 512 bytes). */
void plugin_host_report(const struct traced_host_api *api, struct traced_host *host, const char *ds,
                        uint64_t instance_id, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
#define plugin_report(pl, ds, id, field, ...) plugin_host_report((pl)->api, (pl)->host, (ds), (id), (field), __VA_ARGS__)

/* The same for a config parser's "field: why" (err): the field under prefix
 * (e.g. "perf_event_config"), the rest as the message. */
void plugin_host_report_parsed(const struct traced_host_api *api, struct traced_host *host, const char *ds,
                               uint64_t instance_id, const char *prefix, const char *err);
#define plugin_report_parsed(pl, ds, id, prefix, err)                                                                  \
        plugin_host_report_parsed((pl)->api, (pl)->host, (ds), (id), (prefix), (err))

/* The per-CPU event of an instance's CPU changed with CPU hotplug (error:
 * with CPU_HOTPLUG_GAVE_UP). */
void plugin_host_log_cpu_change(const struct traced_host_api *api, struct traced_host *host, const char *ds,
                                uint64_t id, uint32_t cpu, enum cpu_hotplug_change what, int error);
#define plugin_log_cpu_change(pl, ds, id, cpu, what, error)                                                            \
        plugin_host_log_cpu_change((pl)->api, (pl)->host, (ds), (id), (cpu), (what), (error))

/* create's first step: 0 when the host's table holds every call of ABI
 * 1.0 and the zero-copy packets of 1.2 (begin_packet, end_packet: the
 * plugins write every packet with them), else -EPROTO (report_error is
 * checked where it is used). */
int plugin_check_host(const struct traced_host_api *api);

/* The ops table of a plugin.c that defines static create, destroy, start,
 * stop and flush, and its entry point. PLUGIN_DEFINE_CLEARING adds a static
 * clear_incremental_state (its data sources register with
 * TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR). */
#define PLUGIN_DEFINE(name, caps) PLUGIN_DEFINE_OPS(name, caps, NULL)
#define PLUGIN_DEFINE_CLEARING(name, caps) PLUGIN_DEFINE_OPS(name, caps, clear_incremental_state)
#define PLUGIN_DEFINE_OPS(name, caps, clear)                                                                           \
        static const struct traced_plugin_ops plugin_ops = {                                                           \
                .struct_size = sizeof(struct traced_plugin_ops),                                                       \
                .create = create,                                                                                      \
                .destroy = destroy,                                                                                    \
                .start = start,                                                                                        \
                .stop = stop,                                                                                          \
                .flush = flush,                                                                                        \
                .clear_incremental_state = clear,                                                                      \
        };                                                                                                             \
        TRACED_PLUGIN_DEFINE(name, PACKAGE_VERSION, caps, plugin_ops)

/*
 * Data source instances, newest first. An instance's struct starts with a
 * struct plugin_instance (its first member), so that a pointer to one is a
 * pointer to the other.
 */
struct plugin_instance {
        struct plugin_instance *next;
        uint64_t id;
};

/* i->id set by the caller. */
void plugin_instance_add(struct plugin_instance **list, struct plugin_instance *i);
/* NULL when id is not in the list. */
struct plugin_instance *plugin_instance_find(struct plugin_instance *list, uint64_t id);
/* Takes instance id out of the list: NULL when it is not there. */
struct plugin_instance *plugin_instance_take(struct plugin_instance **list, uint64_t id);
/* Takes the first instance out of the list: NULL when it is empty. */
struct plugin_instance *plugin_instance_pop(struct plugin_instance **list);
