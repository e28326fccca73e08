/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What tracectl does when something goes wrong, against the real traced
 * (socket-activated) with a producer in this process: the exit code, the
 * message, and that no file the user had is destroyed. */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "traced/producer.h"

#include "plugin-fixture.h"
#include "raw-producer.h"
#include "test-consumer.h"
#include "traced-instance.h"
#include "tracectl-child.h"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(tracectl_errors, .init = setup, .fini = teardown, .timeout = 60);

/* tracectl --socket SOCKET ARGS... (SOCKET NULL: the instance's). */
static void spawn_on(struct tracectl_child *c, const char *socket, const char *const *args) {
        tracectl_child_spawn(c, inst.dir, socket ? socket : inst.consumer_path, args, 0);
}

static void spawn_tracectl(struct tracectl_child *c, const char *const *args) {
        spawn_on(c, NULL, args);
}

/* Runs the loop (serving the producer) until the child exits. */
static int wait_child(struct tracectl_child *c, unsigned timeout_ms) {
        return tracectl_child_wait(c, ev, timeout_ms);
}

static int run(const char *const *args, char **ret_err, char **ret_out);

static bool started(struct raw_producer *p) {
        return p->n_start > 0;
}

/* A trace the user keeps, in a directory of its own. */
static const char precious[] = "a trace the user wants to keep";

static void make_precious(char *dir, size_t dir_size, char *path, size_t path_size) {
        snprintf(dir, dir_size, "%s/keep", inst.dir);
        cr_assert_eq(mkdir(dir, 0755), 0);
        snprintf(path, path_size, "%s/keep.pftrace", dir);
        FILE *f = fopen(path, "w");
        fputs(precious, f);
        fclose(f);
}

/* The file is byte-identical and alone in its directory (no temporary
 * file is left). */
static void assert_kept(const char *dir, const char *path, const char *what) {
        size_t len;
        char *data = test_slurp(path, &len);
        cr_assert_not_null(data, "%s: %s is gone", what, path);
        cr_assert(len == strlen(precious) && memcmp(data, precious, len) == 0,
                  "%s: %s changed (%zu bytes)", what, path, len);
        free(data);
        DIR *d = opendir(dir);
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        n++;
        closedir(d);
        cr_assert_eq(n, 1, "%s: a file was left beside %s", what, path);
}

static char *run_failing(const char *socket, const char *const *args, int expected, const char *what) {
        struct tracectl_child c;
        spawn_on(&c, socket, args);
        int st = wait_child(&c, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, expected, "%s: tracectl exited %d, not %d: %s", what, st, expected, se);
        return se;
}

Test(tracectl_errors, an_unreachable_service_leaves_the_file) {
        char dir[512], path[600], sock[512];
        make_precious(dir, sizeof(dir), path, sizeof(path));
        snprintf(sock, sizeof(sock), "%s/nope.sock", inst.dir);
        char *se = run_failing(sock,
                               (const char *const[]) { "record", "-t", "2s", "--no-process-stats", "--ds", "test.data",
                                                       "-o", path, NULL },
                               4, "no service");
        cr_assert(strstr(se, "nope.sock") != NULL, "%s", se);
        /* No traced is about to listen there: no waiting, a hint. */
        cr_assert(strstr(se, "waiting") == NULL, "%s", se);
        cr_assert(strstr(se, "systemctl start traced.socket") != NULL && strstr(se, "--socket PATH") != NULL, "%s",
                  se);
        free(se);
        assert_kept(dir, path, "no service");
}

Test(tracectl_errors, a_refused_session_leaves_the_file) {
        struct raw_producer prod;
        char dir[512], path[600];
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        make_precious(dir, sizeof(dir), path, sizeof(path));

        /* Over the service's limit: tracectl knows it before asking. */
        char *se = run_failing(NULL,
                               (const char *const[]) { "record", "-t", "200h", "--no-process-stats", "--ds",
                                                       "test.data", "-o", path, NULL },
                               2, "-t 200h");
        cr_assert(strstr(se, "over the service's limit of 7 days") != NULL, "%s", se);
        free(se);
        assert_kept(dir, path, "-t 200h");
        se = run_failing(NULL, (const char *const[]) { "record", "-t", "1000d", "-o", path, NULL }, 2, "-t 1000d");
        cr_assert(strstr(se, "7 days") != NULL, "%s", se);
        free(se);
        se = run_failing(NULL, (const char *const[]) { "record", "-t", "10y", "-o", path, NULL }, 2, "-t 10y");
        cr_assert(strstr(se, "ms, s, m, h or d") != NULL, "the units are not named: %s", se);
        free(se);

        /* The service refuses. */
        se = run_failing(NULL,
                         (const char *const[]) { "record", "-t", "2s", "-b", "100gb", "--no-process-stats", "--ds",
                                                 "test.data", "-o", path, NULL },
                         5, "-b 100gb");
        cr_assert(strstr(se, "the session failed: ") != NULL, "the refusal does not say why: %s", se);
        cr_assert(strstr(se, "left as it was") != NULL, "%s", se);
        free(se);
        assert_kept(dir, path, "-b 100gb");
        cr_assert_eq(prod.n_start, 0, "a refused session started a data source");
        raw_producer_free(&prod);
}

