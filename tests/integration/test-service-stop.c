/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The service stopped, restarted, reloaded or killed while tracectl
 * records, as a user meets it: traced under systemd-socket-activate
 * (SIGTERM is what `systemctl stop` and `restart` send it, SIGHUP what
 * `reload` sends), tracectl run as a user runs it, and the file it leaves
 * decoded. */

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

#include "basic/pbr.h"
#include "plugin-fixture.h"
#include "raw-producer.h"
#include "test-consumer.h"
#include "traced-instance.h"
#include "trace-file-checks.h"
#include "tracectl-child.h"

#include "perfetto/common/trace_stats.pb-c.h"

#define SERVICE_STOPPED PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_SERVICE_STOPPED
/* tracectl's exit status for a recording that ended early (tracectl(1)). */
#define EXIT_ENDED_EARLY 75

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(service_stop, .init = setup, .fini = teardown, .timeout = 120);

static bool started(struct raw_producer *p) {
        return p->n_start > 0;
}

/* Sends sig to traced and waits for it to exit, serving the producers of
 * this process meanwhile (a stop flushes them): its exit status, or
 * -ETIMEDOUT. */
static int signal_traced_and_wait(int sig) {
        cr_assert_gt(inst.pid, 0);
        cr_assert_eq(kill(inst.pid, sig), 0);
        for (unsigned waited = 0; waited < 40000; waited += 20) {
                int st;
                if (waitpid(inst.pid, &st, WNOHANG) == inst.pid) {
                        inst.pid = 0;
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                }
                spin_ms(ev, 20);
        }
        return -ETIMEDOUT;
}

/* SIGTERM to traced, which finishes the recording c runs and exits 0;
 * then tracectl exits 75. Its stderr (freed by the caller). */
static char *stop_traced_during(struct tracectl_child *c) {
        int st = signal_traced_and_wait(SIGTERM);
        if (st != 0)
                traced_instance_dump_log(&inst);
        cr_assert_eq(st, 0, "traced exited with %d after SIGTERM", st);
        int rc = tracectl_child_wait(c, ev, 30000);
        char *se = test_slurp(c->err_path, NULL);
        cr_assert_eq(rc, EXIT_ENDED_EARLY, "tracectl exited %d: %s", rc, se);
        return se;
}

/* Nothing but the file itself is left in its directory (no temporary file
 * of tracectl's). */
static void assert_alone(const char *dir, const char *name) {
        DIR *d = opendir(dir);
        cr_assert_not_null(d);
        for (struct dirent *e; (e = readdir(d));)
                cr_assert(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, name) == 0,
                          "%s was left beside %s", e->d_name, name);
        closedir(d);
}

/* inst.dir/name holding text; its path in path. */
static void write_file(char *path, size_t size, const char *name, const char *text) {
        snprintf(path, size, "%s/%s", inst.dir, name);
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s: %s", path, strerror(errno));
        fputs(text, f);
        cr_assert_eq(fclose(f), 0);
}

/* A text config of test.data for 30 s into a file (written every
 * period_ms), with more lines. */
static void write_config(char *path, size_t size, unsigned period_ms, const char *more) {
        char text[2048];
        snprintf(text, sizeof(text),
                 "buffers { size_kb: 4096 }\n"
                 "data_sources { config { name: \"test.data\" } }\n"
                 "duration_ms: 30000\n"
                 "write_into_file: true\n"
                 "file_write_period_ms: %u\n"
                 "flush_period_ms: 60000\n"
                 "%s",
                 period_ms, more);
        write_file(path, size, "config.pbtxt", text);
}

static void make_dir(char *dir, size_t size, const char *name) {
        snprintf(dir, size, "%s/%s", inst.dir, name);
        cr_assert_eq(mkdir(dir, 0755), 0);
}

/* A recording of the raw producer's packets that SIGTERM to traced ends:
 * what was committed and what the stop's flush brought is in the file,
 * which ends with the service's statistics saying why; tracectl keeps it
 * in place of the file it replaces, says so and exits 75. args: tracectl's
 * (the output file is ours/out.pftrace, written there first). */
