/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Host and client driven over socketpairs on one sd-event loop. The
 * request/reply types are IPCFrame sub-messages so the test needs no other
 * protos: BindService carries a string in, RequestError a string out. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"
#include "test-scratch.h"

typedef Perfetto__Protos__IPCFrame__BindService Req;
typedef Perfetto__Protos__IPCFrame__RequestError Rep;
#define REQ_DESC (&perfetto__protos__ipcframe__bind_service__descriptor)
#define REP_DESC (&perfetto__protos__ipcframe__request_error__descriptor)

static sd_event *ev;
static ipc_host *host;
static int n_binds, n_disconnects;
static ipc_request *deferred;
static int flood_result;
static uid_t seen_uid;
static pid_t seen_pid;

static void reply_str(ipc_request *req, const char *s, bool has_more, int fd) {
        Rep rep = PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
        rep.error = (char *) s;
        ipc_request_reply(req, &rep.base, has_more, fd);
}

static void h_echo(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        const Req *r = (const Req *) args;
        ipc_host_conn *hc = ipc_request_conn(req);
        seen_uid = ipc_host_conn_uid(hc);
        seen_pid = ipc_host_conn_pid(hc);
        reply_str(req, r->service_name ? r->service_name : "(null)", false, -EBADF);
}

static void h_stream(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        reply_str(req, "one", true, -EBADF);
        reply_str(req, "two", true, -EBADF);
        reply_str(req, "three", false, -EBADF);
}

static void h_fail(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        ipc_request_fail(req);
}

static void h_fd(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        char buf[64] = {};
        int fd = ipc_request_take_fd(req);
        if (fd < 0) {
                ipc_request_fail(req);
                return;
        }
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        cr_assert_gt(n, 0);
        int p[2];
        cr_assert_eq(pipe(p), 0);
        cr_assert_eq(write(p[1], "from-host", 9), 9);
        close(p[1]);
        reply_str(req, buf, false, p[0]);
        close(p[0]);
}

static void h_defer(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        deferred = req; /* answered later by the test */
}

/* Postponed: served later by the test, with h_redispatched. */
static ipc_request *postponed;
static int n_redispatched;
static void h_postpone(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        cr_assert_eq(ipc_request_postpone(req), 0);
        postponed = req;
}

static void h_redispatched(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        const Req *r = (const Req *) args;
        size_t len = 0;
        const uint8_t *bytes = ipc_request_args(req, &len);
        char text[128];
        n_redispatched++;
        cr_assert_not_null(bytes, "the arguments' bytes are not there while the handler runs");
        cr_assert_eq(len, protobuf_c_message_get_packed_size(&r->base));
        cr_assert_str_eq((const char *) ud, "service");
        int fd = ipc_request_take_fd(req);
        char buf[32] = {};
        if (fd >= 0) {
                cr_assert_gt(read(fd, buf, sizeof(buf) - 1), 0);
                close(fd);
        }
        snprintf(text, sizeof(text), "%s+%s", r->service_name ? r->service_name : "", buf);
        reply_str(req, text, false, -EBADF);
}

static void h_flood(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        static char big[100 * 1024];
        memset(big, 'x', sizeof(big) - 1);
        for (int i = 0; i < 1000; i++) {
                Rep rep = PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
                rep.error = big;
                int r = ipc_request_reply(req, &rep.base, true, -EBADF);
                if (r < 0) {
                        flood_result = r;
                        ipc_request_unref(req);
                        return;
                }
        }
        flood_result = 1;
        ipc_request_fail(req);
}

/* Replies, many more than the socket holds, without returning to the loop:
 * the first ones go straight out (small ones from the stack), the one that
 * finds the socket full waits in the queue with what the socket did not
 * take of it, and those behind it queue up after it. Asked with the
 * service name "big", each reply carries BIG_PAD more bytes. */
enum { BURST = 20000, BIG_BURST = 60, BIG_PAD = 100000 };
static void h_burst(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        const Req *a = (const Req *) args;
        bool big = a->service_name && strcmp(a->service_name, "big") == 0;
        int n = big ? BIG_BURST : BURST;
        static char text[32 + BIG_PAD];
        for (int i = 0; i < n; i++) {
                int k = snprintf(text, 32, "reply %d", i);
                if (big) {
                        memset(text + k, 'x', BIG_PAD);
                        text[k + BIG_PAD] = '\0';
                }
                reply_str(req, text, i + 1 < n, -EBADF);
        }
}

