/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The service core's state, shared by its layers: the two IPC hosts, the
 * producers (owned by the producer port), the sessions (owned by the
 * sessions layer) and the machines behind traced_relay. service.c builds
 * it for core.c: it registers the ports on the hosts and the ports'
 * listeners with the sessions; core.c alone calls the functions below.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "ipc/ipc.h"
#include "core/sessions/machines.h"

struct producer;
struct session;
struct session_consumer_ops;

struct traced_service {
        sd_event *event;
        const struct session_consumer_ops *consumer_ops;
        ipc_host *producer_host;
        ipc_host *consumer_host;

        struct producer *producers;
        size_t n_producers;
        uint16_t last_producer_id;

        struct session *sessions;
        size_t n_sessions;
        uint64_t last_session_id;
        uint64_t last_ds_instance_id;
        uint32_t last_buffer_id;
        uint64_t last_flush_request_id;

        /* Triggers that matched a session in the last 24 hours, oldest
         * first, for TriggerConfig.Trigger.max_per_24_h. */
        struct trigger_history {
                uint64_t ts_ns;
                uint64_t name_hash;
        } *trigger_history;
        size_t n_trigger_history;

        void (*state_changed)(struct traced_service *svc); /* for sd_notify STATUS= */
        /* The service is stopping (service_begin_stop): no new session,
         * and the sessions' flushes and stops wait at most the stop's
         * bounds (limits.h, SERVICE_STOP_*). */
        bool stopping;

        /* Where TraceConfig.output_path may point (output-path.h). */
        char *trace_dir;
        int trace_dir_fd;
        /* traced.conf's retention (bytes, 0: none): the closed files of
         * rotations in the trace directory take at most max_use; a rotation
         * leaves keep_free bytes free on its file system. */
        uint64_t max_use, keep_free;
        /* Reserved data source names (NAME or PREFIX*) and who besides the
         * plugin hosts and root may register them. */
        const char *const *trusted_names;
        size_t n_trusted_names;
        const uid_t *trusted_uids;
        size_t n_trusted_uids;
        /* Connections traced made for its plugins (ipc_host_conn_id),
         * until their producer binds. */
        uint64_t *plugin_conns;
        size_t n_plugin_conns;
        /* The first moments' hold of sessions (ports/startup-hold.h). */
        struct startup_hold *startup_hold;
        /* Machines behind traced_relay (RelayPort). */
        struct relay_machines machines;
        /* Plugin hosts that ended (sessions/host-exits.h). */
        struct host_exits *host_exits;
        /* Plugins whose host starts when a session needs it
         * (sessions/parked.h), and how to ask for one (core.c: the
         * supervisor's CONTROL_START_PLUGIN), or its stop when idle. */
        struct parked_set *parked;
        int (*start_plugin_host)(struct traced_service *svc, const char *plugin);
        int (*stop_plugin_host)(struct traced_service *svc, const char *plugin, pid_t pid);
        void *start_plugin_host_userdata;
};

int service_new(sd_event *event, struct traced_service **ret);
struct traced_service *service_free(struct traced_service *svc);
int service_attach_listeners(struct traced_service *svc, int producer_fd, bool producer_relay, int consumer_fd);
/* Serves an already connected producer socket (a plugin host's end of a
 * socketpair); pid names the process behind it when known. Takes fd.
 * ret_conn_id (may be NULL): the connection's id. */
int service_adopt_producer(struct traced_service *svc, int fd, pid_t pid, uint64_t *ret_conn_id);
/* The service stops: new sessions are refused from now on (those held
 * at the start are answered so), and every session is flushed and ended
 * (sessions_begin_shutdown). */
void service_begin_stop(struct traced_service *svc);
/* Whether all of that is done: every session's end written and told to
 * its consumer, and what was queued for the consumers sent. */
bool service_stop_done(const struct traced_service *svc);
/* Ends every session that is left at once (final writes to files). */
void service_shutdown(struct traced_service *svc);
/* The trace directory from now on (path NULL or fd < 0: none). Takes fd. */
int service_set_trace_directory(struct traced_service *svc, const char *path, int fd);
void service_set_retention(struct traced_service *svc, uint64_t max_use, uint64_t keep_free);
