/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "core/service.h"

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

int service_adopt_producer(struct traced_service *svc, int fd, pid_t pid) {
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
        return 0;
}

bool service_take_plugin_conn(struct traced_service *svc, uint64_t conn_id) {
        for (size_t i = 0; i < svc->n_plugin_conns; i++)
                if (svc->plugin_conns[i] == conn_id) {
                        svc->plugin_conns[i] = svc->plugin_conns[--svc->n_plugin_conns];
                        return true;
                }
        return false;
}

bool service_name_is_reserved(const struct traced_service *svc, const char *name) {
        for (size_t i = 0; i < svc->n_trusted_names; i++) {
                const char *pat = svc->trusted_names[i];
                size_t n = strlen(pat);
                if (n > 0 && pat[n - 1] == '*' ? strncmp(name, pat, n - 1) == 0 : strcmp(name, pat) == 0)
                        return true;
        }
        return false;
}

bool service_producer_is_trusted(const struct traced_service *svc, const struct producer *p) {
        /* A relayed producer's uid is a claim nobody checked. */
        if (p->remote)
                return false;
        if (p->plugin_host || p->uid == 0)
                return true;
        for (size_t i = 0; i < svc->n_trusted_uids; i++)
                if (svc->trusted_uids[i] == p->uid)
                        return true;
        return false;
}

bool service_producer_may_use_name(const struct traced_service *svc, const struct producer *p, const char *name) {
        if (!service_name_is_reserved(svc, name))
                return true;
        /* Reserved names are this machine's. A relayed machine's producers
         * name their own machine's sources: every packet of theirs carries
         * their machine id, so they cannot pass for ours. A TCP peer that
         * named no machine is machine 0 and gets no such leeway. */
        if (p->remote)
                return p->machine_id != 0;
        return service_producer_is_trusted(svc, p);
}

void service_state_changed(struct traced_service *svc) {
        if (svc->state_changed)
                svc->state_changed(svc);
}

void service_shutdown(struct traced_service *svc) {
        /* No time for flushes: take what is committed and write it out. */
        for (struct session *s = svc->sessions; s; s = s->next)
                if (s->state != SESSION_DISABLED) {
                        session_cancel_flushes(s);
                        if (s->state == SESSION_STARTED || s->state == SESSION_DISABLING)
                                s->state = SESSION_DISABLING;
                        session_force_finalize(s, "The tracing service is shutting down");
                }
}

struct traced_service *service_free(struct traced_service *svc) {
        if (!svc)
                return NULL;
        svc->state_changed = NULL;
        while (svc->sessions)
                session_free(svc->sessions);
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
