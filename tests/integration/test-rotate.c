/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Rotation (tracectl record --rotate, TraceConfig.traced_rotation), as a
 * user runs it: the real traced with this build's plugins, tracectl
 * recording ftrace into a directory, numbered trace_marker lines written
 * meanwhile, then every file decoded on its own. Each line is in exactly
 * one file; each file opens alone (the config, clocks, system info, a
 * process tree with thread names, its own TraceStats at the end); --keep
 * holds; a core killed mid-rotation leaves every closed file whole and the
 * open one readable; a full disk stops the session with its reason. When
 * TRACED_TRACE_PROCESSOR names upstream's trace_processor_shell, every
 * file is loaded in it too (thread names, no error or data loss stats). */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "plugin-fixture.h"
#include "traced-instance.h"
#include "tracectl-child.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define EXIT_ENDED_EARLY 75
#define MAX_FILES 256
#define MARKER_PREFIX "rotate-marker-"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        if (geteuid() != 0 || !fixture_tracefs_usable())
                cr_skip_test("needs root and tracefs for the ftrace plugin");
        cr_assert_eq(fixture_start(&inst, &ev), 0, "could not start traced");
}

static void teardown(void) {
        char small[600];
        snprintf(small, sizeof(small), "%s/small", inst.dir);
        (void) umount2(small, MNT_DETACH); /* a_full_disk_stops_the_session_cleanly's, on its way out */
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(rotate, .init = setup, .fini = teardown, .timeout = 240);

/* What one file holds. */
struct file_check {
        unsigned markers_total;
        unsigned *marker_count; /* per marker number, across files */
        unsigned n_markers;
        bool config, clock, system_info, thread_names, stats_last, torn_ok;
        /* Processes alive throughout the recording, and how many of them
         * the file's process trees describe. */
        const int *lived;
        size_t n_lived, n_lived_described;
        bool *described;
        unsigned packets;
        Perfetto__Protos__TracePacket__DataCase last;
        uint64_t flushes_requested; /* the file's TraceStats */
};

static void check_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct file_check *k = userdata;
        k->packets++;
        k->last = p->data_case;
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
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS:
                k->flushes_requested = p->trace_stats->flushes_requested;
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
                for (size_t i = 0; i < p->process_tree->n_processes; i++)
                        for (size_t j = 0; j < k->n_lived; j++)
                                if (p->process_tree->processes[i]->pid == k->lived[j] && !k->described[j]) {
                                        k->described[j] = true;
                                        k->n_lived_described++;
                                }
                for (size_t i = 0; i < p->process_tree->n_threads; i++)
                        if (p->process_tree->threads[i]->name && p->process_tree->threads[i]->name[0])
                                k->thread_names = true;
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
                for (size_t i = 0; i < p->ftrace_events->n_event; i++) {
                        const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[i];
                        if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT || !e->print->buf)
                                continue;
                        const char *m = strstr(e->print->buf, MARKER_PREFIX);
                        if (!m)
                                continue;
                        unsigned n = (unsigned) strtoul(m + strlen(MARKER_PREFIX), NULL, 10);
                        if (n < k->n_markers) {
                                k->marker_count[n]++;
                                k->markers_total++;
                        }
                }
                break;
        default:
                break;
        }
}

/* The names in dir ending in suffix, sorted. */
static size_t list_dir(const char *dir, const char *suffix, char names[][128], size_t max) {
        DIR *d = opendir(dir);
        cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));) {
                size_t len = strlen(e->d_name), sl = strlen(suffix);
                if (len > sl && strcmp(e->d_name + len - sl, suffix) == 0 && n < max)
                        snprintf(names[n++], 128, "%s", e->d_name);
        }
        closedir(d);
        qsort(names, n, 128, (int (*)(const void *, const void *)) strcmp);
        return n;
}

