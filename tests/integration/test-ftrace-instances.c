/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ftrace plugin's choice of tracefs instance, as traced_probes makes
 * it (the root without instance_name, instances/<name> with it, the state
 * of a shared instance put back afterwards), and what its FtraceStats
 * packets report. Run by the real traced on the real kernel.
 *
 * The kernel is shared with other tests and with whatever ran before: the
 * root's tracing_on may be 0 (what upstream's traced_probes leaves, or a
 * user's choice), so writes into the root's trace_marker go through
 * fixture_write_root_marker, which switches tracing on for the write and
 * puts it back. Recordings in the root hold the tests' root lock
 * (fixture_root_lock); other than that, the tests look at what their own
 * session recorded (their own trace_marker writes) and at instances they
 * own. */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin-fixture.h"
#include "test-scratch.h"

#include "perfetto/common/observable_events.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/ftrace/ftrace_stats.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define TRACEFS "/sys/kernel/tracing"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        if (fixture_tracefs_usable())
                cr_assert_eq(fixture_start(&inst, &ev), 0);
}

/* The instance existing_named_instance_is_put_back creates: removed here
 * too, so a failed assertion does not leave it behind. */
static void keep_instance_path(char *buf, size_t size) {
        snprintf(buf, size, TRACEFS "/instances/uc_keep_%d", (int) getpid());
}

/* The instance a_session_enabled_as_traced_starts_records_at_once makes. */
static void start_instance_path(char *buf, size_t size) {
        snprintf(buf, size, TRACEFS "/instances/uc_start_%d", (int) getpid());
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
        char dir[256];
        keep_instance_path(dir, sizeof(dir));
        if (rmdir(dir) < 0 && errno != ENOENT)
                cr_expect(false, "cannot remove %s: %m", dir);
        start_instance_path(dir, sizeof(dir));
        if (rmdir(dir) < 0 && errno != ENOENT)
                cr_expect(false, "cannot remove %s: %m", dir);
}

TestSuite(ftrace_instances, .init = setup, .fini = teardown, .timeout = 180);

#define SKIP_WITHOUT_TRACEFS()                                                          \
        do {                                                                            \
                if (!ev) {                                                              \
                        cr_skip_test("tracefs is not available on this kernel/machine"); \
                        return;                                                         \
                }                                                                       \
        } while (0)

static void write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "cannot open %s: %m", path);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text), "write to %s: %m", path);
        close(fd);
}

static void write_marker(const char *path, const char *text) {
        int r = fixture_write_marker(path, text);
        cr_assert_eq(r, 0, "write to %s: %s", path, strerror(-r));
}

static void read_line(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "cannot open %s: %m", path);
        if (!fgets(buf, (int) size, f))
                buf[0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
}

static bool subbuf_default(void) {
        return !getenv("TRACED_FTRACE_SUBBUF_KB"); /* else the plugin asks for that */
}

/* Whether the plugin could size the sub-buffers: said in the log when
 * the kernel does not let them be sized. */
static bool subbuf_resizable(void) {
        int r = fixture_subbuf_resizable();
        if (r < 0)
                cr_log_info("this kernel does not let sub-buffers be sized (%s): their size is not checked",
                            strerror(-r));
        return r >= 0;
}

/* An instance's sub-buffer size in KiB; 0 on kernels without the file
 * (before Linux 6.8), where the plugin leaves it alone. */
static int subbuf_kb(const char *instance_dir) {
        char path[320], line[64];
        snprintf(path, sizeof(path), "%s/buffer_subbuf_size_kb", instance_dir);
        if (access(path, F_OK) < 0)
                return 0;
        read_line(path, line, sizeof(line));
        return atoi(line);
}

struct seen {
        const char *want[4];
        bool found[4];
        Perfetto__Protos__FtraceStats *end_stats;
        unsigned n_stats;
};

static void collect(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct seen *k = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                for (size_t i = 0; i < p->ftrace_events->n_event; i++) {
                        const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[i];
                        if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT || !e->print->buf)
                                continue;
                        for (size_t w = 0; w < 4 && k->want[w]; w++)
                                if (strstr(e->print->buf, k->want[w]))
                                        k->found[w] = true;
                }
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS) {
                k->n_stats++;
                if (p->ftrace_stats->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE) {
                        /* Keep a copy: the packet goes away after this call. */
                        size_t n = perfetto__protos__ftrace_stats__get_packed_size(p->ftrace_stats);
                        uint8_t *b = malloc(n ? n : 1);
                        perfetto__protos__ftrace_stats__pack(p->ftrace_stats, b);
                        k->end_stats = perfetto__protos__ftrace_stats__unpack(NULL, n, b);
                        free(b);
                }
        }
}

