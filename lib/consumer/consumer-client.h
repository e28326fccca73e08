/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A client of the service's ConsumerPort, on the IPC client: bind the
 * port, call a method and wait for its reply (streamed replies merged),
 * send EnableTracing and take its deferred reply, read the buffers back
 * as whole packets. tracectl and the integration tests both drive the
 * service through it. Calls run the caller's sd-event loop until their
 * reply or timeout; nothing here prints: errors are negative errno. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "ipc/ipc.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

/* Runs event until *done is true (done NULL: for the whole time) or
 * timeout_ms passed: 0, -ETIMEDOUT, or the loop's error. */
int consumer_wait(sd_event *event, const bool *done, unsigned timeout_ms);

/* Binds ConsumerPort on a connected client within timeout_ms. */
int consumer_bind(ipc_client *c, unsigned timeout_ms);
/* Connects to the consumer socket at path and binds ConsumerPort. On
 * failure *ret is left alone and nothing stays open. */
int consumer_connect(sd_event *event, const char *path, unsigned bind_timeout_ms, ipc_client **ret);

/* Calls method with args (and fd, if >= 0, which stays the caller's) and
 * waits for its last reply. A streamed reply (has_more) is put together
 * like the perfetto CLI does: the serialized parts appended, so lists
 * accumulate. With ret_reply, *ret_reply is the reply unpacked with
 * reply_desc (NULL if none came); free it with
 * protobuf_c_message_free_unpacked(). 0, -ETIMEDOUT (the call is then
 * cancelled: a late reply is dropped), or the call's error. */
int consumer_call(sd_event *event, ipc_client *c, const char *method, const ProtobufCMessage *args,
                  const ProtobufCMessageDescriptor *reply_desc, int fd, ProtobufCMessage **ret_reply,
                  unsigned timeout_ms);

/* The same, but done at the first reply: the rest of a stream is
 * dropped. For a caller that only wants to know the service answers (the
 * integration tests): a long stream (QueryServiceState with thousands of
 * producers) can outgrow what the service queues for one consumer, which
 * then loses its connection before the last part. */
int consumer_call_first(sd_event *event, ipc_client *c, const char *method, const ProtobufCMessage *args,
                        const ProtobufCMessageDescriptor *reply_desc, int fd, ProtobufCMessage **ret_reply,
                        unsigned timeout_ms);

/* EnableTracing answers when the session ends (or could not start). */
struct consumer_session {
        bool replied;
        bool disabled;  /* the reply reports the session disabled */
        int ipc_error;  /* the call failed without a reply: -errno */
        char *error;    /* the service's error text, NULL if none */
        /* traced's own: why the session ended early
         * (PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__*), 0 if it
         * did not. */
        int end_reason;
        /* Optional, set by the caller: told once the reply is in. */
        void (*on_reply)(struct consumer_session *s, void *userdata);
        void *userdata;
};

/* Sends EnableTracing (a config, or attach_notification_only) with fd
 * (if >= 0, stays the caller's) and returns without waiting: the reply
 * fills s, which must outlive it or the client. Clears what s held of an
 * earlier session, keeps on_reply and userdata. The request id, or
 * -errno. */
int64_t consumer_enable_tracing(ipc_client *c, const Perfetto__Protos__EnableTracingRequest *req, int fd,
                                struct consumer_session *s);
void consumer_session_done(struct consumer_session *s);

/* One whole packet of the buffers, its slices joined; valid during the
 * call only. A negative return stops the read with that error. */
typedef int (*consumer_packet_cb)(const uint8_t *packet, size_t len, void *userdata);

/* ReadBuffers: hands each packet to cb in order and waits for the last
 * reply. 0, -ETIMEDOUT, or the call's (or cb's) error. */
int consumer_read_buffers(sd_event *event, ipc_client *c, consumer_packet_cb cb, void *userdata,
                          unsigned timeout_ms);
