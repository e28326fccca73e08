/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Replays the exact bytes that upstream Perfetto's traced_probes (a
 * producer) and perfetto command line (a consumer) sent to upstream's
 * service, recorded in tests/data/upstream/, against our traced, and
 * checks that what comes back matches what upstream's service answered:
 * the same method tables, the same commands in the same order with the
 * same contents, the SMB fd on SetupTracing, the deferred EnableTracing
 * reply, and a readable trace. */

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/macro.h"
#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"
#include "basic/pbr.h"
#include "traced-instance.h"

#include "perfetto/config/data_source_config.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

struct recording {
        uint8_t *cs, *sc; /* client->service, service->client streams */
        size_t cs_len, sc_len;
};

static void load_recording(const char *name, struct recording *rec) {
        char path[512];
        snprintf(path, sizeof(path), "%s/upstream/%s.hex", TEST_DATA_DIR, name);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "missing fixture %s", path);
        memset(rec, 0, sizeof(*rec));
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) {
                char dir[8], hex[1 << 16];
                double t;
                if (line[0] == '#' || sscanf(line, "%lf %7s %65535s", &t, dir, hex) != 3)
                        continue;
                size_t n = strlen(hex) / 2;
                uint8_t **buf = strcmp(dir, "C>S") == 0 ? &rec->cs : &rec->sc;
                size_t *len = strcmp(dir, "C>S") == 0 ? &rec->cs_len : &rec->sc_len;
                *buf = realloc(*buf, *len + n);
                for (size_t i = 0; i < n; i++) {
                        unsigned v;
                        sscanf(hex + 2 * i, "%2x", &v);
                        (*buf)[*len + i] = (uint8_t) v;
                }
                *len += n;
        }
        free(line);
        fclose(f);
}

/* Splits a recorded stream into frames (with their length prefix). */
static size_t split_frames(const uint8_t *buf, size_t len, const uint8_t **ret_start, size_t *ret_len, size_t max) {
        size_t pos = 0, n = 0;
        while (pos + 4 <= len && n < max) {
                uint32_t l = (uint32_t) buf[pos] | ((uint32_t) buf[pos + 1] << 8) | ((uint32_t) buf[pos + 2] << 16) |
                             ((uint32_t) buf[pos + 3] << 24);
                cr_assert_leq(pos + 4 + l, len);
                ret_start[n] = buf + pos;
                ret_len[n] = 4 + l;
                n++;
                pos += 4 + l;
        }
        return n;
}

static Perfetto__Protos__IPCFrame *decode(const uint8_t *frame, size_t len) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, frame, len), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 1);
        ipc_frame_decoder_done(&d);
        return f;
}

struct peer {
        int fd;
        struct ipc_frame_decoder dec;
        int last_fd;
};