static void record(const char *ftrace_config, void (*action)(void *), void *data, struct seen *k) {
        char text[2048];
        snprintf(text, sizeof(text),
                 "buffers { size_kb: 8192 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config { %s drain_period_ms: 50 } } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 ftrace_config);
        fixture_record(&inst, ev, "linux.ftrace", text, action, data, collect, k);
}

/* ---- FtraceStats ---------------------------------------------------------- */

static void nothing(void *data) {
        spin_ms(ev, 200);
}

static bool kallsyms_visible(void) {
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[256];
        bool nonzero = false;
        while (f && !nonzero && fgets(line, sizeof(line), f))
                nonzero = strtoull(line, NULL, 16) != 0;
        if (f)
                fclose(f);
        return nonzero;
}

Test(ftrace_instances, stats_name_unknown_events_atrace_and_ksyms) {
        SKIP_WITHOUT_TRACEFS();
        struct seen k = {};
        record("ftrace_events: \"sched/sched_switch\" ftrace_events: \"nosuchgroup/nosuchevent\" "
               "ftrace_events: \"no_such_event_anywhere\" atrace_categories: \"gfx\" symbolize_ksyms: true "
               "preserve_ftrace_buffer: true",
               nothing, NULL, &k);
        cr_assert_eq(k.n_stats, 2, "%u ftrace_stats packets", k.n_stats);
        Perfetto__Protos__FtraceStats *st = k.end_stats;
        cr_assert_not_null(st);
        cr_assert_eq(st->n_unknown_ftrace_events, 2, "%zu unknown events reported", st->n_unknown_ftrace_events);
        cr_assert_str_eq(st->unknown_ftrace_events[0], "nosuchgroup/nosuchevent");
        cr_assert_str_eq(st->unknown_ftrace_events[1], "no_such_event_anywhere");
        cr_assert_eq(st->n_failed_ftrace_events, 0);
        cr_assert_not_null(st->atrace_errors, "atrace was asked for and not reported");
        cr_assert(st->has_preserve_ftrace_buffer && st->preserve_ftrace_buffer);
        cr_assert_eq(st->n_ftrace_parse_errors, 0, "the kernel's pages did not parse");
        if (kallsyms_visible()) {
                cr_assert(st->has_kernel_symbols_parsed && st->kernel_symbols_parsed > 1000,
                          "kernel_symbols_parsed %u", st->kernel_symbols_parsed);
                cr_assert(st->has_kernel_symbols_mem_kb && st->kernel_symbols_mem_kb > 0);
        } else
                cr_log_warn("kallsyms addresses are hidden here; kernel_symbols_* not checked");
        perfetto__protos__ftrace_stats__free_unpacked(st, NULL);
}

/* ---- instances ------------------------------------------------------------ */

struct marker_action {
        char instance_dir[256]; /* where the session should record */
        char own_marker[320];
        char own_text[64], root_text[64];
        bool dir_existed_during;
        int subbuf_kb_during;
};

static void write_markers(void *data) {
        struct marker_action *a = data;
        struct stat st;
        a->dir_existed_during = stat(a->instance_dir, &st) == 0;
        if (a->dir_existed_during)
                a->subbuf_kb_during = subbuf_kb(a->instance_dir);
        if (a->own_marker[0] && a->dir_existed_during)
                write_marker(a->own_marker, a->own_text);
        int r = fixture_write_root_marker(a->root_text);
        cr_assert_eq(r, 0, "write to the root's trace_marker: %s", strerror(-r));
        spin_ms(ev, 300);
}

Test(ftrace_instances, instance_name_records_in_that_instance) {
        SKIP_WITHOUT_TRACEFS();
        struct marker_action a = {};
        char cfg[256];
        snprintf(cfg, sizeof(cfg), "ftrace_events: \"ftrace/print\" instance_name: \"uc_named_%d\"", (int) getpid());
        snprintf(a.instance_dir, sizeof(a.instance_dir), TRACEFS "/instances/uc_named_%d", (int) getpid());
        snprintf(a.own_marker, sizeof(a.own_marker), "%s/trace_marker", a.instance_dir);
        snprintf(a.own_text, sizeof(a.own_text), "uc-named-%d", (int) getpid());
        snprintf(a.root_text, sizeof(a.root_text), "uc-top-%d", (int) getpid());
        struct seen k = { .want = { a.own_text, a.root_text } };
        record(cfg, write_markers, &a, &k);
        cr_assert(a.dir_existed_during, "%s did not exist during the session", a.instance_dir);
        cr_assert(k.found[0], "the write into the instance's trace_marker is not in the trace");
        cr_assert(!k.found[1], "a named instance recorded the top-level trace_marker");
        struct stat st;
        cr_assert_neq(stat(a.instance_dir, &st), 0, "the instance the session created is still there");
        if (k.end_stats)
                perfetto__protos__ftrace_stats__free_unpacked(k.end_stats, NULL);
}

Test(ftrace_instances, existing_named_instance_is_put_back) {
        SKIP_WITHOUT_TRACEFS();
        char dir[256], path[320], line[512], cfg[256];
        keep_instance_path(dir, sizeof(dir));
        (void) rmdir(dir);
        cr_assert_eq(mkdir(dir, 0700), 0, "cannot create %s: %m", dir);
        snprintf(path, sizeof(path), "%s/tracing_on", dir);
        write_file(path, "0");
        snprintf(path, sizeof(path), "%s/buffer_size_kb", dir);
        write_file(path, "512");
        char size_before[64];
        read_line(path, size_before, sizeof(size_before)); /* rounded to pages by the kernel */
        snprintf(path, sizeof(path), "%s/trace_clock", dir);
        write_file(path, "mono");
        int subbuf_before = subbuf_kb(dir);
        if (subbuf_before == 0)
                cr_log_warn("no buffer_subbuf_size_kb (Linux 6.8 and later): sub-buffers not checked");

        struct marker_action a = {};
        snprintf(a.instance_dir, sizeof(a.instance_dir), "%s", dir);
        snprintf(a.own_marker, sizeof(a.own_marker), "%s/trace_marker", dir);
        snprintf(a.own_text, sizeof(a.own_text), "uc-keep-%d", (int) getpid());
        snprintf(a.root_text, sizeof(a.root_text), "uc-keep-top-%d", (int) getpid());
        snprintf(cfg, sizeof(cfg),
                 "ftrace_events: \"ftrace/print\" ftrace_events: \"sched/sched_switch\" buffer_size_kb: 1024 "
                 "instance_name: \"uc_keep_%d\"",
                 (int) getpid());
        struct seen k = { .want = { a.own_text } };
        record(cfg, write_markers, &a, &k);
        cr_assert(k.found[0], "the write into the instance's trace_marker is not in the trace");

        struct stat st;
        cr_assert_eq(stat(dir, &st), 0, "an instance that existed before the session was removed");
        snprintf(path, sizeof(path), "%s/tracing_on", dir);
        read_line(path, line, sizeof(line));
        cr_assert_str_eq(line, "0", "tracing_on left at %s", line);
        snprintf(path, sizeof(path), "%s/buffer_size_kb", dir);
        read_line(path, line, sizeof(line));
        cr_assert_eq(atoi(line), atoi(size_before), "buffer_size_kb left at %s, was %s", line, size_before);
        snprintf(path, sizeof(path), "%s/trace_clock", dir);
        read_line(path, line, sizeof(line));
        cr_assert(strstr(line, "[mono]") != NULL, "trace_clock left at %s", line);
        /* 1024 KiB per CPU: 32 KiB sub-buffers (32 of them), then the
         * instance's own size back. */
        if (subbuf_before) {
                if (subbuf_default() && (a.subbuf_kb_during == 32 || subbuf_resizable()))
                        cr_assert_eq(a.subbuf_kb_during, 32, "sub-buffers of %d KiB during the session",
                                     a.subbuf_kb_during);
                cr_assert_eq(subbuf_kb(dir), subbuf_before, "buffer_subbuf_size_kb left at %d, was %d", subbuf_kb(dir),
                             subbuf_before);
        }
        snprintf(path, sizeof(path), "%s/events/sched/sched_switch/enable", dir);
        read_line(path, line, sizeof(line));
        cr_assert_str_eq(line, "0", "sched_switch left enabled");
        cr_assert_eq(rmdir(dir), 0, "cannot remove %s: %m", dir);
        if (k.end_stats)
                perfetto__protos__ftrace_stats__free_unpacked(k.end_stats, NULL);
}

struct root_action {
        char text[64];
        bool private_instance; /* our traced recorded in an instance of its own */
};

/* Private instances are named traced_<plugin host pid>_<n>: one whose pid
 * belongs to this test's traced means the root was not used. */
static void root_markers(void *data) {
        struct root_action *a = data;
        DIR *d = opendir(TRACEFS "/instances");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                long pid;
                if (sscanf(de->d_name, "traced_%ld_", &pid) == 1 && pid > 0 && fixture_descends_from((pid_t) pid, inst.pid))
                        a->private_instance = true;
        }
        if (d)
                closedir(d);
        int r = fixture_write_root_marker(a->text);
        cr_assert_eq(r, 0, "write to the root's trace_marker: %s", strerror(-r));
        spin_ms(ev, 300);
}

