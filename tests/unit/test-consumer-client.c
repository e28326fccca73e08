/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* lib/consumer against a stand-in ConsumerPort served by lib/ipc on a
 * socket of a temporary directory, client and host on one loop. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "consumer/consumer-client.h"

static sd_event *ev;
static ipc_host *host;
static char dir[] = "/tmp/test-consumer-client-XXXXXX";
static char path[sizeof(dir) + 16];
static ipc_request *held; /* a request answered later */

static void reply_qss(ipc_request *req, const char *producer, bool has_more) {
        Perfetto__Protos__TracingServiceState__Producer p = PERFETTO__PROTOS__TRACING_SERVICE_STATE__PRODUCER__INIT;
        Perfetto__Protos__TracingServiceState__Producer *pp[1] = { &p };
        Perfetto__Protos__TracingServiceState st = PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
        Perfetto__Protos__QueryServiceStateResponse resp = PERFETTO__PROTOS__QUERY_SERVICE_STATE_RESPONSE__INIT;
        p.name = (char *) producer;
        st.n_producers = 1;
        st.producers = pp;
        resp.service_state = &st;
        cr_assert_geq(ipc_request_reply(req, &resp.base, has_more, -EBADF), 0);
}

/* Two streamed parts: the client sees one state with both producers. */
static void m_query(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        reply_qss(req, "first", true);
        reply_qss(req, "second", false);
}

static void m_fail(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        ipc_request_fail(req);
}

/* Never answered in time: kept for a late reply. */
static void m_hold(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        held = ipc_request_ref(req);
}

static void m_enable(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        const Perfetto__Protos__EnableTracingRequest *a = (const void *) args;
        Perfetto__Protos__EnableTracingResponse resp = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
        resp.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
        resp.disabled = true;
        if (!a->trace_config)
                resp.error = (char *) "no config";
        ipc_request_reply(req, &resp.base, false, -EBADF);
}

static void slice(Perfetto__Protos__ReadBuffersResponse__Slice *s, const char *data, bool last) {
        *s = (Perfetto__Protos__ReadBuffersResponse__Slice) PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__SLICE__INIT;
        s->has_data = true;
        s->data.data = (uint8_t *) data;
        s->data.len = strlen(data);
        s->has_last_slice_for_packet = true;
        s->last_slice_for_packet = last;
}

/* Packets "one", "two" (in three slices over two replies), "three". */
static void m_read(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        Perfetto__Protos__ReadBuffersResponse__Slice s[3], *sp[3] = { &s[0], &s[1], &s[2] };
        Perfetto__Protos__ReadBuffersResponse resp = PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__INIT;
        resp.slices = sp;
        slice(&s[0], "one", true);
        slice(&s[1], "t", false);
        resp.n_slices = 2;
        ipc_request_reply(req, &resp.base, true, -EBADF);
        slice(&s[0], "w", false);
        slice(&s[1], "o", true);
        slice(&s[2], "three", true);
        resp.n_slices = 3;
        ipc_request_reply(req, &resp.base, false, -EBADF);
}

#define M(name, req, rep, h) { name, &perfetto__protos__##req##__descriptor, &perfetto__protos__##rep##__descriptor, h }
static const struct ipc_method_desc methods[] = {
        M("QueryServiceState", query_service_state_request, query_service_state_response, m_query),
        M("DisableTracing", disable_tracing_request, disable_tracing_response, m_fail),
        M("Flush", flush_request, flush_response, m_hold),
        M("EnableTracing", enable_tracing_request, enable_tracing_response, m_enable),
        M("ReadBuffers", read_buffers_request, read_buffers_response, m_read),
};
static const struct ipc_service_desc consumer_port = {
        .name = "ConsumerPort",
        .methods = methods,
        .n_methods = sizeof(methods) / sizeof(methods[0]),
};
static const struct ipc_service_desc other_port = {
        .name = "ProducerPort",
        .methods = methods,
        .n_methods = 1,
};

static void serve(const struct ipc_service_desc *service) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/sock", dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        cr_assert_geq(fd, 0);
        cr_assert_eq(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(fd, 8), 0);
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(ipc_host_new(ev, &host), 0);
        cr_assert_eq(ipc_host_add_service(host, service, NULL), 0);
        cr_assert_eq(ipc_host_add_listener(host, fd), 0);
}

static void setup(void) {
        serve(&consumer_port);
}

static void setup_other(void) {
        serve(&other_port);
}

static void teardown(void) {
        held = ipc_request_unref(held);
        host = ipc_host_free(host);
        ev = sd_event_unref(ev);
        (void) unlink(path);
        (void) rmdir(dir);
}

static ipc_client *connect_ok(void) {
        ipc_client *c = NULL;
        cr_assert_eq(consumer_connect(ev, path, 2000, &c), 0);
        cr_assert_not_null(c);
        return c;
}

TestSuite(consumer_client, .init = setup, .fini = teardown);

Test(consumer_client, streamed_reply_is_merged) {
        ipc_client *c = connect_ok();
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(consumer_call(ev, c, "QueryServiceState", &rq.base,
                                   &perfetto__protos__query_service_state_response__descriptor, -EBADF, &reply, 2000),
                     0);
        const Perfetto__Protos__QueryServiceStateResponse *r = (const void *) reply;
        cr_assert_not_null(r);
        cr_assert_not_null(r->service_state);
        cr_assert_eq(r->service_state->n_producers, 2);
        cr_assert_str_eq(r->service_state->producers[0]->name, "first");
        cr_assert_str_eq(r->service_state->producers[1]->name, "second");
        protobuf_c_message_free_unpacked(reply, NULL);
        ipc_client_free(c);
}

