/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack on the real kernel, through the real traced and the
 * bpfstack plugin's host: tests/bpfstack/bpfstack-workload (frame
 * pointers) spins in spin_inner <- spin_outer <- main, then blocks in
 * block_sleep (nanosleep) and block_read (an empty pipe). The stacks and
 * the blocked time are read back from the trace's two packet sequences as
 * trace_processor would. Bad configs and a kernel without BTF (a BTF path
 * that does not exist) must give an error naming the field, and traced
 * goes on. */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "bpfstack-collect.h"
#include "bpfstack.h"
#include "plugin-fixture.h"
#include "profiling/jit-map.h"

#include "perfetto/trace/trace_packet.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void workload_copy(void);

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
        workload_copy();
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(bpfstack, .init = setup, .fini = teardown, .timeout = 120);

#define SKIP(...)                          \
        do {                               \
                teardown();                \
                cr_skip_test(__VA_ARGS__); \
        } while (0)

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        return 0;
}

/* Whether /proc/kallsyms has a function (text symbol) of that name. */
static bool kallsyms_has(const char *name) {
        FILE *f = fopen("/proc/kallsyms", "re");
        cr_assert(f, "/proc/kallsyms: %s", strerror(errno));
        char line[1024], sym[512], type;
        unsigned long long addr;
        bool found = false;
        while (!found && fgets(line, sizeof(line), f))
                found = sscanf(line, "%llx %c %511s", &addr, &type, sym) == 3 && (type == 't' || type == 'T') &&
                        strcmp(sym, name) == 0;
        fclose(f);
        return found;
}

/* What the plugin needs from the kernel, and whether we may use it. */
static const char *bpf_refused(void) {
        libbpf_set_print(quiet);
        if (access("/sys/kernel/btf/vmlinux", R_OK) < 0)
                return "the kernel has no BTF (/sys/kernel/btf/vmlinux)";
        if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) != 1)
                return "BPF perf_event programs are refused here";
        if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
                return "BPF ring buffers are refused here";
        return NULL;
}

/* Whether names[at..] reads chain (leaf first), anywhere in the stack. */
static bool has_chain(const struct sample *s, const char *const *chain, size_t n) {
        for (size_t k = 0; k + n <= s->n_names; k++) {
                bool ok = true;
                for (size_t j = 0; j < n && ok; j++)
                        ok = s->names[k + j] && strcmp(s->names[k + j], chain[j]) == 0;
                if (ok)
                        return true;
        }
        return false;
}

static bool has_name(const struct sample *s, const char *name) {
        for (size_t k = 0; k < s->n_names; k++)
                if (s->names[k] && strcmp(s->names[k], name) == 0)
                        return true;
        return false;
}

/* ---- the program ---- */

/* Waits for pid; the CPU time it got. */
static uint64_t reap(pid_t pid, int *ret_status) {
        struct rusage ru;
        cr_assert_eq(wait4(pid, ret_status, 0, &ru), pid);
        return ((uint64_t) ru.ru_utime.tv_sec + (uint64_t) ru.ru_stime.tv_sec) * 1000000000u +
               ((uint64_t) ru.ru_utime.tv_usec + (uint64_t) ru.ru_stime.tv_usec) * 1000u;
}

/* The samples the tests ask of a program that got cpu_ns of CPU time,
 * sampled at hz: half of what that time gives, at least 5. A loaded
 * machine gives a program less CPU than its wall time, and the asks
 * follow what it got rather than what it asked for. */
static size_t share_of(uint64_t cpu_ns, unsigned hz) {
        size_t want = (size_t) (cpu_ns / 1000000u * hz / 1000u / 2u);
        return want > 5 ? want : 5;
}

struct run {
        const char *argv[8];
        pid_t pid;
        uint64_t cpu_ns;         /* the CPU time it got */
        uint64_t blocked_ns;     /* as it measured */
        unsigned setups_before; /* run_workload_once_set_up: instances set up before this one */
};