static void stop_during(const char *const *args, const char *out) {
        struct raw_producer prod;
        struct tracectl_child c;

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 100;
        prod.packets_at_flush = 50;
        prod.payload_size = 30;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, args, 0);
        cr_assert(raw_producer_spin_until(&prod, started, 20000), "the data source never started");
        spin_ms(ev, 300);
        int flushes = prod.n_flush;

        char *se = stop_traced_during(&c);
        cr_assert(strstr(se, "ended early") && strstr(se, "stopped or restarted") && strstr(se, "of the 30 s asked"),
                  "tracectl did not say why and how long: %s", se);
        cr_assert_not_null(strstr(se, out), "tracectl did not name the file: %s", se);
        free(se);

        /* The stop flushed the data source: what it held until then came. */
        cr_assert_gt(prod.n_flush, flushes, "the stop did not flush the data source");
        cr_assert_geq(prod.next_seq, 150);
        size_t n = tracectl_count_test_packets(out, 30);
        cr_assert_eq(n, prod.next_seq, "%zu of the %u packets written are in the file", n, prod.next_seq);
        bool have_stats;
        cr_assert_eq(tracectl_trace_end_reason(out, &have_stats), SERVICE_STOPPED,
                     "the trace does not say that the service stopped (TraceStats %s)",
                     have_stats ? "without traced_end_reason" : "missing");
        raw_producer_free(&prod);

        /* tracectl summary says it too. */
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                                          (const char *const[]) { "summary", out, NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 20000), 0);
        char *so = test_slurp(c.out, NULL);
        cr_assert_not_null(strstr(so, "Ended early:    the tracing service was stopped or restarted"), "%s", so);
        free(so);

        /* systemctl restart: the next recording works. */
        cr_assert_eq(traced_instance_restart(&inst, true, NULL), 0);
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 10;
        prod.payload_size = 30;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                                          (const char *const[]) { "record", "-t", "1s", "--no-process-stats", "--ds",
                                                                  "test.data", "--no-summary", "-o", out, NULL }, 0);
        int rc = tracectl_child_wait(&c, ev, 30000);
        se = test_slurp(c.err_path, NULL);
        cr_assert_eq(rc, 0, "the recording after the restart exited %d: %s", rc, se);
        free(se);
        cr_assert_eq(tracectl_count_test_packets(out, 30), 10);
        raw_producer_free(&prod);
}

Test(service_stop, sigterm_keeps_a_quick_recording_and_says_why) {
        char dir[512], out[600];
        make_dir(dir, sizeof(dir), "quick");
        snprintf(out, sizeof(out), "%s/trace.pftrace", dir);
        /* A file from before: the recording that started replaces it. */
        char older[600];
        write_file(older, sizeof(older), "quick/trace.pftrace", "an older trace");
        stop_during((const char *const[]) { "record", "-t", "30s", "--no-process-stats", "--ds", "test.data",
                                            "--no-summary", "-o", out, NULL },
                    out);
        assert_alone(dir, "trace.pftrace");
}

Test(service_stop, sigterm_keeps_a_config_recording_and_says_why) {
        char dir[512], out[600], cfg[600];
        make_dir(dir, sizeof(dir), "config");
        snprintf(out, sizeof(out), "%s/trace.pftrace", dir);
        write_config(cfg, sizeof(cfg), 500, "");
        stop_during((const char *const[]) { "record", "-c", cfg, "--txt", "--no-summary", "-o", out, NULL }, out);
        assert_alone(dir, "trace.pftrace");
}

/* The same for a file the service opens itself (output_path, in its trace
 * directory): the file is finished the same way. */
Test(service_stop, sigterm_finishes_a_file_the_service_opened) {
        char traces[512], line[1024], cfg[600], out[600];

        cr_assert_eq(traced_instance_stop(&inst), 0);
        snprintf(traces, sizeof(traces), "%s/traces", inst.dir);
        cr_assert_eq(mkdir(traces, 0755), 0);
        /* Open to the core, whatever user it runs as. */
        cr_assert_eq(chmod(traces, 01777), 0);
        snprintf(line, sizeof(line), "[service]\ntrace_directory = %s\n", traces);
        cr_assert_eq(traced_instance_restart_conf(&inst, line, NULL), 0);

        snprintf(out, sizeof(out), "%s/service.pftrace", traces);
        snprintf(line, sizeof(line), "output_path: \"%s\"\n", out);
        write_config(cfg, sizeof(cfg), 500, line);
        stop_during((const char *const[]) { "record", "-c", cfg, "--txt", "--no-summary", NULL }, out);
}

/* The service core killed outright (no chance to flush or finish): what
 * it had written into the file is kept, readable to its last whole
 * packet, and tracectl says so. */
