/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbw.h"
#include "test-consumer.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

void spin_ms(sd_event *event, unsigned ms) {
        uint64_t deadline = now_usec() + (uint64_t) ms * 1000u;
        for (;;) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        return;
                sd_event_run(event, deadline - now);
        }
}

int test_consumer_connect(struct test_consumer *c, sd_event *event, const char *path) {
        int r;
        memset(c, 0, sizeof(*c));
        c->event = event;
        r = ipc_client_connect(event, path, &c->client);
        if (r < 0)
                return r;
        return ipc_client_bind_sync(c->client, "ConsumerPort", 5000000);
}

void test_consumer_free(struct test_consumer *c) {
        c->client = ipc_client_free(c->client);
        free(c->data);
        free(c->partial);
        c->data = c->partial = NULL;
        c->len = c->cap = c->partial_len = c->partial_cap = 0;
}

static void on_enable(ipc_client *cl, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct test_consumer *c = ud;
        const Perfetto__Protos__EnableTracingResponse *r = (const void *) reply;
        c->enable_replied = true;
        if (error < 0)
                snprintf(c->error, sizeof(c->error), "ipc error %d", error);
        else if (r) {
                c->disabled = r->state_case == PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED && r->disabled;
                if (r->error)
                        snprintf(c->error, sizeof(c->error), "%s", r->error);
        }
        if (fd >= 0)
                close(fd);
}

int test_consumer_enable(struct test_consumer *c, const Perfetto__Protos__TraceConfig *cfg, int fd) {
        Perfetto__Protos__EnableTracingRequest req = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        req.trace_config = (Perfetto__Protos__TraceConfig *) cfg;
        c->enable_replied = c->disabled = false;
        c->error[0] = '\0';
        int64_t r = ipc_client_invoke(c->client, "EnableTracing", &req.base,
                                      &perfetto__protos__enable_tracing_response__descriptor, fd, on_enable, c);
        return r < 0 ? (int) r : 0;
}

bool test_consumer_wait_disabled(struct test_consumer *c, unsigned timeout_ms) {
        uint64_t deadline = now_usec() + (uint64_t) timeout_ms * 1000u;
        while (!c->enable_replied) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        return false;
                sd_event_run(c->event, deadline - now);
        }
        return true;
}

/* Grows geometrically: traces of tens of MB arrive packet by packet (and
 * a sanitizer's realloc always copies). */
static int append(uint8_t **buf, size_t *len, size_t *cap, const void *data, size_t n) {
        if (*len + n + 1 > *cap) {
                size_t c = *cap ? *cap : 4096;
                while (c < *len + n + 1)
                        c *= 2;
                uint8_t *b = realloc(*buf, c);
                if (!b)
                        return -ENOMEM;
                *buf = b;
                *cap = c;
        }
        memcpy(*buf + *len, data, n);
        *len += n;
        return 0;
}

static void on_read(ipc_client *cl, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct test_consumer *c = ud;
        const Perfetto__Protos__ReadBuffersResponse *r = (const void *) reply;

        if (fd >= 0)
                close(fd);
        if (error < 0) {
                c->read_error = error;
                c->read_done = true;
                return;
        }
        for (size_t i = 0; r && i < r->n_slices; i++) {
                const Perfetto__Protos__ReadBuffersResponse__Slice *s = r->slices[i];
                if (s->has_data)
                        append(&c->partial, &c->partial_len, &c->partial_cap, s->data.data, s->data.len);
                if (s->has_last_slice_for_packet && s->last_slice_for_packet) {
                        uint8_t hdr[11];
                        hdr[0] = 0x0a;
                        size_t hn = 1 + pbw_put_varint(hdr + 1, c->partial_len);
                        append(&c->data, &c->len, &c->cap, hdr, hn);
                        append(&c->data, &c->len, &c->cap, c->partial, c->partial_len);
                        c->partial_len = 0;
                        c->n_packets++;
                }
        }
        if (!has_more)
                c->read_done = true;
}

