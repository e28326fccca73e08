/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* QueryServiceState: the state cut into replies, sent as the consumer
 * takes them. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/consumer-port.h"
#include "core/ports/ports.h"
#include "core/service.h"
#include "core/sessions/session-stats.h"

#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"

/* Each reply carries a slice of the producers, data sources and sessions;
 * the perfetto CLI (like tracectl) concatenates the replies. An element
 * bigger than a slice (a descriptor as large as a frame carries) goes
 * alone, and still fits a frame: registrations are held to that
 * (consumer_query_can_list). */
#define QSS_SLICE_BYTES (64u * 1024u)
/* More replies wait while this much is queued for the consumer; the rest
 * follows when the socket has taken it (ipc_host_conn_set_drained_cb). */
#define QSS_PAUSE_BYTES (256u * 1024u)
/* QueryServiceState calls of one consumer waiting behind the one being
 * answered; more are refused. */
#define QSS_MAX_WAITING 8u

struct qss_reply {
        uint8_t *data;
        size_t len;
};

/* An answer being sent: its replies, packed when the call came (the state
 * borrows from producers and sessions that may go meanwhile). */
struct qss_stream {
        ipc_request *req;
        struct qss_reply *replies;
        size_t n_replies, next;
        struct {
                ipc_request *req;
                bool sessions_only;
        } waiting[QSS_MAX_WAITING];
        size_t n_waiting;
};

struct qss_slicer {
        Perfetto__Protos__TracingServiceState part;
        size_t bytes;
        struct qss_stream *out;
        size_t allocated;
        int error;
};

static void qss_stream_free_replies(struct qss_stream *q) {
        for (size_t i = 0; i < q->n_replies; i++)
                free(q->replies[i].data);
        free(q->replies);
        q->replies = NULL;
        q->n_replies = q->next = 0;
}

/* Packs the current slice as one reply and starts the next one. */
static void qss_cut(struct qss_slicer *k) {
        Perfetto__Protos__QueryServiceStateResponse resp = PERFETTO__PROTOS__QUERY_SERVICE_STATE_RESPONSE__INIT;
        resp.service_state = &k->part;
        if (!k->error) {
                struct qss_stream *q = k->out;
                size_t len = protobuf_c_message_get_packed_size(&resp.base);
                uint8_t *data = malloc(len ? len : 1);
                if (!data || GREEDY_REALLOC(q->replies, k->allocated, q->n_replies + 1) < 0) {
                        free(data);
                        k->error = -ENOMEM;
                } else {
                        protobuf_c_message_pack(&resp.base, data);
                        q->replies[q->n_replies++] = (struct qss_reply) { data, len };
                }
        }
        /* Later slices carry only the lists: the scalars came first. */
        perfetto__protos__tracing_service_state__init(&k->part);
        k->bytes = 0;
}

/* Makes room for an element of size n: the current slice is cut first
 * when the element would not fit in it. */
static void qss_room(struct qss_slicer *k, size_t n) {
        size_t total = n + 8; /* tag and length */
        if (k->bytes > 0 && k->bytes + total > QSS_SLICE_BYTES)
                qss_cut(k);
        k->bytes += total;
}