Test(ftrace_instances, no_instance_name_records_in_the_root) {
        SKIP_WITHOUT_TRACEFS();
        /* Another traced's session may hold the root for a while (the
         * session then records privately): try again until ours gets it. */
        for (int attempt = 0; attempt < 30; attempt++) {
                struct root_action a = {};
                snprintf(a.text, sizeof(a.text), "uc-root-%d-%d", (int) getpid(), attempt);
                struct seen k = { .want = { a.text } };
                record("ftrace_events: \"ftrace/print\"", root_markers, &a, &k);
                if (k.end_stats)
                        perfetto__protos__ftrace_stats__free_unpacked(k.end_stats, NULL);
                if (a.private_instance) {
                        spin_ms(ev, 500);
                        continue;
                }
                cr_assert(k.found[0], "the top-level trace_marker write is not in the trace");
                return;
        }
        cr_assert_fail("every session recorded in a private instance, never in the root");
}

struct kill_action {
        char before_size[64];
        int subbuf_kb_during;
        bool took_root; /* the root's buffer became this session's size */
        bool killed;
};

#define KILL_SESSION_KB 1164
/* The kernel rounds a size up to whole pages of data. */
static bool is_session_size(int kb) {
        return kb >= KILL_SESSION_KB && kb < KILL_SESSION_KB + 16;
}

