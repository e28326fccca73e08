/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's public structures pinned (sizes and offsets on LP64,
 * as test-plugin-abi.c does for the plugin ABI), and the rules for what a
 * caller built against another header passes: a longer structure whose
 * unknown tail is set fails with -E2BIG, unknown flag bits with -EINVAL,
 * and fd 0 is a socket like any other with TRACED_PRODUCER_SOCKET_FD. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "producer-internal.h"
#include "test-scratch.h"
#include "traced/producer.h"

Test(client_abi, options_layout) {
        cr_assert_eq(sizeof(void *), 8, "these pins are for LP64");
        cr_assert_eq(offsetof(struct traced_producer_options, struct_size), 0);
        cr_assert_eq(sizeof(((struct traced_producer_options *) NULL)->struct_size), 4);
        cr_assert_eq(offsetof(struct traced_producer_options, socket_path), 8);
        cr_assert_eq(offsetof(struct traced_producer_options, name), 16);
        cr_assert_eq(offsetof(struct traced_producer_options, smb_size_hint), 24);
        cr_assert_eq(offsetof(struct traced_producer_options, page_size_hint), 28);
        cr_assert_eq(offsetof(struct traced_producer_options, socket_fd), 32);
        cr_assert_eq(offsetof(struct traced_producer_options, flags), 36);
        cr_assert_eq(sizeof(struct traced_producer_options), 40);
}

Test(client_abi, ops_layout) {
        cr_assert_eq(offsetof(struct traced_producer_ops, struct_size), 0);
        cr_assert_eq(sizeof(((struct traced_producer_ops *) NULL)->struct_size), 4);
        cr_assert_eq(offsetof(struct traced_producer_ops, start), 8);
        cr_assert_eq(offsetof(struct traced_producer_ops, stop), 16);
        cr_assert_eq(offsetof(struct traced_producer_ops, flush), 24);
        cr_assert_eq(offsetof(struct traced_producer_ops, disconnected), 32);
        cr_assert_eq(offsetof(struct traced_producer_ops, connected), 40);
        cr_assert_eq(offsetof(struct traced_producer_ops, clear_incremental_state), 48); /* 0.2 */
        cr_assert_eq(sizeof(struct traced_producer_ops), 56);
}

Test(client_abi, constants) {
        cr_assert_eq(TRACED_DS_WILL_NOTIFY_ON_STOP, 0x1u);
        cr_assert_eq(TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR, 0x2u);
        cr_assert_eq(TRACED_DS_STALL_WHEN_FULL, 0x4u);
        cr_assert_eq(TRACED_PRODUCER_NO_RECONNECT, 0x1u);
        cr_assert_eq(TRACED_PRODUCER_SOCKET_FD, 0x2u);
}

static sd_event *ev;
static char dir[512];
static char missing[600]; /* a socket path nobody listens on */

static void setup(void) {
        cr_assert_geq(sd_event_new(&ev), 0);
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "client-abi."), 0);
        snprintf(missing, sizeof(missing), "%s/nobody.sock", dir);
}

static void teardown(void) {
        ev = sd_event_unref(ev);
        (void) rm_rf(dir);
}

/* A caller built against a newer header: options and ops followed by a
 * field this library does not know. */
struct newer_options {
        struct traced_producer_options known;
        uint64_t added_later;
};
struct newer_ops {
        struct traced_producer_ops known;
        void (*added_later)(void);
};

static void nothing(void) {
}

Test(client_abi, a_newer_caller_is_refused_only_when_it_uses_what_is_missing, .init = setup, .fini = teardown) {
        traced_producer *p = NULL;
        struct newer_options o = { .known = { .struct_size = sizeof(o), .socket_path = missing, .name = "t" } };
        struct newer_ops ops = { .known = { .struct_size = sizeof(ops) } };
        /* Nothing new used: accepted, and the connection itself fails. */
        cr_assert_eq(traced_producer_connect(ev, &o.known, &ops.known, NULL, &p), -ENOENT);
        o.added_later = 1;
        cr_assert_eq(traced_producer_connect(ev, &o.known, &ops.known, NULL, &p), -E2BIG);
        o.added_later = 0;
        ops.added_later = nothing;
        cr_assert_eq(traced_producer_connect(ev, &o.known, &ops.known, NULL, &p), -E2BIG);
        /* A size no structure has is garbage, not a newer caller's. */
        ops.known.struct_size = 1u << 20;
        cr_assert_eq(traced_producer_connect(ev, &o.known, &ops.known, NULL, &p), -EINVAL);
        cr_assert_null(p);
}

