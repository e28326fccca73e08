/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.frozen_ftrace on a fake tracefs tree: an instance whose
 * per_cpu/cpu0/trace_pipe_raw is a file holding pages captured from a real
 * kernel (tests/data/ftrace), read through the plugin's data source with a
 * fake host that keeps the packets; and the id index of an instance's
 * events/. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-packets.h"
#include "event-index.h"
#include "ftrace-ds.h"
#include "test-scratch.h"

#include "perfetto/trace/ftrace/ftrace_stats.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

static char root[256];

static void make_root(void) {
        cr_assert_eq(test_mkdtemp(root, sizeof(root), "traced-frozen-"), 0);
}

static void remove_root(void) {
        cr_expect_eq(test_scratch_remove(root), 0, "could not remove %s", root);
}

/* Writes data (len bytes) into root/rel, making its directories. */
static void put(const char *rel, const void *data, size_t len) {
        char path[768];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
                *p = '\0';
                cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %m", path);
                *p = '/';
        }
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s: %m", path);
        cr_assert_eq(fwrite(data, 1, len, f), len);
        fclose(f);
}

static void put_str(const char *rel, const char *text) {
        put(rel, text, strlen(text));
}

static char *slurp(const char *name, size_t *ret_len) {
        char path[512];
        snprintf(path, sizeof(path), "%s/ftrace/%s", TEST_DATA_DIR, name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "missing fixture %s", path);
        char *buf = malloc(1 << 16);
        size_t n = fread(buf, 1, (1 << 16) - 1, f);
        buf[n] = '\0';
        fclose(f);
        *ret_len = n;
        return buf;
}

/* events/<group>/<name>/{id,format} from a captured format file. */
static void put_event(const char *inst, const char *group, const char *name, const char *fixture) {
        size_t n;
        char *text = slurp(fixture, &n), rel[256], id[16];
        const char *at = strstr(text, "ID: ");
        cr_assert_not_null(at);
        snprintf(id, sizeof(id), "%d\n", atoi(at + 4));
        snprintf(rel, sizeof(rel), "%s/events/%s/%s/format", inst, group, name);
        put(rel, text, n);
        snprintf(rel, sizeof(rel), "%s/events/%s/%s/id", inst, group, name);
        put_str(rel, id);
        free(text);
}

Test(frozen_event_index, ids_of_every_group_sorted_and_found, .init = make_root, .fini = remove_root) {
        put_event("i", "sched", "sched_switch", "format-sched_switch");
        put_event("i", "sched", "sched_waking", "format-sched_waking");
        put_event("i", "ftrace", "print", "format-print");
        put_str("i/events/enable", "0\n");              /* a file, not a group */
        put_str("i/events/irq/broken/id", "not a number\n"); /* left out */
        put_str("i/events/irq/huge/id", "70000\n");          /* not a u16: left out */
        put_str("i/events/irq/noid/format", "name: noid\n"); /* no id file: left out */
        char inst[512];
        snprintf(inst, sizeof(inst), "%s/i", root);
        struct event_index idx;
        cr_assert_eq(event_index_build(inst, &idx), 0);
        cr_assert_eq(idx.n, 3);
        for (size_t i = 1; i < idx.n; i++)
                cr_assert_lt(idx.entries[i - 1].id, idx.entries[i].id);
        const struct event_index_entry *e = event_index_find(&idx, 372);
        cr_assert_not_null(e);
        cr_assert_str_eq(e->group, "sched");
        cr_assert_str_eq(e->name, "sched_switch");
        e = event_index_find(&idx, 5);
        cr_assert(e && strcmp(e->group, "ftrace") == 0 && strcmp(e->name, "print") == 0);
        cr_assert_null(event_index_find(&idx, 6));
        event_index_done(&idx);
        snprintf(inst, sizeof(inst), "%s/nothing", root);
        cr_assert_eq(event_index_build(inst, &idx), -ENOENT);
}

/* ---- the data source, on a fake host ------------------------------------- */

struct fake_host {
        uint8_t *packets[64];
        size_t sizes[64];
        size_t n_packets;
        traced_timer_cb timer;
        void *timer_data;
        bool timer_live;
        unsigned stopped;
        char reports[4][1024];
        size_t n_reports;
};

static struct fake_host fh;
static char source_marker; /* the one timer's handle */

