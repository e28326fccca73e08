/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "basic/socket-address.h"
#include "core/core.h" /* struct extra_listener: what the core is handed */

struct listen_sockets {
        int producer_fd;
        int consumer_fd;
        bool producer_relay;
        struct extra_listener extra[LISTEN_MAX_EXTRA];
        size_t n_extra;
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

/*
 * As above, but producer_list is a comma-separated list of addresses, as
 * upstream parses PERFETTO_PRODUCER_SOCK_NAME: "@name" (abstract UNIX),
 * "vsock://CID:PORT", "HOST:PORT" or "[V6]:PORT" (TCP), else a UNIX path.
 * The first one is the main producer socket, the others go to ret->extra.
 * relay_list (may be NULL) names those on which the RelayPort service is
 * offered. Under socket activation, further fds named "remote" are extra
 * producer listeners and those named "relay" extra listeners with the
 * RelayPort. On error *ret_bad points at the entry that failed.
 */
int listen_sockets_open_list(const char *producer_list, const char *consumer_path, const char *relay_list,
                             struct listen_sockets *ret, const char **ret_bad);

/* Binds and listens on one address of the syntax above. */
int socket_bind_address(const char *address, int *ret_fd);

void listen_sockets_close(struct listen_sockets *s);

/* On the way out of a traced that bound its own sockets: removes the
 * socket files of producer_list (its UNIX paths) and consumer_path that no
 * one listens on any more, so that clients find no socket rather than one
 * that refuses them. */
void listen_sockets_remove_files(const char *producer_list, const char *consumer_path);

/* Binds and listens on a UNIX stream socket at path (a leading '@' selects
 * the abstract namespace), creating the parent directory and replacing a
 * stale socket file. mode applies to the socket file. */
int socket_bind_unix(const char *path, unsigned mode, int *ret_fd);
