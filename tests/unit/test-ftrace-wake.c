/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace's drains woken by the kernel (ftrace-wake.c), on the real
 * tracefs with a fake host: the session's own instance gets
 * buffer_percent, every CPU's trace_pipe_raw is watched, the timer keeps
 * only a long period, a CPU's buffer filled to the mark polls readable and
 * its wake drains it into packets, and a wake that finds nothing drops the
 * watch until the timer's next tick. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-packets.h"
#include "ftrace-ds.h"
#include "ftrace-session.h"
#include "ftrace-wake.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define TRACEFS "/sys/kernel/tracing"
#define MAX_SOURCES 64

struct fake_source {
        bool live, timer;
        int fd;
        uint32_t events, period_ms;
        traced_fd_cb fd_cb;
        traced_timer_cb timer_cb;
        void *userdata;
};

static struct {
        struct fake_source src[MAX_SOURCES];
        unsigned adds, removes;
        size_t packets, prints;
} fh;

static void h_log(struct traced_host *h, int level, const char *msg) {
        (void) h;
        (void) level;
        cr_log_info("plugin: %s", msg);
}

static struct fake_source *new_source(struct traced_source **ret) {
        for (size_t i = 0; i < MAX_SOURCES; i++)
                if (!fh.src[i].live) {
                        fh.src[i] = (struct fake_source) { .live = true, .fd = -1 };
                        fh.adds++;
                        *ret = (struct traced_source *) &fh.src[i];
                        return &fh.src[i];
                }
        cr_assert_fail("more than %d sources", MAX_SOURCES);
        return NULL;
}

static int32_t h_add_fd(struct traced_host *h, int fd, uint32_t events, traced_fd_cb cb, void *ud,
                        struct traced_source **ret) {
        (void) h;
        struct fake_source *s = new_source(ret);
        s->fd = fd;
        s->events = events;
        s->fd_cb = cb;
        s->userdata = ud;
        return 0;
}

static int32_t h_add_timer(struct traced_host *h, uint32_t ms, traced_timer_cb cb, void *ud,
                           struct traced_source **ret) {
        (void) h;
        struct fake_source *s = new_source(ret);
        s->timer = true;
        s->period_ms = ms;
        s->timer_cb = cb;
        s->userdata = ud;
        return 0;
}

static void h_remove(struct traced_host *h, struct traced_source *src) {
        (void) h;
        struct fake_source *s = (struct fake_source *) src;
        cr_assert(s >= fh.src && s < fh.src + MAX_SOURCES && s->live, "removed a source that is not live");
        s->live = false;
        fh.removes++;
}

static int32_t h_new_writer(struct traced_host *h, uint64_t id, struct traced_writer **ret) {
        (void) h;
        (void) id;
        *ret = (struct traced_writer *) &fh;
        return 0;
}