/* Ctrl-C completes the file, which then replaces the old one whole. */
Test(tracectl_errors, ctrl_c_replaces_the_file_whole) {
        struct raw_producer prod;
        struct tracectl_child c;
        char dir[512], path[600];
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 50;
        prod.payload_size = 30;
        make_precious(dir, sizeof(dir), path, sizeof(path));
        spawn_tracectl(&c, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds", "test.data",
                                                   "-o", path, "--no-summary", NULL });
        cr_assert(raw_producer_spin_until(&prod, started, 10000));
        /* While it records, the old trace is still there as it was. */
        size_t len;
        char *data = test_slurp(path, &len);
        cr_assert(len == strlen(precious) && memcmp(data, precious, len) == 0, "the file changed while recording");
        free(data);
        spin_ms(ev, 200);
        kill(c.pid, SIGINT);
        int st = wait_child(&c, 20000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d after Ctrl-C: %s", st, se);
        free(se);
        data = test_slurp(path, &len);
        cr_assert_gt(len, 50 * 30, "the new trace is not whole (%zu bytes)", len);
        cr_assert(memmem(data, len, precious, strlen(precious)) == NULL, "the old trace is still there");
        free(data);
        DIR *d = opendir(dir);
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        cr_assert_eq(n, 1);
        raw_producer_free(&prod);
}

/* With this build's plugins: what a plugin refuses reaches tracectl. */
static void plugins_setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0, "could not start traced with plugins");
}

static void plugins_teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(tracectl_plugins, .init = plugins_setup, .fini = plugins_teardown, .timeout = 90);

/* Runs tracectl; returns its exit code, *ret_err its stderr. */
static int run(const char *const *args, char **ret_err, char **ret_out) {
        struct tracectl_child c;
        spawn_tracectl(&c, args);
        int st = wait_child(&c, 60000);
        *ret_err = test_slurp(c.err_path, NULL);
        if (ret_out)
                *ret_out = test_slurp(c.out, NULL);
        return st;
}

Test(tracectl_plugins, a_missing_ftrace_event_stops_the_recording_and_names_it) {
        if (!fixture_tracefs_usable())
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        char dir[512], path[600], *se = NULL, *so = NULL;
        make_precious(dir, sizeof(dir), path, sizeof(path));
        /* A minute asked for: the recording stops as soon as the plugin
         * reports (the test's own timeout would end it otherwise). */
        int st = run((const char *const[]) { "record", "-t", "60s", "--no-process-stats", "sched/sched_swich",
                                             "sched/sched_switch", "-o", path, NULL },
                     &se, NULL);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "linux.ftrace: ftrace_events \"sched/sched_swich\": no such event (see ") != NULL &&
                          strstr(se, "available_events)") != NULL,
                  "stderr: %s", se);
        cr_assert(strstr(se, "--allow-missing") != NULL, "no way on is suggested: %s", se);
        cr_assert(strstr(se, "sched/sched_switch\"") == NULL, "the good event is reported: %s", se);
        free(se);
        assert_kept(dir, path, "a missing event");

        /* With --allow-missing it records the rest, and the trace says
         * what is missing. */
        st = run((const char *const[]) { "record", "-t", "500ms", "--no-process-stats", "--allow-missing",
                                         "sched/sched_swich", "sched/sched_switch", "-o", path, "--no-summary", NULL },
                 &se, NULL);
        cr_assert_eq(st, 0, "tracectl --allow-missing exited %d: %s", st, se);
        cr_assert(strstr(se, "ftrace_events \"sched/sched_swich\": no such event") != NULL, "stderr: %s", se);
        free(se);
        st = run((const char *const[]) { "summary", path, NULL }, &se, &so);
        cr_assert_eq(st, 0, "summary exited %d: %s", st, se);
        cr_assert(strstr(so, "Not recorded:   linux.ftrace: ftrace_events \"sched/sched_swich\": no such event") !=
                          NULL,
                  "summary:\n%s", so);
        free(se);
        free(so);
}

