/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Many machines: replays what upstream's traced_relay and the
 * traced_probes behind it sent to upstream's service over TCP (recorded
 * in tests/data/upstream/relay/) against our traced listening on
 * 127.0.0.1, checks the replies (RelayPort methods, shared memory
 * emulation, no fd on SetupTracing) and the trace (machine_id on the
 * relayed packets, the machine's system_info and remote_clock_sync).
 * Also: the RelayPort only where enabled, SetPeerIdentity only on TCP and
 * only first, reserved data source names for an anonymous TCP peer. */

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"
#include "traced-instance.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

#define RELAY_MACHINE_ID 2045628265u /* FNV-1a of the recorded boot id, low 32 bits */

struct recording {
        uint8_t *cs, *sc;
        size_t cs_len, sc_len;
};

static void load_recording(const char *name, struct recording *rec) {
        char path[512];
        snprintf(path, sizeof(path), "%s/upstream/relay/%s.hex", TEST_DATA_DIR, name);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "missing fixture %s", path);
        memset(rec, 0, sizeof(*rec));
        char *line = NULL, *hex = malloc(1 << 18);
        size_t cap = 0;
        cr_assert_not_null(hex);
        while (getline(&line, &cap, f) > 0) {
                char dir[8];
                double t;
                if (line[0] == '#' || sscanf(line, "%lf %7s %262143s", &t, dir, hex) != 3)
                        continue;
                size_t n = strlen(hex) / 2;
                bool cs = strcmp(dir, "C>S") == 0;
                uint8_t **buf = cs ? &rec->cs : &rec->sc;
                size_t *len = cs ? &rec->cs_len : &rec->sc_len;
                *buf = realloc(*buf, *len + n);
                cr_assert_not_null(*buf);
                for (size_t i = 0; i < n; i++) {
                        unsigned v;
                        sscanf(hex + 2 * i, "%2x", &v);
                        (*buf)[*len + i] = (uint8_t) v;
                }
                *len += n;
        }
        free(hex);
        free(line);
        fclose(f);
}

static void recording_done(struct recording *r) {
        free(r->cs);
        free(r->sc);
}

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

struct peer {
        int fd;
        struct ipc_frame_decoder dec;
        int last_fd;
};

static void peer_init(struct peer *p, int fd) {
        p->fd = fd;
        ipc_frame_decoder_init(&p->dec, IPC_FRAME_MAX_SIZE);
        p->last_fd = -1;
}