static int32_t h_write(struct traced_writer *w, const void *p, size_t n) {
        (void) w;
        Perfetto__Protos__TracePacket *pkt = perfetto__protos__trace_packet__unpack(NULL, n, p);
        cr_assert_not_null(pkt, "a packet does not decode");
        if (pkt->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                for (size_t k = 0; k < pkt->ftrace_events->n_event; k++)
                        fh.prints += pkt->ftrace_events->event[k]->event_case ==
                                     PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT;
        perfetto__protos__trace_packet__free_unpacked(pkt, NULL);
        fh.packets++;
        return 0;
}

static int32_t h_flush(struct traced_writer *w) {
        (void) w;
        return 0;
}

static void h_free_writer(struct traced_writer *w) {
        (void) w;
}

static int32_t h_stopped(struct traced_host *h, uint64_t id) {
        (void) h;
        (void) id;
        return 0;
}

static int32_t h_report(struct traced_host *h, uint64_t id, const char *field, const char *msg) {
        (void) h;
        (void) id;
        cr_log_info("report: %s: %s", field ? field : "-", msg);
        return 0;
}

static const struct traced_host_api api = {
        .struct_size = sizeof(struct traced_host_api),
        .abi_minor = 1,
        .log = h_log,
        .add_fd = h_add_fd,
        .add_timer = h_add_timer,
        .remove_source = h_remove,
        .new_writer = h_new_writer,
        .write_packet = h_write,
        .begin_packet = test_begin_packet,
        .end_packet = test_end_packet,
        .flush_writer = h_flush,
        .free_writer = h_free_writer,
        .notify_stopped = h_stopped,
        .report_error = h_report,
};

static struct plugin pl;
static char instance[64], instance_dir[256];

static void setup(void) {
        if (access(TRACEFS "/instances", W_OK) < 0)
                cr_skip_test("%s/instances is not writable (%s): these tests need root and tracefs", TRACEFS,
                             strerror(errno));
        memset(&fh, 0, sizeof(fh));
        test_packets_sink = h_write;
        pl = (struct plugin) { .api = &api };
        snprintf(pl.tracefs, sizeof(pl.tracefs), "%s", TRACEFS);
        snprintf(instance, sizeof(instance), "traced_test_wake_%d", (int) getpid());
        snprintf(instance_dir, sizeof(instance_dir), TRACEFS "/instances/%s", instance);
}

static void teardown(void) {
        ftrace_sessions_free(&pl);
        (void) rmdir(instance_dir); /* the session removes it: only after a failure is it still there */
}

static size_t put_varint(uint8_t *b, uint64_t v) {
        size_t n = 0;
        do {
                b[n] = (uint8_t) (v & 0x7f);
                v >>= 7;
                if (v)
                        b[n] |= 0x80;
                n++;
        } while (v);
        return n;
}

static size_t put_string(uint8_t *b, uint32_t field, const char *s) {
        size_t n = put_varint(b, field << 3 | 2), l = strlen(s);
        n += put_varint(b + n, l);
        memcpy(b + n, s, l);
        return n + l;
}

/* A DataSourceConfig { ftrace_config { ftrace_events: "ftrace/print",
 * buffer_size_kb: 64, instance_name, [drain_period_ms] } }. */
static size_t config(uint8_t *buf, uint32_t drain_ms) {
        uint8_t fc[256];
        size_t n = put_string(fc, 1, "ftrace/print");
        n += put_varint(fc + n, 10 << 3);
        n += put_varint(fc + n, 64);
        if (drain_ms) {
                n += put_varint(fc + n, 11 << 3);
                n += put_varint(fc + n, drain_ms);
        }
        n += put_string(fc + n, 25, instance);
        size_t k = put_varint(buf, 100 << 3 | 2);
        k += put_varint(buf + k, n);
        memcpy(buf + k, fc, n);
        return k + n;
}

static struct fake_source *the_timer(unsigned *n) {
        struct fake_source *t = NULL;
        *n = 0;
        for (size_t i = 0; i < MAX_SOURCES; i++)
                if (fh.src[i].live && fh.src[i].timer) {
                        t = &fh.src[i];
                        (*n)++;
                }
        return t;
}

static struct fake_source *watch_of(const struct ftrace_session *s, int cpu) {
        for (size_t i = 0; i < MAX_SOURCES; i++)
                if (fh.src[i].live && !fh.src[i].timer && fh.src[i].fd == s->cpu_fds[cpu])
                        return &fh.src[i];
        return NULL;
}

static struct ftrace_session *only_session(void) {
        cr_assert_not_null(pl.sessions);
        return (struct ftrace_session *) pl.sessions;
}

static int readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        return poll(&p, 1, 0);
}

static void read_file(const char *rel, char *buf, size_t size) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", instance_dir, rel);
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "%s: %s", path, strerror(errno));
        cr_assert_not_null(fgets(buf, (int) size, f));
        fclose(f);
        buf[strcspn(buf, "\n")] = '\0';
}

Test(ftrace_wake, every_cpu_is_watched_at_half_full_and_the_timer_only_bounds_the_wait, .init = setup,
     .fini = teardown) {
        uint8_t cfg[256];
        cr_assert_eq(ftrace_session_start(&pl, 1, cfg, config(cfg, 0)), 0);
        struct ftrace_session *s = only_session();
        unsigned timers;
        struct fake_source *t = the_timer(&timers);
        cr_assert_eq(timers, 1);
        cr_assert_eq(t->period_ms, 1000, "drain period %u ms without drain_period_ms", t->period_ms);
        char v[64];
        read_file("buffer_percent", v, sizeof(v));
        cr_assert_str_eq(v, "50");
        int watched = 0, open_cpus = 0;
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                if (s->cpu_fds[cpu] < 0)
                        continue;
                open_cpus++;
                struct fake_source *w = watch_of(s, cpu);
                cr_assert_not_null(w, "cpu%d's buffer is not watched", cpu);
                cr_assert(w->events & POLLIN);
                watched++;
        }
        cr_assert_gt(open_cpus, 0);
        cr_assert_eq(watched, open_cpus);
        ftrace_session_stop(&pl, 1);
        cr_assert_eq(fh.adds, fh.removes, "%u sources added, %u removed at the stop", fh.adds, fh.removes);
        cr_assert_eq(access(instance_dir, F_OK), -1, "the instance outlived its session");
}