/* Decodes dir/name alone; every packet must decode. */
static void check_file(const char *dir, const char *name, struct file_check *k) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        k->config = k->clock = k->system_info = k->thread_names = false;
        k->packets = 0;
        k->flushes_requested = UINT64_MAX;
        k->n_lived_described = 0;
        if (k->described)
                memset(k->described, 0, k->n_lived * sizeof(bool));
        fixture_for_each_packet(fd, check_packet, k);
        close(fd);
        k->stats_last = k->last == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS;
}

/* The pids in /proc now, sorted. */
static size_t live_pids(int *pids, size_t max) {
        DIR *d = opendir("/proc");
        cr_assert_not_null(d);
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d)) && n < max;)
                if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
                        pids[n++] = atoi(e->d_name);
        closedir(d);
        return n;
}

/* Loads path in upstream's trace_processor_shell when the environment
 * names one: thread names there, and no stat of severity error or
 * data_loss. */
static void check_in_trace_processor(const char *path) {
        const char *tp = getenv("TRACED_TRACE_PROCESSOR");
        if (!tp || access(tp, X_OK) != 0)
                return;
        char cmd[4096];
        snprintf(cmd, sizeof(cmd),
                 "'%s' -q /dev/stdin '%s' 2>&1 <<'EOF'\n"
                 "select 'threads', count(*) from thread where name is not null;\n"
                 "select 'bad', name, idx, value from stats where severity in ('error', 'data_loss') and value > 0;\n"
                 "EOF",
                 tp, path);
        FILE *f = popen(cmd, "r");
        cr_assert_not_null(f);
        char line[1024], all[16384] = "";
        bool threads = false, bad = false;
        while (fgets(line, sizeof(line), f)) {
                strncat(all, line, sizeof(all) - strlen(all) - 1);
                if (strstr(line, "\"threads\"") && !strstr(line, "\"threads\",0"))
                        threads = true;
                if (strstr(line, "\"bad\""))
                        bad = true;
        }
        cr_assert_eq(pclose(f), 0, "trace_processor failed on %s: %s", path, all);
        cr_assert(threads, "trace_processor finds no thread names in %s: %s", path, all);
        cr_assert(!bad, "trace_processor reports errors or data loss in %s: %s", path, all);
}

/* linux.ftrace and linux.process_stats, which keeps incremental state;
 * with ftrace_only, linux.ftrace alone and no periodic flush. */
static void write_config_of(char *path, size_t size, unsigned duration_ms, bool ftrace_only) {
        snprintf(path, size, "%s/rotate.pbtxt", inst.dir);
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        fprintf(f,
                "buffers { size_kb: 16384 }\n"
                "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_waking\"\n"
                "  ftrace_events: \"task/task_newtask\" ftrace_events: \"task/task_rename\"\n"
                "  ftrace_events: \"ftrace/print\" compact_sched { enabled: true } drain_period_ms: 100 } } }\n"
                "%s"
                "duration_ms: %u\n",
                ftrace_only ? ""
                            : "data_sources { config { name: \"linux.process_stats\" process_stats_config {\n"
                              "  scan_all_processes_on_start: true } } }\n"
                              "flush_period_ms: 2000\n",
                duration_ms);
        cr_assert_eq(fclose(f), 0);
}

static void write_config(char *path, size_t size, unsigned duration_ms) {
        write_config_of(path, size, duration_ms, false);
}

/* dir, made as a user would for the service (tracectl(1)): group of the
 * service core's user (traced, or nobody where there is no such user),
 * group-writable, setgid. */
static void make_rotation_dir(const char *dir) {
        struct passwd *pw = getpwnam("traced");
        if (!pw)
                pw = getpwnam("nobody");
        cr_assert_not_null(pw, "neither traced nor nobody is a user here");
        gid_t gid = pw->pw_gid;
        cr_assert_eq(mkdir(dir, 0750), 0, "%s: %s", dir, strerror(errno));
        cr_assert_eq(chown(dir, (uid_t) -1, gid), 0);
        cr_assert_eq(chmod(dir, 02770), 0);
}

/* Records with tracectl into dir with the extra arguments while n
 * numbered markers are written, and returns tracectl's exit status. */
