/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A consumer for tests, on lib/consumer: EnableTracing with a config
 * (optionally passing an output fd), waits for the deferred reply, reads
 * the buffers back as whole packets, in a Trace's encoding. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "basic/pbr.h"
#include "consumer/consumer-client.h"
#include "ipc/ipc.h"

#include "perfetto/config/trace_config.pb-c.h"

struct test_consumer {
        sd_event *event;
        ipc_client *client;
        bool enable_replied;
        bool disabled;
        char error[512];
        /* ReadBuffers results */
        uint8_t *data; /* packets, each prefixed like a Trace (field 1) */
        size_t len, cap;
        size_t n_packets;
        bool read_done;
        int read_error;
        struct consumer_session session; /* fills the fields above */
};

int test_consumer_connect(struct test_consumer *c, sd_event *event, const char *path);
void test_consumer_free(struct test_consumer *c);
int test_consumer_enable(struct test_consumer *c, const Perfetto__Protos__TraceConfig *cfg, int fd);
int test_consumer_read(struct test_consumer *c, unsigned timeout_ms);
/* Runs the loop until the EnableTracing reply arrived. */
bool test_consumer_wait_disabled(struct test_consumer *c, unsigned timeout_ms);
/* Invokes a method and waits for its (first) reply: 0, or the error. */
int test_consumer_call(struct test_consumer *c, const char *method, const ProtobufCMessage *args,
                       const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **ret_reply,
                       unsigned timeout_ms);
/* The same, sending fd (not taken) with the request. */
int test_consumer_call_fd(struct test_consumer *c, const char *method, const ProtobufCMessage *args, int fd,
                          const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **ret_reply,
                          unsigned timeout_ms);
void spin_ms(sd_event *event, unsigned ms);

/* A one-buffer config for data source ds_name. */
Perfetto__Protos__TraceConfig *test_config_new(uint32_t buffer_kb, const char *ds_name, uint32_t duration_ms);
void test_config_free(Perfetto__Protos__TraceConfig *cfg);
