/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.frozen_ftrace through the real traced, its ftrace plugin and the
 * real kernel: a tracefs instance of the test's own records sched_switch
 * and trace_marker writes, is stopped (tracing_on 0, as a persistent
 * instance is after boot), and a recording of linux.frozen_ftrace takes
 * those events out of its buffer without changing its settings. A missing
 * instance, or one still recording, is an error tracectl reports. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"

#include "perfetto/trace/ftrace/ftrace_stats.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define TRACEFS "/sys/kernel/tracing"

static struct traced_instance inst;
static sd_event *ev;
static char instance_dir[256]; /* the instance a test made: removed in teardown */

static void setup(void) {
        if (fixture_tracefs_usable())
                cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
        if (instance_dir[0] && rmdir(instance_dir) < 0 && errno != ENOENT)
                cr_expect(false, "cannot remove %s: %m", instance_dir);
        instance_dir[0] = '\0';
}

TestSuite(ftrace_frozen, .init = setup, .fini = teardown, .timeout = 120);

#define SKIP_WITHOUT_TRACEFS()                                                          \
        do {                                                                            \
                if (!ev) {                                                              \
                        cr_skip_test("tracefs is not available on this kernel/machine"); \
                        return;                                                         \
                }                                                                       \
        } while (0)

static void write_file(const char *dir, const char *rel, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        int r = fixture_write_marker(path, text);
        cr_assert_eq(r, 0, "write \"%s\" to %s: %s", text, path, strerror(-r));
}

static void read_file(const char *dir, const char *rel, char *buf, size_t size) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "cannot open %s: %m", path);
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = '\0';
        fclose(f);
}

/* A new instance of the test's own, named name_<pid>. */
static void make_instance(const char *name, char *ret_name, size_t size) {
        snprintf(ret_name, size, "%s_%d", name, (int) getpid());
        snprintf(instance_dir, sizeof(instance_dir), TRACEFS "/instances/%s", ret_name);
        cr_assert_eq(mkdir(instance_dir, 0700), 0, "cannot create %s: %m", instance_dir);
}

/* The settings a reader must leave alone. */
static const char *const settings[] = {
        "tracing_on", "buffer_size_kb", "trace_clock", "current_tracer", "set_event", "events/sched/sched_switch/enable",
        "options/overwrite",
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static void read_settings(char values[N_SETTINGS][4096]) {
        for (size_t i = 0; i < N_SETTINGS; i++)
                read_file(instance_dir, settings[i], values[i], 4096);
}

#define FILLER "frozen-filler-0123456789abcdef0123456789abcdef"
#define N_FILLERS 100 /* before each marker: more than a page */

struct seen {
        char markers[3][64];
        bool found[3];
        unsigned switches, bundles, with_clock, fillers;
        unsigned n_stats, parse_errors;
        bool first_stats_preserve;
};

static void collect(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct seen *k = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
                k->bundles++;
                if (p->ftrace_events->has_ftrace_clock)
                        k->with_clock++;
                for (size_t i = 0; i < p->ftrace_events->n_event; i++) {
                        const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[i];
                        if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH)
                                k->switches++;
                        if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT || !e->print->buf)
                                continue;
                        k->fillers += strstr(e->print->buf, FILLER) != NULL;
                        for (size_t w = 0; w < 3; w++)
                                if (strstr(e->print->buf, k->markers[w]))
                                        k->found[w] = true;
                }
        }
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS) {
                k->parse_errors += (unsigned) p->ftrace_stats->n_ftrace_parse_errors;
                if (k->n_stats++ == 0)
                        k->first_stats_preserve =
                                p->ftrace_stats->has_preserve_ftrace_buffer && p->ftrace_stats->preserve_ftrace_buffer;
        }
}

static void wait_read(void *data) {
        const unsigned *before = data;
        /* The plugin says when it got through the buffer. */
        (void) fixture_wait_log(&inst, ev, "linux.frozen_ftrace instance ", ": read ", *before, 10000);
}