static int record_markers_of(const char *dir, const char *rotate, const char *keep, unsigned n, unsigned duration_ms,
                             bool ftrace_only) {
        char config[1024], out[1100];
        struct tracectl_child c;
        write_config_of(config, sizeof(config), duration_ms, ftrace_only);
        snprintf(out, sizeof(out), "%s/", dir);
        make_rotation_dir(dir);
        const char *args[] = { "record", "-c", config, "--txt", "--rotate", rotate, "-o", out,
                               keep ? "--keep" : NULL, keep, NULL };
        int root = fixture_root_lock(); /* records in the root instance */
        unsigned started = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, args, 0);
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, started, 90000), "linux.ftrace never started");
        for (unsigned i = 0; i < n; i++) {
                /* Long enough that the markers alone fill several files,
                 * however little else the machine does meanwhile; in
                 * atrace's counter syntax, which trace_processor parses
                 * (free text counts as a systrace_parse_failure there). */
                char text[160];
                snprintf(text, sizeof(text), "C|%d|" MARKER_PREFIX "%u-long-enough-that-markers-alone-rotate-files|%u",
                         (int) getpid(), i, i);
                int r = fixture_write_root_marker(text);
                cr_assert_eq(r, 0, "trace_marker: %s", strerror(-r));
                if (i % 50 == 49)
                        spin_ms(ev, 20);
        }
        int rc = tracectl_child_wait(&c, ev, duration_ms + 60000);
        fixture_root_unlock(root);
        if (rc != 0) {
                char *se = test_slurp(c.err_path, NULL);
                cr_log_warn("tracectl: %s", se ? se : "");
                free(se);
        }
        return rc;
}

static int record_markers(const char *dir, const char *rotate, const char *keep, unsigned n, unsigned duration_ms) {
        return record_markers_of(dir, rotate, keep, n, duration_ms, false);
}

Test(rotate, each_marker_in_exactly_one_file_and_each_file_alone) {
        enum { N = 3000 };
        char dir[600], names[MAX_FILES][128];
        static int before[65536], after[65536], lived[65536];
        snprintf(dir, sizeof(dir), "%s/traces", inst.dir);
        size_t n_before = live_pids(before, 65536);
        int rc = record_markers(dir, "96kb", NULL, N, 6000);
        cr_assert_eq(rc, 0, "tracectl record --rotate failed (%d)", rc);
        size_t n_after = live_pids(after, 65536), n_lived = 0;
        for (size_t i = 0; i < n_before; i++)
                for (size_t j = 0; j < n_after; j++)
                        if (before[i] == after[j])
                                lived[n_lived++] = before[i];

        cr_assert_eq(list_dir(dir, ".part", names, MAX_FILES), 0, "a .part file was left");
        size_t n = list_dir(dir, ".pftrace", names, MAX_FILES);
        cr_assert_geq(n, 3, "only %zu files for a 96 KiB rotation", n);
        unsigned *count = calloc(N, sizeof(unsigned));
        bool *described = calloc(n_lived, sizeof(bool));
        struct file_check k = { .marker_count = count, .n_markers = N, .lived = lived, .n_lived = n_lived,
                                .described = described };
        for (size_t i = 0; i < n; i++) {
                check_file(dir, names[i], &k);
                cr_assert(k.config && k.clock && k.system_info, "%s does not start with the service's packets",
                          names[i]);
                cr_assert(k.thread_names, "%s has no process tree with thread names", names[i]);
                /* Every file describes every process (linux.process_stats
                 * scanned them again at the cut), not only those that ran
                 * while it was written. */
                cr_assert_geq(k.n_lived_described * 10, n_lived * 9,
                              "%s describes %zu of the %zu processes alive throughout", names[i],
                              k.n_lived_described, n_lived);
                cr_assert(k.stats_last, "%s does not end with its TraceStats", names[i]);
                char path[1024];
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                check_in_trace_processor(path);
        }
        for (unsigned i = 0; i < N; i++)
                cr_assert_eq(count[i], 1, "marker %u is in %u files", i, count[i]);
        free(count);
        free(described);
}

