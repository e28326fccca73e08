/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <linux/vm_sockets.h>

/*
 * A socket address in the syntax upstream Perfetto uses for
 * PERFETTO_PRODUCER_SOCK_NAME: "@name" (abstract UNIX), "vsock://CID:PORT"
 * (CID may be "any" or "-1" when binding), "HOST:PORT" (IPv4; "localhost"
 * is the loopback) or "[V6]:PORT" (TCP); anything else is a UNIX path.
 */
struct socket_address {
        union {
                struct sockaddr sa;
                struct sockaddr_un un;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
                struct sockaddr_vm vm;
        };
        socklen_t len;
};

/* Whether an address of the syntax above is a UNIX socket. */
bool socket_address_is_unix(const char *address);

/* Parses address into ret. -EINVAL for a malformed host, port or CID,
 * -ENAMETOOLONG for a UNIX path that does not fit. */
int socket_address_parse(const char *address, struct socket_address *ret);

/* Connects a new blocking stream socket (close-on-exec) to address; TCP
 * connections get TCP_NODELAY. Returns the fd or -errno. */
int socket_address_connect(const char *address);