static void run_workload(void *userdata) {
        struct run *r = userdata;
        int out[2];
        cr_assert_eq(pipe(out), 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        int e = posix_spawn(&r->pid, r->argv[0], &fa, NULL, (char *const *) r->argv, environ);
        cr_assert_eq(e, 0, "%s: %s", r->argv[0], strerror(e));
        posix_spawn_file_actions_destroy(&fa);
        close(out[1]);
        char buf[128] = "";
        ssize_t n = read(out[0], buf, sizeof(buf) - 1);
        close(out[0]);
        int status;
        r->cpu_ns = reap(r->pid, &status);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the workload ran");
        unsigned long long b = 0;
        cr_assert(n > 0 && sscanf(buf, "blocked_ns %llu", &b) == 1, "the workload said how long it blocked: %s",
                  buf);
        r->blocked_ns = b;
        /* Its last records still travel through the ring buffer. */
        usleep(300 * 1000);
}

static char *log_text(void) {
        FILE *f = fopen(inst.log_path, "re");
        cr_assert_not_null(f, "%s", inst.log_path);
        char *text = NULL;
        size_t size = 0;
        FILE *m = open_memstream(&text, &size);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                fwrite(buf, 1, n, m);
        fclose(f);
        fclose(m);
        return text;
}

/* How many linux.bpf_stack instances the log says are set up (their
 * programs loaded and attached). */
static unsigned setups_logged(void) {
        char *log = log_text();
        unsigned n = 0;
        for (const char *p = log; p && (p = strstr(p, "linux.bpf_stack instance ")); p++) {
                const char *eol = strchr(p, '\n'), *on = strstr(p, ": on-CPU ");
                if (on && (!eol || on < eol))
                        n++;
        }
        free(log);
        return n;
}

/* The workload, once the session's instance is set up: loading the BPF
 * programs can take seconds on a cold, sanitized first run, and what the
 * workload does before that is not recorded. */
static void run_workload_once_set_up(void *userdata) {
        struct run *r = userdata;
        for (int i = 0; i < 300 && setups_logged() <= r->setups_before; i++)
                usleep(100 * 1000);
        if (setups_logged() <= r->setups_before)
                traced_instance_dump_log(&inst);
        cr_assert_gt(setups_logged(), r->setups_before, "the linux.bpf_stack instance was never set up");
        run_workload(r);
}

#define WORKLOAD BPFSTACK_TEST_BIN_DIR "/bpfstack-workload"

/* Criterion runs tests in parallel, and other tests of the machine may
 * run this program too: each test runs its own copy, named after the
 * test's pid, and filters on that name. */
static char workload[512], workload_comm[16];

static void workload_copy(void) {
        snprintf(workload_comm, sizeof(workload_comm), "bsw%d", (int) getpid());
        snprintf(workload, sizeof(workload), "%s/%s", inst.dir, workload_comm);
        int in = open(WORKLOAD, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(in, 0, "%s: %s", WORKLOAD, strerror(errno));
        int out = open(workload, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        cr_assert_geq(out, 0, "%s: %s", workload, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        close(in);
        close(out);
}

static const char *const spin_chain[] = { "spin_inner", "spin_outer", "main" };

/* The number right before marker in line (0 when absent). */
static unsigned long long number_before(const char *line, const char *eol, const char *marker) {
        const char *at = strstr(line, marker);
        if (!at || (eol && at > eol))
                return 0;
        while (at > line && at[-1] >= '0' && at[-1] <= '9')
                at--;
        return strtoull(at, NULL, 10);
}

/* What the plugin's stop line of the last instance counts as lost on the
 * way (ring buffer full, stacks lost or gone, switch-outs not remembered,
 * bad records), waiting up to 5 s for the line. */
static unsigned long long logged_losses(void) {
        (void) fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", " stopped: ", 0, 5000);
        char *log = log_text();
        unsigned long long n = 0;
        const char *last = NULL;
        for (const char *p = log; p && (p = strstr(p, "linux.bpf_stack instance ")); p++) {
                const char *eol = strchr(p, '\n'), *st = strstr(p, " stopped: ");
                if (st && (!eol || st < eol))
                        last = p;
        }
        if (last) {
                const char *eol = strchr(last, '\n');
                static const char *const markers[] = {
                        " records lost in the ring buffer", " stacks lost to map collisions", " stack errors",
                        " switch-outs not remembered",      " stacks gone before lookup",
                        " samples of processes gone before symbolization", " bad records",
                };
                for (size_t k = 0; k < ELEMENTSOF(markers); k++)
                        n += number_before(last, eol, markers[k]);
        }
        free(log);
        return n;
}

Test(bpfstack, on_cpu_and_off_cpu_stacks_and_blocked_time) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        char *cfg;
        cr_assert_gt(asprintf(&cfg,
                              "buffers { size_kb: 65536 }\n"
                              "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                              "  frequency: 999 filter: \"comm=%s\"\n"
                              "} } }\n"
                              "write_into_file: true file_write_period_ms: 250\n",
                              workload_comm),
                     0);
        struct run r = { .argv = { workload, "1500", "4", "100", "300", NULL }, .setups_before = setups_logged() };
        struct collect c = {};
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_workload_once_set_up, &r, collect_packet, &c);
        free(cfg);

        size_t on = 0, on_chain = 0, off = 0, off_blocking = 0, n_leaves = 0;
        uint64_t blocked_total = 0, blocked_in_blocking = 0;
        const char *leaves[16];
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                cr_assert_eq(s->pid, (uint32_t) r.pid, "the comm filter keeps only the workload (%u, %u, %s)", s->pid,
                             (unsigned) r.pid, s->n_names ? s->names[0] : "-");
                if (!s->off_cpu) {
                        cr_assert_eq(s->blocked_ns, 0);
                        if (s->tid != (uint32_t) r.pid)
                                continue;
                        on++;
                        on_chain += has_chain(s, spin_chain, 3);
                        continue;
                }
                if (s->tid != (uint32_t) r.pid)
                        continue; /* the pipe's writer thread */
                off++;
                cr_assert(s->n_names > 0 && s->names[0], "an off-CPU sample without a leaf frame");
                cr_assert(strncmp(s->names[0], "bpf_prog_", 9) != 0 && strncmp(s->names[0], "bpf_trace_run", 13) != 0,
                          "the off-CPU leaf is the collector's own frame %s, not the task's", s->names[0]);
                bool seen = false;
                for (size_t i = 0; i < n_leaves && !seen; i++)
                        seen = strcmp(leaves[i], s->names[0]) == 0;
                if (!seen && n_leaves < ELEMENTSOF(leaves))
                        leaves[n_leaves++] = s->names[0];
                blocked_total += s->blocked_ns;
                cr_log_info("off-CPU at %llu for %.1f ms in %s <- %s", (unsigned long long) s->ts, s->blocked_ns / 1e6,
                            s->n_names > 2 && s->names[s->n_names - 3] ? s->names[s->n_names - 3] : "?",
                            s->n_names > 1 && s->names[s->n_names - 2] ? s->names[s->n_names - 2] : "?");
                if (has_name(s, "block_sleep") || has_name(s, "block_read")) {
                        off_blocking++;
                        blocked_in_blocking += s->blocked_ns;
                }
        }
        /* Each off-CPU leaf (a kernel frame: where the task blocked) is a
         * function as /proc/kallsyms names it, whether the plugin named it
         * on demand or read that file. */
        for (size_t i = 0; i < n_leaves; i++)
                cr_assert(kallsyms_has(leaves[i]), "the off-CPU leaf %s is no function of /proc/kallsyms", leaves[i]);
        cr_log_info("on-CPU: %zu samples, %zu with spin_inner <- spin_outer <- main; off-CPU: %zu samples, %zu in "
                    "block_sleep/block_read, %.1f ms of %.1f ms blocked there; the program measured %.1f ms",
                    on, on_chain, off, off_blocking, blocked_in_blocking / 1e6, blocked_total / 1e6,
                    r.blocked_ns / 1e6);
        cr_assert_geq(on, share_of(r.cpu_ns, 999), "on-CPU samples of the workload: %zu in %.0f ms of CPU", on,
                      r.cpu_ns / 1e6);
        cr_assert_geq(on_chain * 10, on * 9, "spin_inner <- spin_outer <- main in only %zu of %zu samples", on_chain,
                      on);
        /* A record the plugin could not take (its ring full under a slow,
         * sanitized drain) is counted as lost, never silently missing. */
        unsigned long long lost = logged_losses();
        cr_assert_geq(off_blocking + lost, 5, "four sleeps and a read: %zu off-CPU samples there, %llu counted lost",
                      off_blocking, lost);
        cr_assert_gt(blocked_in_blocking * 2, blocked_total, "the blocking functions dominate the blocked time");
        double ratio = (double) blocked_in_blocking / (double) r.blocked_ns;
        if (lost == 0)
                cr_assert(ratio > 0.9 && ratio < 1.1, "blocked time %.1f ms in the trace vs %.1f ms measured",
                          blocked_in_blocking / 1e6, r.blocked_ns / 1e6);
        else
                cr_log_warn("%llu records lost: blocked time %.1f ms in the trace vs %.1f ms measured", lost,
                            blocked_in_blocking / 1e6, r.blocked_ns / 1e6);
        collect_free(&c);
}

static void nothing(void *userdata) {
        usleep(200 * 1000);
}

/* A config the plugin must refuse: the error names the field and reaches
 * the service (its log names the session's data source), and traced still
 * records the good instance next to it. */
static void check_refused(const char *bad, const char *expect) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        char *cfg;
        cr_assert_gt(asprintf(&cfg,
                              "buffers { size_kb: 16384 }\n"
                              "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config { %s } } }\n"
                              "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                              "  off_cpu: false frequency: 999 filter: \"comm=%s\" } } }\n"
                              "write_into_file: true file_write_period_ms: 250\n",
                              bad, workload_comm),
                     0);
        struct run r = { .argv = { workload, "500", "1", "1", "1", NULL }, .setups_before = setups_logged() };
        struct collect c = {};
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_workload_once_set_up, &r, collect_packet, &c);
        free(cfg);
        char *log = log_text();
        cr_assert(strstr(log, expect), "the log says \"%s\":\n%s", expect, log);
        free(log);
        cr_assert(traced_instance_alive(&inst), "traced keeps running");
        size_t on = 0;
        for (size_t k = 0; k < c.n_s; k++)
                on += c.s[k].pid == (uint32_t) r.pid && !c.s[k].off_cpu;
        cr_assert_geq(on, share_of(r.cpu_ns, 999), "the good instance recorded: %zu samples in %.0f ms of CPU", on,
                      r.cpu_ns / 1e6);
        collect_free(&c);
        (void) nothing;
}

