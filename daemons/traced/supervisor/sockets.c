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
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <systemd/sd-daemon.h>

#include "basic/macro.h"
#include "supervisor/sockets.h"

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
                bool extra = name && (strcmp(name, "remote") == 0 || strcmp(name, "relay") == 0);
                if (extra && sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) > 0) {
                        if (ret->n_extra < LISTEN_MAX_EXTRA)
                                ret->extra[ret->n_extra++] = (struct extra_listener) {
                                        .fd = fd,
                                        .relay = strcmp(name, "relay") == 0,
                                };
                        continue;
                }
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
                bool kept = fd == ret->producer_fd || fd == ret->consumer_fd;
                for (size_t j = 0; j < ret->n_extra; j++)
                        kept = kept || fd == ret->extra[j].fd;
                if (!kept)
                        close(fd);
        }
        if (r < 0 || ret->producer_fd < 0 || ret->consumer_fd < 0) {
                listen_sockets_close(ret);
                return r < 0 ? r : -ENOENT;
        }
        ret->from_systemd = true;
        return 1;
}

/* The consumer socket: consumers control tracing and read everything, so
 * it is for root and the traced group. */
static int bind_consumer_socket(const char *path, int *ret_fd) {
        int r = socket_bind_unix(path, 0660, ret_fd);
        if (r < 0)
                return r;
        if (path[0] != '@') {
                /* Without its group the socket is root's alone: say so
                 * rather than leave the traced group locked out. */
                struct group *g = getgrnam("traced");
                if (g && chown(path, (uid_t) -1, g->gr_gid) < 0) {
                        r = -errno;
                        *ret_fd = safe_close(*ret_fd);
                        (void) unlink(path);
                        return r;
                }
        }
        return 0;
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

        /* Producers are any local user. */
        r = socket_bind_unix(producer_path, 0666, &s.producer_fd);
        if (r < 0)
                return r;
        r = bind_consumer_socket(consumer_path, &s.consumer_fd);
        if (r < 0) {
                s.producer_fd = safe_close(s.producer_fd);
                return r;
        }
        *ret = s;
        return 0;
}

/* Removes the socket file at path if nobody listens there. */
static void remove_stale_socket(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        size_t len = strlen(path);
        if (path[0] != '/' || len >= sizeof(sa.sun_path) || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
                return;
        memcpy(sa.sun_path, path, len + 1);
        _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof(sa)) < 0 && errno == ECONNREFUSED)
                (void) unlink(path);
}

void listen_sockets_remove_files(const char *producer_list, const char *consumer_path) {
        if (consumer_path)
                remove_stale_socket(consumer_path);
        for (const char *p = producer_list; p && *p;) {
                size_t n = strcspn(p, ",");
                char path[sizeof(((struct sockaddr_un *) NULL)->sun_path)];
                if (n < sizeof(path)) {
                        memcpy(path, p, n);
                        path[n] = '\0';
                        remove_stale_socket(path); /* addresses other than paths are skipped */
                }
                p += n + (p[n] == ',');
        }
}

void listen_sockets_close(struct listen_sockets *s) {
        s->producer_fd = safe_close(s->producer_fd);
        s->consumer_fd = safe_close(s->consumer_fd);
        for (size_t i = 0; i < s->n_extra; i++)
                s->extra[i].fd = safe_close(s->extra[i].fd);
        s->n_extra = 0;
}

static int bind_listen(int family, const struct sockaddr *sa, socklen_t len, int *ret_fd) {
        _cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1;

        if (fd < 0)
                return negative_errno();
        if (family != AF_VSOCK)
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, sa, len) < 0 || listen(fd, SOMAXCONN) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int socket_bind_address(const char *a, int *ret_fd) {
        struct socket_address sa;
        int r;

        if (socket_address_is_unix(a))
                return socket_bind_unix(a, 0666, ret_fd);
        r = socket_address_parse(a, &sa);
        if (r < 0)
                return r;
        return bind_listen(sa.sa.sa_family, &sa.sa, sa.len, ret_fd);
}

static bool list_contains(const char *list, const char *item) {
        size_t n = strlen(item);
        for (const char *p = list; p && *p;) {
                const char *e = strchrnul(p, ',');
                if ((size_t) (e - p) == n && strncmp(p, item, n) == 0)
                        return true;
                p = *e ? e + 1 : e;
        }
        return false;
}

int listen_sockets_open_list(const char *producer_list, const char *consumer_path, const char *relay_list,
                             struct listen_sockets *ret, const char **ret_bad) {
        _cleanup_free_ char *list = strdup(producer_list);
        struct listen_sockets s = { .producer_fd = -EBADF, .consumer_fd = -EBADF };
        static char bad[256];
        int r;

        if (!list)
                return -ENOMEM;
        *ret_bad = NULL;
        r = take_systemd_fds(&s);
        if (r < 0)
                return r;
        if (r > 0) {
                *ret = s;
                return 0;
        }
        /* The consumer port stays UNIX-only: it controls tracing and reads
         * every trace. */
        if (!socket_address_is_unix(consumer_path)) {
                *ret_bad = consumer_path;
                return -EPROTONOSUPPORT;
        }
        char *save = NULL;
        for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
                int fd = -EBADF;
                if (s.producer_fd >= 0 && s.n_extra >= LISTEN_MAX_EXTRA)
                        r = -E2BIG;
                else
                        r = socket_bind_address(a, &fd);
                if (r < 0) {
                        (void) snprintf(bad, sizeof(bad), "%s", a);
                        *ret_bad = bad;
                        listen_sockets_close(&s);
                        return r;
                }
                bool relay = relay_list && list_contains(relay_list, a);
                if (s.producer_fd < 0) {
                        s.producer_fd = fd;
                        s.producer_relay = relay;
                } else
                        s.extra[s.n_extra++] = (struct extra_listener) { .fd = fd, .relay = relay };
        }
        if (s.producer_fd < 0) {
                *ret_bad = producer_list;
                return -EINVAL;
        }
        r = bind_consumer_socket(consumer_path, &s.consumer_fd);
        if (r < 0) {
                *ret_bad = consumer_path;
                listen_sockets_close(&s);
                return r;
        }
        *ret = s;
        return 0;
}