/* With no data source that keeps incremental state, nothing waits at a
 * cut: no flush is asked (each closed file's TraceStats counts none), and
 * still every packet is in exactly one file. */
Test(rotate, a_cut_flushes_only_data_sources_with_incremental_state) {
        enum { N = 3000 };
        char dir[600], names[MAX_FILES][128];
        snprintf(dir, sizeof(dir), "%s/traces", inst.dir);
        int rc = record_markers_of(dir, "64kb", NULL, N, 5000, true);
        cr_assert_eq(rc, 0, "tracectl record --rotate failed (%d)", rc);
        /* Files are cut at the first drain past the size: a loaded
         * machine drains less often, in larger pieces, and makes fewer. At
         * least one of them is then before the last two. */
        size_t n = list_dir(dir, ".pftrace", names, MAX_FILES);
        cr_assert_geq(n, 3, "only %zu files for a 64 KiB rotation", n);
        unsigned *count = calloc(N, sizeof(unsigned));
        struct file_check k = { .marker_count = count, .n_markers = N };
        for (size_t i = 0; i < n; i++) {
                check_file(dir, names[i], &k);
                cr_assert(k.config && k.clock && k.system_info && k.stats_last, "%s is not a whole trace",
                          names[i]);
                /* The flush of the session's end is in the last file, or
                 * in the one before when a cut came while it ran. */
                if (i + 2 < n)
                        cr_assert_eq(k.flushes_requested, 0, "%s: %" PRIu64 " flush(es) at its cut", names[i],
                                     k.flushes_requested);
        }
        for (unsigned i = 0; i < N; i++)
                cr_assert_eq(count[i], 1, "marker %u is in %u files", i, count[i]);
        free(count);
}

Test(rotate, keep_holds_the_newest_files) {
        char dir[600], names[MAX_FILES][128];
        snprintf(dir, sizeof(dir), "%s/kept", inst.dir);
        /* Enough markers alone for four files: a quiet machine adds few
         * sched events. */
        int rc = record_markers(dir, "128kb", "2", 8000, 5000);
        cr_assert_eq(rc, 0, "tracectl record --rotate --keep failed (%d)", rc);
        size_t n = list_dir(dir, ".pftrace", names, MAX_FILES);
        cr_assert_eq(n, 2, "%zu files kept for --keep 2", n);
        /* The two newest: consecutive numbers, the last one the end. */
        const char *a = strrchr(names[0], '-'), *b = strrchr(names[1], '-');
        cr_assert(a && b);
        unsigned long na = strtoul(a + 1, NULL, 10), nb = strtoul(b + 1, NULL, 10);
        cr_assert_eq(nb, na + 1, "kept %s and %s", names[0], names[1]);
        cr_assert_geq(na, 2, "no file was ever removed (%s, %s)", names[0], names[1]);
        struct file_check k = {};
        check_file(dir, names[1], &k);
        cr_assert(k.stats_last, "the last file does not end with its TraceStats");
}

/* Packets of dir/name that decode, up to the first that does not (a torn
 * tail): how many, and whether the whole file was read. */
static unsigned count_whole_packets(const char *dir, const char *name, bool *ret_whole) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        size_t len;
        char *buf = test_slurp(path, &len);
        cr_assert_not_null(buf, "%s: %s", path, strerror(errno));
        size_t pos = 0;
        unsigned n = 0;
        struct pbr_field f;
        int r;
        while ((r = pbr_next((const uint8_t *) buf, len, &pos, &f)) > 0) {
                cr_assert(f.number == 1 && f.wire_type == 2, "%s does not parse at packet %u", name, n);
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, f.len, f.data);
                cr_assert_not_null(p, "%s: packet %u does not decode", name, n);
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
                n++;
        }
        *ret_whole = r == 0;
        free(buf);
        return n;
}

static const char *const fixture_args[] = { "--plugin-dir=" TOP_BUILDDIR "/plugins/.libs",
                                            "--plugin-host=" TOP_BUILDDIR "/tests/bin/traced-plugin-host", NULL };