Test(bpfstack, frequency_zero_is_refused) {
        check_refused("frequency: 0",
                      "reports for data source linux.bpf_stack: bpf_stack_config.frequency: 0 Hz is out of range");
}

Test(bpfstack, frequency_too_high_is_refused) {
        check_refused("frequency: 200000",
                      "reports for data source linux.bpf_stack: bpf_stack_config.frequency: 200000 Hz is out of range");
}

Test(bpfstack, unknown_filter_is_refused) {
        check_refused("filter: \"color=red\"",
                      "reports for data source linux.bpf_stack: bpf_stack_config.filter: unknown filter \"color\"");
}

Test(bpfstack, depth_over_127_is_refused) {
        check_refused("max_depth: 128",
                      "reports for data source linux.bpf_stack: bpf_stack_config.max_depth: 128 is out of range (1..127)");
}

Test(bpfstack, kernel_without_btf_is_refused) {
        check_refused("btf_path: \"/nonexistent/vmlinux\"",
                      "reports for data source linux.bpf_stack: no kernel BTF at /nonexistent/vmlinux");
}

/* A copy of the workload spinning for ms, pinned to cpu (which the kernel
 * widens when that CPU goes offline). */
static pid_t spawn_pinned(int cpu, const char *ms) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                if (sched_setaffinity(0, sizeof(set), &set) < 0)
                        _exit(3);
                execl(workload, workload, ms, "0", "0", "0", (char *) NULL);
                _exit(4);
        }
        return pid;
}

struct hotplug_run {
        struct fixture_hotplug h;
        unsigned setups_before;
        pid_t pinned_after;
        uint64_t pinned_after_cpu_ns; /* the CPU time the copy pinned to CPU 1 once it was back got */
        bool unseen; /* the plugin host held stopped across the offline stretch */
};

/* Once CPU 1 is back: a copy pinned to it spins there for a second (the
 * scheduler may take its time to move the others back). */
static void spin_on_cpu1(struct fixture_hotplug *h) {
        struct hotplug_run *hr = h->userdata;
        hr->pinned_after = spawn_pinned(1, "1000");
}

/* Once the instance is set up (loading the programs can take a second on
 * a loaded machine): a copy pinned to CPU 1 and one free to run anywhere
 * keep both CPUs busy while CPU 1 goes offline and comes back. */
static void offline_and_back(void *userdata) {
        struct hotplug_run *hr = userdata;
        for (int i = 0; i < 300 && setups_logged() <= hr->setups_before; i++)
                usleep(100 * 1000);
        cr_assert_gt(setups_logged(), hr->setups_before, "the linux.bpf_stack instance was never set up");
        const char *argv[] = { workload, "3000", "0", "0", "0", NULL };
        pid_t spin[2];
        spin[0] = spawn_pinned(1, "3000");
        cr_assert_eq(posix_spawn(&spin[1], workload, NULL, NULL, (char *const *) argv, environ), 0);
        hr->h.on_back = spin_on_cpu1;
        hr->h.userdata = hr;
        if (hr->unseen) {
                hr->h.hold = fixture_plugin_host_pid(&inst, "bpfstack.so");
                cr_assert_gt(hr->h.hold, 0, "no plugin host runs bpfstack.so");
        }
        fixture_cpu_offline_and_back(&hr->h);
        int st;
        pid_t all[3] = { spin[0], spin[1], hr->pinned_after };
        for (int i = 0; i < 3; i++) {
                uint64_t cpu_ns = reap(all[i], &st);
                cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a workload copy ran (status %d)", st);
                if (all[i] == hr->pinned_after)
                        hr->pinned_after_cpu_ns = cpu_ns;
        }
}

/* A CPU that goes offline mid-recording and comes back is sampled again:
 * the kernel leaves its clock event silent, the plugin opens it anew. */