/* Makes an instance (sub-buffers of subbuf_kb KiB when not 0), records
 * sched_switch and three markers in it, stops it, and checks what a
 * linux.frozen_ftrace recording of it holds and that its settings stayed. */
static void record_stopped_instance(const char *prefix, unsigned subbuf_kb) {
        char name[64], text[32];
        make_instance(prefix, name, sizeof(name));
        write_file(instance_dir, "buffer_size_kb", "512");
        if (subbuf_kb) {
                snprintf(text, sizeof(text), "%u", subbuf_kb);
                write_file(instance_dir, "buffer_subbuf_size_kb", text);
        }
        write_file(instance_dir, "events/sched/sched_switch/enable", "1");
        write_file(instance_dir, "tracing_on", "1");
        struct seen k = {};
        for (int i = 0; i < 3; i++) {
                /* More than a page of them before each marker: a sub-buffer
                 * larger than a page is then more than one page's read. */
                for (int j = 0; j < N_FILLERS; j++)
                        write_file(instance_dir, "trace_marker", FILLER);
                snprintf(k.markers[i], sizeof(k.markers[i]), "frozen-marker-%d-%d", (int) getpid(), i);
                write_file(instance_dir, "trace_marker", k.markers[i]);
                usleep(20 * 1000); /* sleeping: switches */
        }
        write_file(instance_dir, "tracing_on", "0");
        static char before[N_SETTINGS][4096], after[N_SETTINGS][4096];
        read_settings(before);

        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 8192 }\n"
                 "data_sources { config { name: \"linux.frozen_ftrace\" frozen_ftrace_config { instance_name: \"%s\" } "
                 "} }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 name);
        unsigned read_before = fixture_log_count(&inst, "linux.frozen_ftrace instance ", ": read ");
        fixture_record(&inst, ev, "linux.frozen_ftrace", cfg, wait_read, &read_before, collect, &k);

        for (int i = 0; i < 3; i++)
                cr_assert(k.found[i], "marker %s written into the instance is not in the trace", k.markers[i]);
        cr_assert_eq(k.fillers, 3 * N_FILLERS, "%u of the %u writes to trace_marker are in the trace", k.fillers,
                     3 * N_FILLERS);
        cr_assert_gt(k.switches, 0, "no sched_switch from the instance's buffer in the trace");
        cr_assert_eq(k.with_clock, 0, "%u of %u bundles name a clock: the buffer's clock is not known", k.with_clock,
                     k.bundles);
        cr_assert_eq(k.n_stats, 2, "%u ftrace_stats packets", k.n_stats);
        cr_assert(k.first_stats_preserve, "START_OF_TRACE does not say the events predate the trace");
        cr_assert_eq(k.parse_errors, 0, "the instance's pages did not parse");
        read_settings(after);
        for (size_t i = 0; i < N_SETTINGS; i++)
                cr_assert_str_eq(after[i], before[i], "%s changed", settings[i]);
        cr_assert_eq(fixture_log_count(&inst, "linux.frozen_ftrace instance ", " failed to start"), 0);
}

Test(ftrace_frozen, reads_a_stopped_instance_and_leaves_its_settings) {
        SKIP_WITHOUT_TRACEFS();
        record_stopped_instance("tfz", 0);
}

Test(ftrace_frozen, sub_buffers_larger_than_a_page_lose_nothing) {
        SKIP_WITHOUT_TRACEFS();
        if (access(TRACEFS "/buffer_subbuf_size_kb", F_OK) < 0)
                cr_skip_test("this kernel has no buffer_subbuf_size_kb (Linux 6.8 and later)");
        int r = fixture_subbuf_resizable();
        if (r < 0) {
                teardown(); /* a skip does not run the suite's .fini */
                cr_skip_test("this kernel does not let sub-buffers be sized: writing buffer_subbuf_size_kb fails (%s)",
                             strerror(-r));
                return;
        }
        record_stopped_instance("tfz_sb", 2 * (unsigned) sysconf(_SC_PAGESIZE) / 1024);
}