#define QSS_ADD(k, st, list)                                                  \
        for (size_t _i = 0; _i < (st)->n_##list; _i++) {                      \
                qss_room(k, protobuf_c_message_get_packed_size(&(st)->list[_i]->base)); \
                if ((k)->part.n_##list == 0)                                  \
                        (k)->part.list = &(st)->list[_i];                     \
                (k)->part.n_##list++;                                         \
        }

/* The state as packed replies; -ENOMEM when it does not fit in memory. */
static int qss_slice(const Perfetto__Protos__TracingServiceState *st, struct qss_stream *q) {
        struct qss_slicer k = { .out = q };
        /* The first slice: the scalars, then as many elements as fit. */
        k.part = *st;
        k.part.producers = NULL;
        k.part.data_sources = NULL;
        k.part.tracing_sessions = NULL;
        k.part.n_producers = k.part.n_data_sources = k.part.n_tracing_sessions = 0;
        k.bytes = protobuf_c_message_get_packed_size(&k.part.base);

        QSS_ADD(&k, st, producers);
        QSS_ADD(&k, st, data_sources);
        QSS_ADD(&k, st, tracing_sessions);
        qss_cut(&k);
        if (k.error < 0)
                qss_stream_free_replies(q);
        return k.error;
}

bool consumer_query_can_list(const Perfetto__Protos__DataSourceDescriptor *d, uint16_t producer_id,
                             size_t *ret_max_size) {
        /* The reply with that data source alone, as qss_slice cuts it. */
        Perfetto__Protos__TracingServiceState__DataSource ds = PERFETTO__PROTOS__TRACING_SERVICE_STATE__DATA_SOURCE__INIT;
        Perfetto__Protos__TracingServiceState__DataSource *list[1] = { &ds };
        Perfetto__Protos__TracingServiceState st = PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
        Perfetto__Protos__QueryServiceStateResponse resp = PERFETTO__PROTOS__QUERY_SERVICE_STATE_RESPONSE__INIT;
        ds.ds_descriptor = (Perfetto__Protos__DataSourceDescriptor *) d;
        ds.has_producer_id = true;
        ds.producer_id = producer_id;
        st.n_data_sources = 1;
        st.data_sources = list;
        resp.service_state = &st;
        size_t descriptor = protobuf_c_message_get_packed_size(&d->base);
        size_t frame = ipc_reply_frame_max_size(protobuf_c_message_get_packed_size(&resp.base));
        size_t around = frame - descriptor;
        *ret_max_size = IPC_FRAME_MAX_SEND_SIZE > around ? IPC_FRAME_MAX_SEND_SIZE - around : 0;
        return frame <= IPC_FRAME_MAX_SEND_SIZE;
}

/* Builds the answer to req; on failure req is answered with an error. */
static int qss_begin(struct consumer *c, ipc_request *req, bool sessions_only) {
        struct qss_stream *q = c->query;
        Perfetto__Protos__TracingServiceState *st = service_build_state(c->svc, sessions_only, c->uid);
        int r = st ? qss_slice(st, q) : -ENOMEM;
        service_free_state(st);
        if (r < 0) {
                log_warning_errno(r, "Cannot answer QueryServiceState: %m");
                (void) ipc_request_fail(req);
                return r;
        }
        q->req = req;
        return 0;
}

/* Sends replies while the consumer keeps up, the calls that wait one after
 * the other; called again when what is queued for it has drained. */
static void qss_pump(struct consumer *c) {
        struct qss_stream *q = c->query;
        for (;;) {
                if (!q->req) {
                        if (q->n_waiting == 0)
                                return;
                        ipc_request *next = q->waiting[0].req;
                        bool sessions_only = q->waiting[0].sessions_only;
                        memmove(q->waiting, q->waiting + 1, --q->n_waiting * sizeof(q->waiting[0]));
                        if (qss_begin(c, next, sessions_only) < 0)
                                continue;
                }
                if (ipc_host_conn_queued_bytes(c->conn) >= QSS_PAUSE_BYTES)
                        return;
                struct qss_reply *rp = &q->replies[q->next++];
                bool last = q->next == q->n_replies;
                int r = ipc_request_reply_packed(q->req, rp->data, rp->len, !last, -EBADF);
                free(rp->data);
                rp->data = NULL;
                if (r == -ENOTCONN) {
                        /* The consumer went: on_disconnect frees the rest. */
                        if (!last)
                                ipc_request_unref(q->req);
                        q->req = NULL;
                        qss_stream_free_replies(q);
                        return;
                }
                if (r < 0)
                        log_warning_errno(r, "Failed to send a QueryServiceState reply (%zu bytes): %m", rp->len);
                if (!last)
                        continue;
                if (q->n_replies > 1)
                        log_debug("QueryServiceState answered in %zu replies.", q->n_replies);
                q->req = NULL;
                qss_stream_free_replies(q);
        }
}

static void qss_on_drained(ipc_host_conn *conn, void *userdata) {
        qss_pump(userdata);
}

void m_query_service_state(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__QueryServiceStateRequest *a = (const void *) args;
        struct consumer *c = req_consumer(req);

        if (!c) {
                ipc_request_fail(req);
                return;
        }
        if (!c->query) {
                c->query = calloc(1, sizeof(*c->query));
                if (!c->query) {
                        log_oom();
                        ipc_request_fail(req);
                        return;
                }
                ipc_host_conn_set_drained_cb(c->conn, qss_on_drained, c);
        }
        struct qss_stream *q = c->query;
        /* One answer at a time per consumer: the others wait their turn,
         * kept by their handler's reference until answered. */
        if (q->n_waiting >= QSS_MAX_WAITING) {
                ipc_request_fail(req);
                return;
        }
        q->waiting[q->n_waiting].req = req;
        q->waiting[q->n_waiting++].sessions_only = a->has_sessions_only && a->sessions_only;
        qss_pump(c);
}

void consumer_query_free(struct consumer *c) {
        struct qss_stream *q = c->query;
        if (!q)
                return;
        ipc_host_conn_set_drained_cb(c->conn, NULL, NULL);
        q->req = ipc_request_unref(q->req);
        for (size_t i = 0; i < q->n_waiting; i++)
                ipc_request_unref(q->waiting[i].req);
        qss_stream_free_replies(q);
        free(q);
        c->query = NULL;
}
