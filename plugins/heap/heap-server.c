/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "heap-ds.h"

int heap_server_setup(struct heap_plugin *pl) {
        if (pl->state)
                return 0;
        const char *d = getenv(HEAP_DIR_ENV);
        snprintf(pl->dir, sizeof(pl->dir), "%s", d && d[0] == '/' ? d : HEAP_DIR_DEFAULT);
        if (mkdir(pl->dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        char path[256];
        snprintf(path, sizeof(path), "%s/" HEAP_STATE_FILE, pl->dir);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (st.st_size < (off_t) HEAP_STATE_SIZE && ftruncate(fd, HEAP_STATE_SIZE) < 0)) {
                int r = errno ? -errno : -EINVAL;
                close(fd);
                return r;
        }
        (void) fchmod(fd, 0644);
        void *m = mmap(NULL, HEAP_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
                int r = -errno;
                close(fd);
                return r;
        }
        struct heap_state *s = m;
        if (s->magic != HEAP_WIRE_MAGIC || s->version != HEAP_WIRE_VERSION) {
                /* New, tmpfiles.d's line of text, or of another version:
                 * made ours, with a generation the processes watching it
                 * have not seen (they look again, and find a valid page). */
                uint32_t old = __atomic_load_n(&s->generation, __ATOMIC_ACQUIRE);
                s->version = HEAP_WIRE_VERSION;
                s->pad = 0;
                __atomic_store_n(&s->magic, HEAP_WIRE_MAGIC, __ATOMIC_RELEASE);
                __atomic_store_n(&s->generation, (old & ~1u) + 2u ? (old & ~1u) + 2u : 2u, __ATOMIC_RELEASE);
        }
        pl->state_fd = fd;
        pl->state = s;
        return 0;
}

void heap_server_bump(struct heap_plugin *pl) {
        if (!pl->state)
                return;
        /* Even values only: the library's odd "look" value never matches. */
        uint32_t g = __atomic_load_n(&pl->state->generation, __ATOMIC_ACQUIRE) & ~1u;
        __atomic_store_n(&pl->state->generation, g + 2u ? g + 2u : 2u, __ATOMIC_RELEASE);
}

void heap_client_free(struct heap_plugin *pl, struct heap_client *c) {
        for (struct heap_client **p = &pl->clients; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        if (c->src)
                pl->api->remove_source(pl->host, c->src);
        if (c->fd >= 0)
                close(c->fd);
        if (c->ring_mem)
                munmap(c->ring_mem, c->ring_size);
        if (c->templates)
                munmap(c->templates, HEAP_TEMPLATES_SIZE);
        heap_callsites_done(&c->cs);
        free(c);
}

static void end_connection(struct heap_client *c) {
        struct heap_plugin *pl = c->pl;
        if (c->src)
                pl->api->remove_source(pl->host, c->src);
        c->src = NULL;
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

/* /proc/PID/cmdline (argv, NUL separated) into buf: its size, or 0. */
static size_t read_cmdline(pid_t pid, char *buf, size_t size) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, size - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        return (size_t) n;
}

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks
 * since boot. 0 when unknown. */
static uint64_t start_ticks(pid_t pid) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        const char *p = strrchr(buf, ')'); /* comm may hold spaces */
        if (!p)
                return 0;
        /* After ")": field 3 (state) onwards; starttime is field 22. */
        unsigned long long v = 0;
        int field = 2;
        for (const char *t = p + 1; *t && field < 22; t++)
                if (*t == ' ' && ++field == 22)
                        v = strtoull(t + 1, NULL, 10);
        return v;
}

/* A reply, with up to two descriptors (the ring's, then the templates'). */
static int send_reply(int fd, const struct heap_reply *reply, const int *pass_fds, size_t n_fds) {
        char control[CMSG_SPACE(2 * sizeof(int))] = { 0 };
        struct iovec iov = { .iov_base = (void *) reply, .iov_len = sizeof(*reply) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n_fds > 0 && n_fds <= 2) {
                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(c), pass_fds, n_fds * sizeof(int));
        }
        return sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t) sizeof(*reply) ? 0 : -errno;
}