Test(tracectl_plugins, a_perf_value_the_plugin_refuses_is_named) {
        char cfg[512], out[512], *se = NULL;
        snprintf(cfg, sizeof(cfg), "%s/perf.pbtxt", inst.dir);
        snprintf(out, sizeof(out), "%s/perf.pftrace", inst.dir);
        FILE *f = fopen(cfg, "w");
        fprintf(f, "buffers { size_kb: 1024 }\n"
                   "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                   "  timebase { frequency: 99 counter: SW_CPU_CLOCK }\n"
                   "  callstack_sampling { user_frames: UNWIND_KERNEL_FRAME_POINTER } } } }\n"
                   "duration_ms: 60000\n");
        fclose(f);
        int st = run((const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL }, &se, NULL);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "linux.perf: perf_event_config.callstack_sampling.user_frames: "
                             "UNWIND_KERNEL_FRAME_POINTER is not supported") != NULL,
                  "stderr: %s", se);
        free(se);
        cr_assert_eq(access(out, F_OK), -1, "a failed recording left a file");
}

/* A misspelt data source fails before anything starts, with the name
 * meant; one no producer offers fails after the wait, naming those
 * offered. */
Test(tracectl_errors, an_unknown_data_source_name_suggests_the_registered_one) {
        struct raw_producer prod;
        char dir[512], path[600];
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        spin_ms(ev, 100);
        make_precious(dir, sizeof(dir), path, sizeof(path));
        char *se = run_failing(NULL,
                               (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds",
                                                       "test.dta", "-o", path, NULL },
                               3, "a misspelt data source");
        cr_assert(strstr(se, "no producer offers data source \"test.dta\"; did you mean test.data?") != NULL, "%s",
                  se);
        cr_assert(strstr(se, "waiting") == NULL, "tracectl waited for a misspelt name: %s", se);
        free(se);
        assert_kept(dir, path, "a misspelt data source");
        cr_assert_eq(prod.n_start, 0);
        raw_producer_free(&prod);
}

/* A stop trigger fired with tracectl trigger ends the recording, which
 * completes its file; one never fired is named at the end. */
Test(tracectl_errors, tracectl_trigger_stops_a_recording) {
        struct raw_producer prod;
        struct tracectl_child rec, trig;
        char out[512];
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 20;
        prod.payload_size = 10;
        snprintf(out, sizeof(out), "%s/triggered.pftrace", inst.dir);
        /* A minute asked for: only the trigger ends it within the test's
         * own timeout. */
        spawn_tracectl(&rec, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds", "test.data",
                                                     "--stop-on-trigger", "stop-now", "-o", out, "--no-summary",
                                                     NULL });
        cr_assert(raw_producer_spin_until(&prod, started, 10000));
        spawn_tracectl(&trig, (const char *const[]) { "trigger", "stop-now", NULL });
        int st = wait_child(&trig, 10000);
        char *so = test_slurp(trig.out, NULL), *se = test_slurp(trig.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl trigger exited %d: %s", st, se);
        cr_assert(strstr(so, "Activated trigger \"stop-now\"") != NULL, "%s", so);
        free(so);
        free(se);
        st = wait_child(&rec, 30000);
        se = test_slurp(rec.err_path, NULL);
        cr_assert_eq(st, 0, "the triggered recording exited %d: %s", st, se);
        cr_assert(strstr(se, "was not activated") == NULL, "%s", se);
        free(se);
        size_t len;
        char *data = test_slurp(out, &len);
        cr_assert(memmem(data, len, "stop-now", 8) != NULL, "the trace does not record the trigger");
        free(data);

        spawn_tracectl(&rec, (const char *const[]) { "record", "-t", "300ms", "--no-process-stats", "--ds",
                                                     "test.data", "--stop-on-trigger", "never", "-o", out,
                                                     "--no-summary", NULL });
        st = wait_child(&rec, 30000);
        se = test_slurp(rec.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "trigger \"never\" was not activated") != NULL, "%s", se);
        free(se);
        raw_producer_free(&prod);
}

Test(tracectl_errors, trigger_without_a_service_says_how_to_start_it) {
        char sock[512];
        snprintf(sock, sizeof(sock), "%s/nope/consumer.sock", inst.dir);
        char *se = run_failing(sock, (const char *const[]) { "trigger", "x", NULL }, 4, "trigger, no service");
        cr_assert(strstr(se, "nope/producer.sock") != NULL, "%s", se);
        cr_assert(strstr(se, "systemctl start traced.socket") != NULL && strstr(se, "--socket PATH") != NULL, "%s",
                  se);
        free(se);
}

/* traced that bound its own sockets removes them when it exits: a client
 * then hears there is no service, not a refusal from a dead socket. */
