/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "ftrace-session.h"
#include "ftrace-wake.h"

static void on_cpu_ready(int fd, uint32_t revents, void *userdata) {
        struct ftrace_session *s = userdata;
        (void) revents;
        int cpu = 0;
        while (cpu < s->n_cpus && s->cpu_fds[cpu] != fd)
                cpu++;
        uint64_t pages = s->pages;
        ftrace_drain(s, false);
        /* A wake that moved nothing (a buffer that reads as full but gives
         * no sub-buffer, a kernel that wakes early) would come back at
         * once: the CPU is watched again at the next tick of the timer. */
        if (s->pages == pages && cpu < s->n_cpus && s->cpu_wake[cpu]) {
                s->pl->api->remove_source(s->pl->host, s->cpu_wake[cpu]);
                s->cpu_wake[cpu] = NULL;
                s->wakes_idle++;
        }
}

static int watch(struct ftrace_session *s, int cpu) {
        if (s->cpu_fds[cpu] < 0 || s->cpu_wake[cpu])
                return 0;
        return s->pl->api->add_fd(s->pl->host, s->cpu_fds[cpu], EPOLLIN, on_cpu_ready, s, &s->cpu_wake[cpu]);
}

int ftrace_wake_start(struct ftrace_session *s) {
        if (!s->pl->api->add_fd)
                return -EOPNOTSUPP;
        char val[16];
        snprintf(val, sizeof(val), "%u", FTRACE_WAKE_PERCENT);
        int r = ftrace_session_write(s, "buffer_percent", val);
        if (r < 0)
                return r;
        s->cpu_wake = calloc((size_t) s->n_cpus, sizeof(*s->cpu_wake));
        if (!s->cpu_wake)
                return -ENOMEM;
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                r = watch(s, cpu);
                if (r < 0) {
                        ftrace_wake_stop(s);
                        return r;
                }
        }
        return 0;
}

void ftrace_wake_rearm(struct ftrace_session *s) {
        for (int cpu = 0; s->cpu_wake && cpu < s->n_cpus; cpu++)
                (void) watch(s, cpu); /* else the timer alone drains it */
}

void ftrace_wake_stop(struct ftrace_session *s) {
        for (int cpu = 0; s->cpu_wake && cpu < s->n_cpus; cpu++)
                if (s->cpu_wake[cpu])
                        s->pl->api->remove_source(s->pl->host, s->cpu_wake[cpu]);
        free(s->cpu_wake);
        s->cpu_wake = NULL;
}
