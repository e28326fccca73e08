/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Resident sessions and snapshots as a user meets them: the real traced
 * with this build's plugins and a sessions directory (--sessions-dir),
 * whose files traced starts itself, lists in tracectl query, re-reads on
 * SIGHUP (systemctl reload) and starts again after its core died; and
 * tracectl snapshot, which writes what a running session holds into a
 * file that opens alone (the service's packets, the processes), twice,
 * without stopping it. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "plugin-fixture.h"
#include "traced-instance.h"
#include "tracectl-child.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

static struct traced_instance inst;
static sd_event *ev;
static char sessions[600];
static char sessions_arg[700];
static const char *args[4];

/* A light resident session: process_stats, every live process described
 * again each second (ClearIncrementalState). */
#define RECORDER_CFG                                                                                                   \
        "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"                                                           \
        "incremental_state_config { clear_period_ms: 1000 }\n"                                                         \
        "data_sources { config { name: \"linux.process_stats\"\n"                                                      \
        "  process_stats_config { scan_all_processes_on_start: true } } }\n"

static void write_file(const char *name, const char *text) {
        char path[700], tmp[720];
        snprintf(path, sizeof(path), "%s/%s", sessions, name);
        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", sessions, name);
        FILE *f = fopen(tmp, "we");
        cr_assert(f, "%s: %s", tmp, strerror(errno));
        fputs(text, f);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(rename(tmp, path), 0);
}

static void write_recorder(const char *name, unsigned kb) {
        char text[1024];
        snprintf(text, sizeof(text), RECORDER_CFG, kb);
        write_file(name, text);
}

static void setup(void) {
        if (geteuid() != 0 || !fixture_tracefs_usable())
                cr_skip_test("needs root and tracefs for the plugins");
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(traced_instance_start_args(&inst, true, (const char *const[]) { "--no-plugins", NULL }), 0);
        /* The sessions directory lives in the instance's directory; traced
         * is started again with it and the plugins. */
        snprintf(sessions, sizeof(sessions), "%s/sessions.d", inst.dir);
        cr_assert_eq(mkdir(sessions, 0755), 0);
        snprintf(sessions_arg, sizeof(sessions_arg), "--sessions-dir=%s", sessions);
        args[0] = "--plugin-dir=" TOP_BUILDDIR "/plugins/.libs";
        args[1] = "--plugin-host=" TOP_BUILDDIR "/traced-plugin-host";
        args[2] = sessions_arg;
        args[3] = NULL;
        cr_assert_eq(traced_instance_stop(&inst), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(resident, .init = setup, .fini = teardown, .timeout = 240);

struct listed {
        uint64_t id;
        bool found, resident, started;
};

/* The session named name in QueryServiceState. */
static struct listed query(const char *name) {
        struct test_consumer c;
        struct listed l = {};
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(&c, "QueryServiceState", &rq.base,
                                        &perfetto__protos__query_service_state_response__descriptor, &reply, 10000),
                     0);
        const Perfetto__Protos__TracingServiceState *st =
                ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        for (size_t i = 0; st && i < st->n_tracing_sessions; i++) {
                const Perfetto__Protos__TracingServiceState__TracingSession *s = st->tracing_sessions[i];
                if (!s->unique_session_name || strcmp(s->unique_session_name, name) != 0)
                        continue;
                l = (struct listed) { .id = s->id, .found = true, .resident = s->resident, .started = s->is_started };
        }
        protobuf_c_message_free_unpacked(reply, NULL);
        test_consumer_free(&c);
        return l;
}

/* Waits until name is listed started (want) or not listed (!want). */
static struct listed wait_listed(const char *name, bool want) {
        struct listed l = {};
        for (unsigned i = 0; i < 200; i++) {
                l = query(name);
                if (want ? l.found && l.started : !l.found)
                        return l;
                spin_ms(ev, 50);
        }
        cr_assert_fail("session %s %s", name, want ? "never started" : "never went away");
        return l;
}

struct snap_check {
        bool config, clock, system_info, snapshot_packet, marker;
        unsigned processes;
        const char *marker_name;
        char session[64];
};

static void check_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct snap_check *k = userdata;
        switch (p->data_case) {
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG:
                k->config = true;
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT:
                k->clock = true;
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO:
                k->system_info = true;
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACED_SNAPSHOT:
                k->snapshot_packet = true;
                snprintf(k->session, sizeof(k->session), "%s",
                         p->traced_snapshot->session_name ? p->traced_snapshot->session_name : "");
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
                for (size_t i = 0; i < p->process_tree->n_processes; i++) {
                        const Perfetto__Protos__ProcessTree__Process *pr = p->process_tree->processes[i];
                        k->processes++;
                        if (k->marker_name && pr->n_cmdline > 0 && strcmp(pr->cmdline[0], k->marker_name) == 0)
                                k->marker = true;
                }
                break;
        default:
                break;
        }
}

/* tracectl snapshot name -o path, checked to open alone. */
static struct snap_check snapshot(const char *name, const char *path, const char *marker) {
        struct tracectl_child c;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                             (const char *const[]) { "snapshot", name, "-o", path, NULL }, 0);
        int rc = tracectl_child_wait(&c, ev, 60000);
        cr_assert_eq(rc, 0, "tracectl snapshot exited %d", rc);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        struct snap_check k = { .marker_name = marker };
        fixture_for_each_packet(fd, check_packet, &k);
        close(fd);
        cr_assert(k.config && k.clock && k.system_info, "%s does not open alone (config %d clock %d system info %d)",
                  path, k.config, k.clock, k.system_info);
        cr_assert(k.processes > 0, "%s names no process", path);
        cr_assert(k.snapshot_packet && strcmp(k.session, name) == 0, "%s does not say it is a snapshot of %s", path,
                  name);
        return k;
}