Test(service_stop, a_killed_core_leaves_what_it_had_written) {
        struct raw_producer prod;
        struct tracectl_child c;
        char dir[512], out[600], cfg[600], tmp_prefix[64];

        make_dir(dir, sizeof(dir), "killed");
        snprintf(out, sizeof(out), "%s/trace.pftrace", dir);
        write_config(cfg, sizeof(cfg), 100, "");

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 200;
        prod.payload_size = 30;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                                          (const char *const[]) { "record", "-c", cfg, "--txt", "--no-summary", "-o",
                                                                  out, NULL }, 0);
        cr_assert(raw_producer_spin_until(&prod, started, 20000), "the data source never started");

        /* Until the service has written the committed packets into the
         * file tracectl made beside the one it replaces. */
        snprintf(tmp_prefix, sizeof(tmp_prefix), ".trace.pftrace.tracectl-");
        off_t size = 0;
        for (unsigned waited = 0; waited < 20000 && size < 200 * 40; waited += 20) {
                DIR *d = opendir(dir);
                cr_assert_not_null(d);
                for (struct dirent *e; (e = readdir(d));)
                        if (strncmp(e->d_name, tmp_prefix, strlen(tmp_prefix)) == 0) {
                                struct stat st;
                                char p[1024];
                                snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                                if (stat(p, &st) == 0)
                                        size = st.st_size;
                        }
                closedir(d);
                spin_ms(ev, 20);
        }
        cr_assert_geq(size, 200 * 40, "the service did not write the packets into the file (%ld bytes)", (long) size);

        pid_t core = traced_instance_core_pid(&inst);
        cr_assert_gt(core, 0, "no service core under traced %d", (int) inst.pid);
        cr_assert_eq(kill(core, SIGKILL), 0);
        int rc = tracectl_child_wait(&c, ev, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(rc, EXIT_ENDED_EARLY, "tracectl exited %d: %s", rc, se);
        cr_assert(strstr(se, "ended early") && strstr(se, "went away") && strstr(se, "of the 30 s asked"),
                  "tracectl did not say what happened: %s", se);
        free(se);
        /* The whole file reads as a trace (counted packet by packet), and
         * holds every packet committed before the kill, in order. */
        cr_assert_eq(tracectl_count_test_packets(out, 30), 200);
        bool have_stats;
        cr_assert_eq(tracectl_trace_end_reason(out, &have_stats), 0);
        assert_alone(dir, "trace.pftrace");
        raw_producer_free(&prod);

        /* The supervisor exits with an error (systemd restarts it), and
         * the service started again serves. */
        cr_assert_neq(traced_instance_stop(&inst), 0, "traced exited cleanly after losing its core");
        cr_assert_eq(traced_instance_restart(&inst, true, NULL), 0);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, (const char *const[]) { "query", NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 20000), 0);
}

/* systemctl reload (SIGHUP) while recording: the recording goes on and
 * completes as asked. */
Test(service_stop, reload_leaves_a_recording_running) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[600];

        snprintf(out, sizeof(out), "%s/reloaded.pftrace", inst.dir);
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 100;
        prod.packets_at_flush = 10;
        prod.payload_size = 30;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                                          (const char *const[]) { "record", "-t", "3s", "--no-process-stats", "--ds",
                                                                  "test.data", "--no-summary", "-o", out, NULL }, 0);
        cr_assert(raw_producer_spin_until(&prod, started, 20000), "the data source never started");
        cr_assert_eq(kill(inst.pid, SIGHUP), 0);
        int rc = tracectl_child_wait(&c, ev, 30000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(rc, 0, "tracectl exited %d after a reload: %s", rc, se);
        free(se);
        cr_assert(traced_instance_alive(&inst), "traced did not survive the reload");
        cr_assert_eq(tracectl_count_test_packets(out, 30), prod.next_seq);
        bool have_stats;
        cr_assert_eq(tracectl_trace_end_reason(out, &have_stats), 0);
        cr_assert(have_stats);
        raw_producer_free(&prod);
}

/* With this build's plugins, the ftrace plugin recording: SIGTERM flushes
 * it while it still runs (the supervisor stops the plugins only once the
 * core finished), so an event of the moment before the stop is in the
 * file. */
static void plugins_setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0, "could not start traced with plugins");
}

static void plugins_teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(service_stop_plugins, .init = plugins_setup, .fini = plugins_teardown, .timeout = 120);

