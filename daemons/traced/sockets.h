/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

struct listen_sockets {
        int producer_fd;
        int consumer_fd;
        bool from_systemd; /* passed by socket activation */
};

/* Default paths when traced binds its own sockets. */
#define TRACED_DEFAULT_PRODUCER_SOCKET "/run/traced/producer.sock"
#define TRACED_DEFAULT_CONSUMER_SOCKET "/run/traced/consumer.sock"

/*
 * Takes the listening sockets from systemd (LISTEN_FDS, matched by the
 * names "producer" and "consumer"; two unnamed fds are taken in that
 * order), or binds them at the given paths. Returns -errno; on success both
 * fds are valid and owned by the caller.
 */
int listen_sockets_open(const char *producer_path, const char *consumer_path, struct listen_sockets *ret);
void listen_sockets_close(struct listen_sockets *s);

/* Binds and listens on a UNIX stream socket at path (a leading '@' selects
 * the abstract namespace), creating the parent directory and replacing a
 * stale socket file. mode applies to the socket file. */
int socket_bind_unix(const char *path, unsigned mode, int *ret_fd);