static void reload(void) {
        unsigned before = fixture_log_count(&inst, "Reloaded ", "");
        cr_assert_eq(kill(inst.pid, SIGHUP), 0);
        cr_assert(fixture_wait_log(&inst, ev, "Reloaded ", "", before, 20000), "traced did not reload");
}

Test(resident, started_listed_snapshotted_reloaded_and_back_after_a_core_restart) {
        char bad[256], one[700], two[700];
        write_recorder("recorder.cfg", 4096);
        /* A bad file: reported with file, line and field, skipped. */
        snprintf(bad, sizeof(bad), "buffers { size_kb: 1024 }\n"
                                   "data_sources { config { name: \"linux.process_stats\" } }\n"
                                   "duration_ms: 5000\n");
        write_file("bad.cfg", bad);
        write_file("typo.cfg", "buffers { size_kb: 1024 }\nbufers { size_kb: 1 }\n");
        cr_assert_eq(traced_instance_restart(&inst, true, args), 0);

        struct listed l = wait_listed("recorder", true);
        cr_assert(l.resident, "the session is not marked resident");
        char *line = fixture_log_last(&inst, "bad.cfg:3:", "duration_ms");
        cr_assert(line, "the bad file's line and field are not in the log");
        free(line);
        line = fixture_log_last(&inst, "typo.cfg:2:", "bufers");
        cr_assert(line, "the misspelled field's line is not in the log");
        free(line);
        cr_assert(!query("bad").found && !query("typo").found, "a bad file started a session");

        /* Two snapshots while it runs, each opening alone. */
        snprintf(one, sizeof(one), "%s/one.pftrace", inst.dir);
        snprintf(two, sizeof(two), "%s/two.pftrace", inst.dir);
        /* The plugins register after the session started: their data
         * sources join it then. */
        cr_assert(fixture_wait_log(&inst, ev, "linux.process_stats instance ", " processes at start", 0, 30000),
                  "linux.process_stats never joined the resident session");
        spin_ms(ev, 500);
        snapshot("recorder", one, NULL);
        spin_ms(ev, 1000);
        snapshot("recorder", two, NULL);
        cr_assert_eq(query("recorder").id, l.id, "the snapshots stopped the session");

        /* Reload: a new file starts, an unchanged one goes on, a changed
         * one restarts, a removed one stops. */
        write_recorder("second.cfg", 1024);
        reload();
        wait_listed("second", true);
        cr_assert_eq(query("recorder").id, l.id, "an unchanged resident session was restarted by a reload");
        write_recorder("recorder.cfg", 2048);
        char path[700];
        snprintf(path, sizeof(path), "%s/second.cfg", sessions);
        cr_assert_eq(unlink(path), 0);
        reload();
        wait_listed("second", false);
        struct listed l2 = wait_listed("recorder", true);
        for (unsigned i = 0; i < 100 && l2.id == l.id; i++) {
                spin_ms(ev, 50);
                l2 = wait_listed("recorder", true);
        }
        cr_assert_neq(l2.id, l.id, "a changed resident session was not restarted");

        /* The core dies: traced exits (systemd's Restart= starts it
         * again); started again, it starts the resident session again. */
        pid_t core = traced_instance_core_pid(&inst);
        cr_assert_gt(core, 0);
        cr_assert_eq(kill(core, SIGKILL), 0);
        cr_assert_neq(traced_instance_stop(&inst), 0, "traced exited cleanly after losing its core");
        unsigned scans = fixture_log_count(&inst, "linux.process_stats instance ", " processes at start");
        cr_assert_eq(traced_instance_restart(&inst, true, args), 0);
        wait_listed("recorder", true);
        cr_assert(fixture_wait_log(&inst, ev, "linux.process_stats instance ", " processes at start", scans, 30000),
                  "linux.process_stats never joined the restarted resident session");
        spin_ms(ev, 500);
        snapshot("recorder", one, NULL);
}

