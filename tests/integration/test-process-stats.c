/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.process_stats on the real system, through the real traced and the
 * ftrace plugin's host: periodic ProcessStats of our own process, and
 * processes described on demand when the session's scheduling events
 * first name them, without a full scan. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "pbtxt/pbtxt.h"
#include "plugin-fixture.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define CHILD_NAME "tracedondemand"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(process_stats, .init = setup, .fini = teardown, .timeout = 90);

/* Criterion runs no .fini after a skip: stop traced (started by .init)
 * first, or its socket activator would stay behind. */
#define SKIP(...)                                \
        do {                                     \
                teardown();                      \
                cr_skip_test(__VA_ARGS__);       \
        } while (0)

typedef fixture_packet_fn packet_fn;

static void record(const char *config, void (*action)(void *), void *action_data, packet_fn fn, void *userdata) {
        fixture_record(&inst, ev, "linux.process_stats", config, action, action_data, fn, userdata);
}

static void busy_ms(unsigned ms) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do
                clock_gettime(CLOCK_MONOTONIC, &b);
        while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static uint64_t cpu_after_work_ns;

static void work_a_second(void *unused) {
        for (int i = 0; i < 10; i++) {
                busy_ms(50);
                spin_ms(ev, 50);
        }
        /* All the CPU this process has used so far: the last sample (taken
         * when the session stops, later) cannot show less. */
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        cpu_after_work_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

struct poll_check {
        unsigned packets_with_us;
        uint64_t rss_kb, user_ns, kernel_ns;
};

static void check_stats(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct poll_check *c = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_STATS)
                return;
        cr_assert(p->process_stats->has_collection_end_timestamp);
        for (size_t i = 0; i < p->process_stats->n_processes; i++) {
                const Perfetto__Protos__ProcessStats__Process *pr = p->process_stats->processes[i];
                if (pr->pid != getpid())
                        continue;
                c->packets_with_us++;
                c->rss_kb = pr->vm_rss_kb;
                c->user_ns = pr->runtime_user_mode;
                c->kernel_ns = pr->runtime_kernel_mode;
        }
}

Test(process_stats, polls_memory_and_cpu_time) {
        struct poll_check c = {};
        record("buffers { size_kb: 8192 }\n"
               "data_sources { config { name: \"linux.process_stats\" process_stats_config {\n"
               "  proc_stats_poll_ms: 100 record_process_runtime: true } } }\n"
               "write_into_file: true file_write_period_ms: 200\n",
               work_a_second, NULL, check_stats, &c);
        cr_assert_geq(c.packets_with_us, 3, "our process was in %u ProcessStats samples", c.packets_with_us);
        /* The last sample: a running test has a resident set, and has
         * spent most of a second busy. */
        cr_assert_gt(c.rss_kb, 1000, "vm_rss_kb %llu", (unsigned long long) c.rss_kb);
        /* /proc's user and system times are tick samples scaled to the
         * scheduler's total: allow 10% and two ticks (10 ms each here). */
        cr_assert_geq(c.user_ns + c.kernel_ns + 20000000ull, cpu_after_work_ns / 10 * 9, "cpu time %llu ns, used %llu ns",
                      (unsigned long long) (c.user_ns + c.kernel_ns), (unsigned long long) cpu_after_work_ns);
        cr_assert_gt(cpu_after_work_ns, 100000000ull, "the busy loop ran for %llu ns of CPU",
                     (unsigned long long) cpu_after_work_ns);
}

struct ttl_check {
        unsigned samples, full, partial;
};

static void check_ttl(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct ttl_check *c = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_STATS)
                return;
        for (size_t i = 0; i < p->process_stats->n_processes; i++) {
                const Perfetto__Protos__ProcessStats__Process *pr = p->process_stats->processes[i];
                if (pr->pid != getpid())
                        continue;
                if (c->samples++ == 0)
                        cr_assert(pr->has_vm_size_kb && pr->has_vm_hwm_kb && pr->has_oom_score_adj,
                                  "the first sample lacks counters");
                /* oom_score_adj does not change here: present only in a
                 * TTL's first sample. */
                if (pr->has_oom_score_adj)
                        c->full++;
                else
                        c->partial++;
        }
}

static void wait_1600ms(void *unused) {
        spin_ms(ev, 1600);
}

/* proc_stats_cache_ttl_ms: within a TTL, counters equal to the last values
 * sent are left out; each TTL starts again with every counter. */
