/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl record against the real traced (socket-activated): a recording
 * lasts what was asked for once its data sources run, stops at once when
 * asked to, passes signals on to its command, and refuses what would
 * record nothing (or ends non-zero naming why) rather than leave an empty
 * trace with exit 0. The producers are raw ones of this process, or this
 * build's plugins. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"
#include "raw-producer.h"
#include "test-consumer.h"
#include "tracectl-child.h"
#include "traced-instance.h"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(record, .init = setup, .fini = teardown, .timeout = 90);

static void spawn(struct tracectl_child *c, const char *const *args, unsigned flags) {
        tracectl_child_spawn(c, inst.dir, inst.consumer_path, args, flags);
}

/* Runs tracectl to its end: its exit status, *ret_err its standard error. */
static int run(const char *const *args, char **ret_err) {
        struct tracectl_child c;
        spawn(&c, args, 0);
        int st = tracectl_child_wait(&c, ev, 60000);
        *ret_err = test_slurp(c.err_path, NULL);
        return st;
}

static bool start_asked(struct raw_producer *p) {
        return p->n_start > 0;
}

static bool registered(struct raw_producer *p) {
        return p->registered;
}

static void connect_producer(struct raw_producer *p, const char *ds, unsigned flags) {
        cr_assert_eq(raw_producer_connect_flags(p, ev, inst.producer_path, "p", ds, 1024 * 1024, 0, flags), 0);
        cr_assert(raw_producer_spin_until(p, registered, 10000), "%s was not registered", ds);
}

static void lifecycle_of(const char *path, struct fixture_lifecycle *l) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        fixture_lifecycle(fd, l);
        close(fd);
}

static void path_in(char *buf, size_t size, const char *name) {
        snprintf(buf, size, "%s/%s", inst.dir, name);
}

/* A data source that takes its time to start (as linux.bpf_stack loading
 * its programs): the recording has it for the whole duration asked for,
 * counted from its start, not from the session's. */
Test(record, the_duration_counts_from_when_every_data_source_started) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512];
        connect_producer(&prod, "test.slow", RAW_PRODUCER_NOTIFY_ON_START);
        prod.packets_at_start = 10;
        prod.payload_size = 20;
        path_in(out, sizeof(out), "slow.pftrace");
        spawn(&c, (const char *const[]) { "record", "-t", "1s", "--no-process-stats", "--ds", "test.slow", "-o", out,
                                          "--no-summary", NULL },
              0);
        cr_assert(raw_producer_spin_until(&prod, start_asked, 20000), "the data source was not started");
        /* Longer than the duration: the session must still run. */
        spin_ms(ev, 1500);
        cr_assert_eq(waitpid(c.pid, NULL, WNOHANG), 0, "the recording ended before its data source had started");
        cr_assert_eq(raw_producer_notify_started(&prod), 0);
        int st = tracectl_child_wait(&c, ev, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        free(se);

        struct fixture_lifecycle l;
        lifecycle_of(out, &l);
        cr_assert(l.tracing_started && l.all_started && l.disabled, "service events missing: %llu %llu %llu",
                  (unsigned long long) l.tracing_started, (unsigned long long) l.all_started,
                  (unsigned long long) l.disabled);
        cr_assert_geq(l.all_started - l.tracing_started, 1500000000ull, "the start was not waited for");
        cr_assert_geq(l.disabled - l.all_started, 1000000000ull,
                      "the session ended %llu ms after its data sources started, not the 1 s asked for",
                      (unsigned long long) ((l.disabled - l.all_started) / 1000000u));
        raw_producer_free(&prod);
}

/* One that never starts does not hold the session: after the service's
 * start timeout it is named (tracectl prints it, the trace says it) and
 * the duration runs. */
Test(record, a_data_source_that_never_starts_is_named) {
        struct raw_producer prod;
        char out[512], *se = NULL;
        connect_producer(&prod, "test.never", RAW_PRODUCER_NOTIFY_ON_START);
        path_in(out, sizeof(out), "never.pftrace");
        int st = run((const char *const[]) { "record", "-t", "500ms", "--no-process-stats", "--allow-missing", "--ds",
                                             "test.never", "-o", out, "--no-summary", NULL },
                     &se);
        cr_assert_eq(st, 0, "tracectl --allow-missing exited %d: %s", st, se);
        cr_assert(strstr(se, "tracectl: test.never: had not started 20 s after the session started") != NULL,
                  "not named: %s", se);
        free(se);
        struct fixture_lifecycle l;
        lifecycle_of(out, &l);
        cr_assert_eq(l.slow_starting, 1, "no slow_starting_data_sources event names it");
        cr_assert_eq(l.all_started, 0);
        struct tracectl_child c;
        spawn(&c, (const char *const[]) { "summary", out, NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 30000), 0);
        char *so = test_slurp(c.out, NULL);
        cr_assert(strstr(so, "Not recorded:   test.never: had not started") != NULL, "%s", so);
        cr_assert(strstr(so, "Started:        not every data source started (see Not recorded)") != NULL, "%s", so);
        free(so);
        raw_producer_free(&prod);
}

