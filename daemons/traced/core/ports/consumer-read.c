/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* ReadBuffers: a session's packets as reply slices, paced by what the
 * consumer takes. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/consumer-port.h"
#include "core/service.h"
#include "core/sessions/session-read.h"
#include "core/sessions/session.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

/* Payload bytes per ReadBuffers reply; frames stay well under the IPC cap. */
#define READ_REPLY_BYTES (64u * 1024u)
/* ReadBuffers stops queuing replies once this much waits for the consumer,
 * and goes on when it has taken half of it: a large trace is never held
 * in the send queue at once (whose limit would cut the consumer off). */
#define READ_PAUSE_BYTES (2u * 1024u * 1024u)
#define READ_POLL_USEC 2000u

struct read_ctx {
        ipc_request *req;
        ipc_host_conn *conn;
        Perfetto__Protos__ReadBuffersResponse__Slice *slices;
        Perfetto__Protos__ReadBuffersResponse__Slice **ptrs;
        size_t n, cap;
        uint8_t *buf;
        size_t used, buf_cap;
        int error;
};

static int read_flush(struct read_ctx *k, bool final) {
        Perfetto__Protos__ReadBuffersResponse resp = PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__INIT;
        /* Slice data points into buf; fix pointers now that it is stable. */
        size_t off = 0;
        for (size_t i = 0; i < k->n; i++) {
                k->slices[i].data.data = k->buf + off;
                off += k->slices[i].data.len;
                k->ptrs[i] = &k->slices[i];
        }
        resp.n_slices = k->n;
        resp.slices = k->ptrs;
        int r = ipc_request_reply(k->req, &resp.base, !final, -EBADF);
        k->n = 0;
        k->used = 0;
        return r;
}

/* Adds a slice of len bytes to the reply being built; *ret_data is where
 * its bytes go (valid until the next slice is added). */
static int read_add_slice(struct read_ctx *k, size_t len, bool last, uint8_t **ret_data) {
        if (k->n == k->cap) {
                size_t cap = k->cap ? k->cap * 2 : 64;
                void *a = realloc(k->slices, cap * sizeof(*k->slices));
                if (!a)
                        return -ENOMEM;
                k->slices = a;
                a = realloc(k->ptrs, cap * sizeof(*k->ptrs));
                if (!a)
                        return -ENOMEM;
                k->ptrs = a;
                k->cap = cap;
        }
        if (k->used + len > k->buf_cap) {
                size_t cap = MAX(k->buf_cap * 2, k->used + len);
                uint8_t *b = realloc(k->buf, cap);
                if (!b)
                        return -ENOMEM;
                k->buf = b;
                k->buf_cap = cap;
        }
        *ret_data = k->buf + k->used;
        k->used += len;
        k->slices[k->n] = (Perfetto__Protos__ReadBuffersResponse__Slice) PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__SLICE__INIT;
        k->slices[k->n].has_data = true;
        k->slices[k->n].data.len = len;
        k->slices[k->n].has_last_slice_for_packet = true;
        k->slices[k->n].last_slice_for_packet = last;
        k->n++;
        return 0;
}

static int read_sink(const struct iovec *iov, size_t n_iov, size_t total, void *userdata) {
        struct read_ctx *k = userdata;
        size_t left = total;
        int r;

        /* A packet becomes one or more slices, each within a reply. */
        size_t i = 0, off = 0;
        while (left > 0) {
                size_t room = k->used < READ_REPLY_BYTES ? READ_REPLY_BYTES - k->used : 0;
                if (room == 0) {
                        r = read_flush(k, false);
                        if (r < 0)
                                return r;
                        continue;
                }
                size_t take = MIN(room, left);
                left -= take;
                /* Gather take bytes from the iovecs into one slice. */
                uint8_t *tmp;
                r = read_add_slice(k, take, left == 0, &tmp);
                if (r < 0)
                        return r;
                size_t got = 0;
                while (got < take) {
                        size_t n = MIN(iov[i].iov_len - off, take - got);
                        memcpy(tmp + got, (const uint8_t *) iov[i].iov_base + off, n);
                        got += n;
                        off += n;
                        if (off == iov[i].iov_len) {
                                i++;
                                off = 0;
                        }
                }
        }
        /* Taken; pause if the consumer is behind. */
        return k->conn && ipc_host_conn_queued_bytes(k->conn) >= READ_PAUSE_BYTES ? 1 : 0;
}

static void read_step(struct consumer *c);

static int on_read_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct consumer *c = userdata;
        if (ipc_host_conn_queued_bytes(c->conn) > READ_PAUSE_BYTES / 2) {
                (void) sd_event_source_set_time_relative(s, READ_POLL_USEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        read_step(c);
        return 0;
}

/* Reads what the session has, until done or the consumer falls behind. */
static void read_step(struct consumer *c) {
        struct read_ctx k = { .req = c->read_req, .conn = c->conn };
        bool paused = false;
        int r = c->session ? session_read_packets_paced(c->session, read_sink, &k, &paused) : -ESRCH;
        if (r >= 0 && (!paused || k.n > 0))
                r = read_flush(&k, !paused);
        free(k.slices);
        free(k.ptrs);
        free(k.buf);
        if (r < 0) {
                log_debug_errno(r, "ReadBuffers failed: %m");
                (void) ipc_request_fail(c->read_req);
                paused = false;
        }
        if (paused) {
                if (c->read_timer)
                        r = sd_event_source_set_time_relative(c->read_timer, READ_POLL_USEC) < 0 ? -1 :
                            sd_event_source_set_enabled(c->read_timer, SD_EVENT_ONESHOT);
                else
                        r = sd_event_add_time_relative(c->svc->event, &c->read_timer, CLOCK_MONOTONIC, READ_POLL_USEC,
                                                       1000, on_read_timer, c);
                if (r >= 0)
                        return;
                (void) ipc_request_fail(c->read_req);
        }
        c->read_timer = sd_event_source_disable_unref(c->read_timer);
        c->read_req = ipc_request_unref(c->read_req);
}

void m_read_buffers(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        struct consumer *c = req_consumer(req);

        if (!c || !c->session || c->read_req) {
                /* No session, or a read already in progress. */
                ipc_request_fail(req);
                return;
        }
        const Perfetto__Protos__TraceConfig *cfg = session_config(c->session);
        if (session_writes_file(c->session) || (cfg->has_write_into_file && cfg->write_into_file)) {
                /* The trace goes to the file; there is nothing to read. */
                ipc_request_fail(req);
                return;
        }
        if (session_waiting_for_trigger(c->session)) {
                /* Like upstream: a session still waiting for its trigger
                 * (or read only through clones) has no trace yet. */
                Perfetto__Protos__ReadBuffersResponse empty = PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__INIT;
                reply(req, &empty.base);
                return;
        }
        c->read_req = ipc_request_ref(req);
        read_step(c);
}