Test(process_stats, cache_ttl_leaves_out_unchanged_counters) {
        struct ttl_check c = {};
        record("buffers { size_kb: 8192 }\n"
               "data_sources { config { name: \"linux.process_stats\" process_stats_config {\n"
               "  proc_stats_poll_ms: 100 proc_stats_cache_ttl_ms: 500 } } }\n"
               "write_into_file: true file_write_period_ms: 200\n",
               wait_1600ms, NULL, check_ttl, &c);
        cr_assert_geq(c.samples, 8, "%u samples", c.samples);
        /* 5 polls per TTL: about one full sample in five. */
        cr_assert_geq(c.full, 2, "%u full samples of %u", c.full, c.samples);
        cr_assert_geq(c.partial, 2 * c.full, "%u full samples of %u", c.full, c.samples);
}

struct demand {
        pid_t sleeper, child;
};

static void spawn_named_child(void *userdata) {
        struct demand *d = userdata;
        /* The child has its name from birth (inherited, then ours put
         * back): renamed after the fork, a drain that ran before the child
         * did (a loaded machine) described it with our name. */
        char own[16] = "";
        prctl(PR_GET_NAME, own);
        prctl(PR_SET_NAME, CHILD_NAME);
        d->child = fork();
        if (d->child != 0)
                prctl(PR_SET_NAME, own);
        if (d->child == 0) {
                busy_ms(100);
                usleep(200000);
                _exit(0);
        }
        cr_assert_gt(d->child, 0);
        /* Still alive while the drain that saw it asks /proc about it. */
        spin_ms(ev, 150);
        waitpid(d->child, NULL, 0);
}

struct tree_check {
        const struct demand *d;
        bool child_process, child_thread, sleeper_seen;
        unsigned processes;
};

static void check_tree(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct tree_check *c = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
                return;
        for (size_t i = 0; i < p->process_tree->n_processes; i++) {
                const Perfetto__Protos__ProcessTree__Process *pr = p->process_tree->processes[i];
                c->processes++;
                if (pr->pid == c->d->sleeper)
                        c->sleeper_seen = true;
                if (pr->pid == c->d->child) {
                        cr_assert_eq(pr->ppid, getpid(), "the child's parent is %d", pr->ppid);
                        cr_assert_gt(pr->n_cmdline, 0);
                        c->child_process = true;
                }
        }
        for (size_t i = 0; i < p->process_tree->n_threads; i++) {
                const Perfetto__Protos__ProcessTree__Thread *t = p->process_tree->threads[i];
                if (t->tid == c->d->child && t->name && strcmp(t->name, CHILD_NAME) == 0)
                        c->child_thread = true;
        }
}