/* Ctrl-C while a data source is still starting (and its producer busy,
 * answering nothing): the recording stops at once, without waiting for a
 * flush or a stop that cannot come, and says the data source is missing. */
Test(record, ctrl_c_while_a_data_source_starts_stops_at_once) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512];
        connect_producer(&prod, "test.busy",
                         RAW_PRODUCER_NOTIFY_ON_START | RAW_PRODUCER_NOTIFY_ON_STOP | RAW_PRODUCER_IGNORE_FLUSH |
                                 RAW_PRODUCER_IGNORE_STOP);
        path_in(out, sizeof(out), "busy.pftrace");
        spawn(&c, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds", "test.busy", "-o", out,
                                          "--no-summary", NULL },
              0);
        cr_assert(raw_producer_spin_until(&prod, start_asked, 20000));
        kill(c.pid, SIGINT);
        int st = tracectl_child_wait(&c, ev, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "test.busy: the session stopped before it had started") != NULL, "%s", se);
        free(se);
        cr_assert_eq(fixture_log_count(&inst, "timed out waiting for producer", NULL), 0,
                     "a flush waited for a data source still starting");
        cr_assert_eq(fixture_log_count(&inst, "did not acknowledge the stop", NULL), 0,
                     "the stop waited for a data source still starting");
        cr_assert_eq(access(out, F_OK), -1, "a recording of nothing replaced the file");
        raw_producer_free(&prod);
}

/* Ctrl-C while tracectl waits for a data source to be registered, even
 * when the shell that started it ignores SIGINT and SIGTERM (a background
 * job): tracectl ends, nothing recorded. */
Test(record, ctrl_c_while_waiting_for_a_data_source) {
        struct tracectl_child c;
        char out[512];
        path_in(out, sizeof(out), "waiting.pftrace");
        spawn(&c, (const char *const[]) { "record", "-t", "1s", "--no-process-stats", "--ds", "test.later", "-o", out,
                                          NULL },
              TRACECTL_CHILD_SIGNALS_IGNORED);
        cr_assert(tracectl_child_wait_stderr(&c, ev, "waiting for data source test.later", 20000));
        kill(c.pid, SIGINT);
        int st = tracectl_child_wait(&c, ev, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 1, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "interrupted before the recording started: nothing was recorded") != NULL, "%s", se);
        free(se);
        cr_assert_eq(access(out, F_OK), -1);
}

/* The pid the command wrote into pidfile, once it runs. */
static pid_t command_pid(const char *pidfile) {
        for (int i = 0; i < 1000; i++) {
                char *s = test_slurp(pidfile, NULL);
                pid_t pid = s && strchr(s, '\n') ? (pid_t) atoi(s) : 0;
                free(s);
                if (pid > 0)
                        return pid;
                spin_ms(ev, 20);
        }
        cr_assert_fail("the command did not run");
        return 0;
}

/* record -- CMD: SIGTERM (or SIGINT) sent to tracectl reaches the command
 * too, as with perf record or strace; the recording ends with it. */
Test(record, a_signal_reaches_the_command) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512], pidfile[512], caught[512], script[1200];
        connect_producer(&prod, "test.data", 0);
        path_in(out, sizeof(out), "cmd.pftrace");
        path_in(pidfile, sizeof(pidfile), "cmd.pid");
        path_in(caught, sizeof(caught), "cmd.caught");
        snprintf(script, sizeof(script), "trap 'echo TERM >%s; exit 7' TERM; echo $$ >%s; while :; do sleep 0.1; done",
                 caught, pidfile);
        spawn(&c, (const char *const[]) { "record", "--no-process-stats", "--ds", "test.data", "-o", out,
                                          "--no-summary", "--", "sh", "-c", script, NULL },
              0);
        pid_t sh = command_pid(pidfile);
        kill(c.pid, SIGTERM);
        int st = tracectl_child_wait(&c, ev, 30000);
        if (st == -ETIMEDOUT)
                kill(sh, SIGKILL);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "SIGTERM passed on to sh") != NULL, "%s", se);
        cr_assert(strstr(se, "sh exited with status 7") != NULL, "%s", se);
        free(se);
        char *got = test_slurp(caught, NULL);
        cr_assert(got && strcmp(got, "TERM\n") == 0, "the command did not get the signal");
        free(got);
        raw_producer_free(&prod);
}

/* A command that ignores the signal (a daemon): the recording ends with
 * the first one, a second ends tracectl's wait for the command, which
 * runs on. */
