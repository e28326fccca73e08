/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/ports.h"
#include "core/ports/startup-hold.h"
#include "core/service.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/parked.h"
#include "core/sessions/producer.h"
#include "core/sessions/session.h"

int service_new(sd_event *event, struct traced_service **ret) {
        int r;

        struct traced_service *svc = calloc(1, sizeof(*svc));
        if (!svc)
                return -ENOMEM;
        svc->event = sd_event_ref(event);
        svc->consumer_ops = &consumer_port_session_ops;
        svc->trace_dir_fd = -EBADF;
        r = ipc_host_new(event, &svc->producer_host);
        if (r >= 0)
                r = ipc_host_new(event, &svc->consumer_host);
        if (r >= 0)
                r = ipc_host_add_service(svc->producer_host, &producer_port_desc, svc);
        if (r >= 0)
                r = ipc_host_add_service(svc->consumer_host, &consumer_port_desc, svc);
        if (r >= 0)
                r = ipc_host_add_service(svc->producer_host, &relay_port_desc, svc);
        if (r < 0) {
                service_free(svc);
                return r;
        }
        *ret = svc;
        return 0;
}

int service_attach_listeners(struct traced_service *svc, int producer_fd, bool producer_relay, int consumer_fd) {
        int r = ipc_host_add_listener_flags(svc->producer_host, producer_fd, producer_relay ? IPC_LISTENER_RELAY : 0);
        if (r < 0) {
                safe_close(consumer_fd);
                return r;
        }
        return ipc_host_add_listener(svc->consumer_host, consumer_fd);
}

int service_adopt_producer(struct traced_service *svc, int fd, pid_t pid, uint64_t *ret_conn_id) {
        ipc_host_conn *conn;
        int r = ipc_host_adopt(svc->producer_host, fd, &conn);
        if (r < 0)
                return r;
        if (pid > 0)
                ipc_host_conn_set_pid(conn, pid);
        uint64_t *ids = realloc(svc->plugin_conns, (svc->n_plugin_conns + 1) * sizeof(*ids));
        if (!ids) {
                ipc_host_conn_close(conn);
                return -ENOMEM;
        }
        svc->plugin_conns = ids;
        svc->plugin_conns[svc->n_plugin_conns++] = ipc_host_conn_id(conn);
        if (ret_conn_id)
                *ret_conn_id = ipc_host_conn_id(conn);
        return 0;
}

void service_begin_stop(struct traced_service *svc) {
        svc->stopping = true;
        startup_hold_end(svc);
        sessions_begin_shutdown(svc);
}

bool service_stop_done(const struct traced_service *svc) {
        return sessions_shutdown_done(svc) && ipc_host_queued_bytes(svc->consumer_host) == 0;
}

void service_shutdown(struct traced_service *svc) {
        svc->stopping = true;
        sessions_shutdown(svc);
}

struct traced_service *service_free(struct traced_service *svc) {
        if (!svc)
                return NULL;
        svc->state_changed = NULL;
        startup_hold_free(svc);
        while (svc->sessions)
                session_free(svc->sessions);
        host_exits_free(svc);
        parked_free(svc);
        /* Connections go away with the hosts (producers are freed by the
         * disconnect callbacks). */
        svc->consumer_host = ipc_host_free(svc->consumer_host);
        svc->producer_host = ipc_host_free(svc->producer_host);
        sd_event_unref(svc->event);
        free(svc->trigger_history);
        safe_close(svc->trace_dir_fd);
        free(svc->trace_dir);
        free(svc->plugin_conns);
        relay_machines_done(&svc->machines);
        free(svc);
        return NULL;
}

void service_set_retention(struct traced_service *svc, uint64_t max_use, uint64_t keep_free) {
        svc->max_use = max_use;
        svc->keep_free = keep_free;
}

int service_set_trace_directory(struct traced_service *svc, const char *path, int fd) {
        char *p = NULL;
        if (path && fd >= 0) {
                p = strdup(path);
                if (!p) {
                        safe_close(fd);
                        return -ENOMEM;
                }
        } else
                fd = safe_close(fd);
        safe_close(svc->trace_dir_fd);
        free(svc->trace_dir);
        svc->trace_dir = p;
        svc->trace_dir_fd = fd;
        return 0;
}