Test(ftrace_wake, an_explicit_drain_period_is_kept_and_the_buffers_still_wake_it, .init = setup,
     .fini = teardown) {
        uint8_t cfg[256];
        cr_assert_eq(ftrace_session_start(&pl, 1, cfg, config(cfg, 250)), 0);
        struct ftrace_session *s = only_session();
        unsigned timers;
        cr_assert_eq(the_timer(&timers)->period_ms, 250);
        for (int cpu = 0; cpu < s->n_cpus; cpu++)
                cr_assert(s->cpu_fds[cpu] < 0 || watch_of(s, cpu), "cpu%d's buffer is not watched", cpu);
        ftrace_session_stop(&pl, 1);
}

/* Runs on cpu (pinned), writing markers into the instance until that CPU's
 * buffer polls readable: how many were written. */
static unsigned fill_until_readable(const struct ftrace_session *s, int cpu) {
        cpu_set_t set, old;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        cr_assert_eq(sched_getaffinity(0, sizeof(old), &old), 0);
        cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0, "cannot run on cpu%d: %s", cpu, strerror(errno));
        char path[512], line[200];
        snprintf(path, sizeof(path), "%s/trace_marker", instance_dir);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        memset(line, 'm', sizeof(line));
        unsigned n = 0;
        /* 64 KiB per CPU: half of it is a few hundred markers; ten times
         * the buffer is the bound. */
        while (readable(s->cpu_fds[cpu]) == 0 && n < 3500) {
                cr_assert_eq(write(fd, line, sizeof(line)), (ssize_t) sizeof(line), "trace_marker: %s",
                             strerror(errno));
                n++;
        }
        close(fd);
        (void) sched_setaffinity(0, sizeof(old), &old);
        return n;
}

Test(ftrace_wake, a_half_full_buffer_polls_readable_and_its_wake_drains_it, .init = setup, .fini = teardown) {
        uint8_t cfg[256];
        cr_assert_eq(ftrace_session_start(&pl, 1, cfg, config(cfg, 0)), 0);
        struct ftrace_session *s = only_session();
        int cpu = sched_getcpu();
        cr_assert_geq(cpu, 0);
        cr_assert_geq(s->cpu_fds[cpu], 0);
        cr_assert_eq(readable(s->cpu_fds[cpu]), 0, "cpu%d polls readable with nothing written", cpu);
        unsigned n = fill_until_readable(s, cpu);
        cr_assert_eq(readable(s->cpu_fds[cpu]), 1, "cpu%d never polled readable after %u markers", cpu, n);
        cr_assert_gt(n, 10, "readable after %u markers: not at half of a 64 KiB buffer", n);
        struct fake_source *w = watch_of(s, cpu);
        cr_assert_not_null(w);
        w->fd_cb(w->fd, POLLIN, w->userdata);
        cr_assert_eq(readable(s->cpu_fds[cpu]), 0, "cpu%d still polls readable after its drain", cpu);
        cr_assert_not_null(watch_of(s, cpu), "a wake that drained pages dropped the watch");
        /* Each sub-buffer taken whole: the writer's own one waits for the
         * timer or a flush, so most but not all markers are there. */
        cr_assert_gt(fh.prints, n / 2, "%zu of %u markers drained by the wake", fh.prints, n);
        ftrace_session_flush(&pl, 1);
        cr_assert_geq(fh.prints, n, "%zu of %u markers after the flush", fh.prints, n);
        ftrace_session_stop(&pl, 1);
}

Test(ftrace_wake, a_wake_that_finds_nothing_drops_the_watch_until_the_next_tick, .init = setup,
     .fini = teardown) {
        uint8_t cfg[256];
        cr_assert_eq(ftrace_session_start(&pl, 1, cfg, config(cfg, 0)), 0);
        struct ftrace_session *s = only_session();
        int cpu = 0;
        while (cpu < s->n_cpus && s->cpu_fds[cpu] < 0)
                cpu++;
        cr_assert_lt(cpu, s->n_cpus);
        struct fake_source *w = watch_of(s, cpu);
        cr_assert_not_null(w);
        int fd = w->fd;
        w->fd_cb(fd, POLLIN, w->userdata);
        cr_assert_null(watch_of(s, cpu), "a wake that read nothing kept its watch (it would come back at once)");
        cr_assert_eq(s->wakes_idle, 1);
        unsigned timers;
        struct fake_source *t = the_timer(&timers);
        t->timer_cb(t->userdata);
        cr_assert_not_null(watch_of(s, cpu), "the timer's tick did not watch cpu%d again", cpu);
        ftrace_session_stop(&pl, 1);
        cr_assert_eq(fh.adds, fh.removes);
}