static void h_log(struct traced_host *h, int level, const char *msg) {
        (void) h;
        (void) level;
        cr_log_info("plugin: %s", msg);
}

static int32_t h_add_timer(struct traced_host *h, uint32_t ms, traced_timer_cb cb, void *ud, struct traced_source **ret) {
        (void) h;
        (void) ms;
        cr_assert(!fh.timer_live, "a second timer");
        fh.timer = cb;
        fh.timer_data = ud;
        fh.timer_live = true;
        *ret = (struct traced_source *) &source_marker;
        return 0;
}

static void h_remove(struct traced_host *h, struct traced_source *s) {
        (void) h;
        cr_assert_eq((void *) s, (void *) &source_marker);
        fh.timer_live = false;
}

static int32_t h_new_writer(struct traced_host *h, uint64_t id, struct traced_writer **ret) {
        (void) h;
        (void) id;
        *ret = (struct traced_writer *) &fh;
        return 0;
}

static int32_t h_write(struct traced_writer *w, const void *p, size_t n) {
        (void) w;
        cr_assert_lt(fh.n_packets, 64);
        fh.packets[fh.n_packets] = malloc(n);
        memcpy(fh.packets[fh.n_packets], p, n);
        fh.sizes[fh.n_packets++] = n;
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
        fh.stopped++;
        return 0;
}

static int32_t h_report(struct traced_host *h, uint64_t id, const char *field, const char *msg) {
        (void) h;
        (void) id;
        cr_assert_lt(fh.n_reports, 4);
        snprintf(fh.reports[fh.n_reports++], sizeof(fh.reports[0]), "%s: %s", field ? field : "-", msg);
        return 0;
}

static const struct traced_host_api api = {
        .struct_size = sizeof(struct traced_host_api),
        .abi_minor = 1,
        .log = h_log,
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

static void fake_tracefs(void) {
        make_root();
        memset(&fh, 0, sizeof(fh));
        test_packets_sink = h_write;
        pl = (struct plugin) { .api = &api };
        snprintf(pl.tracefs, sizeof(pl.tracefs), "%s", root);
        put_event("instances/fz", "sched", "sched_switch", "format-sched_switch");
        put_event("instances/fz", "ftrace", "print", "format-print");
        put_str("instances/fz/tracing_on", "0\n");
        put_str("instances/fz/buffer_size_kb", "1408\n");
        size_t n;
        char *pages = slurp("cpu0.pages", &n);
        put("instances/fz/per_cpu/cpu0/trace_pipe_raw", pages, n);
        free(pages);
}

static void fake_done(void) {
        for (size_t i = 0; i < fh.n_packets; i++)
                free(fh.packets[i]);
        remove_root();
}

/* A DataSourceConfig { frozen_ftrace_config { instance_name } }. */
static size_t config(const char *name, uint8_t *buf) {
        size_t l = strlen(name), n = 0;
        buf[n++] = 0xc2; /* field 136, wire type 2 (1090) as a varint */
        buf[n++] = 0x08;
        buf[n++] = (uint8_t) (2 + l);
        buf[n++] = 1 << 3 | 2;
        buf[n++] = (uint8_t) l;
        memcpy(buf + n, name, l);
        return n + l;
}

struct counts {
        unsigned switches, prints, other, bundles, with_clock, stats;
        bool start_preserve;
        char markers[3][64];
};

static void count_packets(struct counts *c) {
        for (size_t i = 0; i < fh.n_packets; i++) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, fh.sizes[i], fh.packets[i]);
                cr_assert_not_null(p, "packet %zu does not decode", i);
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS) {
                        if (c->stats++ == 0)
                                c->start_preserve = p->ftrace_stats->phase ==
                                                            PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE &&
                                                    p->ftrace_stats->preserve_ftrace_buffer;
                }
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
                        c->bundles++;
                        c->with_clock += p->ftrace_events->has_ftrace_clock;
                        cr_assert_eq(p->ftrace_events->cpu, 0, "bundle of cpu %u", p->ftrace_events->cpu);
                        for (size_t k = 0; k < p->ftrace_events->n_event; k++) {
                                const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[k];
                                if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH)
                                        c->switches++;
                                else if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT) {
                                        if (c->prints < 3)
                                                snprintf(c->markers[c->prints], 64, "%s", e->print->buf);
                                        c->prints++;
                                } else
                                        c->other++;
                        }
                }
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
}