static void peer_connect_unix(struct peer *p, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        cr_assert_eq(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        peer_init(p, fd);
}

static void peer_connect_tcp(struct peer *p, unsigned port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        cr_assert_eq(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0, "connect 127.0.0.1:%u: %m", port);
        peer_init(p, fd);
}

static void peer_send(struct peer *p, const uint8_t *frame, size_t len) {
        cr_assert_eq(write(p->fd, frame, len), (ssize_t) len);
}

static void peer_send_frame(struct peer *p, const Perfetto__Protos__IPCFrame *f) {
        size_t n = perfetto__protos__ipcframe__get_packed_size(f);
        uint8_t *buf = malloc(n + 4);
        cr_assert_not_null(buf);
        buf[0] = (uint8_t) n;
        buf[1] = (uint8_t) (n >> 8);
        buf[2] = (uint8_t) (n >> 16);
        buf[3] = (uint8_t) (n >> 24);
        perfetto__protos__ipcframe__pack(f, buf + 4);
        peer_send(p, buf, n + 4);
        free(buf);
}

/* Next frame, or NULL after timeout_ms or when the service hung up. */
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

/* True once the service closed the connection (EOF within timeout_ms). */
static bool peer_hung_up(struct peer *p, int timeout_ms) {
        for (;;) {
                Perfetto__Protos__IPCFrame *f = peer_recv(p, timeout_ms);
                if (!f)
                        break;
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }
        uint8_t b;
        struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
        return poll(&pfd, 1, timeout_ms) == 1 && read(p->fd, &b, 1) == 0;
}

static void peer_close(struct peer *p) {
        close(p->fd);
        if (p->last_fd >= 0)
                close(p->last_fd);
        ipc_frame_decoder_done(&p->dec);
}

static Perfetto__Protos__GetAsyncCommandResponse *async_cmd(const Perfetto__Protos__IPCFrame *f) {
        cr_assert_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
        Perfetto__Protos__GetAsyncCommandResponse *c = perfetto__protos__get_async_command_response__unpack(
                NULL, f->msg_invoke_method_reply->reply_proto.len, f->msg_invoke_method_reply->reply_proto.data);
        cr_assert_not_null(c);
        return c;
}

/* Next async command on the producer's GetAsyncCommand stream. */
static Perfetto__Protos__GetAsyncCommandResponse *next_cmd(struct peer *p) {
        for (;;) {
                Perfetto__Protos__IPCFrame *f = peer_recv(p, 10000);
                cr_assert_not_null(f, "no command from the service");
                if (f->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY &&
                    f->msg_invoke_method_reply->has_more) {
                        Perfetto__Protos__GetAsyncCommandResponse *c = async_cmd(f);
                        perfetto__protos__ipcframe__free_unpacked(f, NULL);
                        return c;
                }
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }
}

static bool bind_reply_ok(struct peer *p) {
        Perfetto__Protos__IPCFrame *f = peer_recv(p, 5000);
        if (!f)
                return false;
        cr_assert_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
        bool ok = f->msg_bind_service_reply->success;
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        return ok;
}

static void send_bind(struct peer *p, const char *service) {
        Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        b.service_name = (char *) service;
        f.has_request_id = true;
        f.request_id = 1;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        f.msg_bind_service = &b;
        peer_send_frame(p, &f);
}

static void send_identity(struct peer *p, const char *hint) {
        Perfetto__Protos__IPCFrame__SetPeerIdentity id = PERFETTO__PROTOS__IPCFRAME__SET_PEER_IDENTITY__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        id.has_pid = id.has_uid = true;
        id.pid = 10;
        id.uid = 0;
        id.machine_id_hint = (char *) hint;
        id.machine_name = (char *) "forged";
        f.has_request_id = true;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY;
        f.set_peer_identity = &id;
        peer_send_frame(p, &f);
}

static struct traced_instance inst;
static unsigned relay_port, plain_port;

/* traced with the UNIX producer socket, a TCP one with the RelayPort and
 * a TCP one without. */
static void setup(void) {
        static char prod[700], relay[100];
        int r = -EADDRINUSE;
        /* The free ports may be taken meanwhile by others: try again. */
        for (int attempt = 0; attempt < 5 && r < 0; attempt++) {
                relay_port = test_free_tcp_port();
                plain_port = test_free_tcp_port();
                if (relay_port == plain_port)
                        continue;
                /* What the try before left (its ports were taken). */
                (void) traced_instance_destroy(&inst);
                /* traced_instance_start_args names the UNIX path; ours
                 * comes after it and wins. The path is only known after
                 * the directory is made, so start once to learn it. */
                const char *const args0[] = { "--no-plugins", NULL };
                r = traced_instance_start_args(&inst, false, args0);
                cr_assert_eq(r, 0, "could not start traced: %s", strerror(-r));
                (void) traced_instance_stop(&inst);
                snprintf(prod, sizeof(prod), "--producer-socket=%s,127.0.0.1:%u,127.0.0.1:%u", inst.producer_path,
                         relay_port, plain_port);
                snprintf(relay, sizeof(relay), "--enable-relay-endpoint-on=127.0.0.1:%u", relay_port);
                const char *const args[] = { "--no-plugins", prod, relay, NULL };
                r = traced_instance_restart(&inst, false, args);
        }
        cr_assert_eq(r, 0, "could not start traced: %s", strerror(-r));
}

static void teardown(void) {
        int st = traced_instance_destroy(&inst);
        cr_expect_eq(st, 0);
}

TestSuite(relay, .init = setup, .fini = teardown, .timeout = 90);

Test(relay, upstream_relay_and_relayed_producer_replayed) {
        struct recording ctl_rec, prod_rec, cons_rec;
        const uint8_t *ccs[16], *pcs[64], *kcs[16], *ksc[16];
        size_t ccs_len[16], pcs_len[64], kcs_len[16], ksc_len[16];

        load_recording("01-relay-control", &ctl_rec);
        load_recording("02-relayed-producer", &prod_rec);
        load_recording("03-consumer", &cons_rec);
        size_t n_ccs = split_frames(ctl_rec.cs, ctl_rec.cs_len, ccs, ccs_len, 16);
        size_t n_pcs = split_frames(prod_rec.cs, prod_rec.cs_len, pcs, pcs_len, 64);
        size_t n_kcs = split_frames(cons_rec.cs, cons_rec.cs_len, kcs, kcs_len, 16);
        size_t n_ksc = split_frames(cons_rec.sc, cons_rec.sc_len, ksc, ksc_len, 16);
        cr_assert_eq(n_ccs, 5);
        cr_assert_geq(n_pcs, 35);
        cr_assert_geq(n_kcs, 3);
        cr_assert_geq(n_ksc, 2);

        /* The relay: SetPeerIdentity, BindService RelayPort, InitRelay,
         * SyncClock PING, SyncClock UPDATE. */
        struct peer ctl;
        peer_connect_tcp(&ctl, relay_port);
        for (size_t i = 0; i < 4; i++)
                peer_send(&ctl, ccs[i], ccs_len[i]);
        Perfetto__Protos__IPCFrame *f = peer_recv(&ctl, 5000);
        cr_assert_not_null(f, "no reply to BindService(RelayPort)");
        cr_assert_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
        cr_assert(f->msg_bind_service_reply->success, "RelayPort refused on the relay endpoint");
        cr_assert_eq(f->msg_bind_service_reply->n_methods, 2);
        cr_assert_str_eq(f->msg_bind_service_reply->methods[0]->name, "InitRelay");
        cr_assert_eq(f->msg_bind_service_reply->methods[0]->id, 1);
        cr_assert_str_eq(f->msg_bind_service_reply->methods[1]->name, "SyncClock");
        cr_assert_eq(f->msg_bind_service_reply->methods[1]->id, 2);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        for (uint64_t id = 2; id <= 4; id++) {
                if (id == 4)
                        peer_send(&ctl, ccs[4], ccs_len[4]); /* UPDATE follows the PING reply */
                f = peer_recv(&ctl, 5000);
                cr_assert_not_null(f, "no reply to request %" PRIu64, id);
                cr_assert_eq(f->request_id, id);
                cr_assert(f->msg_invoke_method_reply->success, "request %" PRIu64 " failed", id);
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }

        /* traced_probes through the relay: identity, bind, Initialize-
         * Connection, GetAsyncCommand, 19 RegisterDataSource. */
        struct peer prod;
        peer_connect_tcp(&prod, relay_port);
        for (size_t i = 0; i <= 22; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);
        cr_assert(bind_reply_ok(&prod));
        f = peer_recv(&prod, 5000);
        cr_assert_not_null(f);
        cr_assert_eq(f->request_id, 2);
        cr_assert(f->msg_invoke_method_reply->success);
        Perfetto__Protos__InitializeConnectionResponse *init = perfetto__protos__initialize_connection_response__unpack(
                NULL, f->msg_invoke_method_reply->reply_proto.len, f->msg_invoke_method_reply->reply_proto.data);
        cr_assert_not_null(init);
        cr_assert(init->has_use_shmem_emulation && init->use_shmem_emulation,
                  "no shared memory emulation on a TCP socket");
        perfetto__protos__initialize_connection_response__free_unpacked(init, NULL);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        for (size_t i = 4; i <= 22; i++) {
                f = peer_recv(&prod, 5000);
                cr_assert_not_null(f, "no reply to RegisterDataSource frame %zu", i);
                /* The relayed machine names its own linux.ftrace. */
                cr_assert(f->msg_invoke_method_reply->success, "registration %zu refused", i);
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }

        /* The CLI: bind, EnableTracing (trace_all_machines, 2 s). */
        struct peer cons;
        peer_connect_unix(&cons, inst.consumer_path);
        peer_send(&cons, kcs[0], kcs_len[0]);
        cr_assert(bind_reply_ok(&cons));
        peer_send(&cons, kcs[1], kcs_len[1]);

        /* SetupTracing without an fd (none crosses TCP), with a page size;
         * then SetupDataSource x2 and StartDataSource x2. */
        Perfetto__Protos__GetAsyncCommandResponse *c = next_cmd(&prod);
        cr_assert_eq(c->cmd_case, PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING);
        cr_assert_gt(c->setup_tracing->shared_buffer_page_size_kb, 0);
        cr_assert_lt(prod.last_fd, 0, "an fd came over TCP");
        perfetto__protos__get_async_command_response__free_unpacked(c, NULL);
        unsigned setups = 0, starts = 0;
        while (setups < 2 || starts < 2) {
                c = next_cmd(&prod);
                setups += c->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
                starts += c->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
                perfetto__protos__get_async_command_response__free_unpacked(c, NULL);
        }
        /* RegisterTraceWriter x2, NotifyDataSourceStarted x2. */
        for (size_t i = 23; i <= 26; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);

        /* At the end: Flush; the relayed producer answers with its chunks
         * as bytes (CommitData ChunksToMove.data) and the flush ack. */
        c = next_cmd(&prod);
        cr_assert_eq(c->cmd_case, PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH);
        perfetto__protos__get_async_command_response__free_unpacked(c, NULL);
        for (size_t i = 27; i <= 30; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);
        unsigned stops = 0;
        while (stops < 2) {
                c = next_cmd(&prod);
                stops += c->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE;
                perfetto__protos__get_async_command_response__free_unpacked(c, NULL);
        }
        for (size_t i = 31; i < n_pcs; i++)
                peer_send(&prod, pcs[i], pcs_len[i]);

        /* The deferred EnableTracing reply, then ReadBuffers. */
        f = peer_recv(&cons, 15000);
        cr_assert_not_null(f, "EnableTracing never answered");
        cr_assert(f->msg_invoke_method_reply->success);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        peer_send(&cons, kcs[2], kcs_len[2]);

        size_t packets = 0, relayed = 0, relayed_sysinfo = 0, clock_syncs = 0, host_marked = 0, pairs = 0;
        uint8_t *pkt = NULL;
        size_t pkt_len = 0;
        bool more = true;
        while (more) {
                f = peer_recv(&cons, 5000);
                cr_assert_not_null(f);
                more = f->msg_invoke_method_reply->has_more;
                Perfetto__Protos__ReadBuffersResponse *rb = perfetto__protos__read_buffers_response__unpack(
                        NULL, f->msg_invoke_method_reply->reply_proto.len, f->msg_invoke_method_reply->reply_proto.data);
                cr_assert_not_null(rb);
                for (size_t i = 0; i < rb->n_slices; i++) {
                        pkt = realloc(pkt, pkt_len + rb->slices[i]->data.len + 1);
                        cr_assert_not_null(pkt);
                        memcpy(pkt + pkt_len, rb->slices[i]->data.data, rb->slices[i]->data.len);
                        pkt_len += rb->slices[i]->data.len;
                        if (!rb->slices[i]->last_slice_for_packet)
                                continue;
                        struct pbr_field m, sc;
                        packets++;
                        bool has_machine = pbr_get(pkt, pkt_len, 98, false, &m);
                        if (has_machine) {
                                cr_assert_eq(m.varint, RELAY_MACHINE_ID);
                                cr_assert_eq(pbr_count(pkt, pkt_len, 98), 1);
                                relayed++;
                                relayed_sysinfo += pbr_count(pkt, pkt_len, 45);
                                if (pbr_get(pkt, pkt_len, 107, false, &sc)) {
                                        clock_syncs++;
                                        pairs += pbr_count(sc.data, sc.len, 1);
                                }
                        } else
                                host_marked += pbr_count(pkt, pkt_len, 107);
                        pkt_len = 0;
                }
                perfetto__protos__read_buffers_response__free_unpacked(rb, NULL);
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }
        free(pkt);
        cr_assert_geq(packets, 10);
        /* The relayed chunk's packets (the print events, process tree...)
         * and the service's packets for the machine. */
        cr_assert_geq(relayed, 5, "only %zu packets carry the machine id", relayed);
        cr_assert_eq(relayed_sysinfo, 1, "the relayed machine's system_info: %zu", relayed_sysinfo);
        cr_assert_eq(clock_syncs, 1);
        cr_assert_eq(pairs, 2, "one pair per SyncClock request");
        cr_assert_eq(host_marked, 0);

        peer_close(&cons);
        peer_close(&prod);
        peer_close(&ctl);
        recording_done(&ctl_rec);
        recording_done(&prod_rec);
        recording_done(&cons_rec);
}

Test(relay, relay_port_only_where_enabled) {
        struct peer p;

        /* Not on the UNIX producer socket, even with an identity. */
        peer_connect_unix(&p, inst.producer_path);
        send_bind(&p, "RelayPort");
        cr_assert_not(bind_reply_ok(&p), "RelayPort bound on a UNIX socket");
        peer_close(&p);

        /* Not on a TCP socket not named by --enable-relay-endpoint-on. */
        peer_connect_tcp(&p, plain_port);
        send_identity(&p, "some-boot-id");
        send_bind(&p, "RelayPort");
        cr_assert_not(bind_reply_ok(&p), "RelayPort bound on a plain TCP socket");
        peer_close(&p);

        /* On the relay endpoint, but only with a machine named. */
        peer_connect_tcp(&p, relay_port);
        send_bind(&p, "RelayPort");
        cr_assert_not(bind_reply_ok(&p), "RelayPort bound without a machine");
        peer_close(&p);
        peer_connect_tcp(&p, relay_port);
        send_identity(&p, "some-boot-id");
        send_bind(&p, "RelayPort");
        cr_assert(bind_reply_ok(&p));
        peer_close(&p);

        /* The producer port is there on every producer socket. */
        peer_connect_tcp(&p, plain_port);
        send_bind(&p, "ProducerPort");
        cr_assert(bind_reply_ok(&p));
        peer_close(&p);
}

Test(relay, peer_identity_only_on_tcp_and_first) {
        struct peer p;

        /* On a UNIX socket the kernel's credentials are the truth: a
         * SetPeerIdentity costs the connection. */
        peer_connect_unix(&p, inst.producer_path);
        send_identity(&p, "some-boot-id");
        cr_assert(peer_hung_up(&p, 5000), "SetPeerIdentity accepted on a UNIX socket");
        peer_close(&p);

        /* On TCP, only before anything else, and only once. */
        peer_connect_tcp(&p, plain_port);
        send_bind(&p, "ProducerPort");
        cr_assert(bind_reply_ok(&p));
        send_identity(&p, "some-boot-id");
        cr_assert(peer_hung_up(&p, 5000), "SetPeerIdentity accepted after BindService");
        peer_close(&p);

        peer_connect_tcp(&p, plain_port);
        send_identity(&p, "some-boot-id");
        send_identity(&p, "other-boot-id");
        cr_assert(peer_hung_up(&p, 5000), "a second SetPeerIdentity accepted");
        peer_close(&p);

        /* The service is still there. */
        peer_connect_tcp(&p, plain_port);
        send_identity(&p, "some-boot-id");
        send_bind(&p, "ProducerPort");
        cr_assert(bind_reply_ok(&p));
        peer_close(&p);
}

/* hint NULL: no SetPeerIdentity; "": one with uid 0 but no machine. */
static bool register_ftrace(struct peer *p, const char *hint) {
        if (hint)
                send_identity(p, hint);
        send_bind(p, "ProducerPort");
        cr_assert(bind_reply_ok(p));

        Perfetto__Protos__InitializeConnectionRequest ic = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        Perfetto__Protos__RegisterDataSourceRequest rd = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
        Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
        Perfetto__Protos__IPCFrame__InvokeMethod inv = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        uint8_t args[256];

        ic.producer_name = (char *) "relay-test";
        inv.has_service_id = inv.has_method_id = inv.has_args_proto = true;
        inv.service_id = 1;
        inv.method_id = 1;
        inv.args_proto.len = perfetto__protos__initialize_connection_request__pack(&ic, args);
        inv.args_proto.data = args;
        f.has_request_id = true;
        f.request_id = 2;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
        f.msg_invoke_method = &inv;
        peer_send_frame(p, &f);
        Perfetto__Protos__IPCFrame *r = peer_recv(p, 5000);
        cr_assert_not_null(r);
        cr_assert(r->msg_invoke_method_reply->success);
        perfetto__protos__ipcframe__free_unpacked(r, NULL);

        d.name = (char *) "linux.ftrace";
        rd.data_source_descriptor = &d;
        uint8_t args2[256];
        inv.method_id = 2;
        inv.args_proto.len = perfetto__protos__register_data_source_request__pack(&rd, args2);
        inv.args_proto.data = args2;
        f.request_id = 3;
        peer_send_frame(p, &f);
        r = peer_recv(p, 5000);
        cr_assert_not_null(r);
        Perfetto__Protos__RegisterDataSourceResponse *resp = perfetto__protos__register_data_source_response__unpack(
                NULL, r->msg_invoke_method_reply->reply_proto.len, r->msg_invoke_method_reply->reply_proto.data);
        bool ok = r->msg_invoke_method_reply->success && resp && !(resp->error && resp->error[0]);
        if (resp)
                perfetto__protos__register_data_source_response__free_unpacked(resp, NULL);
        perfetto__protos__ipcframe__free_unpacked(r, NULL);
        return ok;
}

Test(relay, forged_root_is_not_root) {
        struct peer p;

        /* A TCP peer that names no machine is machine 0, with a uid nobody
         * checked: it may not take the host's reserved names. */
        peer_connect_tcp(&p, plain_port);
        cr_assert_not(register_ftrace(&p, NULL), "an anonymous TCP peer registered linux.ftrace");
        peer_close(&p);

        /* Claiming uid 0 is not being root. */
        peer_connect_tcp(&p, plain_port);
        cr_assert_not(register_ftrace(&p, ""), "a TCP peer claiming uid 0 registered linux.ftrace");
        peer_close(&p);

        /* A peer that names its machine names that machine's
         * linux.ftrace; its packets carry its machine id. */
        peer_connect_tcp(&p, plain_port);
        cr_assert(register_ftrace(&p, "another-machine"));
        peer_close(&p);
}

/* Binds service on p and returns the id of method (0 if absent). */
static uint32_t bind_and_find(struct peer *p, const char *service, const char *method) {
        send_bind(p, service);
        Perfetto__Protos__IPCFrame *f = peer_recv(p, 5000);
        cr_assert_not_null(f);
        cr_assert(f->msg_bind_service_reply->success);
        uint32_t id = 0;
        for (size_t i = 0; i < f->msg_bind_service_reply->n_methods; i++)
                if (strcmp(f->msg_bind_service_reply->methods[i]->name, method) == 0)
                        id = f->msg_bind_service_reply->methods[i]->id;
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        return id;
}

static void invoke(struct peer *p, uint64_t request_id, uint32_t method_id, const ProtobufCMessage *args) {
        Perfetto__Protos__IPCFrame__InvokeMethod inv = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        size_t n = protobuf_c_message_get_packed_size(args);
        uint8_t *buf = malloc(n + 1);
        cr_assert_not_null(buf);
        protobuf_c_message_pack(args, buf);
        inv.has_service_id = inv.has_method_id = inv.has_args_proto = true;
        inv.service_id = 1;
        inv.method_id = method_id;
        inv.args_proto.len = n;
        inv.args_proto.data = buf;
        f.has_request_id = true;
        f.request_id = request_id;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
        f.msg_invoke_method = &inv;
        peer_send_frame(p, &f);
        free(buf);
}

/* Runs a 300 ms session of data source "relay.test" and returns how many
 * SetupDataSource commands the relayed producer got for it. */
static unsigned session_reaches_remote(struct peer *prod, const char *machine_filter, bool all_machines) {
        struct peer cons;
        peer_connect_unix(&cons, inst.consumer_path);
        uint32_t enable = bind_and_find(&cons, "ConsumerPort", "EnableTracing");
        cr_assert_gt(enable, 0);

        Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
        Perfetto__Protos__TraceConfig__BufferConfig buf = PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
        Perfetto__Protos__TraceConfig__DataSource ds = PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT;
        Perfetto__Protos__DataSourceConfig dsc = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
        Perfetto__Protos__TraceConfig__BufferConfig *bufs[] = { &buf };
        Perfetto__Protos__TraceConfig__DataSource *dss[] = { &ds };
        char *filters[] = { (char *) machine_filter };
        buf.has_size_kb = true;
        buf.size_kb = 256;
        dsc.name = (char *) "relay.test";
        ds.config = &dsc;
        if (machine_filter) {
                ds.n_machine_name_filter = 1;
                ds.machine_name_filter = filters;
        }
        cfg.n_buffers = 1;
        cfg.buffers = bufs;
        cfg.n_data_sources = 1;
        cfg.data_sources = dss;
        cfg.has_duration_ms = true;
        cfg.duration_ms = 300;
        if (all_machines) {
                cfg.has_trace_all_machines = true;
                cfg.trace_all_machines = true;
        }
        Perfetto__Protos__EnableTracingRequest req = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        req.trace_config = &cfg;
        invoke(&cons, 2, enable, &req.base);

        /* The session's end answers EnableTracing; whatever the producer
         * was sent for it has been sent by then. */
        Perfetto__Protos__IPCFrame *f = peer_recv(&cons, 15000);
        cr_assert_not_null(f, "EnableTracing never answered");
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        peer_close(&cons);

        unsigned setups = 0;
        for (;;) {
                f = peer_recv(prod, 500);
                if (!f)
                        break;
                if (f->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY &&
                    f->msg_invoke_method_reply->has_more) {
                        Perfetto__Protos__GetAsyncCommandResponse *c = async_cmd(f);
                        setups += c->cmd_case == PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
                        perfetto__protos__get_async_command_response__free_unpacked(c, NULL);
                }
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }
        return setups;
}

Test(relay, machines_filter_and_query) {
        struct peer prod;

        /* A relayed producer of machine "forged" with data source
         * relay.test, waiting for commands. */
        peer_connect_tcp(&prod, plain_port);
        send_identity(&prod, "machine-of-the-filter-test");
        send_bind(&prod, "ProducerPort");
        cr_assert(bind_reply_ok(&prod));
        Perfetto__Protos__InitializeConnectionRequest ic = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        ic.producer_name = (char *) "relay-filter-test";
        invoke(&prod, 2, 1, &ic.base);
        Perfetto__Protos__RegisterDataSourceRequest rd = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
        Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
        d.name = (char *) "relay.test";
        rd.data_source_descriptor = &d;
        invoke(&prod, 3, 2, &rd.base);
        Perfetto__Protos__GetAsyncCommandRequest ga = PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
        invoke(&prod, 4, 5, &ga.base);
        for (int i = 0; i < 2; i++) {
                Perfetto__Protos__IPCFrame *f = peer_recv(&prod, 5000);
                cr_assert_not_null(f);
                cr_assert(f->msg_invoke_method_reply->success);
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }

        /* QueryServiceState names the producer's machine. */
        struct peer q;
        peer_connect_unix(&q, inst.consumer_path);
        uint32_t qss = bind_and_find(&q, "ConsumerPort", "QueryServiceState");
        cr_assert_gt(qss, 0);
        Perfetto__Protos__QueryServiceStateRequest qr = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        invoke(&q, 2, qss, &qr.base);
        bool found = false;
        for (bool more = true; more;) {
                Perfetto__Protos__IPCFrame *f = peer_recv(&q, 5000);
                cr_assert_not_null(f);
                more = f->msg_invoke_method_reply->has_more;
                Perfetto__Protos__QueryServiceStateResponse *r = perfetto__protos__query_service_state_response__unpack(
                        NULL, f->msg_invoke_method_reply->reply_proto.len, f->msg_invoke_method_reply->reply_proto.data);
                cr_assert_not_null(r);
                for (size_t i = 0; r->service_state && i < r->service_state->n_producers; i++) {
                        const Perfetto__Protos__TracingServiceState__Producer *p = r->service_state->producers[i];
                        if (p->name && strcmp(p->name, "relay-filter-test") == 0) {
                                found = true;
                                cr_assert(p->has_machine_id && p->machine_id != 0);
                                cr_assert_str_eq(p->machine_name, "forged");
                        }
                }
                perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }
        cr_assert(found, "the relayed producer is not in QueryServiceState");
        peer_close(&q);

        /* By default only this machine's data sources start. */
        cr_assert_eq(session_reaches_remote(&prod, NULL, false), 0);
        cr_assert_eq(session_reaches_remote(&prod, "host", false), 0);
        cr_assert_eq(session_reaches_remote(&prod, "forged", false), 1);
        cr_assert_eq(session_reaches_remote(&prod, NULL, true), 1);
        peer_close(&prod);
}

Test(relay, garbage_on_tcp_costs_that_connection_only) {
        struct peer p, other;

        /* A relayed producer that stays connected throughout. */
        peer_connect_tcp(&other, relay_port);
        send_identity(&other, "bystander");
        send_bind(&other, "ProducerPort");
        cr_assert(bind_reply_ok(&other));

        /* An oversized frame header. */
        peer_connect_tcp(&p, plain_port);
        const uint8_t huge[] = { 0xff, 0xff, 0xff, 0x7f, 0x00 };
        peer_send(&p, huge, sizeof(huge));
        cr_assert(peer_hung_up(&p, 5000), "an oversized frame kept the connection");
        peer_close(&p);

        /* A frame of garbage. */
        peer_connect_tcp(&p, relay_port);
        const uint8_t junk[] = { 0x06, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
        peer_send(&p, junk, sizeof(junk));
        cr_assert(peer_hung_up(&p, 5000), "a garbage frame kept the connection");
        peer_close(&p);

        /* The bystander is still served. */
        Perfetto__Protos__InitializeConnectionRequest ic = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        ic.producer_name = (char *) "bystander";
        invoke(&other, 2, 1, &ic.base);
        Perfetto__Protos__IPCFrame *f = peer_recv(&other, 5000);
        cr_assert_not_null(f, "the other relayed producer lost its connection");
        cr_assert(f->msg_invoke_method_reply->success);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        peer_close(&other);
}