Test(record, a_second_signal_ends_the_wait_for_the_command) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512], pidfile[512], script[1200];
        connect_producer(&prod, "test.data", 0);
        path_in(out, sizeof(out), "daemon.pftrace");
        path_in(pidfile, sizeof(pidfile), "daemon.pid");
        snprintf(script, sizeof(script), "trap '' INT TERM; echo $$ >%s; while :; do sleep 0.1; done", pidfile);
        spawn(&c, (const char *const[]) { "record", "--no-process-stats", "--ds", "test.data", "-o", out,
                                          "--no-summary", "--", "sh", "-c", script, NULL },
              0);
        pid_t sh = command_pid(pidfile);
        kill(c.pid, SIGINT);
        bool waiting = tracectl_child_wait_stderr(&c, ev, "waiting for sh", 30000);
        kill(c.pid, SIGINT);
        int st = tracectl_child_wait(&c, ev, 30000);
        bool alive = kill(sh, 0) == 0;
        kill(sh, SIGKILL);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert(waiting, "tracectl does not say it waits for the command: %s", se);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "not waiting for sh") != NULL && strstr(se, "it runs on") != NULL, "%s", se);
        free(se);
        cr_assert(alive, "the command did not run on");
        cr_assert_eq(access(out, F_OK), 0, "the trace was not kept");
        raw_producer_free(&prod);
}

static void write_config(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

/* What would record nothing is refused before anything is recorded, each
 * with what is wrong (a config's line and field). */
Test(record, what_records_nothing_is_refused) {
        struct raw_producer prod;
        char out[512], cfg[512], *se = NULL;
        connect_producer(&prod, "test.data", 0);
        path_in(out, sizeof(out), "refused.pftrace");
        path_in(cfg, sizeof(cfg), "refused.pbtxt");

        write_config(cfg, "data_sources { config { name: \"test.data\" } }\nduration_ms: 500\n");
        int st = run((const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL }, &se);
        cr_assert_eq(st, 3, "no buffers: tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "refused.pbtxt:1:1: data_sources \"test.data\": the config has no buffers") != NULL,
                  "%s", se);
        free(se);

        write_config(cfg, "buffers { size_kb: 1024 }\n"
                          "data_sources {\n"
                          "  config {\n"
                          "    name: \"test.data\"\n"
                          "    target_buffer: 5\n"
                          "  }\n"
                          "}\n"
                          "duration_ms: 500\n");
        st = run((const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL }, &se);
        cr_assert_eq(st, 3, "target_buffer 5: tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "refused.pbtxt:5:5: target_buffer: 5 of data source \"test.data\" is past the last "
                             "buffer (the config has 1: 0..0)") != NULL,
                  "%s", se);
        free(se);

        /* Above any pid the kernel gives. */
        st = run((const char *const[]) { "record", "-t", "500ms", "--no-process-stats", "--ds", "test.data", "-p",
                                         "2147483647", "-o", out, NULL },
                 &se);
        cr_assert_eq(st, 2, "-p: tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "-p 2147483647: no such process") != NULL, "%s", se);
        free(se);

        st = run((const char *const[]) { "record", "--no-process-stats", "--ds", "test.data", "-o", out, "--",
                                         "/nonexistent/cmd", NULL },
                 &se);
        cr_assert_eq(st, 2, "-- /nonexistent/cmd: tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "cannot run /nonexistent/cmd: No such file or directory") != NULL, "%s", se);
        free(se);
        cr_assert_eq(access(out, F_OK), -1, "a refused recording left a file");
        cr_assert_eq(prod.n_start, 0, "a refused recording started a data source");
        raw_producer_free(&prod);
}

/* -o - writes the trace to the standard output (not into a file named
 * "-"), and nothing else goes there. */
Test(record, dash_writes_the_trace_to_stdout) {
        struct raw_producer prod;
        struct tracectl_child c;
        connect_producer(&prod, "test.data", 0);
        prod.packets_at_start = 10;
        prod.payload_size = 20;
        cr_assert_eq(access("-", F_OK), -1, "a file named - is here already");
        spawn(&c, (const char *const[]) { "record", "-t", "500ms", "--no-process-stats", "--ds", "test.data", "-o",
                                          "-", NULL },
              0);
        int st = tracectl_child_wait(&c, ev, 30000);
        bool dash = access("-", F_OK) == 0;
        (void) unlink("-");
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "trace written to the standard output") != NULL, "%s", se);
        free(se);
        cr_assert_not(dash, "a file named - was written");
        struct tracectl_child s;
        spawn(&s, (const char *const[]) { "summary", c.out, NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&s, ev, 30000), 0, "the standard output is not a trace");
        char *so = test_slurp(s.out, NULL);
        cr_assert(strstr(so, "for_testing") != NULL, "the producer's packets are not in it: %s", so);
        free(so);
        raw_producer_free(&prod);
}

