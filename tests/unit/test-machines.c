/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Many machines: machine ids from SetPeerIdentity hints, the producer
 * socket address syntax, and the trusted machine_id field of packets. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "supervisor/config.h"
#include "ipc/ipc.h"
#include "core/sessions/session-read.h"
#include "supervisor/sockets.h"
#include "test-scratch.h"

Test(machines, machine_id_is_fnv1a_low_32_bits) {
        /* The boot id of upstream's recording and the machine id upstream
         * traced gave it (tests/data/upstream/relay). */
        const char *hint = "00000000-1111-2222-3333-444444444444";
        cr_assert_eq(ipc_machine_id_from_hint(hint, strlen(hint)), 2045628265u);
        /* FNV-1a of nothing is the offset basis. */
        cr_assert_eq(ipc_machine_id_from_hint("", 0), 0x84222325u);
        cr_assert_neq(ipc_machine_id_from_hint("a", 1), 0u);
}

Test(machines, address_kinds) {
        cr_assert(socket_address_is_unix("/run/traced/producer.sock"));
        cr_assert(socket_address_is_unix("@traced-producer"));
        cr_assert(socket_address_is_unix("/tmp/odd:name"));
        cr_assert_not(socket_address_is_unix("127.0.0.1:20001"));
        cr_assert_not(socket_address_is_unix("[::1]:20001"));
        cr_assert_not(socket_address_is_unix("vsock://2:20001"));
}

Test(machines, bad_addresses_refused) {
        int fd = -1;
        cr_assert_lt(socket_bind_address("127.0.0.1:99999", &fd), 0);
        cr_assert_lt(socket_bind_address("300.1.1.1:2000", &fd), 0);
        cr_assert_lt(socket_bind_address("[zz]:2000", &fd), 0);
        cr_assert_lt(socket_bind_address("vsock://x:1", &fd), 0);
        cr_assert_lt(socket_bind_address("vsock://2", &fd), 0);
}

Test(machines, tcp_loopback_listener) {
        int fd = -1;
        cr_assert_eq(socket_bind_address("127.0.0.1:0", &fd), 0);
        struct sockaddr_storage ss;
        socklen_t l = sizeof(ss);
        cr_assert_eq(getsockname(fd, (struct sockaddr *) &ss, &l), 0);
        cr_assert_eq(ss.ss_family, AF_INET);
        close(fd);
        cr_assert_eq(socket_bind_address("[::1]:0", &fd), 0);
        close(fd);
}

Test(machines, producer_may_not_write_machine_id) {
        /* TracePacket { timestamp: 1 } is fine; with machine_id (98) it is
         * a producer claiming to be another machine. */
        uint8_t ok[] = { 0x40, 0x01 };
        uint8_t forged[] = { 0x40, 0x01, 0x90, 0x06, 0x05 }; /* 98 << 3 = 0x310 */
        struct iovec a = { ok, sizeof(ok) }, b = { forged, sizeof(forged) };
        cr_assert(packet_is_valid(&a, 1, sizeof(ok)));
        cr_assert_not(packet_is_valid(&b, 1, sizeof(forged)));
}

static int load_conf(const char *text, struct traced_config *cfg, char **error) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/traced-conf-XXXXXX", test_tmp_dir());
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        /* The file goes before any assertion can end the test. */
        ssize_t n = write(fd, text, strlen(text));
        close(fd);
        int r = n == (ssize_t) strlen(text) ? traced_config_load(path, cfg, error) : -EIO;
        unlink(path);
        cr_assert_eq(n, (ssize_t) strlen(text));
        return r;
}

Test(machines, producer_sockets_in_traced_conf) {
        struct traced_config cfg;
        char *error = NULL;

        cr_assert_eq(load_conf("[service]\nproducer_sockets = /run/traced/producer.sock, 127.0.0.1:20001,"
                               " vsock://any:20002\nrelay_endpoint_on = 127.0.0.1:20001\n",
                               &cfg, &error),
                     0);
        cr_assert_str_eq(cfg.producer_sockets, "/run/traced/producer.sock,127.0.0.1:20001,vsock://any:20002");
        cr_assert_str_eq(cfg.relay_endpoint_on, "127.0.0.1:20001");
        traced_config_done(&cfg);

        cr_assert_eq(load_conf("[plugins]\nenabled = yes\n", &cfg, &error), 0);
        cr_assert_null(cfg.producer_sockets);
        cr_assert_null(cfg.relay_endpoint_on);
        traced_config_done(&cfg);

        /* A bad address is named with its line and field. */
        cr_assert_eq(load_conf("[service]\n\nproducer_sockets = /run/p.sock,10.0.0.1:99999\n", &cfg, &error), -EINVAL);
        cr_assert(strstr(error, ":3:") && strstr(error, "producer_sockets") && strstr(error, "10.0.0.1:99999"), "%s",
                  error);
        free(error);
        error = NULL;
        cr_assert_eq(load_conf("[service]\nrelay_endpoint_on = 127.0.0.1:1,,\n", &cfg, &error), -EINVAL);
        cr_assert(strstr(error, "relay_endpoint_on"), "%s", error);
        free(error);
}
