/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "basic/socket-address.h"

Test(socket_address, parses_each_family) {
        struct socket_address sa;

        cr_assert_eq(socket_address_parse("/run/traced/producer.sock", &sa), 0);
        cr_assert_eq(sa.sa.sa_family, AF_UNIX);
        cr_assert_str_eq(sa.un.sun_path, "/run/traced/producer.sock");

        cr_assert_eq(socket_address_parse("@traced-producer", &sa), 0);
        cr_assert_eq(sa.sa.sa_family, AF_UNIX);
        cr_assert_eq(sa.un.sun_path[0], '\0');
        cr_assert_eq(memcmp(sa.un.sun_path + 1, "traced-producer", 15), 0);
        cr_assert_eq(sa.len, offsetof(struct sockaddr_un, sun_path) + 16);

        cr_assert_eq(socket_address_parse("127.0.0.1:20001", &sa), 0);
        cr_assert_eq(sa.sa.sa_family, AF_INET);
        cr_assert_eq(ntohs(sa.in.sin_port), 20001);
        cr_assert_eq(ntohl(sa.in.sin_addr.s_addr), 0x7f000001u);

        cr_assert_eq(socket_address_parse("localhost:7", &sa), 0);
        cr_assert_eq(ntohl(sa.in.sin_addr.s_addr), INADDR_LOOPBACK);

        cr_assert_eq(socket_address_parse("[::1]:443", &sa), 0);
        cr_assert_eq(sa.sa.sa_family, AF_INET6);
        cr_assert_eq(ntohs(sa.in6.sin6_port), 443);
        cr_assert(IN6_IS_ADDR_LOOPBACK(&sa.in6.sin6_addr));

        cr_assert_eq(socket_address_parse("vsock://2:20001", &sa), 0);
        cr_assert_eq(sa.sa.sa_family, AF_VSOCK);
        cr_assert_eq(sa.vm.svm_cid, 2u);
        cr_assert_eq(sa.vm.svm_port, 20001u);
        cr_assert_eq(socket_address_parse("vsock://any:5", &sa), 0);
        cr_assert_eq(sa.vm.svm_cid, VMADDR_CID_ANY);
}

Test(socket_address, a_colon_in_a_path_is_still_a_path) {
        struct socket_address sa;
        cr_assert(socket_address_is_unix("/tmp/odd:name"));
        cr_assert_eq(socket_address_parse("/tmp/odd:name", &sa), 0);
        cr_assert_eq(sa.sa.sa_family, AF_UNIX);
        cr_assert_not(socket_address_is_unix("10.0.0.1:1"));
}

Test(socket_address, rejects_malformed) {
        struct socket_address sa;
        static const char *const bad[] = {
                "", "127.0.0.1:65536", "300.1.1.1:2000", "[zz]:2000", ":2000", "host.example:80",
                "vsock://x:1", "vsock://2", "vsock://2:", "vsock://:1", "127.0.0.1:99999999999999999999",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_assert_lt(socket_address_parse(bad[i], &sa), 0, "accepted \"%s\"", bad[i]);
        char longpath[200];
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[0] = '/';
        longpath[sizeof(longpath) - 1] = '\0';
        cr_assert_eq(socket_address_parse(longpath, &sa), -ENAMETOOLONG);
}

static void *accept_one(void *arg) {
        int fd = *(int *) arg;
        int c = accept(fd, NULL, NULL);
        if (c >= 0) {
                (void) write(c, "ok", 2);
                close(c);
        }
        return NULL;
}

Test(socket_address, connects_over_tcp_loopback) {
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        cr_assert_geq(lfd, 0);
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        cr_assert_eq(bind(lfd, (struct sockaddr *) &in, sizeof(in)), 0);
        cr_assert_eq(listen(lfd, 1), 0);
        socklen_t len = sizeof(in);
        cr_assert_eq(getsockname(lfd, (struct sockaddr *) &in, &len), 0);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, accept_one, &lfd), 0);

        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(in.sin_port));
        int fd = socket_address_connect(addr);
        cr_assert_geq(fd, 0, "connect to %s: %s", addr, strerror(-fd));
        char buf[2];
        cr_assert_eq(read(fd, buf, 2), 2);
        cr_assert_eq(memcmp(buf, "ok", 2), 0);
        close(fd);
        pthread_join(t, NULL);
        close(lfd);

        /* Nobody listens there any more. */
        cr_assert_eq(socket_address_connect(addr), -ECONNREFUSED);
}