static void record_cpu_offline_and_back(bool unseen) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        struct hotplug_run hr = { .h = { .online = "/sys/devices/system/cpu/cpu1/online" },
                                  .setups_before = setups_logged(), .pinned_after = -1,
                                  .unseen = unseen };
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || access(hr.h.online, W_OK) < 0)
                SKIP("CPU 1 cannot be taken offline here (one CPU, no CPU hotplug, or a read-only sysfs)");
        int lock = fixture_hotplug_lock(true);
        struct collect c = {};
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config { frequency: 499 off_cpu: false "
                 "filter: \"comm=%s\" drain_period_ms: 100 } } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 workload_comm);
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, offline_and_back, &hr, collect_packet, &c);
        fixture_hotplug_unlock(lock);
        cr_assert(hr.h.wrote, "CPU 1 did not go offline");
        cr_assert(!unseen || hr.h.held, "the plugin host was not held");
        size_t before = 0, after = 0;
        for (size_t k = 0; k < c.n_s; k++)
                if (!c.s[k].off_cpu && c.s[k].cpu == 1) {
                        if (c.s[k].ts > hr.h.back)
                                after++;
                        else
                                before++;
                }
        cr_log_info("CPU 1: %zu samples before it went offline, %zu after it came back", before, after);
        if (before == 0 || after < share_of(hr.pinned_after_cpu_ns, 499))
                traced_instance_dump_log(&inst);
        cr_assert_gt(before, 0, "CPU 1 was not sampled before it went offline");
        /* A copy pinned to it spun there once it was back. */
        cr_assert_geq(after, share_of(hr.pinned_after_cpu_ns, 499),
                      "CPU 1 was not sampled after it came back online (%zu samples; the copy pinned to it had %.0f ms "
                      "of CPU)",
                      after, hr.pinned_after_cpu_ns / 1e6);
        collect_free(&c);
}

Test(bpfstack, cpu_offline_and_back) {
        record_cpu_offline_and_back(false);
}

/* ... also when the plugin never saw the CPU offline (held up past the
 * offline stretch, as on a loaded machine): the event that went silent is
 * found by its stopped clock. */
Test(bpfstack, cpu_offline_and_back_unseen) {
        record_cpu_offline_and_back(true);
}

/* tracectl record --bpf-stacks: every process, on-CPU at 99 Hz and
 * off-CPU; the workload is found in the file tracectl wrote. */
Test(bpfstack, tracectl_quick_flag) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        struct test_consumer cons = {};
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, ev, "linux.bpf_stack", 1, 5000), "linux.bpf_stack registered");
        test_consumer_free(&cons);

        char out[512];
        snprintf(out, sizeof(out), "%s/quick.pftrace", inst.dir);
        const char *argv[] = { TRACECTL_BINARY, "--socket", inst.consumer_path, "record", "-t", "8s", "--bpf-stacks",
                               "--no-process-stats", "--no-summary", "-o", out, NULL };
        pid_t tc;
        int hotplug = fixture_hotplug_lock(false);
        struct run r = { .argv = { workload, "1500", "24", "25", "100", NULL }, .setups_before = setups_logged() };
        cr_assert_eq(posix_spawn(&tc, TRACECTL_BINARY, NULL, NULL, (char *const *) argv, environ), 0);
        /* 24 sleeps and a read, of which three must be seen: a system-wide
         * recording on a loaded machine (an ASan build beside other tests)
         * loses ring records in bursts (counted in the trace; once, with six
         * sleeps, only one was left): many short stretches spread over
         * 0.7 s are not all lost to one burst. */
        run_workload_once_set_up(&r);
        int status;
        cr_assert_eq(waitpid(tc, &status, 0), tc);
        fixture_hotplug_unlock(hotplug);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tracectl record succeeded");

        int fd = open(out, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s", out);
        struct collect c = {};
        fixture_for_each_packet(fd, collect_packet, &c);
        /* Loading the programs takes a while (seconds on a busy machine):
         * the 8 s asked for count from when they run. */
        struct fixture_lifecycle l;
        fixture_lifecycle(fd, &l);
        close(fd);
        cr_assert(l.all_started > l.tracing_started && l.disabled, "the trace lacks the session's start or end");
        cr_assert_geq(l.disabled - l.all_started, 8000000000ull,
                      "linux.bpf_stack recorded %.3f s of the 8 s asked for (it started %.3f s after the session)",
                      (double) (l.disabled - l.all_started) / 1e9, (double) (l.all_started - l.tracing_started) / 1e9);
        size_t on = 0, on_chain = 0, off_blocking = 0, others = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                if (s->pid != (uint32_t) r.pid) {
                        others++;
                        continue;
                }
                if (!s->off_cpu) {
                        on++;
                        on_chain += has_chain(s, spin_chain, 3);
                } else if (has_name(s, "block_sleep") || has_name(s, "block_read"))
                        off_blocking++;
        }
        cr_log_info("--bpf-stacks: %zu samples of the workload on CPU (%zu with the chain), %zu off CPU blocking, "
                    "%zu of other processes",
                    on, on_chain, off_blocking, others);
        cr_assert_geq(on, share_of(r.cpu_ns, 99), "99 Hz on CPU: %zu samples in %.0f ms of CPU", on, r.cpu_ns / 1e6);
        cr_assert_geq(on_chain * 10, on * 8, "the chain in %zu of %zu", on_chain, on);
        cr_assert_geq(off_blocking, 3, "24 sleeps and a read: %zu", off_blocking);
        collect_free(&c);
}

/* ---- user stacks walked by unwind tables ---- */

#define UNWIND_BIN BPFSTACK_TEST_BIN_DIR "/unwind-nofp"
#define COMM_LEN 16 /* the kernel's TASK_COMM_LEN */
#define UNWIND_LIB BPFSTACK_TEST_BIN_DIR "/libunwind-nofp.so"
#define UNWIND_DEBUG_FRAME_BIN BPFSTACK_TEST_BIN_DIR "/unwind-debug-frame"

/* A copy of from at inst.dir/NAME, NAME being prefix and this test's pid
 * (a comm the filter keeps to this test); its path in path. */