/* tracectl record with a linux.frozen_ftrace config naming instance;
 * its exit status, its standard error in err. */
static int record_frozen(const char *instance, char *err, size_t size) {
        char cfg[512], out[512], errpath[512], cmd[2048];
        snprintf(cfg, sizeof(cfg), "%s/frozen.pbtxt", inst.dir);
        snprintf(out, sizeof(out), "%s/frozen.pftrace", inst.dir);
        snprintf(errpath, sizeof(errpath), "%s/frozen.stderr", inst.dir);
        FILE *f = fopen(cfg, "we");
        cr_assert_not_null(f);
        fprintf(f,
                "buffers { size_kb: 1024 }\n"
                "data_sources { config { name: \"linux.frozen_ftrace\" frozen_ftrace_config { instance_name: \"%s\" } } "
                "}\n"
                "duration_ms: 30000\n",
                instance);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "%s --socket=%s record -c %s --txt -o %s 2>%s", TRACECTL_BINARY, inst.consumer_path,
                 cfg, out, errpath);
        int st = system(cmd);
        read_file(inst.dir, "frozen.stderr", err, size);
        cr_assert_eq(access(out, F_OK), -1, "a failed recording left %s", out);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(ftrace_frozen, a_missing_instance_fails_the_recording_with_how_to_make_one) {
        SKIP_WITHOUT_TRACEFS();
        char name[64], err[8192];
        snprintf(name, sizeof(name), "tfz_missing_%d", (int) getpid());
        int st = record_frozen(name, err, sizeof(err));
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, err);
        cr_assert(strstr(err, "linux.frozen_ftrace: frozen_ftrace_config.instance_name: no ftrace instance") &&
                          strstr(err, name) && strstr(err, "trace_instance="),
                  "stderr: %s", err);
}

Test(ftrace_frozen, an_instance_still_recording_is_refused_and_left_alone) {
        SKIP_WITHOUT_TRACEFS();
        char name[64], err[8192], text[64];
        make_instance("tfz_on", name, sizeof(name));
        write_file(instance_dir, "tracing_on", "1");
        write_file(instance_dir, "trace_marker", "still-here");
        int st = record_frozen(name, err, sizeof(err));
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, err);
        cr_assert(strstr(err, "is still recording (tracing_on is 1)") && strstr(err, "echo 0 >"), "stderr: %s", err);
        read_file(instance_dir, "tracing_on", text, sizeof(text));
        cr_assert_str_eq(text, "1\n");
        static char trace[65536];
        read_file(instance_dir, "trace", trace, sizeof(trace));
        cr_assert(strstr(trace, "still-here"), "the instance's buffer was read: %s", trace);
}

Test(ftrace_frozen, tracectl_query_lists_it_beside_linux_ftrace) {
        SKIP_WITHOUT_TRACEFS();
        struct test_consumer c;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&c, ev, "linux.frozen_ftrace", 1, 10000));
        test_consumer_free(&c);
        char cmd[1024], line[512];
        snprintf(cmd, sizeof(cmd), "%s --socket=%s query", TRACECTL_BINARY, inst.consumer_path);
        FILE *out = popen(cmd, "r");
        cr_assert_not_null(out);
        bool frozen = false, ftrace = false;
        while (fgets(line, sizeof(line), out)) {
                frozen = frozen || strstr(line, "linux.frozen_ftrace");
                ftrace = ftrace || strstr(line, "linux.ftrace");
        }
        cr_assert_eq(pclose(out), 0, "tracectl query failed");
        cr_assert(frozen && ftrace, "tracectl query lists linux.frozen_ftrace %d, linux.ftrace %d", frozen, ftrace);
}