Test(consumer_client, first_reply_only) {
        ipc_client *c = connect_ok();
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(consumer_call_first(ev, c, "QueryServiceState", &rq.base,
                                         &perfetto__protos__query_service_state_response__descriptor, -EBADF, &reply,
                                         2000),
                     0);
        const Perfetto__Protos__QueryServiceStateResponse *r = (const void *) reply;
        cr_assert_eq(r->service_state->n_producers, 1);
        cr_assert_str_eq(r->service_state->producers[0]->name, "first");
        protobuf_c_message_free_unpacked(reply, NULL);
        /* The rest of the stream is dropped; the next call is answered. */
        cr_assert_eq(consumer_wait(ev, NULL, 100), -ETIMEDOUT);
        cr_assert_eq(consumer_call(ev, c, "QueryServiceState", &rq.base,
                                   &perfetto__protos__query_service_state_response__descriptor, -EBADF, NULL, 2000),
                     0);
        ipc_client_free(c);
}

Test(consumer_client, failed_call) {
        ipc_client *c = connect_ok();
        Perfetto__Protos__DisableTracingRequest rq = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        ProtobufCMessage *reply = (ProtobufCMessage *) &rq;
        cr_assert_lt(consumer_call(ev, c, "DisableTracing", &rq.base,
                                   &perfetto__protos__disable_tracing_response__descriptor, -EBADF, &reply, 2000),
                     0);
        cr_assert_null(reply);
        ipc_client_free(c);
}

Test(consumer_client, timeout_then_late_reply) {
        ipc_client *c = connect_ok();
        Perfetto__Protos__FlushRequest rq = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
        cr_assert_eq(consumer_call(ev, c, "Flush", &rq.base, &perfetto__protos__flush_response__descriptor, -EBADF,
                                   NULL, 100),
                     -ETIMEDOUT);
        cr_assert_not_null(held);
        /* The reply comes after the caller gave up: dropped, no harm. */
        Perfetto__Protos__FlushResponse resp = PERFETTO__PROTOS__FLUSH_RESPONSE__INIT;
        ipc_request_reply(held, &resp.base, false, -EBADF);
        held = ipc_request_unref(held);
        cr_assert_eq(consumer_wait(ev, NULL, 100), -ETIMEDOUT);
        /* The connection still serves calls. */
        Perfetto__Protos__QueryServiceStateRequest q = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        cr_assert_eq(consumer_call(ev, c, "QueryServiceState", &q.base,
                                   &perfetto__protos__query_service_state_response__descriptor, -EBADF, NULL, 2000),
                     0);
        ipc_client_free(c);
}

static void count_reply(struct consumer_session *s, void *userdata) {
        (*(int *) userdata)++;
}

Test(consumer_client, enable_tracing) {
        ipc_client *c = connect_ok();
        int replies = 0;
        struct consumer_session s = { .on_reply = count_reply, .userdata = &replies };
        Perfetto__Protos__EnableTracingRequest rq = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        cr_assert_gt(consumer_enable_tracing(c, &rq, -EBADF, &s), 0);
        cr_assert_eq(consumer_wait(ev, &s.replied, 2000), 0);
        cr_assert(s.disabled);
        cr_assert_eq(s.ipc_error, 0);
        cr_assert_str_eq(s.error, "no config");
        cr_assert_eq(replies, 1);

        /* Again, with a config: what the first session left is cleared. */
        Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
        rq.trace_config = &cfg;
        cr_assert_gt(consumer_enable_tracing(c, &rq, -EBADF, &s), 0);
        cr_assert_not(s.replied);
        cr_assert_null(s.error);
        cr_assert_eq(consumer_wait(ev, &s.replied, 2000), 0);
        cr_assert_null(s.error);
        cr_assert_eq(replies, 2);
        consumer_session_done(&s);
        ipc_client_free(c);
}

struct packets {
        int n;
        char text[4][16];
};

static int on_packet(const uint8_t *packet, size_t len, void *userdata) {
        struct packets *k = userdata;
        cr_assert_lt(k->n, 4);
        snprintf(k->text[k->n++], sizeof(k->text[0]), "%.*s", (int) len, (const char *) packet);
        return 0;
}

Test(consumer_client, read_buffers_joins_slices) {
        ipc_client *c = connect_ok();
        struct packets k = {};
        cr_assert_eq(consumer_read_buffers(ev, c, on_packet, &k, 2000), 0);
        cr_assert_eq(k.n, 3);
        cr_assert_str_eq(k.text[0], "one");
        cr_assert_str_eq(k.text[1], "two");
        cr_assert_str_eq(k.text[2], "three");
        ipc_client_free(c);
}

static int stop_at_first(const uint8_t *packet, size_t len, void *userdata) {
        (*(int *) userdata)++;
        return -ECANCELED;
}

Test(consumer_client, read_buffers_stopped_by_callback) {
        ipc_client *c = connect_ok();
        int n = 0;
        cr_assert_eq(consumer_read_buffers(ev, c, stop_at_first, &n, 2000), -ECANCELED);
        cr_assert_eq(n, 1);
        /* The rest of the stream arrives and is dropped. */
        cr_assert_eq(consumer_wait(ev, NULL, 100), -ETIMEDOUT);
        cr_assert_eq(n, 1);
        ipc_client_free(c);
}

Test(consumer_client, no_socket) {
        ipc_client *c = NULL;
        char missing[sizeof(path) + 8];
        snprintf(missing, sizeof(missing), "%s/none", dir);
        cr_assert_eq(consumer_connect(ev, missing, 2000, &c), -ENOENT);
        cr_assert_null(c);
}

Test(consumer_client_other_port, no_consumer_port, .init = setup_other, .fini = teardown) {
        ipc_client *c = NULL;
        cr_assert_lt(consumer_connect(ev, path, 2000, &c), 0);
        cr_assert_null(c);
}