static void h_fd_second(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        int p[2];
        cr_assert_eq(pipe(p), 0);
        cr_assert_eq(write(p[1], "second", 6), 6);
        close(p[1]);
        /* Two replies back to back: they reach the client in one read, the
         * fd must still go with the second. */
        reply_str(req, "first", true, -EBADF);
        reply_str(req, "second", false, p[0]);
        close(p[0]);
}

/* "Paced": PACED replies of BIG_PAD bytes, packed beforehand, sent while
 * less than PACED_PAUSE waits in the queue and continued from the drained
 * callback: more than IPC_SEND_QUEUE_MAX in all. */
enum { PACED = 100, PACED_PAUSE = 256 * 1024 };
static struct {
        ipc_request *req;
        int next;
        int drained;
} paced;

static void paced_pump(void) {
        static char text[32 + BIG_PAD];
        static uint8_t packed[64 + BIG_PAD];
        while (paced.req && paced.next < PACED) {
                ipc_host_conn *hc = ipc_request_conn(paced.req);
                if (!hc || ipc_host_conn_queued_bytes(hc) >= PACED_PAUSE)
                        return;
                int k = snprintf(text, 32, "reply %d", paced.next);
                memset(text + k, 'x', BIG_PAD);
                text[k + BIG_PAD] = '\0';
                Rep rep = PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
                rep.error = text;
                size_t len = protobuf_c_message_pack(&rep.base, packed);
                bool more = ++paced.next < PACED;
                cr_assert_eq(ipc_request_reply_packed(paced.req, packed, len, more, -EBADF), 0);
                if (!more)
                        paced.req = NULL;
        }
}

static void paced_drained(ipc_host_conn *hc, void *ud) {
        paced.drained++;
        paced_pump();
}

static void h_paced(ipc_request *req, const ProtobufCMessage *args, void *ud) {
        paced.req = req;
        paced.next = 0;
        ipc_host_conn_set_drained_cb(ipc_request_conn(req), paced_drained, NULL);
        paced_pump();
}

static int on_bind(ipc_host_conn *hc, void *ud) {
        n_binds++;
        return 0;
}
static void on_disconnect(ipc_host_conn *hc, void *ud) {
        n_disconnects++;
        if (deferred && ipc_request_conn(deferred) == hc) {
                ipc_request_unref(deferred);
                deferred = NULL;
        }
}

static const struct ipc_method_desc methods[] = {
        { "Echo", REQ_DESC, REP_DESC, h_echo },     { "Stream", REQ_DESC, REP_DESC, h_stream },
        { "Fail", REQ_DESC, REP_DESC, h_fail },     { "PassFd", REQ_DESC, REP_DESC, h_fd },
        { "Defer", REQ_DESC, REP_DESC, h_defer },   { "Flood", REQ_DESC, REP_DESC, h_flood },
        { "FdSecond", REQ_DESC, REP_DESC, h_fd_second }, { "Burst", REQ_DESC, REP_DESC, h_burst },
        { "Paced", REQ_DESC, REP_DESC, h_paced },   { "Postpone", REQ_DESC, REP_DESC, h_postpone },
};
static const struct ipc_service_desc service = {
        .name = "TestPort",
        .methods = methods,
        .n_methods = sizeof(methods) / sizeof(methods[0]),
        .on_bind = on_bind,
        .on_disconnect = on_disconnect,
};

static void setup(void) {
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(ipc_host_new(ev, &host), 0);
        cr_assert_eq(ipc_host_add_service(host, &service, NULL), 0);
        n_binds = n_disconnects = 0;
        deferred = NULL;
        postponed = NULL;
        n_redispatched = 0;
        flood_result = 0;
}

/* The directory of a test's listening socket, removed at the end. */
static char sock_dir[256];

static void teardown(void) {
        host = ipc_host_free(host);
        ev = sd_event_unref(ev);
        cr_expect_eq(test_scratch_remove(sock_dir), 0);
        sock_dir[0] = '\0';
}