Test(process_stats, new_processes_are_described_on_demand) {
        if (!fixture_tracefs_usable())
                SKIP("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        /* A process that sleeps through the whole trace: never scheduled,
         * so never named by an event, so not described. */
        pid_t sleeper = fork();
        if (sleeper == 0) {
                pause();
                _exit(0);
        }
        struct demand d = { .sleeper = sleeper };
        struct tree_check c = { .d = &d };
        spin_ms(ev, 100);
        record("buffers { size_kb: 16384 }\n"
               "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
               "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_waking\"\n"
               "  compact_sched { enabled: true } drain_period_ms: 50 } } }\n"
               "data_sources { config { name: \"linux.process_stats\" } }\n"
               "write_into_file: true file_write_period_ms: 200\n",
               spawn_named_child, &d, check_tree, &c);
        kill(sleeper, SIGKILL);
        waitpid(sleeper, NULL, 0);
        cr_assert(c.child_process, "the child started during the trace was not described");
        cr_assert(c.child_thread, "the child's thread is not named " CHILD_NAME);
        cr_assert_not(c.sleeper_seen, "a process no event named was described: that is a full scan");
}

/* The done-when: quick-mode tracectl with scheduling events and
 * process stats; the summary lists processes by name with CPU time. */
Test(process_stats, tracectl_quick_mode_summary_lists_processes_with_cpu_time) {
        if (!fixture_tracefs_usable())
                SKIP("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        /* tracectl waits for the data sources it asks for: have them
         * registered first, so its session starts before the busy loop. */
        struct test_consumer ready;
        cr_assert_eq(test_consumer_connect(&ready, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&ready, ev, "linux.ftrace", 1, 30000), "linux.ftrace never registered");
        cr_assert(fixture_wait_data_source(&ready, ev, "linux.process_stats", 1, 30000));
        test_consumer_free(&ready);
        char out[512], so[512];
        snprintf(out, sizeof(out), "%s/quick.pftrace", inst.dir);
        snprintf(so, sizeof(so), "%s/quick.stdout", inst.dir);
        char *argv[] = { (char *) TRACECTL_BINARY, (char *) "--socket", inst.consumer_path, (char *) "record",
                         (char *) "-t", (char *) "6s", (char *) "sched/sched_switch", (char *) "sched/sched_waking",
                         (char *) "-o", out, NULL };
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, so, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        /* Be busy for a while, well inside the 6 s trace, and note how
         * much CPU that took (other work on the machine may take its
         * share and stretch the loop). */
        spin_ms(ev, 1000);
        struct timespec a, b;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        for (int i = 0; i < 8; i++) {
                busy_ms(100);
                spin_ms(ev, 20);
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        double used_ms = (double) (b.tv_sec - a.tv_sec) * 1e3 + (double) (b.tv_nsec - a.tv_nsec) / 1e6;
        int st;
        while (waitpid(pid, &st, WNOHANG) == 0)
                spin_ms(ev, 50);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tracectl failed");
        FILE *f = fopen(so, "r");
        cr_assert_not_null(f);
        static char text[65536];
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        const char *table = strstr(text, "Top processes by CPU time (\"cpu ms\": scheduled, from sched_switch");
        cr_assert_not_null(table, "no process table in the summary:\n%s", text);
        char me[32];
        snprintf(me, sizeof(me), "\n  %-8d ", (int) getpid());
        const char *line = strstr(table, me);
        cr_assert_not_null(line, "this process (%d) is not in the table:\n%s", (int) getpid(), table);
        int rpid;
        char name[64];
        double cpu_ms, proc_ms, rss;
        unsigned threads;
        cr_assert_eq(sscanf(line + 1, "%d %63s %lf %u %lf %lf", &rpid, name, &cpu_ms, &threads, &proc_ms, &rss), 6,
                     "line: %.120s", line + 1);
        /* Named as the process tree has it: the command's base name. */
        char cmd[256] = "";
        FILE *c = fopen("/proc/self/cmdline", "r");
        cr_assert_not_null(c);
        size_t cl = fread(cmd, 1, sizeof(cmd) - 1, c);
        cmd[cl] = '\0';
        fclose(c);
        const char *base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
        cr_assert(strncmp(name, base, 19) == 0, "named %s, expected %s", name, base);
        cr_assert_gt(used_ms, 50.0, "the busy loop got %.1f ms of CPU", used_ms);
        fprintf(stderr, "scheduled %.1f ms, /proc %.1f ms, used %.1f ms\n", cpu_ms, proc_ms, used_ms);
        /* Scheduled time is reconstructed from switches; where this kernel
         * recorded no switch from idle to a woken task, from the waking.
         * Switches the kernel did not record, or that a busy machine's
         * per-CPU buffers lost (CI ran this beside the other suites: 386 of
         * 787 ms), make it short; it is a check of its magnitude. /proc is
         * exact to a clock tick. */
        cr_assert_geq(cpu_ms, 0.25 * used_ms, "scheduled %.1f ms, used %.1f ms", cpu_ms, used_ms);
        /* /proc counts in clock ticks (10 ms here). */
        cr_assert_geq(proc_ms + 20.0, 0.8 * used_ms, "/proc says %.1f ms, used %.1f ms", proc_ms, used_ms);
        cr_assert_gt(rss, 0.5);
}

static void fork_then_exec(void *userdata) {
        struct demand *d = userdata;
        d->child = fork();
        if (d->child == 0) {
                /* Seen (and described as a copy of us) before the exec. */
                busy_ms(150);
                usleep(150000);
                execl("/bin/sleep", "sleep", "0.4", (char *) NULL);
                _exit(127);
        }
        cr_assert_gt(d->child, 0);
        spin_ms(ev, 600);
        waitpid(d->child, NULL, 0);
}

struct exec_check {
        const struct demand *d;
        unsigned descriptions;
        bool as_sleep;
};

static void check_exec(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct exec_check *c = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
                return;
        for (size_t i = 0; i < p->process_tree->n_processes; i++) {
                const Perfetto__Protos__ProcessTree__Process *pr = p->process_tree->processes[i];
                if (pr->pid != c->d->child)
                        continue;
                c->descriptions++;
                if (pr->n_cmdline >= 2 && strcmp(pr->cmdline[0], "sleep") == 0 && strcmp(pr->cmdline[1], "0.4") == 0)
                        c->as_sleep = true;
        }
}

Test(process_stats, an_exec_is_described_again) {
        if (!fixture_tracefs_usable())
                SKIP("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct demand d = {};
        struct exec_check c = { .d = &d };
        record("buffers { size_kb: 16384 }\n"
               "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
               "  ftrace_events: \"sched/sched_switch\" ftrace_events: \"sched/sched_process_exec\"\n"
               "  compact_sched { enabled: true } drain_period_ms: 50 } } }\n"
               "data_sources { config { name: \"linux.process_stats\" } }\n"
               "write_into_file: true file_write_period_ms: 200\n",
               fork_then_exec, &d, check_exec, &c);
        cr_assert_geq(c.descriptions, 2, "the child was described %u time(s)", c.descriptions);
        cr_assert(c.as_sleep, "after its exec the child is not described as \"sleep 0.4\"");
}
