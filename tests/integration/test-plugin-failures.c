/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A plugin that fails is heard by the person recording: tracectl record
 * against the real traced with test plugins that crash in start, hang in
 * start past the watchdog, are refused at load, or write a packet larger
 * than their writer carries. Checked are tracectl's exit status and
 * words, the trace it leaves (decoded) and traced's log. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin-fixture.h"
#include "test-scratch.h"
#include "traced-instance.h"
#include "tracectl-child.h"

#define HOST TOP_BUILDDIR "/tests/bin/traced-plugin-host"

static struct traced_instance inst;
static sd_event *ev;
static char scratch[256];

static void setup(void) {
        int r = test_mkdtemp(scratch, sizeof(scratch), "traced-plugin-failures-");
        cr_assert_eq(r, 0, "no scratch directory: %s", strerror(-r));
}

static void teardown(void) {
        if (ev)
                cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
        int r = test_scratch_remove(scratch);
        cr_expect_eq(r, 0, "could not remove %s: %s", scratch, strerror(-r));
}

TestSuite(plugin_failures, .init = setup, .fini = teardown, .timeout = 90);

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "%s: %s", path, strerror(errno));
        cr_assert_geq(fputs(text, f), 0);
        cr_assert_eq(fclose(f), 0);
}

/* traced with the test plugins named (linked from the build into a
 * directory of their own) and traced.conf's text (NULL: none). */
static void start(const char *const *plugins, const char *conf) {
        char dir[300], dir_arg[320], conf_path[300], conf_arg[320];
        snprintf(dir, sizeof(dir), "%s/plugins", scratch);
        cr_assert_eq(mkdir(dir, 0700), 0);
        for (size_t i = 0; plugins[i]; i++) {
                char src[512], dst[512];
                snprintf(src, sizeof(src), TOP_BUILDDIR "/tests/plugins/.libs/%s.so", plugins[i]);
                snprintf(dst, sizeof(dst), "%s/%s.so", dir, plugins[i]);
                cr_assert_eq(symlink(src, dst), 0);
        }
        snprintf(dir_arg, sizeof(dir_arg), "--plugin-dir=%s", dir);
        snprintf(conf_path, sizeof(conf_path), "%s/traced.conf", scratch);
        snprintf(conf_arg, sizeof(conf_arg), "--config=%s", conf_path);
        if (conf)
                write_file(conf_path, conf);
        const char *const args[] = { dir_arg, "--plugin-host=" HOST, conf ? conf_arg : NULL, NULL };
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(traced_instance_start_args(&inst, true, args), 0);
}

struct run {
        int status;
        char *err, *out;
};

static void run_done(struct run *r) {
        free(r->err);
        free(r->out);
}

static struct run tracectl(const char *const *args) {
        struct tracectl_child c;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, args, 0);
        struct run r = { .status = tracectl_child_wait(&c, ev, 60000) };
        r.err = test_slurp(c.err_path, NULL);
        r.out = test_slurp(c.out, NULL);
        cr_assert(r.err && r.out);
        return r;
}

/* tracectl record of test.plugin for duration_ms into scratch/NAME.pftrace
 * (path into ret_path), with extra (may be NULL) as its last argument. */
static struct run record(const char *name, unsigned duration_ms, const char *extra, char *ret_path, size_t size) {
        char cfg[300], text[300];
        snprintf(cfg, sizeof(cfg), "%s/%s.pbtxt", scratch, name);
        snprintf(text, sizeof(text),
                 "buffers { size_kb: 8192 }\n"
                 "data_sources { config { name: \"test.plugin\" } }\n"
                 "duration_ms: %u\n",
                 duration_ms);
        write_file(cfg, text);
        snprintf(ret_path, size, "%s/%s.pftrace", scratch, name);
        return tracectl((const char *const[]) { "record", "-c", cfg, "--txt", "-o", ret_path, extra, NULL });
}

