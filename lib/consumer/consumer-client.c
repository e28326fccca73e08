/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "consumer/consumer-client.h"

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

int consumer_wait(sd_event *event, const bool *done, unsigned timeout_ms) {
        uint64_t deadline = now_usec() + (uint64_t) timeout_ms * 1000u;
        while (!done || !*done) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        return -ETIMEDOUT;
                int r = sd_event_run(event, deadline - now);
                if (r < 0)
                        return r;
        }
        return 0;
}

int consumer_bind(ipc_client *c, unsigned timeout_ms) {
        return ipc_client_bind_sync(c, "ConsumerPort", (uint64_t) timeout_ms * 1000u);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(ipc_client *, ipc_client_free);

int consumer_connect(sd_event *event, const char *path, unsigned bind_timeout_ms, ipc_client **ret) {
        _cleanup_(ipc_client_freep) ipc_client *c = NULL;
        int r = ipc_client_connect(event, path, &c);
        if (r >= 0)
                r = consumer_bind(c, bind_timeout_ms);
        if (r < 0)
                return r;
        *ret = c;
        c = NULL;
        return 0;
}

/* A request whose replies, one or a stream, go to add() until the last
 * one or an error (the service's, the connection's, or add()'s); add()
 * may also end it early by setting done. */
struct pending {
        bool done;
        int error;
        int (*add)(struct pending *k, const ProtobufCMessage *reply);
};

static void on_reply(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *userdata) {
        struct pending *k = userdata;
        if (fd >= 0)
                close(fd);
        if (k->done)
                return;
        k->error = error < 0 ? error : reply ? k->add(k, reply) : 0;
        k->done = k->done || !has_more || k->error < 0;
}

/* Invokes method and runs the loop until k is done: 0, or an error. The
 * request is forgotten afterwards whatever happened: k lives on the
 * caller's stack, and a reply still due (a timeout, or a stream cut
 * short by an error) must not reach it. */
static int invoke_and_wait(sd_event *event, ipc_client *c, const char *method, const ProtobufCMessage *args,
                           const ProtobufCMessageDescriptor *reply_desc, int fd, struct pending *k,
                           unsigned timeout_ms) {
        int64_t id = ipc_client_invoke(c, method, args, reply_desc, fd, on_reply, k);
        if (id < 0)
                return (int) id;
        int r = consumer_wait(event, &k->done, timeout_ms);
        ipc_client_cancel(c, id);
        return r < 0 ? r : k->error;
}

struct call {
        struct pending pending; /* first: on_reply() sees a call as its pending */
        const ProtobufCMessageDescriptor *desc;
        bool first_only;
        uint8_t *bytes; /* the serialized replies so far, one after the other */
        size_t len;
};

static int call_add(struct pending *p, const ProtobufCMessage *reply) {
        struct call *k = (struct call *) p;
        if (!k->desc)
                return 0;
        size_t n = protobuf_c_message_get_packed_size(reply);
        uint8_t *b = realloc(k->bytes, k->len + n + 1);
        if (!b)
                return -ENOMEM;
        protobuf_c_message_pack(reply, b + k->len);
        k->bytes = b;
        k->len += n;
        k->pending.done = k->first_only;
        return 0;
}

static int call(sd_event *event, ipc_client *c, const char *method, const ProtobufCMessage *args,
                const ProtobufCMessageDescriptor *reply_desc, int fd, bool first_only, ProtobufCMessage **ret_reply,
                unsigned timeout_ms) {
        struct call k = { .pending.add = call_add, .desc = reply_desc, .first_only = first_only };
        ProtobufCMessage *reply = NULL;
        int r = invoke_and_wait(event, c, method, args, reply_desc, fd, &k.pending, timeout_ms);
        if (!k.pending.done) {
                free(k.bytes);
                return r; /* no answer: *ret_reply untouched */
        }
        if (r >= 0 && k.bytes) {
                reply = protobuf_c_message_unpack(reply_desc, NULL, k.len, k.bytes);
                if (!reply)
                        r = -EBADMSG;
        }
        free(k.bytes);
        if (ret_reply)
                *ret_reply = reply;
        else if (reply)
                protobuf_c_message_free_unpacked(reply, NULL);
        return r;
}

int consumer_call(sd_event *event, ipc_client *c, const char *method, const ProtobufCMessage *args,
                  const ProtobufCMessageDescriptor *reply_desc, int fd, ProtobufCMessage **ret_reply,
                  unsigned timeout_ms) {
        return call(event, c, method, args, reply_desc, fd, false, ret_reply, timeout_ms);
}

int consumer_call_first(sd_event *event, ipc_client *c, const char *method, const ProtobufCMessage *args,
                        const ProtobufCMessageDescriptor *reply_desc, int fd, ProtobufCMessage **ret_reply,
                        unsigned timeout_ms) {
        return call(event, c, method, args, reply_desc, fd, true, ret_reply, timeout_ms);
}

static void on_enable_reply(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                            void *userdata) {
        struct consumer_session *s = userdata;
        const Perfetto__Protos__EnableTracingResponse *r = (const void *) reply;
        if (fd >= 0)
                close(fd);
        s->replied = true;
        s->ipc_error = error;
        if (r) {
                s->disabled = r->state_case == PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED && r->disabled;
                if (r->error && r->error[0]) {
                        free(s->error);
                        s->error = strdup(r->error);
                }
                s->end_reason = r->has_traced_end_reason ? (int) r->traced_end_reason : 0;
        }
        if (s->on_reply)
                s->on_reply(s, s->userdata);
}

void consumer_session_done(struct consumer_session *s) {
        free(s->error);
        s->error = NULL;
}

int64_t consumer_enable_tracing(ipc_client *c, const Perfetto__Protos__EnableTracingRequest *req, int fd,
                                struct consumer_session *s) {
        consumer_session_done(s);
        s->replied = s->disabled = false;
        s->ipc_error = 0;
        s->end_reason = 0;
        return ipc_client_invoke(c, "EnableTracing", &req->base, &perfetto__protos__enable_tracing_response__descriptor,
                                 fd, on_enable_reply, s);
}

struct reader {
        struct pending pending; /* first, as in struct call */
        consumer_packet_cb cb;
        void *userdata;
        uint8_t *partial; /* the slices so far of a packet not complete yet */
        size_t partial_len;
};

static int reader_add(struct reader *k, const Perfetto__Protos__ReadBuffersResponse__Slice *s) {
        bool last = s->has_last_slice_for_packet && s->last_slice_for_packet;
        size_t n = s->has_data ? s->data.len : 0;
        if (last && k->partial_len == 0) /* a packet in one slice, the usual case: no copy */
                return k->cb(n > 0 ? s->data.data : (const uint8_t *) "", n, k->userdata);
        if (n > 0) {
                uint8_t *b = realloc(k->partial, k->partial_len + n);
                if (!b)
                        return -ENOMEM;
                memcpy(b + k->partial_len, s->data.data, n);
                k->partial = b;
                k->partial_len += n;
        }
        if (!last)
                return 0;
        size_t len = k->partial_len;
        k->partial_len = 0;
        return k->cb(k->partial, len, k->userdata);
}

static int reader_add_reply(struct pending *p, const ProtobufCMessage *reply) {
        struct reader *k = (struct reader *) p;
        const Perfetto__Protos__ReadBuffersResponse *r = (const void *) reply;
        int e = 0;
        for (size_t i = 0; i < r->n_slices && e >= 0; i++)
                e = reader_add(k, r->slices[i]);
        return e;
}

int consumer_read_buffers(sd_event *event, ipc_client *c, consumer_packet_cb cb, void *userdata,
                          unsigned timeout_ms) {
        Perfetto__Protos__ReadBuffersRequest req = PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
        struct reader k = { .pending.add = reader_add_reply, .cb = cb, .userdata = userdata };
        int r = invoke_and_wait(event, c, "ReadBuffers", &req.base, &perfetto__protos__read_buffers_response__descriptor,
                                -EBADF, &k.pending, timeout_ms);
        free(k.partial);
        return r;
}
