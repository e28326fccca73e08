/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "core/ports/relay-port.h"
#include "core/service.h"

#include "perfetto/ipc/relay_port.pb-c.h"

void relay_machines_done(struct relay_machines *rm) {
        for (size_t i = 0; i < rm->n; i++) {
                free(rm->m[i].name);
                free(rm->m[i].system_info);
        }
        rm->n = 0;
}

struct relay_machine *relay_machines_find(struct relay_machines *rm, uint32_t machine_id) {
        for (size_t i = 0; i < rm->n; i++)
                if (rm->m[i].machine_id == machine_id)
                        return &rm->m[i];
        return NULL;
}

static struct relay_machine *machine_get(struct relay_machines *rm, uint32_t machine_id, const char *name) {
        struct relay_machine *m = relay_machines_find(rm, machine_id);
        if (m)
                return m;
        if (rm->n >= RELAY_MAX_MACHINES)
                return NULL;
        m = &rm->m[rm->n];
        *m = (struct relay_machine) { .machine_id = machine_id };
        if (name && !(m->name = strdup(name)))
                return NULL;
        rm->n++;
        return m;
}

void relay_machine_add_sync(struct relay_machine *m, const uint32_t *ids, const uint64_t *ts, size_t n,
                            const struct relay_clock *host, size_t n_host) {
        struct relay_sync *s;
        if (m->n_syncs < RELAY_KEPT_SYNCS)
                s = &m->syncs[(m->syncs_start + m->n_syncs++) % RELAY_KEPT_SYNCS];
        else {
                s = &m->syncs[m->syncs_start];
                m->syncs_start = (m->syncs_start + 1) % RELAY_KEPT_SYNCS;
        }
        *s = (struct relay_sync) {};
        for (size_t i = 0; i < n && s->n_client < RELAY_MAX_CLOCKS; i++)
                s->client[s->n_client++] = (struct relay_clock) { .id = ids[i], .ts = ts[i] };
        for (size_t i = 0; i < n_host && s->n_host < RELAY_MAX_CLOCKS; i++)
                s->host[s->n_host++] = host[i];
}

size_t relay_read_host_clocks(const uint32_t *ids, size_t n, struct relay_clock *ret) {
        /* Builtin clock ids of the Perfetto ABI. */
        static const clockid_t by_id[] = {
                [1] = CLOCK_REALTIME,         [2] = CLOCK_REALTIME_COARSE, [3] = CLOCK_MONOTONIC,
                [4] = CLOCK_MONOTONIC_COARSE, [5] = CLOCK_MONOTONIC_RAW,   [6] = CLOCK_BOOTTIME,
        };
        size_t k = 0;
        for (size_t i = 0; i < n && k < RELAY_MAX_CLOCKS; i++) {
                struct timespec t;
                if (ids[i] == 0 || ids[i] >= ELEMENTSOF(by_id) || clock_gettime(by_id[ids[i]], &t) < 0)
                        continue;
                ret[k++] = (struct relay_clock) {
                        .id = ids[i],
                        .ts = (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec,
                };
        }
        return k;
}

static int on_bind(ipc_host_conn *conn, void *userdata) {
        /* Only where the administrator enabled it, and never for local
         * apps on a UNIX socket. */
        if (!ipc_host_conn_relay_allowed(conn) || !ipc_host_conn_is_remote(conn))
                return -EPERM;
        /* A relay names its machine before anything else. */
        if (ipc_host_conn_machine_id(conn) == 0)
                return -EPERM;
        return 0;
}

static void m_init_relay(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__InitRelayRequest *a = (const void *) args;
        Perfetto__Protos__InitRelayResponse resp = PERFETTO__PROTOS__INIT_RELAY_RESPONSE__INIT;
        struct traced_service *svc = userdata;
        ipc_host_conn *conn = ipc_request_conn(req);
        uint32_t id = ipc_host_conn_machine_id(conn);

        struct relay_machine *m = machine_get(&svc->machines, id, ipc_host_conn_machine_name(conn));
        if (!m || !a->system_info) {
                ipc_request_fail(req);
                return;
        }
        size_t n = perfetto__protos__system_info__get_packed_size(a->system_info);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf) {
                ipc_request_fail(req);
                return;
        }
        perfetto__protos__system_info__pack(a->system_info, buf);
        free(m->system_info);
        m->system_info = buf;
        m->system_info_size = n;
        log_info("Relay of machine %" PRIu32 " \"%s\" (%s %s) connected.", id, m->name ? m->name : "",
                 a->system_info->utsname && a->system_info->utsname->sysname ? a->system_info->utsname->sysname : "?",
                 a->system_info->utsname && a->system_info->utsname->release ? a->system_info->utsname->release : "?");
        (void) ipc_request_reply(req, &resp.base, false, -EBADF);
}

static void m_sync_clock(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__SyncClockRequest *a = (const void *) args;
        Perfetto__Protos__SyncClockResponse resp = PERFETTO__PROTOS__SYNC_CLOCK_RESPONSE__INIT;
        struct traced_service *svc = userdata;
        ipc_host_conn *conn = ipc_request_conn(req);
        uint32_t ids[RELAY_MAX_CLOCKS] = {};
        uint64_t ts[RELAY_MAX_CLOCKS] = {};
        struct relay_clock host[RELAY_MAX_CLOCKS];
        size_t n = 0;

        for (size_t i = 0; i < a->n_clocks && n < RELAY_MAX_CLOCKS; i++) {
                if (!a->clocks[i]->has_clock_id || !a->clocks[i]->has_timestamp)
                        continue;
                ids[n] = a->clocks[i]->clock_id;
                ts[n] = a->clocks[i]->timestamp;
                n++;
        }
        size_t n_host = relay_read_host_clocks(ids, n, host);
        struct relay_machine *m = machine_get(&svc->machines, ipc_host_conn_machine_id(conn),
                                              ipc_host_conn_machine_name(conn));
        if (!m || n == 0) {
                ipc_request_fail(req);
                return;
        }
        relay_machine_add_sync(m, ids, ts, n, host, n_host);
        (void) ipc_request_reply(req, &resp.base, false, -EBADF);
}

static const struct ipc_method_desc relay_methods[] = {
        { "InitRelay", &perfetto__protos__init_relay_request__descriptor,
          &perfetto__protos__init_relay_response__descriptor, m_init_relay },
        { "SyncClock", &perfetto__protos__sync_clock_request__descriptor,
          &perfetto__protos__sync_clock_response__descriptor, m_sync_clock },
};

const struct ipc_service_desc relay_port_desc = {
        .name = "RelayPort",
        .methods = relay_methods,
        .n_methods = ELEMENTSOF(relay_methods),
        .on_bind = on_bind,
};
