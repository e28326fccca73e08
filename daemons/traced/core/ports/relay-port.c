/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/ports.h"
#include "core/sessions/machines.h"
#include "core/sessions/producer.h"
#include "core/service.h"
#include "core/sessions/session.h"

#include "perfetto/ipc/relay_port.pb-c.h"

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

        struct relay_machine *m = relay_machines_get(&svc->machines, id, ipc_host_conn_machine_name(conn));
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
        struct relay_machine *m = relay_machines_get(&svc->machines, ipc_host_conn_machine_id(conn),
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