/* The core killed while it rotates: every closed file is whole (it ends
 * with its TraceStats), the one being written reads up to its last whole
 * packet, and the service started again serves. */
Test(rotate, a_killed_core_leaves_readable_files) {
        char config[1024], dir[600], out[700], names[MAX_FILES][128];
        struct tracectl_child c;
        snprintf(dir, sizeof(dir), "%s/crash", inst.dir);
        snprintf(out, sizeof(out), "%s/", dir);
        make_rotation_dir(dir);
        write_config(config, sizeof(config), 60000);
        int root = fixture_root_lock();
        unsigned started = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                             (const char *const[]) { "record", "-c", config, "--txt", "--rotate", "128kb", "-o", out,
                                                     NULL },
                             0);
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, started, 90000), "linux.ftrace never started");
        /* Markers until three files are closed. */
        size_t n = 0;
        for (unsigned i = 0; i < 200000 && n < 3; i++) {
                char text[64];
                snprintf(text, sizeof(text), MARKER_PREFIX "%u", i);
                cr_assert_eq(fixture_write_root_marker(text), 0);
                if (i % 100 == 99) {
                        spin_ms(ev, 20);
                        n = list_dir(dir, ".pftrace", names, MAX_FILES);
                }
        }
        cr_assert_geq(n, 3, "the files were not cut");
        /* And until the file being written shows 64 KiB. */
        for (unsigned i = 0; i < 200000; i++) {
                char text[64], parts[2][128], path[1024];
                struct stat st;
                snprintf(text, sizeof(text), MARKER_PREFIX "%u", i);
                cr_assert_eq(fixture_write_root_marker(text), 0);
                if (i % 100 != 99)
                        continue;
                spin_ms(ev, 20);
                if (list_dir(dir, ".part", parts, 2) != 1)
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, parts[0]);
                if (stat(path, &st) == 0 && st.st_size >= 64 * 1024)
                        break;
        }
        pid_t core = traced_instance_core_pid(&inst);
        cr_assert_gt(core, 0, "no service core under traced %d", (int) inst.pid);
        cr_assert_eq(kill(core, SIGKILL), 0);
        int rc = tracectl_child_wait(&c, ev, 30000);
        fixture_root_unlock(root);
        cr_assert_eq(rc, EXIT_ENDED_EARLY, "tracectl exited %d", rc);

        n = list_dir(dir, ".pftrace", names, MAX_FILES);
        for (size_t i = 0; i < n; i++) {
                struct file_check k = {};
                check_file(dir, names[i], &k);
                cr_assert(k.config && k.stats_last, "closed file %s is not whole", names[i]);
        }
        char parts[4][128];
        size_t np = list_dir(dir, ".part", parts, 4);
        /* The file being written, and the one before it if its writer was
         * still making it whole (fsync, rename) when the core died. */
        cr_assert_leq(np, 2, "%zu files were being written", np);
        for (size_t i = 0; i < np; i++) {
                bool whole;
                unsigned packets = count_whole_packets(dir, parts[i], &whole);
                cr_assert_geq(packets, 5, "%s holds %u packets", parts[i], packets);
        }

        cr_assert_neq(traced_instance_stop(&inst), 0, "traced exited cleanly after losing its core");
        cr_assert_eq(traced_instance_restart(&inst, true, fixture_args), 0);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, (const char *const[]) { "query", NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 20000), 0);
}

/* A full disk (a small tmpfs) stops a detached rotating session with its
 * reason, in tracectl query and the log; every file left is whole. */