Test(client_abi, unknown_flags_are_refused, .init = setup, .fini = teardown) {
        traced_producer *p = NULL;
        struct traced_producer_options o = { .struct_size = sizeof(o), .socket_path = missing, .name = "t" };
        o.flags = 0x80000000u;
        cr_assert_eq(traced_producer_connect(ev, &o, NULL, NULL, &p), -EINVAL);
        o.flags = TRACED_PRODUCER_SOCKET_FD;
        o.socket_fd = -1;
        cr_assert_eq(traced_producer_connect(ev, &o, NULL, NULL, &p), -EBADF);

        traced_producer q = {};
        cr_assert_eq(producer_init(&q), 0);
        cr_assert_eq(traced_producer_register_data_source(&q, "x", 0x100u), -EINVAL);
        cr_assert_eq(q.n_ds, 0);
        cr_assert_eq(traced_producer_register_data_source(&q, "x", TRACED_DS_WILL_NOTIFY_ON_STOP), 0);
        cr_assert_eq(q.n_ds, 1);
        free(q.ds[0].name);
        pthread_mutex_destroy(&q.lock);
}

static void on_clear(traced_producer *p, uint64_t id, void *userdata) {
}

/* Refused as the plugin host refuses it: a data source that says it
 * clears its incremental state, of a producer with no callback for it. */
Test(client_abi, incremental_state_clear_needs_its_callback, .init = setup, .fini = teardown) {
        traced_producer q = {};
        cr_assert_eq(producer_init(&q), 0);
        cr_assert_eq(traced_producer_register_data_source(&q, "x", TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR), -EINVAL);
        cr_assert_eq(q.n_ds, 0);
        q.ops.clear_incremental_state = on_clear;
        cr_assert_eq(traced_producer_register_data_source(&q, "x", TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR), 0);
        cr_assert_eq(q.n_ds, 1);
        cr_assert_eq(q.ds[0].flags, TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR);
        free(q.ds[0].name);
        pthread_mutex_destroy(&q.lock);
}

/* An ops table must reach its stop callback; one that stops short (its
 * struct_size says so) has neither start nor stop and is refused. */
Test(client_abi, ops_without_start_and_stop_are_refused, .init = setup, .fini = teardown) {
        traced_producer *p = NULL;
        struct traced_producer_options o = { .struct_size = sizeof(o), .socket_path = missing, .name = "t" };
        struct traced_producer_ops ops = { .struct_size = 8 };
        cr_assert_eq(traced_producer_connect(ev, &o, &ops, NULL, &p), -EINVAL);
        ops.struct_size = offsetof(struct traced_producer_ops, stop);
        cr_assert_eq(traced_producer_connect(ev, &o, &ops, NULL, &p), -EINVAL);
        cr_assert_null(p);
        /* Start and stop and nothing later: a 1.0 caller's table. */
        ops.struct_size = offsetof(struct traced_producer_ops, stop) + sizeof(ops.stop);
        cr_assert_eq(traced_producer_connect(ev, &o, &ops, NULL, &p), -ENOENT);
        /* No table at all: a producer that only activates triggers. */
        cr_assert_eq(traced_producer_connect(ev, &o, NULL, NULL, &p), -ENOENT);
}

/* The service's end of a socketpair: reads what the producer sends first
 * (its BindService request; 10 s at most), then hangs up. */
static void *hear_then_hang_up(void *arg) {
        int *peer = arg;
        char buf[256];
        struct pollfd pfd = { .fd = *peer, .events = POLLIN };
        ssize_t n = poll(&pfd, 1, 10000) == 1 ? read(*peer, buf, sizeof(buf)) : 0;
        close(*peer);
        return (void *) (intptr_t) (n > 0);
}

Test(client_abi, fd_0_is_a_socket_with_the_flag, .init = setup, .fini = teardown) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(dup2(sv[0], 0), 0);
        close(sv[0]);
        traced_producer *p = NULL;
        /* Zeroed options (socket_fd 0, no flag) still mean "by path". */
        struct traced_producer_options o = { .struct_size = sizeof(o), .socket_path = missing, .name = "t" };
        cr_assert_eq(traced_producer_connect(ev, &o, NULL, NULL, &p), -ENOENT);
        cr_assert_geq(fcntl(0, F_GETFD), 0, "fd 0 was left open");

        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, hear_then_hang_up, &sv[1]), 0);
        o.flags = TRACED_PRODUCER_SOCKET_FD;
        int r = traced_producer_connect(ev, &o, NULL, NULL, &p);
        void *heard;
        cr_assert_eq(pthread_join(t, &heard), 0);
        cr_assert(heard, "the producer spoke on fd 0");
        cr_assert_lt(r, 0, "the service hung up");
        cr_assert_neq(r, -ENOENT, "fd 0 was used, not the path");
}