static ipc_client *connect_pair(void) {
        int sv[2];
        ipc_client *c;
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(ipc_host_adopt(host, sv[0], NULL), 0);
        cr_assert_eq(ipc_client_from_fd(ev, sv[1], &c), 0);
        return c;
}

static void spin(int iterations) {
        for (int i = 0; i < iterations; i++)
                sd_event_run(ev, 1000);
}

struct calls {
        int n;
        int errors[16];
        char texts[16][64];
        bool more[16];
        int fds[16];
};

static void collect(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct calls *k = ud;
        if (k->n >= 16) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        k->errors[k->n] = error;
        k->more[k->n] = has_more;
        k->fds[k->n] = fd;
        if (reply && ((const Rep *) reply)->error)
                snprintf(k->texts[k->n], sizeof(k->texts[0]), "%s", ((const Rep *) reply)->error);
        k->n++;
}

static int64_t call(ipc_client *c, const char *method, const char *arg, int fd, struct calls *k) {
        Req r = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        r.service_name = (char *) arg;
        return ipc_client_invoke(c, method, &r.base, REP_DESC, fd, k ? collect : NULL, k);
}

TestSuite(ipc_host, .init = setup, .fini = teardown);

Test(ipc_host, bind_unknown_service_fails) {
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "NoSuchPort", 2000000), -ENOENT);
        cr_assert_not(ipc_client_is_bound(c));
        cr_assert_eq(n_binds, 0);
        ipc_client_free(c);
}

Test(ipc_host, bind_lists_methods_and_echo) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_eq(n_binds, 1);
        cr_assert(ipc_client_has_method(c, "Echo"));
        cr_assert(ipc_client_has_method(c, "Flood"));
        cr_assert_not(ipc_client_has_method(c, "Nope"));
        cr_assert_eq(call(c, "Nope", "x", -EBADF, &k), -ENOENT);

        cr_assert_gt(call(c, "Echo", "hello", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_eq(k.errors[0], 0);
        cr_assert_str_eq(k.texts[0], "hello");
        cr_assert_not(k.more[0]);
        cr_assert_eq(seen_uid, getuid());
        cr_assert_eq(seen_pid, getpid());
        ipc_client_free(c);
        spin(5);
        cr_assert_eq(n_disconnects, 1);
}

Test(ipc_host, streaming_replies_in_order) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "Stream", "", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 3);
        cr_assert_str_eq(k.texts[0], "one");
        cr_assert_str_eq(k.texts[1], "two");
        cr_assert_str_eq(k.texts[2], "three");
        cr_assert(k.more[0]);
        cr_assert(k.more[1]);
        cr_assert_not(k.more[2]);
        ipc_client_free(c);
}

Test(ipc_host, failed_reply_reaches_caller) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "Fail", "", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_eq(k.errors[0], -EREMOTEIO);
        ipc_client_free(c);
}

Test(ipc_host, fd_passing_both_ways) {
        struct calls k = {};
        int p[2];
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_eq(pipe(p), 0);
        cr_assert_eq(write(p[1], "from-client", 11), 11);
        close(p[1]);
        cr_assert_gt(call(c, "PassFd", "", p[0], &k), 0);
        close(p[0]);
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_eq(k.errors[0], 0);
        cr_assert_str_eq(k.texts[0], "from-client");
        cr_assert_geq(k.fds[0], 0);
        char buf[16] = {};
        cr_assert_eq(read(k.fds[0], buf, sizeof(buf)), 9);
        cr_assert_str_eq(buf, "from-host");
        close(k.fds[0]);
        ipc_client_free(c);
}

Test(ipc_host, method_without_expected_fd_fails_cleanly) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "PassFd", "", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_eq(k.errors[0], -EREMOTEIO);
        ipc_client_free(c);
}

Test(ipc_host, deferred_reply_and_drop_reply) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "Defer", "", -EBADF, &k), 0);
        /* drop_reply: no callback, no reply frame. */
        cr_assert_gt(call(c, "Echo", "dropped", -EBADF, NULL), 0);
        spin(10);
        cr_assert_eq(k.n, 0);
        cr_assert_not_null(deferred);
        reply_str(deferred, "later", false, -EBADF);
        deferred = NULL;
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_str_eq(k.texts[0], "later");
        ipc_client_free(c);
}