static void copy_named(const char *from, const char *prefix, char *path, size_t size, char *comm) {
        snprintf(comm, COMM_LEN, "%s%d", prefix, (int) getpid());
        snprintf(path, size, "%s/%s", inst.dir, comm);
        int in = open(from, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(in, 0, "%s: %s", from, strerror(errno));
        int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        cr_assert_geq(out, 0, "%s: %s", path, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        close(in);
        close(out);
}

struct unwind_run {
        const char *argv[6];
        pid_t pid;
        uint64_t cpu_ns; /* the CPU time it got */
        unsigned setups_before;
};

static void run_unwind(void *userdata) {
        struct unwind_run *u = userdata;
        for (int i = 0; i < 300 && setups_logged() <= u->setups_before; i++)
                usleep(100 * 1000);
        cr_assert_gt(setups_logged(), u->setups_before, "the linux.bpf_stack instance was never set up");
        cr_assert_eq(posix_spawn(&u->pid, u->argv[0], NULL, NULL, (char *const *) u->argv, environ), 0);
        int status;
        u->cpu_ns = reap(u->pid, &status);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %s ran (status %d)", u->argv[0], u->argv[1],
                  status);
        usleep(300 * 1000);
}

/* Records the on-CPU samples of u's program, whose comms are given, with
 * user stacks walked by unwind tables (drained often: a process's first
 * samples, before its tables are in, take frame pointers). */
static void record_unwind(struct unwind_run *u, const char *comm1, const char *comm2, struct collect *c) {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                 "  frequency: 999 off_cpu: false kernel_frames: false user_unwind: DWARF_TABLES drain_period_ms: 20\n"
                 "  filter: \"comm=%s\" filter: \"comm=%s\"\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 comm1, comm2);
        u->setups_before = setups_logged();
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_unwind, u, collect_packet, c);
}

/* Records the unwind program bin (a copy named prefix and this test's pid)
 * run as "mode ms [arg]"; its pid, and the CPU time it got. */
static pid_t record_program(const char *bin, const char *prefix, const char *mode, const char *ms, const char *arg,
                            struct collect *c, uint64_t *ret_cpu_ns) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        char path[512], comm[COMM_LEN];
        copy_named(bin, prefix, path, sizeof(path), comm);
        struct unwind_run u = { .argv = { path, mode, ms, arg, NULL } };
        record_unwind(&u, comm, comm, c);
        *ret_cpu_ns = u.cpu_ns;
        return u.pid;
}

/* The share (in tenths) of a program's samples its tables must walk
 * whole, over an exec or a dlopen: those before the tables are in go by
 * frame pointers. Under ASan the plugin compiles several times slower,
 * and a 2 s program has more of its samples before them. */
#if defined(__SANITIZE_ADDRESS__)
#define TABLE_WALK_TENTHS 8
#else
#define TABLE_WALK_TENTHS 9
#endif

static const char *const unwind_chain[] = { "chain_leaf", "chain_middle", "chain_outer", "main" };

/* How many of the workload's on-CPU samples read chain (leaf first, from
 * frame `from` down) through to _start, of how many. */
static void count_chain(const struct collect *c, pid_t pid, const char *const *chain, size_t n, size_t *ret_whole,
                        size_t *ret_all) {
        size_t whole = 0, all = 0;
        for (size_t k = 0; k < c->n_s; k++) {
                const struct sample *s = &c->s[k];
                if (s->off_cpu || s->pid != (uint32_t) pid)
                        continue;
                all++;
                whole += has_chain(s, chain, n) && ends_at_start(s);
        }
        *ret_whole = whole;
        *ret_all = all;
}

/* The first and last time a process's on-CPU samples read the chain
 * whole (both 0 when none did). */
static void whole_span(const struct collect *c, pid_t pid, const char *const *chain, size_t n, uint64_t *ret_first,
                       uint64_t *ret_last) {
        uint64_t first = 0, last = 0;
        for (size_t k = 0; k < c->n_s; k++) {
                const struct sample *s = &c->s[k];
                if (s->off_cpu || s->pid != (uint32_t) pid || !has_chain(s, chain, n) || !ends_at_start(s))
                        continue;
                if (first == 0 || s->ts < first)
                        first = s->ts;
                if (s->ts > last)
                        last = s->ts;
        }
        *ret_first = first;
        *ret_last = last;
}

static bool chain_whole(const struct sample *s) {
        return has_chain(s, unwind_chain, 4) && ends_at_start(s);
}

static bool on_cpu(const struct sample *s) {
        return !s->off_cpu;
}

/* The program's samples (those `in` takes) that `whole` reads whole:
 * before its tables are in they go by frame pointers, and how long that
 * takes depends on the machine (its load, a sanitized plugin). So: at
 * least half of them whole, and from the first whole walk on, 9 in 10. */
static void assert_tables_walk(const struct collect *c, pid_t pid, bool (*in)(const struct sample *),
                               bool (*whole)(const struct sample *), const char *what) {
        size_t all = 0, good = 0, after = 0, good_after = 0;
        uint64_t first = UINT64_MAX;
        for (size_t k = 0; k < c->n_s; k++) {
                const struct sample *s = &c->s[k];
                if (s->pid != (uint32_t) pid || !in(s))
                        continue;
                all++;
                if (whole(s)) {
                        good++;
                        if (s->ts < first)
                                first = s->ts;
                }
        }
        for (size_t k = 0; k < c->n_s; k++) {
                const struct sample *s = &c->s[k];
                if (s->pid != (uint32_t) pid || !in(s) || s->ts < first)
                        continue;
                after++;
                good_after += whole(s);
        }
        cr_log_info("%s: %zu of %zu samples whole; %zu of %zu from the first whole walk on", what, good, all,
                    good_after, after);
        cr_assert_geq(good * 2, all, "%s: whole in only %zu of %zu samples", what, good, all);
        cr_assert_geq(good_after * 10, after * 9, "%s: once the tables were in, whole in only %zu of %zu samples",
                      what, good_after, after);
}

Test(bpfstack, unwind_tables_walk_code_without_frame_pointers) {
        struct collect c = {};
        uint64_t cpu_ns;
        pid_t pid = record_program(UNWIND_BIN, "bsu", "chain", "2000", NULL, &c, &cpu_ns);
        size_t whole, all;
        count_chain(&c, pid, unwind_chain, 4, &whole, &all);
        cr_log_info("chain: %zu of %zu samples read chain_leaf <- chain_middle <- chain_outer <- main ... _start",
                    whole, all);
        cr_assert_geq(all, share_of(cpu_ns, 999), "%zu samples in %.0f ms of CPU", all, cpu_ns / 1e6);
        assert_tables_walk(&c, pid, on_cpu, chain_whole, "chain");
        /* What the tables cost and how the walks ended, in the trace. */
        int64_t bytes, files, walks_whole, by_fp;
        cr_assert(counter_value(&c, "linux.bpf_stack unwind: table bytes", &bytes), "a table bytes counter");
        cr_assert(counter_value(&c, "linux.bpf_stack unwind: files with tables", &files));
        cr_assert(counter_value(&c, "linux.bpf_stack unwind: walks whole", &walks_whole));
        cr_assert(counter_value(&c, "linux.bpf_stack unwind: stacks by frame pointers (tables not in yet)", &by_fp));
        cr_log_info("counters: %lld table bytes, %lld files, %lld walks whole, %lld by frame pointers",
                    (long long) bytes, (long long) files, (long long) walks_whole, (long long) by_fp);
        cr_assert_gt(bytes, 8 * 1000, "the program's and libc's tables: %lld bytes", (long long) bytes);
        cr_assert_geq(files, 2, "the program, libc (and ld.so, the vDSO): %lld", (long long) files);
        cr_assert_geq(walks_whole, (int64_t) whole, "the walks counted whole (%lld) cover the whole samples (%zu)",
                      (long long) walks_whole, whole);
        cr_assert_gt(by_fp, 0, "the first samples, before the tables were in, counted");
        collect_free(&c);
}

