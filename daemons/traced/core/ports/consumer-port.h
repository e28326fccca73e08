/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the consumer port's files: consumer-port.c (sessions driven
 * by a consumer, service state, the session_consumer_ops), consumer-read.c
 * (ReadBuffers), consumer-query.c (QueryServiceState) and consumer-clone.c (CloneSession, SaveTraceForBugreport). */

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "ipc/ipc.h"

struct session;
struct traced_service;

/* A connected consumer, and the session it drives (NULL: none). */
struct consumer {
        struct traced_service *svc;
        ipc_host_conn *conn;
        uid_t uid;
        struct session *session;
        ipc_request *observe_req;
        uint32_t observe_mask;
        /* A ReadBuffers in progress, paced by what the consumer takes. */
        ipc_request *read_req;
        sd_event_source *read_timer;
        /* QueryServiceState answers being sent (consumer-query.c). */
        struct qss_stream *query;
};

static inline struct consumer *req_consumer(ipc_request *req) {
        ipc_host_conn *conn = ipc_request_conn(req);
        return conn ? ipc_host_conn_get_userdata(conn) : NULL;
}

static inline void reply(ipc_request *req, const ProtobufCMessage *msg) {
        (void) ipc_request_reply(req, msg, false, -EBADF);
}

/* consumer-query.c */
void m_query_service_state(ipc_request *req, const ProtobufCMessage *args, void *userdata);
void consumer_query_free(struct consumer *c);
/* consumer-read.c */
void m_read_buffers(ipc_request *req, const ProtobufCMessage *args, void *userdata);
/* consumer-clone.c */
void m_save_trace_for_bugreport(ipc_request *req, const ProtobufCMessage *args, void *userdata);
void m_clone_session(ipc_request *req, const ProtobufCMessage *args, void *userdata);