/* The client's stack templates: a memfd the plugin maps and writes, sealed
 * so that the process can map it read-only and never resize it. Its fd,
 * or negative errno. */
static int make_templates(struct heap_client *c) {
        int fd = memfd_create("traced-heap-templates", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        void *m = MAP_FAILED;
        if (ftruncate(fd, (off_t) HEAP_TEMPLATES_SIZE) < 0 ||
            (m = mmap(NULL, HEAP_TEMPLATES_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
                int r = -errno;
                if (m != MAP_FAILED)
                        munmap(m, HEAP_TEMPLATES_SIZE);
                close(fd);
                return r;
        }
        c->templates = m;
        return fd;
}

/* A ring for the client's instance, passed to it with the client's
 * templates (without them when those could not be made: its samples then
 * carry whole stacks): 0, or negative errno. */
static int give_ring(struct heap_client *c) {
        const struct heap_config *cfg = &c->inst->cfg;
        size_t total = heap_ring_total_size(cfg->shmem_size);
        int mfd = memfd_create("traced-heap-ring", MFD_CLOEXEC);
        if (mfd < 0)
                return -errno;
        int r = 0, tfd = -1;
        if (ftruncate(mfd, (off_t) total) < 0) {
                r = -errno;
                goto out;
        }
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        if (m == MAP_FAILED) {
                r = -errno;
                goto out;
        }
        c->ring_mem = m;
        c->ring_size = total;
        if ((r = heap_ring_format(m, total, &c->ring)) < 0)
                goto out;
        tfd = make_templates(c);
        if (tfd < 0)
                plugin_log(c->pl, TRACED_LOG_INFO,
                           HEAP_DS_NAME ": process %d gets no stack templates (its samples carry whole stacks): %s",
                           (int) c->pid, strerror(-tfd));
        struct heap_reply reply = {
                .magic = HEAP_WIRE_MAGIC, .status = HEAP_REPLY_TARGETED, .interval = cfg->interval,
                .stack_bytes = (uint32_t) MIN((uint64_t) HEAP_DEFAULT_STACK_BYTES,
                                              (total - HEAP_RING_HEADER) / 8u),
                .block_client = cfg->block_client,
                .block_timeout_us = cfg->block_timeout_us,
        };
        int fds[2] = { mfd, tfd };
        r = send_reply(c->fd, &reply, fds, tfd >= 0 ? 2 : 1);
out:
        close(mfd);
        if (tfd >= 0)
                close(tfd);
        return r;
}

static void on_hello(struct heap_client *c) {
        struct heap_plugin *pl = c->pl;
        struct heap_hello hello;
        ssize_t n = recv(c->fd, &hello, sizeof(hello), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        c->hello_done = true;
        if (n != (ssize_t) sizeof(hello) || hello.magic != HEAP_WIRE_MAGIC || hello.version != HEAP_WIRE_VERSION ||
            getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0) {
                heap_client_free(pl, c);
                return;
        }
        c->pid = cred.pid;
        c->text_start = hello.text_start;
        c->text_end = hello.text_end;
        char cmdline[4096];
        size_t size = read_cmdline(c->pid, cmdline, sizeof(cmdline));
        uint64_t started = start_ticks(c->pid);
        struct heap_instance *inst = heap_instance_for(pl, c->pid, cmdline, size, started);
        /* One client per process and instance (a process that asks twice
         * is left with the first). */
        for (struct heap_client *o = pl->clients; inst && o; o = o->next)
                if (o != c && o->inst == inst && o->pid == c->pid && o->fd >= 0)
                        inst = NULL;
        if (!inst) {
                struct heap_reply reply = { .magic = HEAP_WIRE_MAGIC, .status = HEAP_REPLY_NOT_TARGETED };
                (void) send_reply(c->fd, &reply, NULL, 0);
                heap_client_free(pl, c);
                return;
        }
        c->inst = inst;
        c->from_startup = started > inst->start_ticks;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        c->start_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
        int r = give_ring(c);
        if (r < 0) {
                plugin_log(pl, TRACED_LOG_WARNING, HEAP_DS_NAME ": process %d is not profiled: its ring: %s",
                           (int) c->pid, strerror(-r));
                heap_client_free(pl, c);
                return;
        }
        plugin_log(pl, TRACED_LOG_DEBUG, HEAP_DS_NAME ": profiling process %d", (int) c->pid);
}

static void on_client(int fd, uint32_t revents, void *userdata) {
        (void) fd;
        struct heap_client *c = userdata;
        if (!c->hello_done) {
                if (revents & EPOLLIN) {
                        on_hello(c); /* may free c */
                        return;
                }
                heap_client_free(c->pl, c);
                return;
        }
        /* After its hello the library sends only wakes (its ring is past
         * half full: read it now). Anything else is its end (exit, exec)
         * or garbage: what its ring holds is read, and its profile kept
         * for the dumps. */
        char buf[sizeof(struct heap_hello)];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n == 1 && buf[0] == HEAP_WAKE && !(revents & (EPOLLHUP | EPOLLERR))) {
                heap_client_drain(c);
                return;
        }
        struct heap_hello hello;
        if (n == (ssize_t) sizeof(hello) && !(revents & (EPOLLHUP | EPOLLERR))) {
                /* Its hello again (the generation changed): a process with
                 * a ring keeps it while its instance runs. */
                memcpy(&hello, buf, sizeof(hello));
                struct heap_reply reply = { .magic = HEAP_WIRE_MAGIC, .status = HEAP_REPLY_KEEP };
                if (hello.magic == HEAP_WIRE_MAGIC && c->inst && c->ring_mem && send_reply(c->fd, &reply, NULL, 0) == 0)
                        return;
        }
        heap_client_drain(c);
        c->disconnected = true;
        end_connection(c);
}

static void on_accept(int fd, uint32_t revents, void *userdata) {
        (void) revents;
        struct heap_plugin *pl = userdata;
        for (;;) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0)
                        return;
                struct heap_client *c = calloc(1, sizeof(*c));
                if (!c) {
                        close(cfd);
                        return;
                }
                *c = (struct heap_client) { .pl = pl, .fd = cfd, .next = pl->clients };
                if (pl->api->add_fd(pl->host, cfd, EPOLLIN, on_client, c, &c->src) < 0) {
                        close(cfd);
                        free(c);
                        continue;
                }
                pl->clients = c;
        }
}

int heap_server_listen(struct heap_plugin *pl) {
        if (pl->listen_fd >= 0)
                return 0;
        int r = heap_server_setup(pl);
        if (r < 0)
                return r;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if ((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" HEAP_SOCKET_FILE, pl->dir) >=
            sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(sa.sun_path);
        /* Any process may ask; only those a session names get a ring. */
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0666) < 0 || listen(fd, 64) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        if ((r = pl->api->add_fd(pl->host, fd, EPOLLIN, on_accept, pl, &pl->listen_src)) < 0 ||
            (r = pl->api->add_timer(pl->host, HEAP_DRAIN_MS, heap_on_drain_timer, pl, &pl->drain_timer)) < 0) {
                if (pl->listen_src)
                        pl->api->remove_source(pl->host, pl->listen_src);
                pl->listen_src = NULL;
                close(fd);
                (void) unlink(sa.sun_path);
                return r;
        }
        pl->listen_fd = fd;
        return 0;
}

void heap_server_unlisten(struct heap_plugin *pl) {
        if (pl->listen_fd < 0)
                return;
        pl->api->remove_source(pl->host, pl->listen_src);
        pl->listen_src = NULL;
        if (pl->drain_timer)
                pl->api->remove_source(pl->host, pl->drain_timer);
        pl->drain_timer = NULL;
        close(pl->listen_fd);
        pl->listen_fd = -1;
        char path[256];
        snprintf(path, sizeof(path), "%s/" HEAP_SOCKET_FILE, pl->dir);
        (void) unlink(path);
}

void heap_server_free(struct heap_plugin *pl) {
        while (pl->clients)
                heap_client_free(pl, pl->clients);
        heap_server_unlisten(pl);
        if (pl->state) {
                munmap(pl->state, HEAP_STATE_SIZE);
                close(pl->state_fd);
        }
        pl->state = NULL;
}
