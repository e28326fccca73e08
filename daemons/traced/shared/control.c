/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "shared/control.h"

int control_pair(int ret_fds[2]) {
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ret_fds) < 0)
                return -errno;
        return 0;
}

static int send_msg(int ctl_fd, const struct control_msg *msg, int fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = (void *) msg, .iov_len = sizeof(*msg) };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = fd >= 0 ? sizeof(control.buf) : 0,
        };
        if (fd >= 0) {
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        } else
                mh.msg_control = NULL;
        ssize_t n = sendmsg(ctl_fd, &mh, MSG_NOSIGNAL);
        if (n < 0)
                return -errno;
        return n == (ssize_t) sizeof(*msg) ? 0 : -EIO;
}

int control_send_producer(int ctl_fd, const struct control_msg *msg, int fd) {
        struct control_msg m = *msg;
        m.kind = CONTROL_PRODUCER;
        return send_msg(ctl_fd, &m, fd);
}

int control_send_trace_directory(int ctl_fd, const char *path, int fd, uint64_t max_use, uint64_t keep_free) {
        struct control_msg m = { .kind = CONTROL_TRACE_DIRECTORY, .max_use = max_use, .keep_free = keep_free };
        if (!path || strlen(path) >= sizeof(m.path))
                return -ENAMETOOLONG;
        strcpy(m.path, path);
        return send_msg(ctl_fd, &m, fd);
}

int control_send_resident(int ctl_fd, int fd) {
        struct control_msg m = { .kind = CONTROL_RESIDENT_SESSIONS };
        return send_msg(ctl_fd, &m, fd);
}

int control_send_plugins_launched(int ctl_fd) {
        struct control_msg m = { .kind = CONTROL_PLUGINS_LAUNCHED };
        return send_msg(ctl_fd, &m, -EBADF);
}

int control_send_plugin_exited(int ctl_fd, pid_t pid, const char *name, const struct control_exit *how) {
        struct control_msg m = { .kind = CONTROL_PLUGIN_EXITED, .pid = pid };
        snprintf(m.name, sizeof(m.name), "%s", name ? name : "");
        if (how) {
                m.exit = *how;
                m.exit.reason[sizeof(m.exit.reason) - 1] = '\0';
        }
        return send_msg(ctl_fd, &m, -EBADF);
}

int control_send_plugin_parked(int ctl_fd, const char *name, const char *data_sources, uint64_t idle_usec) {
        struct control_msg m = { .kind = CONTROL_PLUGIN_PARKED, .idle_usec = idle_usec };
        if (!name || strlen(name) >= sizeof(m.name) || !data_sources || strlen(data_sources) >= sizeof(m.path))
                return -ENAMETOOLONG;
        strcpy(m.name, name);
        strcpy(m.path, data_sources);
        return send_msg(ctl_fd, &m, -EBADF);
}

int control_send_start_plugin(int ctl_fd, const char *name) {
        struct control_msg m = { .kind = CONTROL_START_PLUGIN };
        if (!name || !name[0] || strlen(name) >= sizeof(m.name))
                return -EINVAL;
        strcpy(m.name, name);
        return send_msg(ctl_fd, &m, -EBADF);
}

int control_send_stop_plugin(int ctl_fd, const char *name, pid_t pid) {
        struct control_msg m = { .kind = CONTROL_STOP_PLUGIN, .pid = pid };
        if (!name || !name[0] || strlen(name) >= sizeof(m.name) || pid <= 0)
                return -EINVAL;
        strcpy(m.name, name);
        return send_msg(ctl_fd, &m, -EBADF);
}

const char *control_exit_describe(const struct control_exit *how, char *buf, size_t size) {
        if (how->hung_usec)
                snprintf(buf, size, "was killed by traced's watchdog after %.1f s without a sign of life",
                         (double) how->hung_usec / 1e6);
        else if (how->refused)
                snprintf(buf, size, "refused its plugin: %s",
                         how->reason[0] ? how->reason : "see the plugin host's log");
        else if (how->code == CLD_EXITED)
                snprintf(buf, size, "exited with status %d", how->status);
        else if (how->code == CLD_KILLED || how->code == CLD_DUMPED) {
                const char *name = sigabbrev_np(how->status);
                if (name)
                        snprintf(buf, size, "was killed by SIG%s%s", name,
                                 how->code == CLD_DUMPED ? " (core dumped)" : "");
                else
                        snprintf(buf, size, "was killed by signal %d", how->status);
        } else
                snprintf(buf, size, "ended");
        return buf;
}

int control_recv(int ctl_fd, struct control_msg *ret_msg, int *ret_fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } control = {};
        struct control_msg msg;
        struct iovec iov = { .iov_base = &msg, .iov_len = sizeof(msg) };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        ssize_t n = recvmsg(ctl_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
        if (n == 0)
                return 0;

        int fd = -EBADF, extra = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int f;
                        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (fd < 0)
                                fd = f;
                        else {
                                safe_close(f);
                                extra++;
                        }
                }
        }
        if (n != (ssize_t) sizeof(msg) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || extra ||
            memchr(msg.name, '\0', sizeof(msg.name)) == NULL || memchr(msg.path, '\0', sizeof(msg.path)) == NULL ||
            memchr(msg.exit.reason, '\0', sizeof(msg.exit.reason)) == NULL ||
            (msg.kind != CONTROL_PRODUCER && msg.kind != CONTROL_TRACE_DIRECTORY &&
             msg.kind != CONTROL_RESIDENT_SESSIONS && msg.kind != CONTROL_PLUGINS_LAUNCHED &&
             msg.kind != CONTROL_PLUGIN_EXITED && msg.kind != CONTROL_PLUGIN_PARKED &&
             msg.kind != CONTROL_START_PLUGIN && msg.kind != CONTROL_STOP_PLUGIN) ||
            ((msg.kind == CONTROL_PLUGIN_PARKED || msg.kind == CONTROL_START_PLUGIN || msg.kind == CONTROL_STOP_PLUGIN) &&
             (fd >= 0 || !msg.name[0])) ||
            (msg.kind == CONTROL_STOP_PLUGIN && msg.pid <= 0)) {
                safe_close(fd);
                return -EBADMSG;
        }
        *ret_msg = msg;
        *ret_fd = fd;
        return 1;
}

int control_recv_next(int ctl_fd, const char *peer, struct control_msg *ret_msg, int *ret_fd) {
        for (;;) {
                int r = control_recv(ctl_fd, ret_msg, ret_fd);
                if (r != -EBADMSG)
                        return r;
                log_warning("Ignoring a malformed message from %s.", peer);
        }
}
