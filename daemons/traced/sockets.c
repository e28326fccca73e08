/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <grp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "basic/macro.h"
#include "sockets.h"

static int mkdir_parents(const char *path) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *s = '/';
        }
        return 0;
}

int socket_bind_unix(const char *path, unsigned mode, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        bool abstract = path[0] == '@';
        size_t len = strlen(path);
        int r;

        if (len == 0 || len >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, len);
        if (abstract)
                sa.sun_path[0] = '\0';
        socklen_t salen = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + (abstract ? 0 : 1));

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();

        if (!abstract) {
                r = mkdir_parents(path);
                if (r < 0)
                        return r;
                /* A socket file left behind by an earlier instance: replace
                 * it only if nobody is listening on it any more. */
                struct stat st;
                if (lstat(path, &st) == 0) {
                        if (!S_ISSOCK(st.st_mode))
                                return -EEXIST;
                        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                        if (probe >= 0) {
                                int c = connect(probe, (struct sockaddr *) &sa, salen);
                                close(probe);
                                if (c == 0)
                                        return -EADDRINUSE;
                        }
                        (void) unlink(path);
                }
        }
        if (bind(fd, (struct sockaddr *) &sa, salen) < 0)
                return negative_errno();
        if (!abstract && chmod(path, mode) < 0)
                return negative_errno();
        if (listen(fd, SOMAXCONN) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int take_systemd_fds(struct listen_sockets *ret) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(true, &names);
        int r = 0;

        if (n <= 0) {
                free(names);
                return n; /* 0: not socket activated */
        }

        ret->producer_fd = ret->consumer_fd = -EBADF;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names ? names[i] : NULL;
                if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
                        r = -EINVAL;
                        continue;
                }
                if (name && strcmp(name, "producer") == 0 && ret->producer_fd < 0)
                        ret->producer_fd = fd;
                else if (name && strcmp(name, "consumer") == 0 && ret->consumer_fd < 0)
                        ret->consumer_fd = fd;
        }
        /* Unnamed fds (e.g. systemd-socket-activate without --fdname):
         * producer first, then consumer. */
        if (ret->producer_fd < 0 && ret->consumer_fd < 0 && n == 2) {
                ret->producer_fd = SD_LISTEN_FDS_START;
                ret->consumer_fd = SD_LISTEN_FDS_START + 1;
        }
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (fd != ret->producer_fd && fd != ret->consumer_fd)
                        close(fd);
        }
        if (r < 0 || ret->producer_fd < 0 || ret->consumer_fd < 0) {
                safe_close(ret->producer_fd);
                safe_close(ret->consumer_fd);
                return r < 0 ? r : -ENOENT;
        }
        ret->from_systemd = true;
        return 1;
}

int listen_sockets_open(const char *producer_path, const char *consumer_path, struct listen_sockets *ret) {
        struct listen_sockets s = { .producer_fd = -EBADF, .consumer_fd = -EBADF };
        int r;

        r = take_systemd_fds(&s);
        if (r < 0)
                return r;
        if (r > 0) {
                *ret = s;
                return 0;
        }

        /* Producers are any local user; consumers control tracing and read
         * everything, so their socket is for root and the traced group. */
        r = socket_bind_unix(producer_path, 0666, &s.producer_fd);
        if (r < 0)
                return r;
        r = socket_bind_unix(consumer_path, 0660, &s.consumer_fd);
        if (r < 0) {
                s.producer_fd = safe_close(s.producer_fd);
                return r;
        }
        if (consumer_path[0] != '@') {
                struct group *g = getgrnam("traced");
                if (g)
                        (void) chown(consumer_path, (uid_t) -1, g->gr_gid);
        }
        *ret = s;
        return 0;
}

void listen_sockets_close(struct listen_sockets *s) {
        s->producer_fd = safe_close(s->producer_fd);
        s->consumer_fd = safe_close(s->consumer_fd);
}
