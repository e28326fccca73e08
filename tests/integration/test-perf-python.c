/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf names CPython's frames: tests/data/pyframes-busy.py (main ->
 * loop -> work -> fib -> fib ..., or csum, or rest, which sleeps) run by
 * Debian's python3.11 and sampled on the CPU with DWARF stacks. The
 * plugin reads each sample's Python frames from the process as it drains
 * its rings, after the sample; those that still agree with the sample's
 * stack copy stand in place of _PyEval_EvalFrameDefault, root first
 * <module>, main, loop, then work and fib, each with the script's file
 * and a line. The share is of the samples the recording got (the issue's
 * figure: 80 %), whatever the machine's load. */

#include <criterion/criterion.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpfstack-collect.h"
#include "plugin-fixture.h"
#include "pyframes-check.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(perf_python, .init = setup, .fini = teardown, .timeout = 180);

#define SKIP(...)                                                                                                      \
        do {                                                                                                           \
                teardown();                                                                                            \
                cr_skip_test(__VA_ARGS__);                                                                             \
        } while (0)

/* Software perf events with user registers and stack copies. */
static bool perf_usable(void) {
        struct perf_event_attr a = {
                .size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_period = 1000000, .sample_type = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
                .sample_regs_user = 0x1ff, .sample_stack_user = 8192, .disabled = 1,
        };
        int fd = (int) syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

struct pyrun {
        pid_t pid;
        bool threads;
};

static void run_python(void *userdata) {
        struct pyrun *r = userdata;
        for (int i = 0; i < 30; i++)
                (void) sd_event_run(ev, 100 * 1000);
        (void) kill(r->pid, SIGKILL);
        (void) waitpid(r->pid, NULL, 0);
}

struct tally {
        size_t on, right, in_fib, other_thread, no_stack, with_eval, with_py;
};

static struct tally record(struct pyrun *r, bool frames, struct collect *c) {
        const char *argv[] = {PYFRAMES_PYTHON, PYFRAMES_SCRIPT, "-1", r->threads ? "threads" : NULL, NULL};
        int e = posix_spawn(&r->pid, PYFRAMES_PYTHON, NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(e, 0, "%s: %s", PYFRAMES_PYTHON, strerror(e));
        usleep(200 * 1000); /* past the interpreter's start */
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                 "  timebase { frequency: 499 counter: SW_CPU_CLOCK }\n"
                 "  callstack_sampling { scope { target_pid: %d } user_frames: UNWIND_DWARF%s }\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 (int) r->pid, frames ? "" : " traced_python_frames: false");
        fixture_record(&inst, ev, "linux.perf", cfg, run_python, r, collect_packet, c);
        cr_assert(fixture_wait_log(&inst, ev, "linux.perf instance ", " stopped: ", 0, 10000));
        struct tally t = {0};
        for (size_t k = 0; k < c->n_s; k++) {
                const struct sample *s = &c->s[k];
                if (s->pid != (uint32_t) r->pid)
                        continue;
                t.on++;
                if (!s->n_names) {
                        t.no_stack++;
                        continue;
                }
                char inner[256];
                size_t under;
                bool right = python_stack_right_under(s, inner, sizeof(inner), &under);
                t.right += right;
                /* The first few that are not, for whoever reads a failure. */
                if (!right && t.on - t.right <= 3) {
                        char line[4096] = "";
                        for (size_t j = s->n_names; j-- > 0;) {
                                strncat(line, s->names[j] ? s->names[j] : "?", sizeof(line) - strlen(line) - 1);
                                strncat(line, " <- ", sizeof(line) - strlen(line) - 1);
                        }
                        cr_log_info("wrong: %s", line);
                }
                t.in_fib += right && strcmp(inner, "fib") == 0;
                t.other_thread += right && s->tid != s->pid && strcmp(inner, "fib") == 0;
                for (size_t j = 0; j < s->n_names; j++)
                        if (s->names[j] && strcmp(s->names[j], "_PyEval_EvalFrameDefault") == 0) {
                                t.with_eval++;
                                break;
                        }
                for (size_t j = 0; j < s->n_names; j++) {
                        char fn[256];
                        if (s->names[j] && python_frame(s->names[j], fn, sizeof(fn))) {
                                t.with_py++;
                                break;
                        }
                }
        }
        return t;
}

static void check_frames(bool threads) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        if (access(PYFRAMES_PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYFRAMES_PYTHON);
        struct pyrun r = {.threads = threads};
        struct collect c = {.orphans_ok = true, .linux_perf = true};
        struct tally t = record(&r, true, &c);
        char *stats = fixture_log_last(&inst, "linux.perf instance ", ": CPython: ");
        cr_log_info("python3.11%s: %zu of %zu on-CPU samples with the Python frames right (%zu in fib, %zu of them in "
                    "another thread; %zu with Python frames; %zu without a stack, %zu with an evaluation frame left); "
                    "%s",
                    threads ? " with two threads" : "", t.right, t.on, t.in_fib, t.other_thread, t.with_py,
                    t.no_stack, t.with_eval, stats ? stats : "(no CPython line in the log)");
        cr_assert_not_null(stats, "the stop says what the CPython frames did");
        cr_assert(strstr(stats, ": CPython: 1 processes with Python frames"), "%s", stats);
        free(stats);
        int64_t procs = 0, with = 0;
        cr_assert(counter_value(&c, "linux.perf python: processes with Python frames", &procs) && procs == 1,
                  "the trace counts the processes with Python frames: %lld", (long long) procs);
        cr_assert(counter_value(&c, "linux.perf python: samples with Python frames", &with) && (size_t) with >= t.right,
                  "the trace counts the samples with Python frames: %lld", (long long) with);
        cr_assert_geq(t.on, 100, "on-CPU samples of python3.11: %zu", t.on);
        cr_assert_geq(t.right * 100, t.on * 80, "only %zu of %zu on-CPU samples carry the Python frames in order",
                      t.right, t.on);
        cr_assert_gt(t.in_fib * 2, t.right, "most samples run fib: %zu of %zu", t.in_fib, t.right);
        /* What does not match the sample stays native rather than wrong
         * (a frame's slot taken by another call of the same size is not
         * seen: a few are allowed). */
        cr_assert_leq((t.with_py - t.right) * 100, t.with_py, "%zu of %zu samples with Python frames are wrong",
                      t.with_py - t.right, t.with_py);
        int64_t moved = 0;
        cr_assert(counter_value(&c, "linux.perf python: samples left native (the thread moved on)", &moved) &&
                          moved >= 0,
                  "the trace counts the samples left native");
        if (threads)
                cr_assert_gt(t.other_thread, 0, "no sample of the second thread in fib");
        collect_free(&c);
}

Test(perf_python, frames_of_a_python_program) {
        check_frames(false);
}

Test(perf_python, frames_of_each_thread) {
        check_frames(true);
}

/* traced_python_frames: false: the stacks stay native, the evaluation
 * frames in, nothing read from the process. */
Test(perf_python, frames_off_leaves_stacks_native) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        if (access(PYFRAMES_PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYFRAMES_PYTHON);
        struct pyrun r = {0};
        struct collect c = {.orphans_ok = true, .linux_perf = true};
        struct tally t = record(&r, false, &c);
        cr_log_info("python3.11, Python frames off: %zu on-CPU samples, %zu right, %zu with an evaluation frame",
                    t.on, t.right, t.with_eval);
        cr_assert_geq(t.on, 100, "on-CPU samples of python3.11: %zu", t.on);
        cr_assert_eq(t.right, 0, "no Python frames when off");
        cr_assert_geq(t.with_eval * 2, t.on, "the evaluation frames stay: %zu of %zu", t.with_eval, t.on);
        int64_t v;
        cr_assert_not(counter_value(&c, "linux.perf python: samples with Python frames", &v), "no CPython counters");
        collect_free(&c);
}