/* What the test reads from a trace. */
struct decoded {
        unsigned hello, hello_after_loss;
        char result[100];
        unsigned lost, other_errors;
        char first_lost[600];
        uint64_t bytes_written;
};

static void on_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct decoded *d = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING && p->for_testing->str) {
                if (strcmp(p->for_testing->str, "hello from a plugin") == 0) {
                        d->hello++;
                        d->hello_after_loss += p->has_previous_packet_dropped && p->previous_packet_dropped;
                } else if (strncmp(p->for_testing->str, "oversize:", 9) == 0)
                        snprintf(d->result, sizeof(d->result), "%s", p->for_testing->str);
        }
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
                return;
        /* The last TraceStats counts. */
        const Perfetto__Protos__TraceStats *st = p->trace_stats;
        d->lost = d->other_errors = 0;
        for (size_t i = 0; i < st->n_traced_data_source_errors; i++) {
                const Perfetto__Protos__TraceStats__TracedDataSourceError *e = st->traced_data_source_errors[i];
                if (!e->has_kind ||
                    e->kind != PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_INSTANCE_LOST) {
                        d->other_errors++;
                        continue;
                }
                if (d->lost++ == 0)
                        snprintf(d->first_lost, sizeof(d->first_lost), "%s|%s|%s", e->producer_name,
                                 e->data_source_name, e->message);
        }
        d->bytes_written = st->n_buffer_stats ? st->buffer_stats[0]->bytes_written : 0;
}

static void decode(const char *path, struct decoded *ret, struct fixture_lifecycle *life) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "no trace at %s: %s", path, strerror(errno));
        *ret = (struct decoded) {};
        fixture_for_each_packet(fd, on_packet, ret);
        fixture_lifecycle(fd, life);
        close(fd);
}

static char *traced_log(void) {
        char *log = test_slurp(inst.log_path, NULL);
        cr_assert_not_null(log);
        return log;
}

/* A plain build dies of the signal; under ASan the host reports the
 * SIGSEGV itself and exits with an error status. */
static bool says_segv(const char *text) {
        return strstr(text, "was killed by SIGSEGV") || strstr(text, "exited with status");
}

Test(plugin_failures, a_plugin_crashing_in_start_fails_the_recording_and_keeps_the_trace) {
        start((const char *const[]) { "good", "crash_on_start", NULL }, NULL);
        char path[400];
        struct run r = record("crash", 2500, NULL, path, sizeof(path));
        cr_assert_eq(r.status, 5, "tracectl exited %d:\n%s", r.status, r.err);
        const char *line = strstr(r.err, "tracectl: test.plugin of traced.test: lost before it started: its plugin "
                                         "host (crash_on_start.so, pid ");
        cr_assert(line && says_segv(line), "the loss is not named:\n%s", r.err);
        cr_assert(strstr(r.err, "the recording is incomplete") && strstr(r.err, "--allow-missing"),
                  "no word on the failure:\n%s", r.err);
        run_done(&r);

        /* The file is in place: the good plugin's packet, the loss in its
         * stats, and no claim that every data source started. */
        struct decoded d;
        struct fixture_lifecycle life;
        decode(path, &d, &life);
        cr_assert_eq(d.hello, 1, "the good plugin's packet: %u", d.hello);
        cr_assert_geq(d.lost, 1, "TraceStats holds no lost instance");
        cr_assert(strstr(d.first_lost, "traced.test|test.plugin|lost before it started: its plugin host "
                                       "(crash_on_start.so, pid ") && says_segv(d.first_lost),
                  "%s", d.first_lost);
        cr_assert_eq(d.other_errors, 0);
        cr_assert_gt(life.tracing_started, 0);
        cr_assert_eq(life.all_started, 0, "the trace says all data sources started");

        r = tracectl((const char *const[]) { "summary", path, NULL });
        cr_assert_eq(r.status, 0, "summary: %s", r.err);
        cr_assert(strstr(r.out, "Not recorded:   test.plugin of traced.test: lost before it started"),
                  "summary:\n%s", r.out);
        run_done(&r);

        char *log = traced_log();
        const char *l = strstr(log, "data source \"test.plugin\" of producer \"traced.test\" lost before it started: "
                                    "its plugin host (crash_on_start.so, pid ");
        cr_assert(l && says_segv(l), "traced's log does not name the loss:\n%s", log);
        free(log);

        /* --allow-missing takes such a trace. */
        r = record("crash-allowed", 1000, "--allow-missing", path, sizeof(path));
        cr_assert_eq(r.status, 0, "tracectl --allow-missing exited %d:\n%s", r.status, r.err);
        cr_assert_eq(access(path, R_OK), 0);
        run_done(&r);
}