/* A postponed request is served later as it came: its arguments decoded
 * again and their bytes there, the fd that came with it; the handler's
 * answer reaches the client. */
Test(ipc_host, postponed_request_is_served_later_as_it_came) {
        struct calls k = {};
        int p[2];
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_eq(pipe(p), 0);
        cr_assert_eq(write(p[1], "its-fd", 6), 6);
        close(p[1]);
        cr_assert_gt(call(c, "Postpone", "args", p[0], &k), 0);
        close(p[0]);
        spin(10);
        cr_assert_not_null(postponed);
        cr_assert_eq(k.n, 0, "a postponed request was answered");
        /* Only from its handler. */
        cr_assert_eq(ipc_request_postpone(postponed), -EINVAL);
        ipc_request_redispatch(postponed, h_redispatched, (void *) "service");
        postponed = NULL;
        spin(10);
        cr_assert_eq(n_redispatched, 1);
        cr_assert_eq(k.n, 1);
        cr_assert_eq(k.errors[0], 0);
        cr_assert_str_eq(k.texts[0], "args+its-fd");
        ipc_client_free(c);
}

/* A postponed request whose client went away is only released. */
Test(ipc_host, postponed_request_of_a_gone_client_is_released) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "Postpone", "args", -EBADF, &k), 0);
        spin(10);
        cr_assert_not_null(postponed);
        ipc_client_free(c);
        spin(10);
        cr_assert_eq(n_disconnects, 1);
        ipc_request_redispatch(postponed, h_redispatched, (void *) "service");
        postponed = NULL;
        cr_assert_eq(n_redispatched, 0, "the handler ran for a client that is gone");
}

static void send_raw(int fd, const void *data, size_t len) {
        cr_assert_eq(write(fd, data, len), (ssize_t) len);
}

static void send_frame(int fd, const Perfetto__Protos__IPCFrame *f) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(ipc_frame_encode(f, &buf, &len), 0);
        send_raw(fd, buf, len);
        free(buf);
}

static Perfetto__Protos__IPCFrame *read_frame(int fd) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        for (int i = 0; i < 200 && !f; i++) {
                uint8_t b[4096];
                spin(1);
                ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
                if (n > 0)
                        cr_assert_eq(ipc_frame_decoder_feed(&d, b, (size_t) n), 0);
                if (ipc_frame_decoder_pop(&d, &f) < 0)
                        break;
        }
        ipc_frame_decoder_done(&d);
        return f;
}