Test(tracectl_errors, standalone_traced_removes_its_sockets) {
        cr_assert_eq(traced_instance_stop(&inst), 0);
        cr_assert_eq(traced_instance_restart(&inst, false, NULL), 0);
        struct tracectl_child c;
        spawn_tracectl(&c, (const char *const[]) { "query", NULL });
        cr_assert_eq(wait_child(&c, 10000), 0, "the standalone traced does not answer");
        cr_assert_eq(access(inst.consumer_path, F_OK), 0);
        cr_assert_eq(traced_instance_stop(&inst), 0, "traced did not exit cleanly");
        cr_assert_eq(access(inst.consumer_path, F_OK), -1, "the consumer socket stayed");
        cr_assert_eq(access(inst.producer_path, F_OK), -1, "the producer socket stayed");
        char *se = run_failing(NULL, (const char *const[]) { "query", NULL }, 4, "after traced exited");
        cr_assert(strstr(se, "No such file or directory") != NULL && strstr(se, "systemctl start traced.socket"),
                  "%s", se);
        free(se);
}

/* record -- CMD: the command runs once tracing runs (its own exec is in
 * the trace), and its exit ends the recording, whose status is
 * tracectl's. */
Test(tracectl_plugins, record_runs_a_command_and_stops_when_it_exits) {
        if (!fixture_tracefs_usable())
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        char out[512], pidfile[512], script[700], *se = NULL, *so = NULL;
        snprintf(out, sizeof(out), "%s/cmd.pftrace", inst.dir);
        snprintf(pidfile, sizeof(pidfile), "%s/cmd.pid", inst.dir);
        snprintf(script, sizeof(script), "echo $$ >%s; exit 3", pidfile);
        /* A minute allowed: only the command's end stops it within the
         * test's own wait. */
        int st = run((const char *const[]) { "record", "-t", "60s", "--no-process-stats", "sched/sched_process_exec",
                                             "-o", out, "--no-summary", "--", "sh", "-c", script, NULL },
                     &se, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "sh exited with status 3") != NULL, "the command's status is not told: %s", se);
        free(se);
        char *pid = test_slurp(pidfile, NULL);
        cr_assert_not_null(pid, "the command did not run");
        pid[strcspn(pid, "\n")] = '\0';
        st = run((const char *const[]) { "print", out, NULL }, &se, &so);
        cr_assert_eq(st, 0, "%s", se);
        /* An event line: "TS pid PID ... sched_process_exec ...". */
        char expected[64];
        snprintf(expected, sizeof(expected), " pid %s ", pid);
        bool found = false;
        for (char *line = strtok(so, "\n"); line && !found; line = strtok(NULL, "\n"))
                found = strstr(line, expected) && strstr(line, "sched_process_exec");
        cr_assert(found, "the command ran before tracing did: its exec (pid %s) is not in the trace", pid);
        free(pid);
        free(se);
        free(so);
}

Test(tracectl_errors, pid_narrows_the_profilers) {
        char *se = NULL, *so = NULL;
        int st = run((const char *const[]) { "record", "--dry-run", "--perf", "99", "--bpf-stacks", "-p", "42,43",
                                             NULL },
                     &se, &so);
        cr_assert_eq(st, 0, "%s", se);
        cr_assert(strstr(so, "target_pid: 42") != NULL && strstr(so, "target_pid: 43") != NULL, "%s", so);
        cr_assert(strstr(so, "filter: \"pid=42\"") != NULL && strstr(so, "filter: \"pid=43\"") != NULL, "%s", so);
        free(se);
        free(so);
        st = run((const char *const[]) { "record", "--dry-run", "-p", "x", NULL }, &se, NULL);
        cr_assert_eq(st, 2, "%s", se);
        free(se);
        st = run((const char *const[]) { "record", "-o", "x", "--", NULL }, &se, NULL);
        cr_assert_eq(st, 2, "%s", se);
        cr_assert(strstr(se, "no command after --") != NULL, "%s", se);
        free(se);
}

/* The public calls of libtraced-client: what an out-of-process producer
 * reports reaches tracectl, and its trigger stops a recording. */
struct client_producer {
        traced_producer *p;
        uint64_t started; /* the last instance started, 0: none */
        bool report;      /* report an error from the start callback */
        bool report_at_stop; /* report one from the stop callback, then say it stopped */
};

static void client_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t n, void *ud) {
        struct client_producer *cp = ud;
        cp->started = id;
        if (cp->report)
                cr_assert_eq(traced_producer_report_error(p, id, "client_config.mode", "\"fast\" is not supported"), 0);
}