Test(plugin_failures, a_plugin_hanging_past_the_watchdog_is_named_with_its_time) {
        start((const char *const[]) { "good", "hang_on_start", NULL }, "[plugins]\nwatchdog_sec = 1\n");
        char path[400];
        struct run r = record("hang", 2500, NULL, path, sizeof(path));
        cr_assert_eq(r.status, 5, "tracectl exited %d:\n%s", r.status, r.err);
        cr_assert(strstr(r.err, "tracectl: test.plugin of traced.test: lost before it started: its plugin host "
                                "(hang_on_start.so, pid ") &&
                          strstr(r.err, ") was killed by traced's watchdog after 1.0 s without a sign of life"),
                  "the hang is not named:\n%s", r.err);
        run_done(&r);
        struct decoded d;
        struct fixture_lifecycle life;
        decode(path, &d, &life);
        cr_assert_eq(d.hello, 1);
        cr_assert(strstr(d.first_lost, "watchdog after 1.0 s"), "%s", d.first_lost);
        cr_assert_eq(life.all_started, 0, "the trace says all data sources started");
}

Test(plugin_failures, a_plugin_refused_at_load_is_named_to_the_consumer) {
        start((const char *const[]) { "null_descriptor", NULL }, NULL);
        char path[400];
        /* No producer offers test.plugin: tracectl waits its 10 s for one. */
        struct run r = record("refused", 500, NULL, path, sizeof(path));
        cr_assert_eq(r.status, 5, "tracectl exited %d:\n%s", r.status, r.err);
        cr_assert(strstr(r.err, "no producer offers data source \"test.plugin\"") &&
                          strstr(r.err, "tracectl: plugin null_descriptor, which may offer it, failed to load: the "
                                        "entry point returned no descriptor"),
                  "the refused plugin is not named:\n%s", r.err);
        cr_assert_neq(access(path, F_OK), 0, "a failed recording left a file");
        run_done(&r);
        char *log = traced_log();
        cr_assert_null(strstr(log, "declared no capabilities"), "a misleading log line:\n%s", log);
        cr_assert_null(strstr(log, "Exec format error"), "a misleading log line:\n%s", log);
        cr_assert_not_null(strstr(log, "Refusing plugin"), "%s", log);
        free(log);
}

Test(plugin_failures, a_packet_larger_than_the_writer_carries_is_refused_and_costs_nothing) {
        start((const char *const[]) { "oversize", NULL }, NULL);
        char path[400];
        struct run r = record("oversize", 1000, NULL, path, sizeof(path));
        cr_assert_eq(r.status, 0, "tracectl exited %d:\n%s", r.status, r.err);
        run_done(&r);
        struct decoded d;
        struct fixture_lifecycle life;
        decode(path, &d, &life);
        /* write_packet said -EMSGSIZE at once, the next packet went in
         * (saying one before it was lost), and the 10 MiB took no room. */
        char want[100];
        snprintf(want, sizeof(want), "oversize: %d then: 0", -EMSGSIZE);
        cr_assert_str_eq(d.result, want, "the plugin's writes returned \"%s\"", d.result);
        cr_assert_eq(d.hello, 1);
        cr_assert_eq(d.hello_after_loss, 1, "the packet after the refused one does not mark the loss");
        cr_assert_lt(d.bytes_written, 1024 * 1024, "the refused packet took %llu bytes of the buffer",
                     (unsigned long long) d.bytes_written);
        cr_assert_neq(life.all_started, 0);
}