int test_consumer_read(struct test_consumer *c, unsigned timeout_ms) {
        Perfetto__Protos__ReadBuffersRequest req = PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
        c->read_done = false;
        c->read_error = 0;
        int64_t r = ipc_client_invoke(c->client, "ReadBuffers", &req.base,
                                      &perfetto__protos__read_buffers_response__descriptor, -EBADF, on_read, c);
        if (r < 0)
                return (int) r;
        uint64_t deadline = now_usec() + (uint64_t) timeout_ms * 1000u;
        while (!c->read_done) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        return -ETIMEDOUT;
                sd_event_run(c->event, deadline - now);
        }
        return c->read_error;
}

struct call_state {
        bool done;
        int error;
        ProtobufCMessage *reply;
        const ProtobufCMessageDescriptor *desc;
};

static void on_call(ipc_client *cl, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct call_state *st = ud;
        if (fd >= 0)
                close(fd);
        if (st->done)
                return;
        st->done = true;
        st->error = error;
        if (reply && st->desc) {
                size_t n = protobuf_c_message_get_packed_size(reply);
                uint8_t *b = malloc(n ? n : 1);
                if (b) {
                        protobuf_c_message_pack(reply, b);
                        st->reply = protobuf_c_message_unpack(st->desc, NULL, n, b);
                        free(b);
                }
        }
}

int test_consumer_call(struct test_consumer *c, const char *method, const ProtobufCMessage *args,
                       const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **ret_reply,
                       unsigned timeout_ms) {
        return test_consumer_call_fd(c, method, args, -EBADF, reply_desc, ret_reply, timeout_ms);
}

int test_consumer_call_fd(struct test_consumer *c, const char *method, const ProtobufCMessage *args, int fd,
                          const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **ret_reply,
                          unsigned timeout_ms) {
        struct call_state *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->desc = reply_desc;
        int64_t r = ipc_client_invoke(c->client, method, args, reply_desc, fd, on_call, st);
        if (r < 0) {
                free(st);
                return (int) r;
        }
        uint64_t deadline = now_usec() + (uint64_t) timeout_ms * 1000u;
        while (!st->done) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        return -ETIMEDOUT; /* st leaks deliberately: the callback may still come */
                sd_event_run(c->event, deadline - now);
        }
        int e = st->error;
        if (ret_reply)
                *ret_reply = st->reply;
        else if (st->reply)
                protobuf_c_message_free_unpacked(st->reply, NULL);
        free(st);
        return e;
}

Perfetto__Protos__TraceConfig *test_config_new(uint32_t buffer_kb, const char *ds_name, uint32_t duration_ms) {
        Perfetto__Protos__TraceConfig *cfg = calloc(1, sizeof(*cfg));
        Perfetto__Protos__TraceConfig__BufferConfig *b = calloc(1, sizeof(*b));
        Perfetto__Protos__TraceConfig__DataSource *ds = calloc(1, sizeof(*ds));
        Perfetto__Protos__DataSourceConfig *dsc = calloc(1, sizeof(*dsc));
        perfetto__protos__trace_config__init(cfg);
        perfetto__protos__trace_config__buffer_config__init(b);
        perfetto__protos__trace_config__data_source__init(ds);
        perfetto__protos__data_source_config__init(dsc);
        b->has_size_kb = true;
        b->size_kb = buffer_kb;
        cfg->n_buffers = 1;
        cfg->buffers = calloc(1, sizeof(void *));
        cfg->buffers[0] = b;
        dsc->name = strdup(ds_name);
        ds->config = dsc;
        cfg->n_data_sources = 1;
        cfg->data_sources = calloc(1, sizeof(void *));
        cfg->data_sources[0] = ds;
        if (duration_ms) {
                cfg->has_duration_ms = true;
                cfg->duration_ms = duration_ms;
        }
        return cfg;
}

void test_config_free(Perfetto__Protos__TraceConfig *cfg) {
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->n_buffers; i++)
                free(cfg->buffers[i]);
        free(cfg->buffers);
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                free(cfg->data_sources[i]->config->name);
                free(cfg->data_sources[i]->config);
                free(cfg->data_sources[i]);
        }
        free(cfg->data_sources);
        free(cfg);
}