/* buffer_size_kb as the size it has or will have ("7 (expanded: 1408)"
 * before the buffer is first used). */
static int size_kb(const char *line) {
        const char *exp = strstr(line, "expanded: ");
        return atoi(exp ? exp + strlen("expanded: ") : line);
}

static void kill_host(void *data) {
        struct kill_action *a = data;
        char line[256];
        read_line(TRACEFS "/buffer_size_kb", line, sizeof(line));
        a->took_root = is_session_size(size_kb(line));
        a->subbuf_kb_during = subbuf_kb(TRACEFS);
        pid_t host = fixture_plugin_host_pid(&inst, "ftrace.so");
        if (a->took_root && host > 0)
                a->killed = kill(host, SIGKILL) == 0;
        if (a->killed)
                spin_ms(ev, 2000); /* the supervisor restarts it after a backoff */
}

Test(ftrace_instances, the_root_is_put_back_after_the_host_is_killed) {
        SKIP_WITHOUT_TRACEFS();
        /* Wait until no session anywhere holds the root (its flock), so
         * that what is read here is the root's own state. */
        int tests_lock = fixture_root_lock();
        int lock = open(TRACEFS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(lock, 0);
        struct kill_action a = {};
        char on_before[64], switch_before[64];
        int subbuf_before = 0;
        for (int attempt = 0; attempt < 10 && !a.killed; attempt++) {
                int i;
                for (i = 0; i < 600 && flock(lock, LOCK_EX | LOCK_NB) < 0; i++)
                        spin_ms(ev, 50);
                if (i == 600)
                        continue;
                read_line(TRACEFS "/tracing_on", on_before, sizeof(on_before));
                read_line(TRACEFS "/buffer_size_kb", a.before_size, sizeof(a.before_size));
                read_line(TRACEFS "/events/sched/sched_switch/enable", switch_before, sizeof(switch_before));
                subbuf_before = subbuf_kb(TRACEFS);
                /* Another session may take the root between this unlock and
                 * ours starting: kill_host then sees a size not ours and
                 * the attempt is repeated. */
                if (is_session_size(size_kb(a.before_size))) {
                        write_file(TRACEFS "/buffer_size_kb", "1408");
                        read_line(TRACEFS "/buffer_size_kb", a.before_size, sizeof(a.before_size));
                }
                flock(lock, LOCK_UN);
                char cfg[256];
                snprintf(cfg, sizeof(cfg),
                         "ftrace_events: \"sched/sched_switch\" buffer_size_kb: %d", KILL_SESSION_KB);
                struct seen k = {};
                record(cfg, kill_host, &a, &k);
                if (k.end_stats)
                        perfetto__protos__ftrace_stats__free_unpacked(k.end_stats, NULL);
        }
        if (!a.killed) {
                close(lock);
                fixture_root_unlock(tests_lock);
                teardown();
                cr_skip_test("the root ftrace instance was busy with other sessions the whole time");
        }
        /* The restarted plugin (or any session taking the root first) puts
         * the root back; read it with the root's flock held, so that no
         * session is changing it. */
        int i;
        for (i = 0; i < 1200 && flock(lock, LOCK_EX | LOCK_NB) < 0; i++)
                spin_ms(ev, 50);
        cr_assert_lt(i, 1200, "the root ftrace instance stayed locked after the session ended");
        char size[256], on[64], sw[64];
        read_line(TRACEFS "/buffer_size_kb", size, sizeof(size));
        read_line(TRACEFS "/tracing_on", on, sizeof(on));
        read_line(TRACEFS "/events/sched/sched_switch/enable", sw, sizeof(sw));
        int subbuf_after = subbuf_kb(TRACEFS);
        close(lock);
        fixture_root_unlock(tests_lock);
        cr_assert(!is_session_size(size_kb(size)), "buffer_size_kb left at the killed session's %s", size);
        cr_expect_eq(size_kb(size), size_kb(a.before_size), "buffer_size_kb %s, was %s", size, a.before_size);
        cr_expect_str_eq(on, on_before, "tracing_on left at %s", on);
        cr_expect_str_eq(sw, switch_before, "sched_switch enable left at %s", sw);
        /* 1164 KiB per CPU: 32 KiB sub-buffers, journaled like the rest. */
        if (subbuf_before) {
                if (subbuf_default() && (a.subbuf_kb_during == 32 || subbuf_resizable()))
                        cr_expect_eq(a.subbuf_kb_during, 32, "sub-buffers of %d KiB during the session",
                                     a.subbuf_kb_during);
                cr_expect_eq(subbuf_after, subbuf_before, "buffer_subbuf_size_kb left at %d, was %d", subbuf_after,
                             subbuf_before);
        }
}

/* ---- the service's start -------------------------------------------------- */

/* The first connection is what starts a socket-activated traced, as the
 * first recording after boot does: a session enabled at once comes before
 * the ftrace plugin registered linux.ftrace. Once its data sources are
 * started (ObserveEvents), it records like a session enabled later. The
 * instance is made first, so the marker lands in its buffer either way:
 * only a session with linux.ftrace puts it into the trace. */
Test(ftrace_instances, a_session_enabled_as_traced_starts_records_at_once) {
        SKIP_WITHOUT_TRACEFS();
        char dir[256], marker[320], text[64], cfg[1024];
        start_instance_path(dir, sizeof(dir));
        (void) rmdir(dir);
        cr_assert_eq(mkdir(dir, 0700), 0, "cannot create %s: %m", dir);
        snprintf(marker, sizeof(marker), "%s/trace_marker", dir);
        snprintf(text, sizeof(text), "uc-start-%d", (int) getpid());
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 4096 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config { ftrace_events: \"ftrace/print\" "
                 "instance_name: \"uc_start_%d\" drain_period_ms: 50 } } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 (int) getpid());
        int fd = test_tmpfile();
        cr_assert_geq(fd, 0, "no trace file: %s", strerror(-fd));

        struct test_consumer c;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        fixture_enable_text(&c, cfg, fd);
        Perfetto__Protos__ObserveEventsRequest oe = PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
        Perfetto__Protos__ObservableEvents__Type types[] = {
                PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED };
        oe.n_events_to_observe = 1;
        oe.events_to_observe = types;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(consumer_call_first(ev, c.client, "ObserveEvents", &oe.base,
                                         &perfetto__protos__observe_events_response__descriptor, -EBADF, &reply, 30000),
                     0, "the session's data sources did not start");
        const Perfetto__Protos__ObserveEventsResponse *r = (const void *) reply;
        cr_assert(r && r->events && r->events->all_data_sources_started, "no all_data_sources_started event");
        protobuf_c_message_free_unpacked(reply, NULL);

        write_marker(marker, text);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&c, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&c, 20000), "the session did not end");
        cr_assert(c.error[0] == '\0', "the session ended with: %s", c.error);
        test_consumer_free(&c);

        struct seen k = { .want = { text } };
        fixture_for_each_packet(fd, collect, &k);
        close(fd);
        if (k.end_stats)
                perfetto__protos__ftrace_stats__free_unpacked(k.end_stats, NULL);
        cr_assert(k.found[0], "the session enabled as traced started did not record the trace_marker write");
}
