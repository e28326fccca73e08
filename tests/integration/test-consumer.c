/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "traced/pbzero/perfetto/trace/trace.pbw.h"
#include "test-consumer.h"

void spin_ms(sd_event *event, unsigned ms) {
        (void) consumer_wait(event, NULL, ms);
}

int test_consumer_connect(struct test_consumer *c, sd_event *event, const char *path) {
        memset(c, 0, sizeof(*c));
        c->event = event;
        /* The service binds its method table once its core runs: on a loaded
         * machine (a compile beside, other suites) that takes seconds. */
        return consumer_connect(event, path, 30000, &c->client);
}

void test_consumer_free(struct test_consumer *c) {
        c->client = ipc_client_free(c->client);
        consumer_session_done(&c->session);
        free(c->data);
        c->data = NULL;
        c->len = c->cap = 0;
}

static void on_enable(struct consumer_session *s, void *userdata) {
        struct test_consumer *c = userdata;
        c->enable_replied = true;
        c->disabled = s->disabled;
        if (s->ipc_error < 0)
                snprintf(c->error, sizeof(c->error), "ipc error %d", s->ipc_error);
        else
                snprintf(c->error, sizeof(c->error), "%s", s->error ? s->error : "");
}

int test_consumer_enable(struct test_consumer *c, const Perfetto__Protos__TraceConfig *cfg, int fd) {
        Perfetto__Protos__EnableTracingRequest req = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        req.trace_config = (Perfetto__Protos__TraceConfig *) cfg;
        c->enable_replied = c->disabled = false;
        c->error[0] = '\0';
        c->session.on_reply = on_enable;
        c->session.userdata = c;
        int64_t r = consumer_enable_tracing(c->client, &req, fd, &c->session);
        return r < 0 ? (int) r : 0;
}

bool test_consumer_wait_disabled(struct test_consumer *c, unsigned timeout_ms) {
        return consumer_wait(c->event, &c->enable_replied, timeout_ms) == 0;
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

/* Each packet as a Trace has it (Trace.packet). */
static int on_packet(const uint8_t *packet, size_t len, void *userdata) {
        struct test_consumer *c = userdata;
        uint8_t hdr[16];
        struct traced_pb_stream s;
        Trace t;
        traced_pb_stream_init_buffer(&s, hdr, sizeof(hdr));
        Trace_init(&t, &s);
        traced_pb_msg_len_header(&t.msg, Trace_FIELD_packet, len);
        append(&c->data, &c->len, &c->cap, hdr, (size_t) traced_pb_msg_size(&t.msg));
        append(&c->data, &c->len, &c->cap, packet, len);
        c->n_packets++;
        return 0;
}

int test_consumer_read(struct test_consumer *c, unsigned timeout_ms) {
        c->read_done = false;
        c->read_error = 0;
        int r = consumer_read_buffers(c->event, c->client, on_packet, c, timeout_ms);
        c->read_done = r != -ETIMEDOUT;
        c->read_error = r;
        return r;
}

int test_consumer_call(struct test_consumer *c, const char *method, const ProtobufCMessage *args,
                       const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **ret_reply,
                       unsigned timeout_ms) {
        return test_consumer_call_fd(c, method, args, -EBADF, reply_desc, ret_reply, timeout_ms);
}

int test_consumer_call_fd(struct test_consumer *c, const char *method, const ProtobufCMessage *args, int fd,
                          const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **ret_reply,
                          unsigned timeout_ms) {
        return consumer_call_first(c->event, c->client, method, args, reply_desc, fd, ret_reply, timeout_ms);
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