Test(rotate, a_full_disk_stops_the_session_cleanly) {
        char config[1024], dir[600], out[700], names[MAX_FILES][128];
        struct tracectl_child c;
        snprintf(dir, sizeof(dir), "%s/small", inst.dir);
        make_rotation_dir(dir);
        struct stat st;
        cr_assert_eq(stat(dir, &st), 0);
        char opts[128];
        snprintf(opts, sizeof(opts), "size=600k,mode=2770,gid=%u", (unsigned) st.st_gid);
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
        snprintf(out, sizeof(out), "%s/", dir);
        write_config(config, sizeof(config), 60000);
        int root = fixture_root_lock();
        unsigned started = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path,
                             (const char *const[]) { "record", "-c", config, "--txt", "--rotate", "128kb", "-o", out,
                                                     "--detach", "rotate-full", NULL },
                             0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 30000), 0, "tracectl record --detach failed");
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, started, 90000), "linux.ftrace never started");
        unsigned before = fixture_log_count(&inst, "Session ", " disabled: ");
        for (unsigned i = 0; i < 400000 && fixture_log_count(&inst, "Session ", " disabled: ") == before; i++) {
                char text[128];
                snprintf(text, sizeof(text), MARKER_PREFIX "%u filling the disk with markers", i);
                int r = fixture_write_root_marker(text);
                /* The session stopped and switched tracing off before
                 * its log line came: the wait below checks the stop. */
                if (r == -EBADF)
                        break;
                cr_assert_eq(r, 0, "trace_marker: %s", strerror(-r));
                if (i % 200 == 199)
                        spin_ms(ev, 10);
        }
        fixture_root_unlock(root);
        cr_assert(fixture_wait_log(&inst, ev, "Session ", " disabled: ", before, 30000), "the session did not stop");
        char *line = fixture_log_last(&inst, "Session ", " disabled: ");
        cr_assert(line && strstr(line, "disk"), "the log does not say the disk is full: %s", line ? line : "");
        free(line);

        /* tracectl query names the reason. */
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, (const char *const[]) { "query", NULL }, 0);
        cr_assert_eq(tracectl_child_wait(&c, ev, 20000), 0);
        char *q = test_slurp(c.out, NULL);
        cr_assert(q && strstr(q, "disk"), "tracectl query does not say why the session stopped: %s", q ? q : "");
        free(q);

        cr_assert_eq(list_dir(dir, ".part", names, MAX_FILES), 0, "a .part file was left");
        size_t n = list_dir(dir, ".pftrace", names, MAX_FILES);
        cr_assert_geq(n, 1);
        for (size_t i = 0; i < n; i++) {
                bool whole;
                unsigned packets = count_whole_packets(dir, names[i], &whole);
                cr_assert(whole, "%s ends with a torn packet", names[i]);
                cr_assert_geq(packets, 5, "%s holds %u packets", names[i], packets);
        }
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, (const char *const[]) { "stop", "rotate-full", NULL }, 0);
        (void) tracectl_child_wait(&c, ev, 20000);
        cr_assert_eq(umount2(dir, MNT_DETACH), 0);
}

static uint64_t dir_bytes(const char *dir, char names[][128], size_t n) {
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
                char path[1024];
                struct stat st;
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                cr_assert_eq(stat(path, &st), 0);
                total += (uint64_t) st.st_size;
        }
        return total;
}

static unsigned long file_number(const char *name) {
        const char *dash = strrchr(name, '-');
        cr_assert_not_null(dash);
        return strtoul(dash + 1, NULL, 10);
}

/* tracectl ARGS (a recording of linux.ftrace in the root instance), with n
 * long markers written once it records: tracectl's exit status. */
static int record_filling(const char *const *args, unsigned n) {
        int root = fixture_root_lock();
        unsigned started = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        struct tracectl_child c;
        tracectl_child_spawn(&c, inst.dir, inst.consumer_path, args, 0);
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, started, 90000), "linux.ftrace never started");
        for (unsigned i = 0; i < n; i++) {
                char text[128];
                snprintf(text, sizeof(text), MARKER_PREFIX "%u and some text to fill the files faster", i);
                cr_assert_eq(fixture_write_root_marker(text), 0);
                if (i % 200 == 199)
                        spin_ms(ev, 20); /* the drain keeps up: none lost in the kernel's buffer */
        }
        int rc = tracectl_child_wait(&c, ev, 60000);
        fixture_root_unlock(root);
        if (rc != 0) {
                char *se = test_slurp(c.err_path, NULL);
                cr_log_warn("tracectl: %s", se ? se : "");
                free(se);
        }
        return rc;
}

