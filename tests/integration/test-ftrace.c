/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ftrace plugin on the real kernel, run by the real traced (socket-
 * activated) through its plugin host: markers written to the top-level
 * trace_marker, a child with a known name and busy work on every CPU must
 * all show up in the decoded trace. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "pbtxt/pbtxt.h"
#include "plugin-fixture.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/ftrace/ftrace_stats.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define N_MARKERS 10
#define CHILD_NAME "tracedkid"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        if (fixture_tracefs_usable())
                cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

static void busy_ms(unsigned ms) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do
                clock_gettime(CLOCK_MONOTONIC, &b);
        while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

/* A child renamed to CHILD_NAME that spins a little on every CPU. */
static pid_t spawn_child(void) {
        pid_t pid = fork();
        if (pid == 0) {
                prctl(PR_SET_NAME, CHILD_NAME);
                long n = sysconf(_SC_NPROCESSORS_ONLN);
                for (long cpu = 0; cpu < n; cpu++) {
                        cpu_set_t set;
                        CPU_ZERO(&set);
                        CPU_SET((int) cpu, &set);
                        sched_setaffinity(0, sizeof(set), &set);
                        busy_ms(30);
                        usleep(10000);
                }
                _exit(0);
        }
        return pid;
}

/* Starts a session from a text config, its trace written into fd. */
static void enable_text(struct test_consumer *cons, const char *text, int fd) {
        fixture_enable_text(cons, text, fd);
        spin_ms(ev, 500); /* the plugin sets up its ftrace instance */
}

TestSuite(ftrace, .init = setup, .fini = teardown, .timeout = 90);

Test(ftrace, markers_child_and_every_cpu) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct test_consumer cons;
        char path[512], markers[N_MARKERS][64];

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        bool ready = fixture_wait_data_source(&cons, ev, "linux.ftrace", 1, 5000);
        if (!ready)
                traced_instance_dump_log(&inst);
        cr_assert(ready, "the ftrace plugin never registered linux.ftrace");

        /* The config, as a user would write it. */
        snprintf(path, sizeof(path), "%s/ftrace.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        const char *text = "buffers { size_kb: 32768 fill_policy: DISCARD }\n"
                           "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                           "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_waking\"\n"
                           "  ftrace_events: \"sched/sched_process_fork\" ftrace_events: \"task/task_newtask\"\n"
                           "  ftrace_events: \"task/task_rename\" ftrace_events: \"ftrace/print\"\n"
                           "  compact_sched { enabled: false } drain_period_ms: 50 } } }\n"
                           "data_sources { config { name: \"linux.process_stats\" } }\n"
                           "write_into_file: true file_write_period_ms: 200\n";


        int root = fixture_root_lock(); /* records in the root instance */
        int hotplug = fixture_hotplug_lock(false); /* every CPU is expected */
        unsigned started = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        enable_text(&cons, text, fd);
        /* The plugin sets its instance up after EnableTracing returned. */
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, started, 30000), "linux.ftrace never started");

        for (int i = 0; i < N_MARKERS; i++) {
                snprintf(markers[i], sizeof(markers[i]), "traced-it-marker-%d-%d", i, (int) getpid());
                int r = fixture_write_root_marker(markers[i]);
                cr_assert_eq(r, 0, "trace_marker: %s", strerror(-r));
        }
        pid_t child = spawn_child();
        cr_assert_gt(child, 0);
        while (waitpid(child, NULL, WNOHANG) == 0)
                spin_ms(ev, 20);
        spin_ms(ev, 200);

        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        fixture_hotplug_unlock(hotplug);
        fixture_root_unlock(root);
        cr_assert_str_eq(cons.error, "");

        /* Decode. */
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t) st.st_size + 1);
        cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        close(fd);
        static struct pbr_field pkts[200000];
        int n = pbr_split_trace(buf, (size_t) st.st_size, pkts, 200000);
        cr_assert_gt(n, 0);
        bool found_marker[N_MARKERS] = {};
        bool fork_seen = false, rename_seen = false, child_in_tree = false;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned long switches[256] = {};
        unsigned stats_start = 0, stats_end = 0;
        for (int i = 0; i < n; i++) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, pkts[i].len, pkts[i].data);
                cr_assert_not_null(p, "packet %d does not decode", i);
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
                        const Perfetto__Protos__FtraceEventBundle *b = p->ftrace_events;
                        for (size_t k = 0; k < b->n_event; k++) {
                                const Perfetto__Protos__FtraceEvent *e = b->event[k];
                                cr_assert_gt(e->timestamp, 0);
                                if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH && b->cpu < 256)
                                        switches[b->cpu]++;
                                if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT && e->print->buf)
                                        for (int j = 0; j < N_MARKERS; j++)
                                                if (strncmp(e->print->buf, markers[j], strlen(markers[j])) == 0)
                                                        found_marker[j] = true;
                                if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK &&
                                    e->sched_process_fork->child_pid == child)
                                        fork_seen = true;
                                if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME &&
                                    e->task_rename->pid == child && e->task_rename->newcomm &&
                                    strcmp(e->task_rename->newcomm, CHILD_NAME) == 0)
                                        rename_seen = true;
                        }
                }
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS) {
                        const Perfetto__Protos__FtraceStats *fs = p->ftrace_stats;
                        if (fs->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE)
                                stats_start++;
                        if (fs->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE) {
                                stats_end++;
                                cr_assert_eq(fs->n_cpu_stats, (size_t) ncpu, "per-CPU stats missing");
                                for (size_t k = 0; k < fs->n_cpu_stats; k++)
                                        cr_assert_eq(fs->cpu_stats[k]->overrun, 0, "the kernel overran cpu %zu", k);
                        }
                }
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
                        for (size_t k = 0; k < p->process_tree->n_processes; k++)
                                if (p->process_tree->processes[k]->pid == getpid())
                                        child_in_tree = true; /* this test process is in the tree */
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
        for (int j = 0; j < N_MARKERS; j++)
                cr_assert(found_marker[j], "marker %d (%s) missing from the trace", j, markers[j]);
        cr_assert_eq(stats_start, 1, "no FtraceStats at the start of the trace");
        cr_assert_eq(stats_end, 1, "no FtraceStats at the end of the trace");
        cr_assert(fork_seen, "the child's sched_process_fork is missing");
        cr_assert(rename_seen, "the child's rename to %s is missing", CHILD_NAME);
        cr_assert(child_in_tree, "the process tree does not list this test process");
        for (long cpu = 0; cpu < ncpu && cpu < 256; cpu++)
                cr_assert_gt(switches[cpu], 0, "no sched_switch on cpu %ld", cpu);
        free(buf);
        test_consumer_free(&cons);
}

