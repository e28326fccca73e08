/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "shared/control.h"
#include "supervisor/host-exec.h"
#include "supervisor/host-probe.h"

int host_probe_start(struct host_probe *p, const char *host_binary, const struct host_identity *id,
                     const char *plugin, enum host_probe_mode mode, uint64_t caps) {
        *p = (struct host_probe) { .out = -EBADF, .err = -EBADF };
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return log_error_errno(errno, "Failed to ask the plugin host about %s: %m", plugin);
        _cleanup_close_ int rd = pfd[0];
        _cleanup_close_ int wr = pfd[1];
        /* Its error output is kept whole (no pipe it could fill and
         * block on) and read once it exited. */
        _cleanup_close_ int err = memfd_create("traced-host-probe", MFD_CLOEXEC);
        if (err < 0)
                return log_error_errno(errno, "Failed to ask the plugin host about %s: %m", plugin);
        char *args[] = { (char *) host_binary,
                         (char *) (mode == HOST_PROBE_CHECK          ? "--check"
                                   : mode == HOST_PROBE_DATA_SOURCES ? "--print-data-sources"
                                                                     : "--print-capabilities") };
        struct host_exec e;
        int r = host_exec_prepare(&e, id, NULL, plugin, caps, args, ELEMENTSOF(args));
        if (r < 0)
                return r;
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                host_exec_done(&e);
                return log_error_errno(r, "Failed to ask the plugin host about %s: %m", plugin);
        }
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                if (dup2(wr, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
                        _exit(127);
                host_exec_child(&e);
        }
        host_exec_done(&e);
        p->pid = pid;
        p->out = TAKE_FD(rd);
        p->err = TAKE_FD(err);
        return 0;
}

static uint64_t now_msec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* Reads its standard output until end of file or the deadline; *overflow
 * when more came than buf holds. */
static bool read_output(int fd, char *buf, size_t size, uint64_t deadline, bool *overflow) {
        size_t n = 0;
        *overflow = false;
        for (;;) {
                uint64_t now = now_msec();
                if (now >= deadline)
                        return false;
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int k = poll(&pfd, 1, (int) (deadline - now));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k == 0)
                        return false;
                if (k < 0)
                        break;
                char scratch[256];
                bool full = n >= size - 1;
                ssize_t got = read(fd, full ? scratch : buf + n, full ? sizeof(scratch) : size - 1 - n);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0)
                        break;
                if (!full)
                        n += (size_t) got;
                else
                        *overflow = true;
        }
        buf[n] = '\0';
        return true;
}

/* All the probe wrote to its error output (NULL: nothing). */
static char *read_errors(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size <= 0)
                return NULL;
        size_t size = MIN((size_t) st.st_size, (size_t) 65536);
        char *buf = malloc(size + 1);
        if (!buf)
                return NULL;
        ssize_t n = pread(fd, buf, size, 0);
        if (n <= 0) {
                free(buf);
                return NULL;
        }
        buf[n] = '\0';
        return buf;
}

/* The last line of text that holds something. */
static void last_line(const char *text, char *buf, size_t size) {
        buf[0] = '\0';
        if (!text)
                return;
        size_t end = strlen(text);
        while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' '))
                end--;
        size_t start = end;
        while (start > 0 && text[start - 1] != '\n')
                start--;
        snprintf(buf, size, "%.*s", (int) (end - start), text + start);
}

void host_probe_abandon(struct host_probe *p) {
        if (p->pid > 0) {
                (void) kill(p->pid, SIGKILL);
                while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        p->pid = 0;
        p->out = safe_close(p->out);
        p->err = safe_close(p->err);
}

/* Waits for the probe, its standard output into buf: 0 when it answered. */
static int finish(struct host_probe *p, char *buf, size_t size, bool *overflow, char *err, size_t err_size,
                  char **ret_output) {
        bool done = read_output(p->out, buf, size, now_msec() + HOST_PROBE_TIMEOUT_MSEC, overflow);
        if (!done)
                (void) kill(p->pid, SIGKILL);
        int status = 0;
        while (waitpid(p->pid, &status, 0) < 0)
                if (errno != EINTR) {
                        status = -1;
                        break;
                }
        p->pid = 0;
        _cleanup_free_ char *output = read_errors(p->err);
        host_probe_abandon(p);
        if (err && err_size > 0)
                last_line(output, err, err_size);
        if (ret_output)
                *ret_output = TAKE_PTR(output);
        if (!done) {
                if (err && err_size > 0)
                        snprintf(err, err_size, "it did not answer within %u s", HOST_PROBE_TIMEOUT_MSEC / 1000u);
                return -ETIMEDOUT;
        }
        if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == CONTROL_EXIT_PLUGIN_REFUSED)
                return -EPERM;
        if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -ENOEXEC;
        return 0;
}

int host_probe_finish_text(struct host_probe *p, char *out, size_t out_size, char *err, size_t err_size,
                           char **ret_output) {
        bool overflow;
        int r = finish(p, out, out_size, &overflow, err, err_size, ret_output);
        if (r < 0)
                return r;
        if (overflow) {
                if (err && err_size > 0)
                        snprintf(err, err_size, "its answer is longer than %zu bytes", out_size - 1);
                return -EMSGSIZE;
        }
        return 0;
}

int host_probe_finish(struct host_probe *p, uint64_t *ret_caps, char *err, size_t err_size, char **ret_output) {
        char buf[64];
        bool overflow;
        int r = finish(p, buf, sizeof(buf), &overflow, err, err_size, ret_output);
        if (r < 0)
                return r;
        if (!ret_caps)
                return 0;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 16);
        if (errno || end == buf || (*end != '\n' && *end != '\0'))
                return -EBADMSG;
        *ret_caps = v;
        return 0;
}

void host_probe_stamp(const char *path, struct host_probe_stamp *ret) {
        struct stat st;
        *ret = (struct host_probe_stamp) {};
        if (stat(path, &st) < 0)
                return;
        *ret = (struct host_probe_stamp) {
                .dev = st.st_dev,
                .ino = st.st_ino,
                .size = st.st_size,
                .mtime = st.st_mtim,
                .ctime = st.st_ctim,
        };
}

bool host_probe_stamp_equal(const struct host_probe_stamp *a, const struct host_probe_stamp *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
               a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
               a->ctime.tv_nsec == b->ctime.tv_nsec;
}