/* What the flood plugins wrote, per data source (0: the stalling one). */
struct flood {
        unsigned packets[2], in_order[2], marked_loss[2], next[2];
        /* The packet each writes after its flood, once its loop ran. */
        bool tail[2], tail_marks_loss[2];
};

static void on_flood_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct flood *f = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING || !p->for_testing->str)
                return;
        char name[8], tail[8];
        unsigned n;
        bool dropped = p->has_previous_packet_dropped && p->previous_packet_dropped;
        if (sscanf(p->for_testing->str, "flood %7[a-z] %7[a-z]", name, tail) == 2 && strcmp(tail, "tail") == 0) {
                int k = strcmp(name, "stall") == 0 ? 0 : 1;
                f->tail[k] = true;
                f->tail_marks_loss[k] = dropped;
                return;
        }
        if (sscanf(p->for_testing->str, "flood %7[a-z] %u ", name, &n) != 2)
                return;
        int k = strcmp(name, "stall") == 0 ? 0 : 1;
        f->packets[k]++;
        f->in_order[k] += n == f->next[k];
        f->next[k] = n + 1;
        f->marked_loss[k] += dropped;
}

/* What a flood plugin logged at its stop: what its writes returned. */
struct flood_sum {
        unsigned written, failed;
        int error;
};

static struct flood_sum flood_sum(const char *name) {
        char want[64];
        snprintf(want, sizeof(want), "flood %s: written ", name);
        struct flood_sum sum = { .error = 1 };
        /* The hosts log as they stop, after tracectl is done. */
        for (unsigned tries = 0; tries < 200; tries++) {
                char *log = traced_log();
                const char *l = strstr(log, want);
                if (l) {
                        cr_assert_eq(sscanf(l + strlen(want), "%u failed %u error %d", &sum.written, &sum.failed,
                                            &sum.error),
                                     3, "%s", l);
                        free(log);
                        return sum;
                }
                free(log);
                usleep(50 * 1000);
        }
        char *log = traced_log();
        cr_assert_fail("the %s plugin did not log its sum:\n%s", name, log);
        free(log);
        return sum;
}

static struct flood record_flood(const char *name, const char *text) {
        char cfg[300], path[400];
        snprintf(cfg, sizeof(cfg), "%s/%s.pbtxt", scratch, name);
        write_file(cfg, text);
        snprintf(path, sizeof(path), "%s/%s.pftrace", scratch, name);
        struct run r = tracectl((const char *const[]) { "record", "-c", cfg, "--txt", "-o", path, NULL });
        cr_assert_eq(r.status, 0, "tracectl exited %d:\n%s", r.status, r.err);
        run_done(&r);
        struct flood f = {};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "no trace at %s: %s", path, strerror(errno));
        fixture_for_each_packet(fd, on_flood_packet, &f);
        close(fd);
        return f;
}

/* Two plugins flood a 64 KiB shared memory buffer from their start
 * callbacks (3000 packets of 1000 bytes, on the host's loop thread, which
 * sends nothing meanwhile unless a writer waits): the one whose data
 * source registered with TRACED_PLUGIN_DS_STALL_WHEN_FULL loses nothing,
 * the one that drops (a plugin of ABI 1.2, for which the flag does not
 * exist and is refused) loses packets, and says how many, as the trace
 * does. */