/* traced.conf's max_use caps the trace directory: a session rotating in
 * it (output_path DIR/...) loses its oldest files, never the newest. */
Test(rotate, max_use_caps_the_trace_directory) {
        char tdir[600], sdir[700], conf[1024], config[1024], names[MAX_FILES][128];
        snprintf(tdir, sizeof(tdir), "%s/tdir", inst.dir);
        snprintf(sdir, sizeof(sdir), "%s/sess", tdir);
        make_rotation_dir(tdir);
        cr_assert_eq(traced_instance_stop(&inst), 0);
        snprintf(conf, sizeof(conf), "[service]\ntrace_directory = %s\nmax_use = 400K\n", tdir);
        cr_assert_eq(traced_instance_restart_conf(&inst, conf, fixture_args), 0);

        snprintf(config, sizeof(config), "%s/max-use.pbtxt", inst.dir);
        FILE *f = fopen(config, "we");
        cr_assert_not_null(f);
        fprintf(f,
                "buffers { size_kb: 16384 }\n"
                "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"ftrace/print\"\n"
                "  compact_sched { enabled: true } drain_period_ms: 100 } } }\n"
                "duration_ms: 5000\n"
                "output_path: \"%s/\"\n"
                "traced_rotation { file_size_bytes: 131072 }\n",
                sdir);
        cr_assert_eq(fclose(f), 0);
        /* About 1 MiB of markers alone, whatever else the machine runs. */
        int rc = record_filling((const char *const[]) { "record", "-c", config, "--txt", NULL }, 12000);
        cr_assert_eq(rc, 0, "tracectl record into output_path %s/ failed (%d)", sdir, rc);
        size_t n = list_dir(sdir, ".pftrace", names, MAX_FILES);
        cr_assert_geq(n, 1);
        uint64_t total = dir_bytes(sdir, names, n);
        cr_assert_leq(total, 400 * 1024, "%zu files of %llu bytes in all kept under max_use=400K", n,
                      (unsigned long long) total);
        cr_assert_geq(file_number(names[0]), 2, "no file was removed for max_use (%zu files)", n);
        for (size_t i = 1; i < n; i++)
                cr_assert_eq(file_number(names[i]), file_number(names[i - 1]) + 1, "a newer file went before %s",
                             names[i - 1]);
}

/* traced.conf's keep_free: a rotation on a small file system removes its
 * oldest files to keep that much free, and records on. */
Test(rotate, keep_free_removes_the_oldest_files) {
        char dir[600], out[700], conf[256], config[1024], opts[128], names[MAX_FILES][128];
        snprintf(dir, sizeof(dir), "%s/small", inst.dir);
        make_rotation_dir(dir);
        struct stat st;
        cr_assert_eq(stat(dir, &st), 0);
        snprintf(opts, sizeof(opts), "size=1m,mode=2770,gid=%u", (unsigned) st.st_gid);
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
        cr_assert_eq(traced_instance_stop(&inst), 0);
        snprintf(conf, sizeof(conf), "[service]\nkeep_free = 640K\n");
        cr_assert_eq(traced_instance_restart_conf(&inst, conf, fixture_args), 0);

        snprintf(out, sizeof(out), "%s/", dir);
        write_config(config, sizeof(config), 5000);
        int rc = record_filling((const char *const[]) { "record", "-c", config, "--txt", "--rotate", "128kb", "-o",
                                                        out, NULL },
                                10000);
        cr_assert_eq(rc, 0, "the recording did not go on (%d)", rc);
        size_t n = list_dir(dir, ".pftrace", names, MAX_FILES);
        cr_assert_geq(n, 1);
        cr_assert_geq(file_number(names[0]), 2, "no file was removed for keep_free (%zu files)", n);
        for (size_t i = 0; i < n; i++) {
                bool whole;
                (void) count_whole_packets(dir, names[i], &whole);
                cr_assert(whole, "%s is torn", names[i]);
        }
        cr_assert_eq(umount2(dir, MNT_DETACH), 0);
}