static void peer_connect(struct peer *p, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        cr_assert_eq(connect(p->fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        ipc_frame_decoder_init(&p->dec, IPC_FRAME_MAX_SIZE);
        p->last_fd = -1;
}

static void peer_send(struct peer *p, const uint8_t *frame, size_t len) {
        cr_assert_eq(write(p->fd, frame, len), (ssize_t) len);
}

/* Next frame from the service, waiting up to timeout_ms. */
static Perfetto__Protos__IPCFrame *peer_recv(struct peer *p, int timeout_ms) {
        for (;;) {
                Perfetto__Protos__IPCFrame *f = NULL;
                int r = ipc_frame_decoder_pop(&p->dec, &f);
                cr_assert_geq(r, 0, "service sent a malformed frame");
                if (r == 1)
                        return f;
                struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
                if (poll(&pfd, 1, timeout_ms) <= 0)
                        return NULL;
                uint8_t *space;
                size_t avail;
                cr_assert_eq(ipc_frame_decoder_space(&p->dec, &space, &avail), 0);
                union {
                        struct cmsghdr c;
                        uint8_t b[CMSG_SPACE(sizeof(int))];
                } ctl;
                struct iovec iov = { .iov_base = space, .iov_len = avail };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof(ctl) };
                ssize_t n = recvmsg(p->fd, &mh, MSG_CMSG_CLOEXEC);
                if (n <= 0)
                        return NULL;
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                        if (cm->cmsg_type == SCM_RIGHTS) {
                                if (p->last_fd >= 0)
                                        close(p->last_fd);
                                memcpy(&p->last_fd, CMSG_DATA(cm), sizeof(int));
                        }
                ipc_frame_decoder_commit(&p->dec, (size_t) n);
        }
}

static void peer_close(struct peer *p) {
        close(p->fd);
        if (p->last_fd >= 0)
                close(p->last_fd);
        ipc_frame_decoder_done(&p->dec);
}

static void assert_same_methods(const Perfetto__Protos__IPCFrame *ours, const Perfetto__Protos__IPCFrame *theirs) {
        cr_assert_eq(ours->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
        const Perfetto__Protos__IPCFrame__BindServiceReply *a = ours->msg_bind_service_reply, *b =
                                                                       theirs->msg_bind_service_reply;
        cr_assert(a->success);
        cr_assert_geq(a->n_methods, b->n_methods, "method tables differ in size: %zu vs %zu", a->n_methods,
                      b->n_methods);
        for (size_t i = 0; i < b->n_methods; i++) {
                cr_assert_str_eq(a->methods[i]->name, b->methods[i]->name);
                cr_assert_eq(a->methods[i]->id, b->methods[i]->id, "method %s has id %u, upstream %u",
                             b->methods[i]->name, a->methods[i]->id, b->methods[i]->id);
        }
        /* Methods of traced's own come after upstream's (clients bind by
         * name), and say whose they are. */
        for (size_t i = b->n_methods; i < a->n_methods; i++)
                cr_assert(strncmp(a->methods[i]->name, "Traced", 6) == 0, "method %s is not upstream's",
                          a->methods[i]->name);
}

/* The GetAsyncCommandResponse carried by a reply frame. */
static Perfetto__Protos__GetAsyncCommandResponse *async_cmd(const Perfetto__Protos__IPCFrame *f) {
        cr_assert_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
        const Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f->msg_invoke_method_reply;
        cr_assert(r->success);
        cr_assert(r->has_more, "async commands must be streamed with has_more");
        Perfetto__Protos__GetAsyncCommandResponse *c =
                perfetto__protos__get_async_command_response__unpack(NULL, r->reply_proto.len, r->reply_proto.data);
        cr_assert_not_null(c);
        return c;
}

static void assert_same_ds_config(const Perfetto__Protos__DataSourceConfig *a, const Perfetto__Protos__DataSourceConfig *b) {
        cr_assert_str_eq(a->name, b->name);
        cr_assert_eq(a->target_buffer, b->target_buffer);
        cr_assert_eq(a->trace_duration_ms, b->trace_duration_ms);
        cr_assert_eq(a->stop_timeout_ms, b->stop_timeout_ms);
        cr_assert_eq(a->tracing_session_id, b->tracing_session_id);
        cr_assert_eq(!!a->ftrace_config, !!b->ftrace_config);
        if (b->ftrace_config) {
                cr_assert_eq(a->ftrace_config->n_ftrace_events, b->ftrace_config->n_ftrace_events);
                cr_assert_str_eq(a->ftrace_config->ftrace_events[0], b->ftrace_config->ftrace_events[0]);
        }
}

static struct traced_instance inst;

static void setup(void) {
        int r = traced_instance_start(&inst, true);
        cr_assert_eq(r, 0, "could not start traced: %s", strerror(-r));
}

static void teardown(void) {
        int st = traced_instance_destroy(&inst);
        cr_expect_eq(st, 0);
}

TestSuite(conformance, .init = setup, .fini = teardown, .timeout = 60);

Test(conformance, upstream_producer_and_consumer_replayed) {
        struct recording prod_rec, cons_rec;
        const uint8_t *pcs[256], *psc[256], *ccs[32], *csc[64];
        size_t pcs_len[256], psc_len[256], ccs_len[32], csc_len[64];

        load_recording("01-producer", &prod_rec);
        load_recording("02-consumer", &cons_rec);
        size_t n_pcs = split_frames(prod_rec.cs, prod_rec.cs_len, pcs, pcs_len, 256);
        size_t n_psc = split_frames(prod_rec.sc, prod_rec.sc_len, psc, psc_len, 256);
        size_t n_ccs = split_frames(cons_rec.cs, cons_rec.cs_len, ccs, ccs_len, 32);
        size_t n_csc = split_frames(cons_rec.sc, cons_rec.sc_len, csc, csc_len, 64);
        cr_assert_geq(n_pcs, 26);
        cr_assert_geq(n_psc, 26);
        cr_assert_geq(n_ccs, 3);
        cr_assert_geq(n_csc, 2);

        /* Producer: bind, InitializeConnection, RegisterDataSource...,
         * GetAsyncCommand: frames 0..21, exactly as traced_probes sent them. */
        struct peer prod;
        peer_connect(&prod, inst.producer_path);
        for (size_t i = 0; i <= 21; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);
        /* 21 replies: every frame but GetAsyncCommand (request 3), whose
         * stream only carries commands; same order as upstream answered. */
        for (size_t i = 0; i <= 20; i++) {
                Perfetto__Protos__IPCFrame *ours = peer_recv(&prod, 5000);
                Perfetto__Protos__IPCFrame *theirs = decode(psc[i], psc_len[i]);
                cr_assert_not_null(ours, "no reply to producer frame %zu", i);
                cr_assert_eq(ours->request_id, theirs->request_id);
                cr_assert_eq(ours->msg_case, theirs->msg_case);
                if (i == 0)
                        assert_same_methods(ours, theirs);
                else
                        cr_assert_eq(ours->msg_invoke_method_reply->success, theirs->msg_invoke_method_reply->success,
                                     "reply %zu differs in success", i);
                perfetto__protos__ipcframe__free_unpacked(ours, NULL);
                perfetto__protos__ipcframe__free_unpacked(theirs, NULL);
        }

        /* Consumer: bind and EnableTracing, as the perfetto CLI sent them. */
        struct peer cons;
        peer_connect(&cons, inst.consumer_path);
        peer_send(&cons, ccs[0], ccs_len[0]);
        Perfetto__Protos__IPCFrame *ours = peer_recv(&cons, 5000), *theirs = decode(csc[0], csc_len[0]);
        cr_assert_not_null(ours);
        assert_same_methods(ours, theirs);
        perfetto__protos__ipcframe__free_unpacked(ours, NULL);
        perfetto__protos__ipcframe__free_unpacked(theirs, NULL);
        peer_send(&cons, ccs[1], ccs_len[1]);

        /* The producer now gets what upstream sent: SetupTracing with the
         * SMB fd, then SetupDataSource x2, StartDataSource x2. */
        for (size_t i = 21; i <= 25; i++) {
                ours = peer_recv(&prod, 5000);
                theirs = decode(psc[i], psc_len[i]);
                cr_assert_not_null(ours, "missing async command %zu", i);
                Perfetto__Protos__GetAsyncCommandResponse *a = async_cmd(ours), *b = async_cmd(theirs);
                cr_assert_eq(a->cmd_case, b->cmd_case, "command %zu: %d, upstream %d", i, a->cmd_case, b->cmd_case);
                if (a->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING) {
                        cr_assert_geq(prod.last_fd, 0, "SetupTracing came without the SMB fd");
                        cr_assert_eq(a->setup_tracing->shared_buffer_page_size_kb,
                                     b->setup_tracing->shared_buffer_page_size_kb);
                        off_t size = lseek(prod.last_fd, 0, SEEK_END);
                        cr_assert_eq(size, 2097152, "SMB size %lld, hint was 2 MiB", (long long) size);
                } else if (a->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE) {
                        cr_assert_eq(a->setup_data_source->new_instance_id, b->setup_data_source->new_instance_id);
                        assert_same_ds_config(a->setup_data_source->config, b->setup_data_source->config);
                } else if (a->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE) {
                        cr_assert_eq(a->start_data_source->new_instance_id, b->start_data_source->new_instance_id);
                        assert_same_ds_config(a->start_data_source->config, b->start_data_source->config);
                }
                perfetto__protos__get_async_command_response__free_unpacked(a, NULL);
                perfetto__protos__get_async_command_response__free_unpacked(b, NULL);
                perfetto__protos__ipcframe__free_unpacked(ours, NULL);
                perfetto__protos__ipcframe__free_unpacked(theirs, NULL);
        }

        /* RegisterTraceWriter + NotifyDataSourceStarted (drop_reply). */
        for (size_t i = 22; i <= 25; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);

        /* At the end of the 1.5 s duration: a Flush for both instances. */
        ours = peer_recv(&prod, 5000);
        cr_assert_not_null(ours, "no flush at the end of the session");
        Perfetto__Protos__GetAsyncCommandResponse *fl = async_cmd(ours);
        cr_assert_eq(fl->cmd_case, PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH);
        cr_assert_eq(fl->flush->n_data_source_ids, 2);
        cr_assert_eq(fl->flush->request_id, 1);
        perfetto__protos__get_async_command_response__free_unpacked(fl, NULL);
        perfetto__protos__ipcframe__free_unpacked(ours, NULL);

        /* traced_probes' commit and flush ack. */
        for (size_t i = 26; i <= 28; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);

        /* Then StopDataSource for both, like upstream. */
        unsigned stops = 0;
        for (int k = 0; k < 6 && stops < 2; k++) {
                ours = peer_recv(&prod, 5000);
                cr_assert_not_null(ours, "stop commands missing");
                if (ours->msg_invoke_method_reply && ours->msg_invoke_method_reply->has_more) {
                        Perfetto__Protos__GetAsyncCommandResponse *c = async_cmd(ours);
                        if (c->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE)
                                stops++;
                        perfetto__protos__get_async_command_response__free_unpacked(c, NULL);
                }
                perfetto__protos__ipcframe__free_unpacked(ours, NULL);
        }
        cr_assert_eq(stops, 2);
        /* NotifyDataSourceStopped / UnregisterTraceWriter. */
        for (size_t i = 29; i <= 32; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);

        /* The deferred EnableTracing reply: byte-identical to upstream's. */
        ours = peer_recv(&cons, 10000);
        theirs = decode(csc[1], csc_len[1]);
        cr_assert_not_null(ours, "EnableTracing never answered");
        cr_assert_eq(ours->request_id, theirs->request_id);
        cr_assert_eq(ours->msg_invoke_method_reply->success, true);
        cr_assert_eq(ours->msg_invoke_method_reply->has_more, false);
        cr_assert_eq(ours->msg_invoke_method_reply->reply_proto.len, theirs->msg_invoke_method_reply->reply_proto.len);
        cr_assert_arr_eq(ours->msg_invoke_method_reply->reply_proto.data, theirs->msg_invoke_method_reply->reply_proto.data,
                         theirs->msg_invoke_method_reply->reply_proto.len);
        perfetto__protos__ipcframe__free_unpacked(ours, NULL);
        perfetto__protos__ipcframe__free_unpacked(theirs, NULL);

        /* ReadBuffers as the CLI sent it: slices of whole packets. */
        peer_send(&cons, ccs[2], ccs_len[2]);
        size_t packets = 0, configs = 0, clocks = 0, stats = 0;
        bool more = true;
        while (more) {
                ours = peer_recv(&cons, 5000);
                cr_assert_not_null(ours);
                cr_assert_eq(ours->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
                more = ours->msg_invoke_method_reply->has_more;
                Perfetto__Protos__ReadBuffersResponse *rb = perfetto__protos__read_buffers_response__unpack(
                        NULL, ours->msg_invoke_method_reply->reply_proto.len, ours->msg_invoke_method_reply->reply_proto.data);
                cr_assert_not_null(rb);
                for (size_t i = 0; i < rb->n_slices; i++) {
                        cr_assert(rb->slices[i]->last_slice_for_packet, "small packets come whole");
                        const uint8_t *d = rb->slices[i]->data.data;
                        size_t l = rb->slices[i]->data.len;
                        packets++;
                        configs += pbr_count(d, l, 33);
                        clocks += pbr_count(d, l, 6);
                        stats += pbr_count(d, l, 35);
                }
                perfetto__protos__read_buffers_response__free_unpacked(rb, NULL);
                perfetto__protos__ipcframe__free_unpacked(ours, NULL);
        }
        cr_assert_geq(packets, 5);
        cr_assert_eq(configs, 1);
        cr_assert_geq(clocks, 1);
        cr_assert_eq(stats, 1);

        /* FreeBuffers. */
        if (n_ccs > 3) {
                peer_send(&cons, ccs[3], ccs_len[3]);
                ours = peer_recv(&cons, 5000);
                cr_assert_not_null(ours);
                cr_assert(ours->msg_invoke_method_reply->success);
                perfetto__protos__ipcframe__free_unpacked(ours, NULL);
        }
        peer_close(&cons);
        peer_close(&prod);
        free(prod_rec.cs);
        free(prod_rec.sc);
        free(cons_rec.cs);
        free(cons_rec.sc);
}