/* A session that is not there: an error naming it, no file. */
Test(resident, snapshot_of_no_session_fails_and_writes_nothing) {
        char out[700], path[700];
        struct tracectl_child c;
        cr_assert_eq(traced_instance_restart(&inst, true, args), 0);
        snprintf(out, sizeof(out), "%s/none.pftrace", inst.dir);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                             (const char *const[]) { "snapshot", "no-such-session", "-o", out, NULL }, 0);
        int rc = tracectl_child_wait(&c, ev, 30000);
        cr_assert_neq(rc, 0, "tracectl snapshot of no session succeeded");
        cr_assert(access(out, F_OK) < 0 && errno == ENOENT, "a failed snapshot left %s", out);
        size_t n = 0;
        _cleanup_free_ char *err = test_slurp(c.err_path, &n);
        cr_assert(err && strstr(err, "not found"), "tracectl did not say why: %s", err ? err : "");
        /* Without -o, into a snapshot directory. */
        snprintf(path, sizeof(path), "%s/snapshots", inst.dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        write_recorder("dir.cfg", 1024);
        reload();
        wait_listed("dir", true);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                             (const char *const[]) { "snapshot", "dir", "--directory", path, NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 60000), 0);
        _cleanup_free_ char *printed = test_slurp(c.out, &n);
        cr_assert(printed && strncmp(printed, path, strlen(path)) == 0 && strstr(printed, "/dir-") &&
                          strstr(printed, ".pftrace\n"),
                  "the snapshot went to %s", printed ? printed : "?");
        *strchr(printed, '\n') = '\0';
        cr_assert_eq(unlink(printed), 0);
        cr_assert_eq(rmdir(path), 0);
}

/* An old snapshot of size bytes, written age seconds ago. */
static void old_snapshot(const char *dir, const char *name, size_t size, time_t age) {
        char path[800];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        cr_assert_eq(ftruncate(fd, (off_t) size), 0);
        time_t t = time(NULL) - age;
        cr_assert_eq(futimens(fd, (const struct timespec[]) { { .tv_sec = t }, { .tv_sec = t } }), 0);
        close(fd);
}

static off_t file_size(const char *dir, const char *name) {
        char path[800];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return stat(path, &st) < 0 ? -1 : st.st_size;
}

/* traced.conf's max_use= holds for the snapshot directory: older
 * snapshots go, oldest first, the new one stays, other files stay; with
 * -o nothing is removed. */