Test(plugin_failures, a_data_source_registered_to_stall_loses_nothing_where_one_that_drops_loses_packets) {
        start((const char *const[]) { "flood_stall", "flood_drop", NULL }, NULL);
        struct flood f =
                record_flood("flood", "buffers { size_kb: 16384 }\n"
                                      "producers { producer_name: \"traced.flood-stall\" shm_size_kb: 64 page_size_kb: 4 }\n"
                                      "producers { producer_name: \"traced.flood-drop\" shm_size_kb: 64 page_size_kb: 4 }\n"
                                      "data_sources { config { name: \"test.flood_stall\" legacy_config: \"packets=3000\" } }\n"
                                      "data_sources { config { name: \"test.flood_drop\" legacy_config: \"packets=3000\" } }\n"
                                      "duration_ms: 1500\n");

        /* Stalling: every write 0, every packet in the trace, in order. */
        struct flood_sum stall = flood_sum("stall");
        cr_assert_eq(stall.written, 3000, "the stalling plugin wrote %u, %u failed (%d)", stall.written, stall.failed,
                     stall.error);
        cr_assert_eq(stall.failed, 0);
        cr_assert_eq(f.packets[0], 3000, "the stalling data source's packets in the trace: %u", f.packets[0]);
        cr_assert_eq(f.in_order[0], 3000);
        cr_assert_eq(f.marked_loss[0], 0, "the stalling data source's sequence says it lost packets");
        cr_assert(f.tail[0] && !f.tail_marks_loss[0], "the stalling data source's last packet: %d, marks a loss %d",
                  f.tail[0], f.tail_marks_loss[0]);

        /* Dropping: what the writes said is what the trace holds, and the
         * loss is marked in it. */
        struct flood_sum drop = flood_sum("drop");
        cr_assert_eq(drop.written + drop.failed, 3000);
        cr_assert_gt(drop.failed, 0, "the dropping data source lost nothing: the test buffer is too large");
        cr_assert_eq(drop.error, -ENOBUFS);
        cr_assert_eq(f.packets[1], drop.written, "%u packets in the trace, %u written", f.packets[1], drop.written);
        cr_assert(f.tail[1], "the dropping data source's packet after the flood is missing");
        cr_assert(f.tail_marks_loss[1] || f.marked_loss[1] > 0,
                  "the dropping data source's losses are not marked in its sequence");
}

/* A stalling plugin writes without pause on its loop thread (from a timer,
 * once its instance runs) into a 64 KiB buffer when the session ends (the
 * flush before the end times out after 200 ms: the host's loop is busy):
 * its next write waiting for room sees the service's stop waiting behind
 * it and fails with -ESHUTDOWN rather than go on reporting packets
 * written that no trace will hold; the trace holds what it wrote before. */
Test(plugin_failures, a_stalled_plugin_writer_is_told_when_its_session_ended) {
        start((const char *const[]) { "flood_stall", NULL }, NULL);
        /* The trace buffer holds all it can write (150-190 MB here in
         * 0.7 s) even when the file's writer falls behind on a loaded
         * machine and the ring would wrap: a gap the buffer made is not
         * what this test looks for. */
        struct flood f = record_flood("late", "buffers { size_kb: 524288 }\n"
                                              "producers { producer_name: \"traced.flood-stall\" shm_size_kb: 64 "
                                              "page_size_kb: 4 }\n"
                                              "data_sources { config { name: \"test.flood_stall\" legacy_config: "
                                              "\"until-refused\" } }\n"
                                              "duration_ms: 500\n"
                                              "flush_timeout_ms: 200\n");
        struct flood_sum sum = flood_sum("stall");
        cr_assert_eq(sum.failed, 1, "the writer was not refused: wrote %u, %u failed (%d)", sum.written, sum.failed,
                     sum.error);
        cr_assert_eq(sum.error, -ESHUTDOWN);
        cr_assert_gt(f.packets[0], 0);
        cr_assert_eq(f.in_order[0], f.packets[0]);
        cr_assert_leq(f.packets[0], sum.written);
        /* What it wrote and the trace lacks: at most the chunks not yet
         * sent when the session ended (half the buffer waits at most). */
        cr_assert_leq(sum.written - f.packets[0], 64, "written %u, in the trace %u", sum.written, f.packets[0]);
        cr_log_info("written %u, in the trace %u", sum.written, f.packets[0]);
}