struct marker_scan {
        const char *marker;
        bool found;
        unsigned switches;
};

static void scan_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct marker_scan *k = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                return;
        for (size_t i = 0; i < p->ftrace_events->n_event; i++) {
                const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[i];
                if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT && e->print->buf &&
                    strstr(e->print->buf, k->marker))
                        k->found = true;
        }
        if (p->ftrace_events->compact_sched)
                k->switches += (unsigned) p->ftrace_events->compact_sched->n_switch_timestamp;
}

Test(service_stop_plugins, sigterm_flushes_the_ftrace_plugin_into_the_file) {
        if (!fixture_tracefs_usable())
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct tracectl_child c;
        char out[600], marker[96];

        snprintf(out, sizeof(out), "%s/ftrace.pftrace", inst.dir);
        snprintf(marker, sizeof(marker), "traced-stop-marker-%d", (int) getpid());
        /* tracectl waits 10 s for the data source; a loaded machine may
         * take longer to start the plugin. */
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, ev, "linux.ftrace", 1, 60000), "linux.ftrace never registered");
        test_consumer_free(&cons);
        int root = fixture_root_lock(); /* quick mode records in the root instance */
        unsigned before = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                                          (const char *const[]) { "record", "-t", "30s", "--no-process-stats",
                                                                  "sched/sched_switch", "ftrace/print", "--no-summary",
                                                                  "-o", out, NULL }, 0);
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, before, 30000), "linux.ftrace never started");
        spin_ms(ev, 300);
        int r = fixture_write_root_marker(marker);
        cr_assert_eq(r, 0, "trace_marker: %s", strerror(-r));

        free(stop_traced_during(&c));
        fixture_root_unlock(root);

        int fd = open(out, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s is missing", out);
        struct marker_scan k = { .marker = marker };
        fixture_for_each_packet(fd, scan_packet, &k);
        close(fd);
        cr_assert(k.found, "the marker written just before the stop is not in the trace");
        cr_assert_gt(k.switches, 0, "no sched_switch in the trace");
        bool have_stats;
        cr_assert_eq(tracectl_trace_end_reason(out, &have_stats), SERVICE_STOPPED);
}

/* systemctl kill -s HUP traced: SIGHUP to every process of the service
 * (the supervisor reloads; the core and the plugin hosts go on) while the
 * ftrace plugin records: the recording completes, with an event from
 * after the signal, and no plugin host was lost. */
Test(service_stop_plugins, sighup_to_every_process_leaves_the_recording_whole) {
        if (!fixture_tracefs_usable())
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct tracectl_child c;
        char out[600], marker[96], path[64];

        snprintf(out, sizeof(out), "%s/hup.pftrace", inst.dir);
        snprintf(marker, sizeof(marker), "traced-hup-marker-%d", (int) getpid());
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, ev, "linux.ftrace", 1, 60000), "linux.ftrace never registered");
        test_consumer_free(&cons);
        int root = fixture_root_lock();
        unsigned before = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                                          (const char *const[]) { "record", "-t", "4s", "--no-process-stats",
                                                                  "ftrace/print", "--no-summary", "-o", out, NULL }, 0);
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, before, 30000), "linux.ftrace never started");

        /* The supervisor and all its children: the core, the plugin hosts. */
        cr_assert_eq(kill(inst.pid, SIGHUP), 0);
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) inst.pid, (int) inst.pid);
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f);
        int pid, n = 0;
        while (fscanf(f, "%d", &pid) == 1) {
                cr_assert_eq(kill(pid, SIGHUP), 0);
                n++;
        }
        fclose(f);
        cr_assert_geq(n, 2, "no plugin host under traced");
        spin_ms(ev, 300);
        int r = fixture_write_root_marker(marker);
        cr_assert_eq(r, 0, "trace_marker: %s", strerror(-r));

        int rc = tracectl_child_wait(&c, ev, 60000);
        fixture_root_unlock(root);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(rc, 0, "tracectl exited %d: %s", rc, se);
        free(se);
        cr_assert(traced_instance_alive(&inst));
        cr_assert_eq(fixture_log_count(&inst, "restarting", NULL), 0, "a plugin host was lost to SIGHUP");
        int fd = open(out, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s is missing", out);
        struct marker_scan k = { .marker = marker };
        fixture_for_each_packet(fd, scan_packet, &k);
        close(fd);
        cr_assert(k.found, "the marker written after the SIGHUP is not in the trace");
}