static void client_stop(traced_producer *p, uint64_t id, void *ud) {
        struct client_producer *cp = ud;
        if (!cp->report_at_stop)
                return;
        cr_assert_eq(traced_producer_report_error(p, id, "client_config.flush", "the last write failed"), 0);
        cr_assert_eq(traced_producer_notify_stopped(p, id), 0);
}

static void client_connect(struct client_producer *cp) {
        static const struct traced_producer_ops ops = {
                .struct_size = sizeof(ops),
                .start = client_start,
                .stop = client_stop,
        };
        struct traced_producer_options o = {
                .struct_size = sizeof(o),
                .socket_path = inst.producer_path,
                .name = "client",
                .flags = TRACED_PRODUCER_NO_RECONNECT,
        };
        cr_assert_eq(traced_producer_connect(ev, &o, &ops, cp, &cp->p), 0);
        cr_assert_eq(traced_producer_register_data_source(cp->p, "client.data",
                                                          cp->report_at_stop ? TRACED_DS_WILL_NOTIFY_ON_STOP : 0),
                     0);
        /* tracectl waits for the registration, while wait_child runs the
         * loop. */
}

/* tracectl records the client's data source for `duration` into `name`
 * under the instance's directory (path in out); its exit status, its
 * stderr in *ret_err (freed by the caller). */
static int record_client(const char *duration, const char *name, char *out, size_t out_size, char **ret_err) {
        snprintf(out, out_size, "%s/%s", inst.dir, name);
        struct tracectl_child c;
        spawn_tracectl(&c, (const char *const[]) { "record", "-t", duration, "--no-process-stats", "--ds", "client.data",
                                                   "-o", out, "--no-summary", NULL });
        int st = wait_child(&c, 30000);
        *ret_err = test_slurp(c.err_path, NULL);
        return st;
}

Test(tracectl_errors, a_client_library_report_reaches_tracectl) {
        struct client_producer cp = { .report = true };
        char out[512], *se = NULL;
        client_connect(&cp);
        int st = record_client("60s", "client.pftrace", out, sizeof(out), &se);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "tracectl: client.data: client_config.mode: \"fast\" is not supported") != NULL, "%s", se);
        free(se);
        traced_producer_free(cp.p);
}

/* An error a data source reports as it stops comes after the last stats
 * tracectl polled during the session: it is found in the session's stats
 * once the session ended, and fails the recording all the same. */
Test(tracectl_errors, an_error_reported_at_the_stop_fails_the_recording) {
        struct client_producer cp = { .report_at_stop = true };
        char out[512], *se = NULL;
        client_connect(&cp);
        int st = record_client("300ms", "client-stop.pftrace", out, sizeof(out), &se);
        cr_assert_eq(st, 5, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "tracectl: client.data: client_config.flush: the last write failed") != NULL, "%s", se);
        free(se);
        cr_assert_eq(access(out, F_OK), -1, "a failed recording left a file");
        traced_producer_free(cp.p);
}

Test(tracectl_errors, a_client_library_trigger_stops_a_recording) {
        struct client_producer cp = {};
        char out[512];
        client_connect(&cp);
        snprintf(out, sizeof(out), "%s/client-trigger.pftrace", inst.dir);
        struct tracectl_child c;
        spawn_tracectl(&c, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds", "client.data",
                                                   "--stop-on-trigger", "client-done", "-o", out, "--no-summary",
                                                   NULL });
        for (unsigned waited = 0; !cp.started && waited < 10000; waited += 20)
                spin_ms(ev, 20);
        cr_assert_neq(cp.started, 0, "the session never started the data source");
        const char *names[] = { "client-done" };
        cr_assert_eq(traced_producer_activate_triggers(cp.p, names, 1), 0);
        int st = wait_child(&c, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "was not activated") == NULL, "%s", se);
        free(se);
        traced_producer_free(cp.p);
}

/* Quick mode adds linux.process_stats by itself: a service without it
 * records the rest (after the wait for a plugin that may yet register). */
Test(tracectl_errors, quick_mode_records_without_its_own_process_stats) {
        struct raw_producer prod;
        char out[512], *se = NULL;
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 5;
        prod.payload_size = 10;
        snprintf(out, sizeof(out), "%s/no-ps.pftrace", inst.dir);
        int st = run((const char *const[]) { "record", "-t", "300ms", "--ds", "test.data", "-o", out, "--no-summary",
                                             NULL },
                     &se, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "no producer offers data source \"linux.process_stats\"; recording without it") != NULL,
                  "%s", se);
        free(se);
        cr_assert_gt(prod.n_start, 0);
        raw_producer_free(&prod);
}