Test(ftrace, compact_sched_columns) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct test_consumer cons;
        char path[512];

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, ev, "linux.ftrace", 1, 5000), "linux.ftrace never registered");
        snprintf(path, sizeof(path), "%s/compact.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        const char *text = "buffers { size_kb: 32768 }\n"
                           "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                           "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_waking\"\n"
                           "  drain_period_ms: 50 } } }\n" /* compact: the default with sched_switch */
                           "write_into_file: true file_write_period_ms: 200\n";
        int root = fixture_root_lock(); /* records in the root instance */
        int hotplug = fixture_hotplug_lock(false); /* every CPU is expected */
        unsigned started = fixture_log_count(&inst, FIXTURE_FTRACE_STARTED);
        enable_text(&cons, text, fd);
        /* The plugin sets its instance up after EnableTracing returned. */
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_FTRACE_STARTED, started, 30000), "linux.ftrace never started");
        pid_t child = spawn_child();
        while (waitpid(child, NULL, WNOHANG) == 0)
                spin_ms(ev, 20);
        spin_ms(ev, 200);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        fixture_hotplug_unlock(hotplug);
        fixture_root_unlock(root);

        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t) st.st_size + 1);
        cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        close(fd);
        static struct pbr_field pkts[200000];
        int n = pbr_split_trace(buf, (size_t) st.st_size, pkts, 200000);
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned long switches[256] = {}, total = 0, full_events = 0;
        bool child_seen = false, child_woken = false;
        /* The child's priority, as the kernel reports it for a task of
         * the normal class: 120 + its nice (inherited from this test). */
        errno = 0;
        int nice_value = getpriority(PRIO_PROCESS, 0);
        cr_assert_eq(errno, 0);
        for (int i = 0; i < n; i++) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, pkts[i].len, pkts[i].data);
                cr_assert_not_null(p);
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
                        const Perfetto__Protos__FtraceEventBundle *b = p->ftrace_events;
                        full_events += b->n_event;
                        const Perfetto__Protos__FtraceEventBundle__CompactSched *c = b->compact_sched;
                        if (c) {
                                cr_assert_eq(c->n_switch_timestamp, c->n_switch_next_pid);
                                cr_assert_eq(c->n_switch_timestamp, c->n_switch_next_comm_index);
                                cr_assert_eq(c->n_waking_timestamp, c->n_waking_pid);
                                for (size_t k = 0; k < c->n_switch_next_comm_index; k++) {
                                        cr_assert_lt(c->switch_next_comm_index[k], c->n_intern_table);
                                        if (c->switch_next_pid[k] != child)
                                                continue;
                                        child_seen = strcmp(c->intern_table[c->switch_next_comm_index[k]],
                                                            CHILD_NAME) == 0 ||
                                                     child_seen;
                                        cr_assert_eq(c->switch_next_prio[k], 120 + nice_value, "the child's prio %d",
                                                     (int) c->switch_next_prio[k]);
                                }
                                /* Each field of sched_waking where it belongs: the
                                 * child, woken from its sleeps, on a CPU there is. */
                                cr_assert_eq(c->n_waking_timestamp, c->n_waking_comm_index);
                                cr_assert_eq(c->n_waking_timestamp, c->n_waking_prio);
                                cr_assert_eq(c->n_waking_timestamp, c->n_waking_target_cpu);
                                for (size_t k = 0; k < c->n_waking_pid; k++) {
                                        cr_assert_lt(c->waking_comm_index[k], c->n_intern_table);
                                        cr_assert_lt(c->waking_target_cpu[k], ncpu, "target_cpu %d",
                                                     (int) c->waking_target_cpu[k]);
                                        if (c->waking_pid[k] != child ||
                                            strcmp(c->intern_table[c->waking_comm_index[k]], CHILD_NAME) != 0)
                                                continue;
                                        child_woken = true;
                                        cr_assert_eq(c->waking_prio[k], 120 + nice_value, "the child's prio %d",
                                                     (int) c->waking_prio[k]);
                                }
                                if (b->cpu < 256)
                                        switches[b->cpu] += c->n_switch_timestamp;
                                total += c->n_switch_timestamp + c->n_waking_timestamp;
                        }
                }
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
        cr_assert_eq(full_events, 0, "sched events were not all in compact form");
        cr_assert(child_seen, "the child never appears as next task under its name");
        cr_assert(child_woken, "the child is never woken under its name");
        for (long cpu = 0; cpu < ncpu && cpu < 256; cpu++)
                cr_assert_gt(switches[cpu], 0, "no compact sched_switch on cpu %ld", cpu);
        /* Columns are far smaller than one message per event. */
        cr_assert_lt((double) st.st_size / (double) total, 30.0, "%.1f bytes per event",
                     (double) st.st_size / (double) total);
        free(buf);
        test_consumer_free(&cons);
}