Test(resident, snapshot_directory_kept_within_max_use) {
        char conf[256], path[700], out[800];
        static const char *const old[] = { "a-20200101T000000.pftrace", "b-20200101T000000.pftrace",
                                           "c-20200101T000000.pftrace" };
        snprintf(path, sizeof(path), "%s/snapshots", inst.dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        for (size_t i = 0; i < ELEMENTSOF(old); i++)
                old_snapshot(path, old[i], 200 * 1024, 300 - 100 * (time_t) i);
        old_snapshot(path, "notes.txt", 1024 * 1024, 400);
        write_recorder("capped.cfg", 1024);
        snprintf(conf, sizeof(conf), "[service]\nmax_use = 500K\n");
        cr_assert_eq(traced_instance_restart_conf(&inst, conf, args), 0);
        wait_listed("capped", true);

        /* -o: the directory is not the store's; nothing goes. */
        snprintf(out, sizeof(out), "%s/own.pftrace", path);
        snapshot("capped", out, NULL);
        for (size_t i = 0; i < ELEMENTSOF(old); i++)
                cr_assert_eq(file_size(path, old[i]), 200 * 1024, "-o removed %s", old[i]);
        cr_assert_eq(unlink(out), 0);

        struct tracectl_child c;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                             (const char *const[]) { "snapshot", "capped", "--directory", path, NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 60000), 0);
        size_t n = 0;
        _cleanup_free_ char *printed = test_slurp(c.out, &n);
        cr_assert(printed && strchr(printed, '\n'));
        *strchr(printed, '\n') = '\0';
        const char *newest = strrchr(printed, '/') + 1;
        off_t new_size = file_size(path, newest);
        cr_assert_gt(new_size, 0, "the new snapshot %s is gone", printed);
        cr_assert_eq(file_size(path, "notes.txt"), 1024 * 1024, "a file that is no snapshot was removed");

        /* The oldest went first; what is left is within 500K, or only the
         * new one is left. */
        off_t total = new_size;
        for (size_t i = 0; i < ELEMENTSOF(old); i++) {
                off_t sz = file_size(path, old[i]);
                cr_assert(sz >= 0 || i == 0 || file_size(path, old[i - 1]) < 0, "%s went, the older %s stayed",
                          old[i], old[i ? i - 1 : 0]);
                total += sz > 0 ? sz : 0;
        }
        cr_assert(file_size(path, old[0]) < 0, "the oldest snapshot stayed beyond max_use=500K");
        cr_assert(total <= 500 * 1024 || (file_size(path, old[2]) < 0 && total == new_size),
                  "%lld bytes of snapshots kept under max_use=500K", (long long) total);
        _cleanup_free_ char *err = test_slurp(c.err_path, &n);
        cr_assert(err && strstr(err, "removed"), "tracectl did not say it removed older snapshots: %s",
                  err ? err : "");

        cr_assert_eq(unlink(printed), 0);
        for (size_t i = 0; i < ELEMENTSOF(old); i++) {
                char p[800];
                snprintf(p, sizeof(p), "%s/%s", path, old[i]);
                (void) unlink(p);
        }
        snprintf(out, sizeof(out), "%s/notes.txt", path);
        cr_assert_eq(unlink(out), 0);
        cr_assert_eq(rmdir(path), 0);
}

/* With [plugins] hosts=lazy no plugin host runs at the start: the resident
 * session that names linux.process_stats has the ftrace plugin's host
 * started, and again after the core died and traced started again. */
Test(resident, a_lazy_plugin_host_starts_for_a_resident_session_also_after_a_core_restart) {
        write_recorder("recorder.cfg", 1024);
        const char *lazy_args[] = { args[0], args[1], args[2], "--plugin-hosts=lazy", NULL };
        cr_assert_eq(traced_instance_restart(&inst, true, lazy_args), 0);
        wait_listed("recorder", true);
        cr_assert(fixture_wait_log(&inst, ev, "linux.process_stats instance ", " processes at start", 0, 30000),
                  "linux.process_stats never joined the resident session");
        cr_assert_neq(fixture_plugin_host_pid(&inst, "ftrace.so"), 0, "no host of the ftrace plugin runs");
        /* Nothing named the others. */
        cr_assert_eq(fixture_plugin_host_pid(&inst, "perf.so"), 0, "the perf plugin's host runs");
        cr_assert_eq(fixture_plugin_host_pid(&inst, "sysstats.so"), 0, "the sysstats plugin's host runs");

        pid_t core = traced_instance_core_pid(&inst);
        cr_assert_gt(core, 0);
        cr_assert_eq(kill(core, SIGKILL), 0);
        cr_assert_neq(traced_instance_stop(&inst), 0, "traced exited cleanly after losing its core");
        unsigned scans = fixture_log_count(&inst, "linux.process_stats instance ", " processes at start");
        cr_assert_eq(traced_instance_restart(&inst, true, lazy_args), 0);
        wait_listed("recorder", true);
        cr_assert(fixture_wait_log(&inst, ev, "linux.process_stats instance ", " processes at start", scans, 30000),
                  "linux.process_stats never joined the restarted resident session");
        cr_assert_neq(fixture_plugin_host_pid(&inst, "ftrace.so"), 0, "no host of the ftrace plugin runs");
        cr_assert_eq(fixture_plugin_host_pid(&inst, "perf.so"), 0, "the perf plugin's host runs");
}