Test(frozen_ds, reads_the_buffer_with_the_instance_formats, .init = fake_tracefs, .fini = fake_done) {
        uint8_t cfg[128];
        cr_assert_eq(frozen_start(&pl, 7, cfg, config("fz", cfg)), 0);
        cr_assert(fh.timer_live);
        for (int i = 0; i < 100 && fh.timer_live; i++)
                fh.timer(fh.timer_data);
        cr_assert(!fh.timer_live, "the reading never finished");
        cr_assert(frozen_stop(&pl, 7));
        cr_assert_eq(fh.stopped, 1);
        cr_assert(!frozen_stop(&pl, 7), "stopped twice");
        struct counts c = {};
        count_packets(&c);
        cr_assert_eq(c.stats, 2);
        cr_assert(c.start_preserve, "START_OF_TRACE without preserve_ftrace_buffer");
        cr_assert_eq(c.with_clock, 0, "a bundle names a clock");
        cr_assert_gt(c.switches, 0);
        /* sched_waking is in the pages but not in the instance's events/:
         * skipped, not guessed. */
        cr_assert_eq(c.other, 0);
        cr_assert_eq(c.prints, 3);
        for (int i = 0; i < 3; i++) {
                char want[32];
                snprintf(want, sizeof(want), "fixture-marker-%d\n", i + 1);
                cr_assert_str_eq(c.markers[i], want);
        }
        /* Nothing was written into the instance. */
        char path[512], text[64];
        snprintf(path, sizeof(path), "%s/instances/fz/tracing_on", root);
        FILE *f = fopen(path, "re");
        cr_assert(f && fgets(text, sizeof(text), f));
        fclose(f);
        cr_assert_str_eq(text, "0\n");
        cr_assert_eq(fh.n_reports, 0, "reported: %s", fh.reports[0]);
}

Test(frozen_ds, one_buffer_of_pages_at_most, .init = fake_tracefs, .fini = fake_done) {
        uint8_t cfg[128];
        struct counts all = {}, one = {};
        /* Stopped before the timer ran: the whole buffer is read then. */
        cr_assert_eq(frozen_start(&pl, 8, cfg, config("fz", cfg)), 0);
        cr_assert(frozen_stop(&pl, 8));
        count_packets(&all);
        for (size_t i = 0; i < fh.n_packets; i++)
                free(fh.packets[i]);
        fh.n_packets = 0;
        /* 1 KiB per CPU: one page (of the two) is all a reader takes. */
        put_str("instances/fz/buffer_size_kb", "1\n");
        cr_assert_eq(frozen_start(&pl, 9, cfg, config("fz", cfg)), 0);
        cr_assert(frozen_stop(&pl, 9));
        count_packets(&one);
        cr_assert_gt(one.switches + one.prints, 0);
        cr_assert_lt(one.switches + one.prints, all.switches + all.prints, "one page: %u events, two: %u",
                     one.switches + one.prints, all.switches + all.prints);
}

Test(frozen_ds, what_is_refused_is_reported_by_field, .init = fake_tracefs, .fini = fake_done) {
        uint8_t cfg[128];
        cr_assert_eq(frozen_start(&pl, 1, cfg, config("nosuch", cfg)), -ENOENT);
        cr_assert(strstr(fh.reports[0], "frozen_ftrace_config.instance_name: no ftrace instance \"nosuch\"") &&
                          strstr(fh.reports[0], "trace_instance=nosuch^traceoff@trace"),
                  "%s", fh.reports[0]);
        cr_assert_eq(frozen_start(&pl, 2, cfg, config("..", cfg)), -EINVAL);
        cr_assert(strstr(fh.reports[1], "\"..\" is not a tracefs instance name"), "%s", fh.reports[1]);
        cr_assert_eq(frozen_start(&pl, 3, cfg, 0), -EINVAL);
        cr_assert(strstr(fh.reports[2], "frozen_ftrace_config.instance_name: not set"), "%s", fh.reports[2]);
        put_str("instances/fz/tracing_on", "1\n");
        cr_assert_eq(frozen_start(&pl, 4, cfg, config("fz", cfg)), -EBUSY);
        cr_assert(strstr(fh.reports[3], "still recording (tracing_on is 1)"), "%s", fh.reports[3]);
        cr_assert_eq(fh.n_packets, 0);
        cr_assert(!fh.timer_live);
        cr_assert(!frozen_stop(&pl, 4));
}
