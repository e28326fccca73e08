/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>

#include "macro.h"
#include "socket-address.h"

bool socket_address_is_unix(const char *a) {
        if (a[0] == '@' || strncmp(a, "vsock://", 8) == 0)
                return a[0] == '@';
        const char *colon = strrchr(a, ':');
        if (!colon || !colon[1])
                return true;
        for (const char *c = colon + 1; *c; c++)
                if (*c < '0' || *c > '9')
                        return true;
        return false;
}

static int parse_number(const char *s, size_t n, unsigned long max, unsigned long *ret) {
        char buf[16], *end;
        if (n == 0 || n >= sizeof(buf) || *s < '0' || *s > '9')
                return -EINVAL;
        memcpy(buf, s, n);
        buf[n] = '\0';
        errno = 0;
        unsigned long v = strtoul(buf, &end, 10);
        if (errno != 0 || *end || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_unix(const char *a, struct socket_address *ret) {
        size_t len = strlen(a);
        if (len == 0)
                return -EINVAL;
        if (len >= sizeof(ret->un.sun_path))
                return -ENAMETOOLONG;
        ret->un.sun_family = AF_UNIX;
        memcpy(ret->un.sun_path, a, len);
        /* An abstract name has no terminating NUL in its length. */
        if (a[0] == '@')
                ret->un.sun_path[0] = '\0';
        ret->len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + (a[0] == '@' ? 0 : 1));
        return 0;
}

static int parse_vsock(const char *spec, struct socket_address *ret) {
        const char *colon = strrchr(spec, ':');
        unsigned long cid, port;
        if (!colon)
                return -EINVAL;
        size_t cl = (size_t) (colon - spec);
        if ((cl == 2 && strncmp(spec, "-1", 2) == 0) || (cl == 3 && strncmp(spec, "any", 3) == 0))
                cid = VMADDR_CID_ANY;
        else if (parse_number(spec, cl, UINT32_MAX, &cid) < 0)
                return -EINVAL;
        if (parse_number(colon + 1, strlen(colon + 1), UINT32_MAX, &port) < 0)
                return -EINVAL;
        ret->vm.svm_family = AF_VSOCK;
        ret->vm.svm_cid = (unsigned) cid;
        ret->vm.svm_port = (unsigned) port;
        ret->len = sizeof(ret->vm);
        return 0;
}

static int parse_inet(const char *a, struct socket_address *ret) {
        const char *colon = strrchr(a, ':');
        unsigned long port;
        char host[INET6_ADDRSTRLEN + 2];
        size_t hl = (size_t) (colon - a);

        if (parse_number(colon + 1, strlen(colon + 1), 65535, &port) < 0 || hl == 0 || hl >= sizeof(host))
                return -EINVAL;
        memcpy(host, a, hl);
        host[hl] = '\0';
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
                host[hl - 1] = '\0';
                ret->in6.sin6_family = AF_INET6;
                ret->in6.sin6_port = htons((uint16_t) port);
                if (inet_pton(AF_INET6, host + 1, &ret->in6.sin6_addr) != 1)
                        return -EINVAL;
                ret->len = sizeof(ret->in6);
                return 0;
        }
        ret->in.sin_family = AF_INET;
        ret->in.sin_port = htons((uint16_t) port);
        if (strcmp(host, "localhost") == 0)
                ret->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (inet_pton(AF_INET, host, &ret->in.sin_addr) != 1)
                return -EINVAL;
        ret->len = sizeof(ret->in);
        return 0;
}

int socket_address_parse(const char *a, struct socket_address *ret) {
        if (!a || !ret)
                return -EINVAL;
        *ret = (struct socket_address) {};
        if (strncmp(a, "vsock://", 8) == 0)
                return parse_vsock(a + 8, ret);
        if (socket_address_is_unix(a))
                return parse_unix(a, ret);
        return parse_inet(a, ret);
}

int socket_address_connect(const char *address) {
        struct socket_address sa;
        int one = 1;
        int r = socket_address_parse(address, &sa);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (sa.sa.sa_family == AF_INET || sa.sa.sa_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, &sa.sa, sa.len) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}