/* Its own rules only in .debug_frame (built -g without unwind tables). */
Test(bpfstack, unwind_tables_from_debug_frame) {
        struct collect c = {};
        uint64_t cpu_ns;
        pid_t pid = record_program(UNWIND_DEBUG_FRAME_BIN, "bsg", "chain", "2000", NULL, &c, &cpu_ns);
        size_t whole, all;
        count_chain(&c, pid, unwind_chain, 4, &whole, &all);
        cr_log_info("debug_frame: %zu of %zu samples read the whole chain", whole, all);
        cr_assert_geq(all, share_of(cpu_ns, 999), "%zu samples in %.0f ms of CPU", all, cpu_ns / 1e6);
        assert_tables_walk(&c, pid, on_cpu, chain_whole, "debug_frame");
        collect_free(&c);
}

/* burn? <- recurse_leaf <- recurse x 100 <- main ... _start, nothing
 * else between. */
static bool recursion_whole(const struct sample *s) {
        size_t at = 0;
        while (at < s->n_names && !name_is(s, at, "recurse_leaf"))
                at++;
        if (at > 1 || at == s->n_names)
                return false;
        size_t depth = 0;
        while (name_is(s, at + 1 + depth, "recurse"))
                depth++;
        return depth == 100 && name_is(s, at + 1 + depth, "main") && ends_at_start(s);
}

Test(bpfstack, unwind_tables_deep_recursion) {
        struct collect c = {};
        uint64_t cpu_ns;
        pid_t pid = record_program(UNWIND_BIN, "bsr", "recurse", "2000", NULL, &c, &cpu_ns);
        size_t good = 0, all = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                if (s->pid != (uint32_t) pid)
                        continue;
                all++;
                good += recursion_whole(s);
        }
        cr_log_info("recursion: %zu of %zu samples read recurse_leaf <- 100 x recurse <- main ... _start", good, all);
        cr_assert_geq(all, share_of(cpu_ns, 999), "%zu samples in %.0f ms of CPU", all, cpu_ns / 1e6);
        assert_tables_walk(&c, pid, on_cpu, recursion_whole, "recursion");
        collect_free(&c);
}

static bool in_cmp_slow(const struct sample *s) {
        return name_is(s, 0, "cmp_slow");
}

/* cmp_slow <- libc's sort (one frame or more) <- sort_outer <- main ... _start */
static bool qsort_whole(const struct sample *s) {
        size_t at = 1;
        while (at < s->n_names && !name_is(s, at, "sort_outer"))
                at++;
        return at >= 2 && name_is(s, at + 1, "main") && ends_at_start(s);
}

Test(bpfstack, unwind_tables_through_a_shared_library) {
        struct collect c = {};
        uint64_t cpu_ns;
        pid_t pid = record_program(UNWIND_BIN, "bsq", "qsort", "2000", NULL, &c, &cpu_ns);
        size_t in_cmp = 0, good = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                if (s->pid != (uint32_t) pid || !in_cmp_slow(s))
                        continue;
                in_cmp++;
                good += qsort_whole(s);
        }
        cr_log_info("qsort: %zu of %zu samples in cmp_slow read cmp_slow <- libc <- sort_outer <- main ... _start", good,
                    in_cmp);
        cr_assert_geq(in_cmp * 10, share_of(cpu_ns, 999) * 3, "samples in the comparator: %zu in %.0f ms of CPU", in_cmp,
                      cpu_ns / 1e6);
        assert_tables_walk(&c, pid, in_cmp_slow, qsort_whole, "qsort");
        collect_free(&c);
}

Test(bpfstack, unwind_tables_follow_exec) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        char first[512], second[512], comm1[COMM_LEN], comm2[COMM_LEN];
        copy_named(UNWIND_BIN, "bsa", first, sizeof(first), comm1);
        copy_named(UNWIND_BIN, "bsb", second, sizeof(second), comm2);
        struct unwind_run u = { .argv = { first, "exec", "1000", second, NULL } };
        struct collect c = {};
        record_unwind(&u, comm1, comm2, &c);
        size_t whole, all;
        count_chain(&c, u.pid, unwind_chain, 4, &whole, &all);
        cr_log_info("exec: %zu of %zu samples read the whole chain, before and after the exec", whole, all);
        cr_assert_geq(all, share_of(u.cpu_ns, 999), "over the exec: %zu samples in %.0f ms of CPU", all, u.cpu_ns / 1e6);
        cr_assert_geq(whole * 10, all * TABLE_WALK_TENTHS, "the whole chain in only %zu of %zu samples", whole, all);
        collect_free(&c);
}