/* With this build's plugins. */
static void plugins_setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0, "could not start traced with plugins");
}

static void plugins_teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(record_plugins, .init = plugins_setup, .fini = plugins_teardown, .timeout = 90);

static bool check_json(const char *args, const char *check) {
        return tracectl_check_json(ev, inst.dir, inst.consumer_path, args, check);
}

/* --ds linux.sys_stats records counters (the quick config gives it
 * periods), and summary --json says what the text says of them. */
Test(record_plugins, sys_stats_from_the_quick_flag_records_counters) {
        char out[512], args[600], *se = NULL;
        path_in(out, sizeof(out), "sys.pftrace");
        int st = run((const char *const[]) { "record", "-t", "1500ms", "--no-process-stats", "--ds", "linux.sys_stats",
                                             "--ds", "linux.system_info", "-o", out, "--no-summary", NULL },
                     &se);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        free(se);
        snprintf(args, sizeof(args), "summary --json %s", out);
        cr_assert(check_json(args, "c = d['system_counters']\n"
                                   "assert c['samples'] >= 1 and c['meminfo'] > 0 and c['cpu_times'] > 0, c\n"
                                   "assert c['mem_free_min_kb'] > 0, c\n"
                                   "assert d['cpus']['count'] >= 1 and d['cpus']['name'], d['cpus']\n"
                                   "assert d['not_recorded'] == [] and d['not_recorded_total'] == 0, d\n"
                                   "assert d['whole'] is True and d['journal'] is None, d\n"
                                   "s = d['started']\n"
                                   "assert s['all_data_sources_started_ns'] >= s['tracing_started_ns'], s\n"
                                   "assert d['service_stats']['chunks_written'] > 0, d['service_stats']"),
                  "summary --json of a sys_stats trace");
}

/* A sys_stats config that enables nothing fails, naming what to set. */
Test(record_plugins, sys_stats_without_a_period_fails) {
        char out[512], cfg[512], *se = NULL;
        path_in(out, sizeof(out), "noperiod.pftrace");
        path_in(cfg, sizeof(cfg), "noperiod.pbtxt");
        write_config(cfg, "buffers { size_kb: 1024 }\n"
                          "data_sources { config { name: \"linux.sys_stats\" } }\n"
                          "duration_ms: 60000\n");
        int st = run((const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL }, &se);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "linux.sys_stats: sys_stats_config: no *_period_ms is set: nothing to record") != NULL,
                  "%s", se);
        free(se);
        cr_assert_eq(access(out, F_OK), -1);
}

/* A kprobe that cannot be placed is reported as a missing event is: the
 * recording fails naming it, or (--allow-missing) records the rest and
 * the trace says what is missing. */
Test(record_plugins, a_kprobe_that_cannot_be_placed_is_named) {
        if (!fixture_tracefs_usable())
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        char out[512], cfg[512], args[600], *se = NULL;
        path_in(out, sizeof(out), "kprobe.pftrace");
        path_in(cfg, sizeof(cfg), "kprobe.pbtxt");
        write_config(cfg, "buffers { size_kb: 1024 }\n"
                          "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                          "  ftrace_events: \"sched/sched_switch\"\n"
                          "  kprobe_events { probe: \"traced_test_no_such_function\" } } } }\n"
                          "duration_ms: 60000\n");
        int st = run((const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL }, &se);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "linux.ftrace: kprobe_events \"traced_test_no_such_function\": cannot be probed: ") !=
                          NULL,
                  "%s", se);
        free(se);
        cr_assert_eq(access(out, F_OK), -1);

        write_config(cfg, "buffers { size_kb: 1024 }\n"
                          "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                          "  ftrace_events: \"sched/sched_switch\"\n"
                          "  kprobe_events { probe: \"traced_test_no_such_function\" } } } }\n"
                          "duration_ms: 500\n");
        st = run((const char *const[]) { "record", "-c", cfg, "--txt", "--allow-missing", "-o", out, "--no-summary",
                                         NULL },
                 &se);
        cr_assert_eq(st, 0, "tracectl --allow-missing exited %d: %s", st, se);
        free(se);
        snprintf(args, sizeof(args), "summary --json %s", out);
        cr_assert(check_json(args, "n = d['not_recorded']\n"
                                   "assert len(n) == 1 and n[0].startswith('linux.ftrace: kprobe_events "
                                   "\"traced_test_no_such_function\": cannot be probed'), n\n"
                                   "assert d['not_recorded_total'] == 1 and d['whole'] is False, d\n"
                                   "assert d['ftrace']['sched_switch'] > 0, d['ftrace']"),
                  "summary --json names the kprobe");
}
