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
#include <fcntl.h>
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
        const char *python; /* PYFRAMES_PYTHON, or a program embedding libpython, or a copy */
        pid_t pid;
        bool threads;
        bool start_during; /* started once the instance is set up (its scope then its name), else before (its pid) */
};

static pid_t spawn_python(const struct pyrun *r) {
        const char *argv[] = {r->python, PYFRAMES_SCRIPT, "-1", r->threads ? "threads" : NULL, NULL};
        pid_t pid;
        int e = posix_spawn(&pid, r->python, NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(e, 0, "%s: %s", r->python, strerror(e));
        return pid;
}

static void run_python(void *userdata) {
        struct pyrun *r = userdata;
        if (r->start_during) {
                if (!fixture_wait_log(&inst, ev, "linux.perf instance ", " CPUs, ", 0, 30000)) {
                        traced_instance_dump_log(&inst);
                        cr_assert_fail("the linux.perf instance was never set up");
                }
                r->pid = spawn_python(r);
        }
        for (int i = 0; i < 30; i++)
                (void) sd_event_run(ev, 100 * 1000);
        (void) kill(r->pid, SIGKILL);
        (void) waitpid(r->pid, NULL, 0);
}

struct tally {
        size_t on, right, in_fib, other_thread, no_stack, with_eval, with_py, before;
};

static struct tally record(struct pyrun *r, bool frames, struct collect *c) {
        char scope[512];
        if (!r->start_during) {
                r->pid = spawn_python(r);
                usleep(200 * 1000); /* past the interpreter's start */
                snprintf(scope, sizeof(scope), "target_pid: %d", (int) r->pid);
        } else {
                const char *base = strrchr(r->python, '/');
                snprintf(scope, sizeof(scope), "target_cmdline: \"%s\"", base ? base + 1 : r->python);
        }
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                 "  timebase { frequency: 999 counter: SW_CPU_CLOCK }\n"
                 "  callstack_sampling { scope { %s } user_frames: UNWIND_DWARF%s }\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 scope, frames ? "" : " traced_python_frames: false");
        fixture_record(&inst, ev, "linux.perf", cfg, run_python, r, collect_packet, c);
        cr_assert(fixture_wait_log(&inst, ev, "linux.perf instance ", " stopped: ", 0, 10000));
        struct tally t = {0};
        /* Started during the recording: its samples count from the first
         * with the script's frames (the interpreter's start runs none). */
        bool begun = !r->start_during || !frames;
        for (size_t k = 0; k < c->n_s; k++) {
                const struct sample *s = &c->s[k];
                if (s->pid != (uint32_t) r->pid)
                        continue;
                char inner[256];
                size_t under;
                bool right = s->n_names && python_stack_right_under(s, inner, sizeof(inner), &under);
                if (!begun && !(right && inner[0])) {
                        t.before++;
                        continue;
                }
                begun = true;
                t.on++;
                if (!s->n_names) {
                        t.no_stack++;
                        continue;
                }
                t.right += right;
                bool has_py = false;
                for (size_t j = 0; j < s->n_names && !has_py; j++) {
                        char fn[256];
                        has_py = s->names[j] && python_frame(s->names[j], fn, sizeof(fn));
                }
                t.with_py += has_py;
                /* The first few with Python frames that are not right, for
                 * whoever reads a failure. */
                if (!right && has_py && t.with_py - t.right <= 3) {
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
        }
        return t;
}

static void check_frames_of(const char *python, bool start_during, bool threads) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        if (access(PYFRAMES_PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYFRAMES_PYTHON);
        struct pyrun r = {.python = python, .threads = threads, .start_during = start_during};
        struct collect c = {.orphans_ok = true, .linux_perf = true};
        struct tally t = record(&r, true, &c);
        char *stats = fixture_log_last(&inst, "linux.perf instance ", ": CPython: ");
        cr_log_info("%s%s%s: %zu of %zu on-CPU samples with the Python frames right (%zu in fib, %zu of them in "
                    "another thread; %zu with Python frames; %zu without a stack, %zu with an evaluation frame left; "
                    "%zu before the script's first); %s",
                    python, start_during ? " started during the recording" : "", threads ? " with two threads" : "",
                    t.right, t.on, t.in_fib, t.other_thread, t.with_py, t.no_stack, t.with_eval, t.before,
                    stats ? stats : "(no CPython line in the log)");
        cr_assert_not_null(stats, "the stop says what the CPython frames did");
        /* Walked by BPF as each sample is taken, where the program loads
         * (this kernel's BPF, the plugin's CAP_BPF); else read from the
         * process as the rings are drained, which the log says. */
        char *no_bpf = fixture_log_last(&inst, "linux.perf instance ", "not walked at the sample");
        bool at_sample = !no_bpf;
        if (no_bpf)
                cr_log_info("no BPF walk here: %s", no_bpf);
        else
                cr_assert_not_null(strstr(stats, "frames walked by BPF at the sample"), "%s", stats);
        free(no_bpf);
        /* With a scope of names, other python3.11 of the machine too. */
        unsigned long long logged = 0;
        const char *at = strstr(stats, ": CPython: ");
        cr_assert(at && sscanf(at, ": CPython: %llu processes with Python frames", &logged) == 1 &&
                          (start_during ? logged >= 1 : logged == 1),
                  "%s", stats);
        free(stats);
        char found[64];
        snprintf(found, sizeof(found), "pid %d runs CPython 3.11 ", (int) r.pid);
        size_t said = (size_t) fixture_log_count(&inst, found, "code objects checked against PyCode_Type");
        cr_assert_eq(said, 1, "the interpreter and PyCode_Type were found, and said once (said %zu times; %zu "
                              "times without PyCode_Type)",
                     said, (size_t) fixture_log_count(&inst, found, "code objects not checked"));
        int64_t procs = 0, with = 0;
        cr_assert(counter_value(&c, "linux.perf python: processes with Python frames", &procs) &&
                          (uint64_t) procs == logged,
                  "the trace counts the processes with Python frames: %lld", (long long) procs);
        cr_assert(counter_value(&c, "linux.perf python: samples with Python frames", &with) && (size_t) with >= t.right,
                  "the trace counts the samples with Python frames: %lld", (long long) with);
        cr_assert_geq(t.on, 100, "on-CPU samples of python3.11: %zu", t.on);
        /* Walked at the sample, the frames are the sample's (a few are
         * taken before the process is looked at, or mid-call); read
         * after it, those of a thread that moved on are left out. */
        size_t want = at_sample ? 95 : 80;
        cr_assert_geq(t.right * 100, t.on * want, "only %zu of %zu on-CPU samples carry the Python frames in order "
                      "(%zu %% wanted)", t.right, t.on, want);
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
        check_frames_of(PYFRAMES_PYTHON, false, false);
}

Test(perf_python, frames_of_each_thread) {
        check_frames_of(PYFRAMES_PYTHON, false, true);
}

/* Met at its first samples (a scope of names: no look at the processes
 * as sampling starts); those drained before the worker looked at it stay
 * native, counted. */
Test(perf_python, frames_of_a_python_started_during_the_recording) {
        check_frames_of(PYFRAMES_PYTHON, true, false);
}

/* CPython as a shared library: tests/bpfstack/pyembed runs the script
 * through libpython3.11.so's Py_BytesMain. */
Test(perf_python, frames_of_a_program_embedding_libpython) {
        const char *embed = BPFSTACK_TEST_BIN_DIR "/pyembed";
        if (access(embed, X_OK) < 0)
                SKIP("no %s: libpython's development files (python3-dev) were missing at configure", embed);
        check_frames_of(embed, false, false);
}

static void copy_file(const char *from, const char *to) {
        int in = open(from, O_RDONLY | O_CLOEXEC), out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        cr_assert(in >= 0 && out >= 0, "%s -> %s: %s", from, to, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        close(in);
        close(out);
}

/* A CPython whose layout is not known (python3.11 copied as python3.99):
 * said once in the log, counted in the stop line and the trace, and its
 * stacks stay native. */
Test(perf_python, an_unknown_version_is_counted_and_stays_native) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        if (access(PYFRAMES_PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYFRAMES_PYTHON);
        char copy[512];
        snprintf(copy, sizeof(copy), "%s/python3.99", inst.dir);
        copy_file(PYFRAMES_PYTHON, copy);
        struct pyrun r = {.python = copy};
        struct collect c = {.orphans_ok = true, .linux_perf = true};
        struct tally t = record(&r, true, &c);
        char *stats = fixture_log_last(&inst, "linux.perf instance ", ": CPython: ");
        cr_log_info("python3.99: %zu on-CPU samples, %zu with Python frames, %zu with an evaluation frame; %s", t.on,
                    t.with_py, t.with_eval, stats ? stats : "(no CPython line)");
        cr_assert_geq(t.on, 100, "samples of python3.99: %zu", t.on);
        cr_assert_eq(t.with_py, 0, "no Python frames for a layout not known");
        cr_assert_geq(t.with_eval * 2, t.on, "its stacks stay native: %zu of %zu", t.with_eval, t.on);
        cr_assert(stats && strstr(stats, ": CPython: 0 processes with Python frames, 1 with a layout not known"), "%s",
                  stats ? stats : "(no CPython line)");
        free(stats);
        char said[64];
        snprintf(said, sizeof(said), "pid %d runs CPython 3.99 ", (int) r.pid);
        unsigned times = fixture_log_count(&inst, said, "whose layout is not known");
        cr_assert_eq(times, 1, "said once in the log: %u", times);
        int64_t unknown = 0;
        cr_assert(counter_value(&c, "linux.perf python: CPython processes left native (layout not known)",
                                &unknown) &&
                          unknown == 1,
                  "the trace counts it: %lld", (long long) unknown);
        collect_free(&c);
}

/* traced_python_frames: false: the stacks stay native, the evaluation
 * frames in, nothing read from the process. */
Test(perf_python, frames_off_leaves_stacks_native) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        if (access(PYFRAMES_PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYFRAMES_PYTHON);
        struct pyrun r = {.python = PYFRAMES_PYTHON};
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