Test(bpfstack, unwind_tables_follow_dlopen) {
        struct collect c = {};
        uint64_t cpu_ns;
        pid_t pid = record_program(UNWIND_BIN, "bsd", "dlopen", "1000", UNWIND_LIB, &c, &cpu_ns);
        static const char *const lib_chain[] = { "lib_leaf", "lib_middle", "lib_outer", "main" };
        size_t in_lib = 0, whole = 0, before, before_all;
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                if (s->pid != (uint32_t) pid || !name_is(s, 0, "lib_leaf"))
                        continue;
                in_lib++;
                whole += has_chain(s, lib_chain, 4) && ends_at_start(s);
        }
        count_chain(&c, pid, unwind_chain, 4, &before, &before_all);
        cr_log_info("dlopen: %zu of %zu samples in the library read lib_leaf <- lib_middle <- lib_outer <- main ... "
                    "_start; %zu before it with the whole chain",
                    whole, in_lib, before);
        /* Half of its time in the library, half before the dlopen. */
        cr_assert_geq(in_lib, share_of(cpu_ns / 2, 999), "in the library: %zu samples in %.0f ms of CPU", in_lib,
                      cpu_ns / 2e6);
        cr_assert_geq(before, share_of(cpu_ns / 2, 999), "before the dlopen: %zu samples in %.0f ms of CPU", before,
                      cpu_ns / 2e6);
        cr_assert_geq(whole * 10, in_lib * TABLE_WALK_TENTHS, "the whole chain in only %zu of %zu samples", whole, in_lib);
        collect_free(&c);
}

/* The same program by frame pointers: what the tables are for. */
Test(bpfstack, frame_pointers_cannot_walk_it) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        char path[512], comm[COMM_LEN], cfg[1024];
        copy_named(UNWIND_BIN, "bsf", path, sizeof(path), comm);
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                 "  frequency: 999 off_cpu: false kernel_frames: false user_unwind: FRAME_POINTER\n"
                 "  filter: \"comm=%s\"\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 comm);
        struct unwind_run u = { .argv = { path, "chain", "1000", NULL }, .setups_before = setups_logged() };
        struct collect c = {};
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_unwind, &u, collect_packet, &c);
        size_t whole, all;
        count_chain(&c, u.pid, unwind_chain, 4, &whole, &all);
        cr_log_info("frame pointers: %zu of %zu samples read the whole chain", whole, all);
        cr_assert_geq(all, share_of(u.cpu_ns, 999), "%zu samples in %.0f ms of CPU", all, u.cpu_ns / 1e6);
        cr_assert_lt(whole * 10, all, "frame pointers walked the whole chain in %zu of %zu samples", whole, all);
        collect_free(&c);
}

/* ---- tasks that exit leave nothing behind ---- */

struct exits_run {
        unsigned setups_before;
        size_t left; /* out_since entries of the workload's comm once all exited */
};

/* The entries of every out_since map loaded (the instances of other tests
 * have their own, with other comms) holding comm. */
static size_t switched_out_entries(const char *comm) {
        size_t n = 0;
        for (__u32 id = 0; bpf_map_get_next_id(id, &id) == 0;) {
                int fd = bpf_map_get_fd_by_id(id);
                if (fd < 0)
                        continue;
                struct bpf_map_info info = {};
                __u32 len = sizeof(info);
                if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && strcmp(info.name, "out_since") == 0 &&
                    info.value_size == sizeof(struct bpfstack_switched_out)) {
                        __u32 key, next;
                        struct bpfstack_switched_out o;
                        for (int r = bpf_map_get_next_key(fd, NULL, &next); r == 0;
                             r = bpf_map_get_next_key(fd, &key, &next)) {
                                key = next;
                                if (bpf_map_lookup_elem(fd, &key, &o) == 0 && strncmp(o.comm, comm, COMM_LEN) == 0) {
                                        cr_log_info("left in out_since: tid %u of pid %u", key, o.pid);
                                        n++;
                                }
                        }
                }
                close(fd);
        }
        return n;
}

static void short_lived(void *userdata) {
        struct exits_run *e = userdata;
        for (int i = 0; i < 300 && setups_logged() <= e->setups_before; i++)
                usleep(100 * 1000);
        cr_assert_gt(setups_logged(), e->setups_before, "the linux.bpf_stack instance was never set up");
        /* Each blocks on a pipe for a millisecond (a thread writes it), then
         * it and its thread exit. */
        const char *argv[] = { workload, "0", "0", "0", "1", NULL };
        for (int k = 0; k < 50; k++) {
                pid_t pid;
                posix_spawn_file_actions_t fa;
                posix_spawn_file_actions_init(&fa);
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
                cr_assert_eq(posix_spawn(&pid, workload, &fa, NULL, (char *const *) argv, environ), 0);
                posix_spawn_file_actions_destroy(&fa);
                int st;
                cr_assert_eq(waitpid(pid, &st, 0), pid);
                cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        usleep(200 * 1000);
        e->left = switched_out_entries(workload_comm);
}

Test(bpfstack, exited_tasks_leave_no_switch_out_behind) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config { on_cpu: false "
                 "filter: \"comm=%s\" } } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 workload_comm);
        struct exits_run e = { .setups_before = setups_logged() };
        struct collect c = {};
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, short_lived, &e, collect_packet, &c);
        size_t blocked = 0;
        for (size_t k = 0; k < c.n_s; k++)
                blocked += c.s[k].off_cpu;
        cr_log_info("50 short-lived processes: %zu off-CPU samples, %zu switch-outs left in the map", blocked, e.left);
        cr_assert_gt(blocked, 25, "the processes' blocking was recorded: %zu samples", blocked);
        /* Without the check each task's last switch-out stays: 100 here.
         * Once, on a loaded machine, one entry was seen left; why is not
         * known, hence a margin. */
        cr_assert_leq(e.left, 5, "%zu switch-outs of exited tasks left in out_since", e.left);
        collect_free(&c);
}

/* ---- bounds ---- */

#define MANY 24

struct many_run {
        char path[512];
        pid_t pids[MANY];
        unsigned setups_before;
};