/* ---- which reader the plugin used ----------------------------------------- */

struct reader_seen {
        unsigned stats;                 /* FtraceStats packets */
        unsigned mapped, read, spliced, missing; /* their per-CPU reader fields */
        unsigned long switches[256];
};

static void count_readers(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct reader_seen *k = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS && p->ftrace_events->cpu < 256 &&
            p->ftrace_events->compact_sched)
                k->switches[p->ftrace_events->cpu] += p->ftrace_events->compact_sched->n_switch_timestamp;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS)
                return;
        k->stats++;
        for (size_t i = 0; i < p->ftrace_stats->n_cpu_stats; i++) {
                const Perfetto__Protos__FtraceCpuStats *c = p->ftrace_stats->cpu_stats[i];
                if (!c->has_traced_reader)
                        k->missing++;
                else if (c->traced_reader == PERFETTO__PROTOS__FTRACE_CPU_STATS__TRACED_READER__TRACED_READER_MMAP)
                        k->mapped++;
                else if (c->traced_reader == PERFETTO__PROTOS__FTRACE_CPU_STATS__TRACED_READER__TRACED_READER_SPLICE)
                        k->spliced++;
                else
                        k->read++;
        }
}

static void child_on_every_cpu(void *userdata) {
        (void) userdata;
        pid_t child = spawn_child();
        cr_assert_gt(child, 0);
        while (waitpid(child, NULL, WNOHANG) == 0)
                spin_ms(ev, 20);
        spin_ms(ev, 200);
}

/* The plugin splices every CPU's full sub-buffers (and read()s the one the
 * writer is on), unless told to map the buffers by TRACED_FTRACE_READ=mmap
 * (as the second run of these tests does), which Linux 6.10 and later
 * allow, or to read() only by TRACED_FTRACE_READ=read (the third run); it
 * says which in FtraceStats at both ends of the trace. */