Test(ipc_host, unknown_ids_answered_with_failure) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(ipc_host_adopt(host, sv[0], NULL), 0);

        Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        b.service_name = (char *) "TestPort";
        f.has_request_id = true;
        f.request_id = 1;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        f.msg_bind_service = &b;
        send_frame(sv[1], &f);
        Perfetto__Protos__IPCFrame *r = read_frame(sv[1]);
        cr_assert_not_null(r);
        cr_assert_eq(r->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
        cr_assert(r->msg_bind_service_reply->success);
        uint32_t sid = r->msg_bind_service_reply->service_id;
        cr_assert_eq(r->msg_bind_service_reply->n_methods, 10);
        cr_assert_str_eq(r->msg_bind_service_reply->methods[0]->name, "Echo");
        perfetto__protos__ipcframe__free_unpacked(r, NULL);

        struct {
                uint32_t service, method;
        } cases[] = { { sid, 99 }, { sid + 5, 1 }, { 0, 1 } };
        for (size_t i = 0; i < 3; i++) {
                Perfetto__Protos__IPCFrame__InvokeMethod inv = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
                Perfetto__Protos__IPCFrame g = PERFETTO__PROTOS__IPCFRAME__INIT;
                inv.has_service_id = inv.has_method_id = true;
                inv.service_id = cases[i].service;
                inv.method_id = cases[i].method;
                g.has_request_id = true;
                g.request_id = 10 + i;
                g.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
                g.msg_invoke_method = &inv;
                send_frame(sv[1], &g);
                r = read_frame(sv[1]);
                cr_assert_not_null(r, "no reply for case %zu", i);
                cr_assert_eq(r->request_id, 10 + i);
                cr_assert_eq(r->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
                cr_assert_not(r->msg_invoke_method_reply->success);
                perfetto__protos__ipcframe__free_unpacked(r, NULL);
        }

        /* Args that do not parse as the method's request type. */
        Perfetto__Protos__IPCFrame__InvokeMethod inv = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
        Perfetto__Protos__IPCFrame g = PERFETTO__PROTOS__IPCFRAME__INIT;
        inv.has_service_id = inv.has_method_id = inv.has_args_proto = true;
        inv.service_id = sid;
        inv.method_id = 1;
        inv.args_proto.data = (uint8_t *) "\x0a\x7f";
        inv.args_proto.len = 2;
        g.has_request_id = true;
        g.request_id = 20;
        g.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
        g.msg_invoke_method = &inv;
        send_frame(sv[1], &g);
        r = read_frame(sv[1]);
        cr_assert_not_null(r);
        cr_assert_eq(r->request_id, 20);
        cr_assert_not(r->msg_invoke_method_reply->success);
        perfetto__protos__ipcframe__free_unpacked(r, NULL);
        close(sv[1]);
}

Test(ipc_host, malformed_frame_costs_only_that_connection) {
        struct calls k = {};
        int sv[2];
        ipc_client *good = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(good, "TestPort", 2000000), 0);

        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(ipc_host_adopt(host, sv[0], NULL), 0);
        Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        b.service_name = (char *) "TestPort";
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        f.msg_bind_service = &b;
        send_frame(sv[1], &f);
        Perfetto__Protos__IPCFrame *r = read_frame(sv[1]);
        cr_assert_not_null(r);
        perfetto__protos__ipcframe__free_unpacked(r, NULL);
        cr_assert_eq(n_binds, 2);
        /* Oversized length header. */
        send_raw(sv[1], "\xff\xff\xff\x7f", 4);
        spin(10);
        cr_assert_eq(n_disconnects, 1);
        char x;
        cr_assert_eq(recv(sv[1], &x, 1, MSG_DONTWAIT), 0, "bad peer not disconnected");
        close(sv[1]);

        cr_assert_gt(call(good, "Echo", "still here", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_str_eq(k.texts[0], "still here");
        ipc_client_free(good);
}

Test(ipc_host, peer_that_does_not_read_is_disconnected) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(ipc_host_adopt(host, sv[0], NULL), 0);

        Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        b.service_name = (char *) "TestPort";
        f.has_request_id = true;
        f.request_id = 1;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        f.msg_bind_service = &b;
        send_frame(sv[1], &f);
        Perfetto__Protos__IPCFrame *r = read_frame(sv[1]);
        cr_assert_not_null(r);
        uint32_t sid = r->msg_bind_service_reply->service_id;
        perfetto__protos__ipcframe__free_unpacked(r, NULL);

        Perfetto__Protos__IPCFrame__InvokeMethod inv = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
        Perfetto__Protos__IPCFrame g = PERFETTO__PROTOS__IPCFRAME__INIT;
        inv.has_service_id = inv.has_method_id = true;
        inv.service_id = sid;
        inv.method_id = 6; /* Flood */
        g.has_request_id = true;
        g.request_id = 2;
        g.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
        g.msg_invoke_method = &inv;
        send_frame(sv[1], &g);
        spin(20);
        cr_assert_eq(flood_result, -ENOBUFS, "flood ended with %d", flood_result);
        cr_assert_eq(n_disconnects, 1);
        close(sv[1]);
}

static void on_client_gone(ipc_client *c, void *ud) {
        (*(int *) ud)++;
}

Test(ipc_host, disconnect_fails_pending_calls) {
        struct calls k = {};
        int gone = 0;
        ipc_client *c = connect_pair();
        ipc_client_set_disconnect_cb(c, on_client_gone, &gone);
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "Defer", "", -EBADF, &k), 0);
        spin(5);
        cr_assert_not_null(deferred);
        /* The service goes away with the call outstanding. */
        host = ipc_host_free(host);
        spin(5);
        cr_assert_eq(k.n, 1);
        cr_assert_eq(k.errors[0], -ECONNRESET);
        cr_assert_eq(gone, 1);
        cr_assert_not(ipc_client_is_connected(c));
        if (deferred) {
                ipc_request_unref(deferred);
                deferred = NULL;
        }
        ipc_client_free(c);
}