static void run_many(void *userdata) {
        struct many_run *m = userdata;
        for (int i = 0; i < 300 && setups_logged() <= m->setups_before; i++)
                usleep(100 * 1000);
        cr_assert_gt(setups_logged(), m->setups_before, "the linux.bpf_stack instance was never set up");
        const char *argv[] = { m->path, "chain", "3000", NULL };
        /* Niced: 24 spinning processes on a small machine would otherwise
         * leave the plugin little CPU to load their tables with. */
        for (size_t k = 0; k < MANY; k++) {
                cr_assert_eq(posix_spawn(&m->pids[k], m->path, NULL, NULL, (char *const *) argv, environ), 0);
                (void) setpriority(PRIO_PROCESS, (id_t) m->pids[k], 19);
        }
        for (size_t k = 0; k < MANY; k++) {
                int st;
                cr_assert_eq(waitpid(m->pids[k], &st, 0), m->pids[k]);
                cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        usleep(300 * 1000);
}

/* More processes than unwind_processes: those with an entry are walked
 * whole, the others keep frame-pointer stacks; the refusals are counted,
 * and nothing else breaks. */
Test(bpfstack, more_processes_than_entries) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        struct many_run m = { .setups_before = setups_logged() };
        char comm[COMM_LEN], cfg[1024];
        copy_named(UNWIND_BIN, "bsm", m.path, sizeof(m.path), comm);
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                 "  frequency: 999 off_cpu: false kernel_frames: false unwind_processes: 16 drain_period_ms: 20\n"
                 "  filter: \"comm=%s\"\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 comm);
        struct collect c = {};
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_many, &m, collect_packet, &c);
        size_t walked = 0, not_walked = 0;
        uint64_t first[MANY], last[MANY];
        bool has_entry[MANY] = {};
        for (size_t k = 0; k < MANY; k++) {
                size_t whole, all;
                count_chain(&c, m.pids[k], unwind_chain, 4, &whole, &all);
                whole_span(&c, m.pids[k], unwind_chain, 4, &first[k], &last[k]);
                /* A process with an entry is walked whole from when its
                 * tables are loaded: on a loaded machine that can be late
                 * in its life, so any real run of whole walks counts. */
                if (whole >= 10) {
                        walked++;
                        has_entry[k] = true;
                } else if (all > 20 && whole * 10 < all)
                        not_walked++;
        }
        /* An entry lasts until its process exits, and one that exits frees
         * its entry for a process still waiting: so more than 16 may be
         * walked in all when the machine is slow to load them, but never
         * more than 16 at once. Each process's whole walks lie within its
         * entry's life, so no instant may fall inside more than 16 of
         * those spans. */
        size_t most_at_once = 0;
        for (size_t k = 0; k < MANY; k++) {
                if (!has_entry[k])
                        continue;
                size_t at_once = 0;
                for (size_t j = 0; j < MANY; j++)
                        at_once += has_entry[j] && first[j] <= first[k] && first[k] <= last[j];
                if (at_once > most_at_once)
                        most_at_once = at_once;
        }
        char *log = log_text();
        const char *at = strstr(log, "process entries written (");
        unsigned long long refused = at ? strtoull(at + strlen("process entries written ("), NULL, 10) : 0;
        free(log);
        cr_log_info("24 processes, 16 entries: %zu walked by tables (at most %zu at once), %zu by frame pointers "
                    "only; %llu entries refused",
                    walked, most_at_once, not_walked, refused);
        /* How many got their entry in time depends on the machine's load
         * (a busy CI runner loaded 9 of 16); that the cap holds does not. */
        cr_assert_geq(walked, 1, "no process was walked by its tables");
        cr_assert_leq(most_at_once, 16, "processes walked by tables at once: %zu of at most 16 entries",
                      most_at_once);
        cr_assert_geq(not_walked, 1, "no process was left to frame pointers (%zu walked by tables)", walked);
        cr_assert_gt(refused, 0, "the entries refused are counted");
        cr_assert(traced_instance_alive(&inst), "traced keeps running");
        collect_free(&c);
}

/* Whether a sample's user stack reaches libc's start. */
static bool walked_to_libc_start(const struct sample *x) {
        for (size_t j = 1; j < x->n_names; j++)
                if (x->names[j] && strcmp(x->names[j], "__libc_start_main") == 0)
                        return true;
        return false;
}

/* JavaScript compiled by V8 runs in anonymous memory: its frames are
 * named from node's perf map (--perf-basic-prof). */
Test(bpfstack, javascript_functions_named_from_the_perf_map) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        const char *node = fixture_node_binary();
        if (!node)
                SKIP("node is not installed (tools/install-deps.sh installs Debian's nodejs)");
        struct unwind_run u = { .argv = { node, "--perf-basic-prof", FIXTURE_NODE_PROGRAM, "8000", NULL } };
        struct collect c = {};
        /* node's comm is its file's name. */
        record_unwind(&u, "node", "nodejs", &c);
        char map[64];
        snprintf(map, sizeof(map), JIT_PERF_MAP_DIR "/perf-%d.map", (int) u.pid);
        (void) unlink(map); /* node leaves it behind */
        size_t total = 0, named = 0, whole = 0;
        uint64_t first_whole = UINT64_MAX;
        for (size_t k = 0; k < c.n_s; k++) {
                if (c.s[k].pid != (uint32_t) u.pid || !on_cpu(&c.s[k]) || c.s[k].n_names == 0)
                        continue;
                total++;
                bool busy = c.s[k].names[0] && strstr(c.s[k].names[0], "busyLoop");
                named += busy;
                /* The walk goes on through the generated code (no table
                 * covers it: its frame pointers lead on) to libc's start. */
                if (busy && walked_to_libc_start(&c.s[k])) {
                        whole++;
                        if (c.s[k].ts < first_whole)
                                first_whole = c.s[k].ts;
                }
        }
        /* Stacks end short of it while node's tables are being loaded
         * (seconds in a sanitized build: a few % of the samples got there
         * on a slow machine, against 95-100 % plain); from the first that
         * got there on, the tables are in, and nearly all do. Without the
         * frame-pointer step none gets there. */
        size_t named_after = 0, whole_after = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                if (c.s[k].pid != (uint32_t) u.pid || !on_cpu(&c.s[k]) || c.s[k].n_names == 0 ||
                    c.s[k].ts < first_whole || !c.s[k].names[0] || !strstr(c.s[k].names[0], "busyLoop"))
                        continue;
                named_after++;
                whole_after += walked_to_libc_start(&c.s[k]);
        }
        cr_log_info("node: %zu of %zu on-CPU samples with a user stack are in busyLoop, named, %zu of them walked to "
                    "__libc_start_main; %zu of the %zu from the first that did",
                    named, total, whole, whole_after, named_after);
        cr_assert_geq(total, share_of(u.cpu_ns, 999), "on-CPU samples of node: %zu", total);
        cr_assert_geq(named * 2, total, "only %zu of %zu samples name busyLoop", named, total);
        cr_assert_gt(whole, 0, "none of the %zu samples in busyLoop walked to __libc_start_main", named);
        cr_assert_geq(whole_after * 4, named_after * 3,
                      "only %zu of the %zu samples in busyLoop from the first whole one walked to __libc_start_main",
                      whole_after, named_after);
        collect_free(&c);
}