Test(ftrace, reader_path_is_the_one_expected) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        const char *how = getenv("TRACED_FTRACE_READ");
        bool mapping = how && strcmp(how, "mmap") == 0, reading = how && strcmp(how, "read") == 0;
        struct utsname u;
        unsigned major = 0, minor = 0;
        cr_assert_eq(uname(&u), 0);
        (void) sscanf(u.release, "%u.%u", &major, &minor);
        if (mapping && (major < 6 || (major == 6 && minor < 10)))
                cr_skip_test("kernel %s cannot map its ring buffers (Linux 6.10 and later can)", u.release);
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                 "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_waking\"\n"
                 "  compact_sched { enabled: true } drain_period_ms: 50 instance_name: \"uc_reader_%d\" } } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 (int) getpid());
        struct reader_seen k = {};
        fixture_record(&inst, ev, "linux.ftrace", cfg, child_on_every_cpu, NULL, count_readers, &k);
        char dir[256];
        snprintf(dir, sizeof(dir), "/sys/kernel/tracing/instances/uc_reader_%d", (int) getpid());
        (void) rmdir(dir);
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        cr_assert_eq(k.stats, 2, "%u FtraceStats packets", k.stats);
        cr_assert_eq(k.missing, 0, "%u CPUs' stats without the reader", k.missing);
        if (!mapping)
                cr_assert_eq(k.mapped, 0, "%u CPUs mapped without TRACED_FTRACE_READ=mmap", k.mapped);
        else
                cr_assert_geq(k.mapped, 2 * (unsigned) ncpu, "only %u of %ld online CPUs mapped (x2)", k.mapped, ncpu);
        if (reading)
                cr_assert_eq(k.spliced, 0, "%u CPUs spliced with TRACED_FTRACE_READ=read", k.spliced);
        else if (!mapping)
                cr_assert_geq(k.spliced, 2 * (unsigned) ncpu, "only %u of %ld online CPUs spliced (x2)", k.spliced, ncpu);
        for (long cpu = 0; cpu < ncpu && cpu < 256; cpu++)
                cr_assert_gt(k.switches[cpu], 0, "no sched_switch read on cpu %ld", cpu);
        cr_log_info("reader: %u CPU stats spliced, %u mapped, %u read() (TRACED_FTRACE_READ=%s)", k.spliced, k.mapped,
                    k.read, how ? how : "unset");
}

/* ---- CPU hotplug ------------------------------------------------------------ */

struct cpu1_seen {
        const struct fixture_hotplug *h; /* its back: CLOCK_BOOTTIME when CPU 1 was online again */
        unsigned long before, after; /* its sched_switch before going offline / once back */
};

static void count_cpu1(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct cpu1_seen *k = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS || p->ftrace_events->cpu != 1 ||
            !p->ftrace_events->compact_sched)
                return;
        const Perfetto__Protos__FtraceEventBundle__CompactSched *c = p->ftrace_events->compact_sched;
        uint64_t ts = 0; /* deltas from 0 in each bundle */
        for (size_t i = 0; i < c->n_switch_timestamp; i++) {
                ts += c->switch_timestamp[i];
                if (ts > k->h->back)
                        k->after++;
                else
                        k->before++;
        }
}

static pid_t pinned_child;

/* Work pinned to CPU 1 once it is back: switches there to be read. */
static void spin_on_cpu1(struct fixture_hotplug *h) {
        (void) h;
        pinned_child = fork();
        if (pinned_child == 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(1, &set);
                for (int i = 0; i < 50 && sched_setaffinity(0, sizeof(set), &set) < 0; i++)
                        usleep(20000);
                for (int i = 0; i < 20; i++) {
                        busy_ms(10);
                        usleep(5000);
                }
                _exit(0);
        }
}

static void cpu1_offline_and_back(void *userdata) {
        fixture_cpu_offline_and_back(userdata);
        if (pinned_child > 0)
                cr_assert_eq(waitpid(pinned_child, NULL, 0), pinned_child);
}

/* A CPU that goes offline keeps its buffer (and its mapping): what it
 * records once back is read like before. */
Test(ftrace, a_cpu_offline_and_back_is_read_again) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct fixture_hotplug h = { .online = "/sys/devices/system/cpu/cpu1/online", .on_back = spin_on_cpu1 };
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || access(h.online, W_OK) < 0)
                cr_skip_test("CPU 1 cannot be taken offline here (one CPU, no CPU hotplug, or a read-only sysfs)");
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                 "  ftrace_events: \"sched/sched_switch\" compact_sched { enabled: true } drain_period_ms: 50\n"
                 "  instance_name: \"uc_hotplug_%d\" } } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 (int) getpid());
        int lock = fixture_hotplug_lock(true);
        struct cpu1_seen k = { .h = &h };
        fixture_record(&inst, ev, "linux.ftrace", cfg, cpu1_offline_and_back, &h, count_cpu1, &k);
        fixture_hotplug_unlock(lock);
        char path[512];
        snprintf(path, sizeof(path), "/sys/kernel/tracing/instances/uc_hotplug_%d", (int) getpid());
        (void) rmdir(path);
        cr_assert(h.wrote, "CPU 1 did not go offline");
        cr_assert_gt(k.before, 0, "no sched_switch on cpu 1 before it went offline");
        cr_assert_gt(k.after, 0, "no sched_switch on cpu 1 once it was back");
        cr_log_info("cpu 1: %lu switches before going offline, %lu once back", k.before, k.after);
}