Test(ipc_host, listener_accepts_and_reports_credentials) {
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        cr_assert_eq(test_mkdtemp(sock_dir, sizeof(sock_dir), "traced-test-ipc-"), 0);
        cr_assert_lt((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", sock_dir), sizeof(sa.sun_path));
        cr_assert_eq(bind(l, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(l, 8), 0);
        cr_assert_eq(ipc_host_add_listener(host, l), 0);

        ipc_client *c;
        struct calls k = {};
        cr_assert_eq(ipc_client_connect(ev, sa.sun_path, &c), 0);
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "Echo", "via listener", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 1);
        cr_assert_str_eq(k.texts[0], "via listener");
        cr_assert_eq(seen_pid, getpid());
        ipc_client_free(c);

        cr_assert_eq(ipc_client_connect(ev, "/nonexistent/traced.sock", &c), -ENOENT);
}

Test(ipc_host, fd_goes_with_its_own_frame) {
        struct calls k = {};
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        cr_assert_gt(call(c, "FdSecond", "", -EBADF, &k), 0);
        spin(10);
        cr_assert_eq(k.n, 2);
        cr_assert_str_eq(k.texts[0], "first");
        cr_assert_lt(k.fds[0], 0, "the fd was handed to the wrong frame");
        cr_assert_geq(k.fds[1], 0, "the fd did not reach its frame");
        char buf[8] = {};
        cr_assert_eq(read(k.fds[1], buf, sizeof(buf)), 6);
        cr_assert_str_eq(buf, "second");
        close(k.fds[1]);
        ipc_client_free(c);
}

struct burst {
        size_t pad; /* 'x' bytes expected after each reply's number */
        int n;
        bool in_order;
        bool ended;
};

static void collect_burst(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct burst *b = ud;
        char want[32];
        size_t k = (size_t) snprintf(want, sizeof(want), "reply %d", b->n);
        const char *got = !error && reply ? ((const Rep *) reply)->error : NULL;
        if (!got || strncmp(got, want, k) != 0 || strlen(got) != k + b->pad ||
            strspn(got + k, "x") != b->pad)
                b->in_order = false;
        b->n++;
        b->ended = !has_more;
}

/* Asks "Burst" (with service name `name`) and checks that all `want`
 * replies, each `pad` bytes past its number, arrive whole and in order. */
static void check_burst_of(const char *method, const char *name, size_t pad, int want) {
        ipc_client *c = connect_pair();
        cr_assert_eq(ipc_client_bind_sync(c, "TestPort", 2000000), 0);
        struct burst b = { .pad = pad, .in_order = true };
        Req r = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        r.service_name = (char *) name;
        cr_assert_gt(ipc_client_invoke(c, method, &r.base, REP_DESC, -EBADF, collect_burst, &b), 0);
        for (int i = 0; i < 2000 && !b.ended; i++)
                sd_event_run(ev, 10000);
        cr_assert_eq(b.n, want, "%d of %d replies", b.n, want);
        cr_assert(b.in_order, "a reply arrived cut, garbled or out of order");
        cr_assert(b.ended);
        ipc_client_free(c);
}

static void check_burst(const char *name, size_t pad, int want) {
        check_burst_of("Burst", name, pad, want);
}

/* Replies sent past a full socket: every one arrives whole and in order. */
Test(ipc_host, replies_beyond_the_socket_buffer_arrive_whole_and_in_order) {
        check_burst(NULL, 0, BURST);
}

/* The same with replies too big for the stack: a reply the socket takes in
 * part keeps its own buffer and the rest goes out from where it stopped. */
Test(ipc_host, big_replies_beyond_the_socket_buffer_arrive_whole_and_in_order) {
        check_burst("big", BIG_PAD, BIG_BURST);
}

/* Replies sent as the peer takes them, from the drained callback: more
 * than a peer may have queued at once, all of it whole and in order. */
Test(ipc_host, replies_paced_by_the_drained_callback_arrive_whole) {
        check_burst_of("Paced", NULL, BIG_PAD, PACED);
        cr_assert_gt((size_t) PACED * BIG_PAD, (size_t) IPC_SEND_QUEUE_MAX);
        cr_assert_gt(paced.drained, 0, "the drained callback never ran");
        cr_assert_null(paced.req);
}
