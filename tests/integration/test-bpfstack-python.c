/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack names CPython's frames: tests/data/pyframes-busy.py
 * (main -> work -> fib -> fib ..., and main -> rest, which sleeps) run by
 * Debian's python3.11, whose stacks without them show the interpreter's
 * _PyEval_EvalFrameDefault and none of the program's functions. The
 * Python frames must stand in its place, root first <module>, main, then
 * work and fib, or rest, each with the script's file and a line; the
 * off-CPU samples must name rest as the function that slept. Shares are
 * of the samples the recording got, whatever the machine's load. */

#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpfstack-collect.h"
#include "plugin-fixture.h"
#include "pyframes-check.h"

extern char **environ;

#define PYTHON PYFRAMES_PYTHON
#define SCRIPT PYFRAMES_SCRIPT

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(bpfstack_python, .init = setup, .fini = teardown, .timeout = 180);

#define SKIP(...)                                                                                                      \
        do {                                                                                                           \
                teardown();                                                                                            \
                cr_skip_test(__VA_ARGS__);                                                                             \
        } while (0)

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        return 0;
}

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

struct pyrun {
        const char *python; /* PYTHON, or a copy */
        pid_t pid;
        bool start_during; /* started once the instance is set up, else before the recording */
        bool threads;      /* a second thread runs the loop too */
};

static pid_t spawn_python(const char *python, bool threads) {
        const char *argv[] = {python, SCRIPT, "-1", threads ? "threads" : NULL, NULL};
        pid_t pid;
        int e = posix_spawn(&pid, python, NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(e, 0, "%s: %s", python, strerror(e));
        return pid;
}

static void run_python(void *userdata) {
        struct pyrun *r = userdata;
        if (!fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", ": on-CPU ", 0, 30000)) {
                traced_instance_dump_log(&inst);
                (void) kill(r->pid, SIGKILL);
                (void) waitpid(r->pid, NULL, 0);
                cr_assert_fail("the linux.bpf_stack instance was never set up");
        }
        if (r->start_during)
                r->pid = spawn_python(r->python, r->threads);
        for (int i = 0; i < 30; i++)
                (void) sd_event_run(ev, 100 * 1000);
        (void) kill(r->pid, SIGKILL);
        (void) waitpid(r->pid, NULL, 0);
}

static void record_python(struct pyrun *r, const char *comm, struct collect *c) {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                 "  frequency: 499 kernel_frames: false min_blocked_us: 5000 drain_period_ms: 50\n"
                 "  filter: \"comm=%s\"\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 comm);
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_python, r, collect_packet, c);
}

/* python: the interpreter to run (PYTHON, or a program embedding
 * libpython), comm its name. */
static void check_python_with(const char *python, const char *comm, bool start_during, bool threads) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        if (access(PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYTHON);
        struct pyrun r = {.python = python, .start_during = start_during, .threads = threads};
        if (!start_during) {
                r.pid = spawn_python(r.python, threads);
                usleep(200 * 1000); /* past the interpreter's start */
        }
        struct collect c = {.orphans_ok = true};
        record_python(&r, comm, &c);
        cr_assert(fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", " stopped: ", 0, 10000));

        size_t on = 0, on_right = 0, in_fib = 0, off = 0, off_right = 0, off_rest = 0, before = 0, other_thread = 0,
               in_csum = 0, csum_native = 0;
        bool begun = !start_during;
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                if (s->pid != (uint32_t) r.pid)
                        continue;
                char inner[256];
                size_t under;
                bool right = python_stack_right_under(s, inner, sizeof(inner), &under);
                /* Started during the recording: its samples count from the
                 * first with the script's frames (the interpreter's start,
                 * or pydlopen's before it loads libpython, runs no script,
                 * and its first samples may come before the plugin has
                 * looked at it). */
                if (!begun && !(right && inner[0])) {
                        before++;
                        continue;
                }
                begun = true;
                if (right && s->tid != s->pid && strcmp(inner, "fib") == 0)
                        other_thread++;
                if (!s->off_cpu && right && strcmp(inner, "csum") == 0) {
                        in_csum++;
                        csum_native += under > 0;
                }
                if (!s->off_cpu) {
                        on++;
                        on_right += right;
                        in_fib += right && strcmp(inner, "fib") == 0;
                } else if (s->blocked_ns >= 10000000u) {
                        /* Slept in rest (20 ms); shorter waits are the
                         * interpreter's own. */
                        off++;
                        off_right += right;
                        off_rest += right && strcmp(inner, "rest") == 0;
                }
        }
        char *stats = fixture_log_last(&inst, "linux.bpf_stack instance ", ": CPython: ");
        cr_log_info("%s %s%s: %zu of %zu on-CPU samples with the Python frames right (%zu in fib, %zu of them in "
                    "another thread); %zu of %zu off-CPU samples of 10 ms or more slept in rest; %zu samples before "
                    "the script's first; %s",
                    comm, start_during ? "started during the recording" : "running before it",
                    threads ? " with two threads" : "", on_right, on, in_fib, other_thread, off_rest, off, before,
                    stats ? stats : "(no CPython line in the log)");
        free(stats);
        char found[64];
        snprintf(found, sizeof(found), "pid %d runs CPython 3.11 ", (int) r.pid);
        cr_assert_eq(fixture_log_count(&inst, found, "code objects checked against PyCode_Type"), 1,
                     "the interpreter and PyCode_Type were found once");
        int64_t procs = 0, walked = 0;
        cr_assert(counter_value(&c, "linux.bpf_stack python: processes with Python frames", &procs) && procs >= 1,
                  "the trace counts the processes with Python frames");
        cr_assert(counter_value(&c, "linux.bpf_stack python: samples with Python frames walked", &walked) &&
                          (size_t) walked >= on_right,
                  "the trace counts the samples walked: %lld", (long long) walked);
        cr_assert_geq(on, 20, "on-CPU samples of python3.11: %zu", on);
        cr_assert_geq(on_right * 100, on * 95, "only %zu of %zu on-CPU samples carry the Python frames in order",
                      on_right, on);
        cr_assert_gt(in_fib * 2, on_right, "most samples run fib: %zu of %zu", in_fib, on_right);
        cr_assert_geq(off, 5, "off-CPU samples of python3.11 in rest's sleep: %zu", off);
        cr_assert_geq(off_right * 100, off * 95, "only %zu of %zu off-CPU samples carry the Python frames in order",
                      off_right, off);
        /* One thread blocks in rest alone; two also wait for each other's
         * GIL (5 ms switch interval, longer on a loaded machine) where
         * they run. */
        if (!threads)
                cr_assert_geq(off_rest * 100, off * 95, "only %zu of %zu off-CPU samples name rest", off_rest, off);
        else
                cr_assert_gt(off_rest, 0, "no off-CPU sample names rest");
        if (threads)
                cr_assert_gt(other_thread, 0, "no sample of the second thread in fib");
        /* The builtin sum, C code called from csum, sits under csum (its
         * samples' leaf is native): most, not all, of csum's samples are in
         * it, and a short run may not catch csum at all. */
        cr_log_info("%s: %zu samples in csum, %zu of them with native frames under it", comm, in_csum, csum_native);
        cr_assert_geq(csum_native * 2, in_csum, "C code called from csum under it in %zu of %zu samples", csum_native,
                      in_csum);
        collect_free(&c);
}

static void check_python(bool start_during, bool threads) {
        check_python_with(PYTHON, "python3.11", start_during, threads);
}

/* CPython loaded late: tests/bpfstack/pydlopen, started during the
 * recording, runs on the CPU for half a second (sampled, looked at: no
 * interpreter) before it dlopen()s libpython3.11.so and runs the script:
 * the plugin looks at it again when its maps change. */
Test(bpfstack_python, frames_of_a_program_loading_libpython_by_dlopen) {
        const char *late = BPFSTACK_TEST_BIN_DIR "/pydlopen";
        if (access(late, X_OK) < 0)
                SKIP("no %s: libpython's development files (python3-dev) were missing at configure", late);
        check_python_with(late, "pydlopen", true, false);
}

/* CPython as a shared library: tests/bpfstack/pyembed runs the script
 * through libpython3.11.so's Py_BytesMain. */
Test(bpfstack_python, frames_of_a_program_embedding_libpython) {
        const char *embed = BPFSTACK_TEST_BIN_DIR "/pyembed";
        if (access(embed, X_OK) < 0)
                SKIP("no %s: libpython's development files (python3-dev) were missing at configure", embed);
        check_python_with(embed, "pyembed", false, false);
}

/* An executable named python3.11 that holds no interpreter, over
 * libpython3.11.so (as a --enable-shared build's, pyenv's): the state is
 * found in the library. */
Test(bpfstack_python, frames_of_a_stub_python_executable_over_libpython) {
        const char *embed = BPFSTACK_TEST_BIN_DIR "/pyembed";
        if (access(embed, X_OK) < 0)
                SKIP("no %s: libpython's development files (python3-dev) were missing at configure", embed);
        char stub[512];
        snprintf(stub, sizeof(stub), "%s/python3.11", inst.dir);
        copy_file(embed, stub);
        check_python_with(stub, "python3.11", false, false);
}

Test(bpfstack_python, frames_of_a_python_started_before_the_recording) {
        check_python(false, false);
}

Test(bpfstack_python, frames_of_a_python_started_during_the_recording) {
        check_python(true, false);
}

Test(bpfstack_python, frames_of_each_thread) {
        check_python(false, true);
}

/* A CPython whose layout is not known (here python3.11 copied under the
 * name python3.99, which the plugin takes for 3.99): said once in the
 * log, counted, and its stacks stay native, the evaluation frames in. */
Test(bpfstack_python, an_unknown_version_is_said_once_and_stays_native) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        if (access(PYTHON, X_OK) < 0)
                SKIP("no %s (tools/install-deps.sh installs Debian's python3)", PYTHON);
        char copy[512];
        snprintf(copy, sizeof(copy), "%s/python3.99", inst.dir);
        copy_file(PYTHON, copy);
        struct pyrun r = {.python = copy};
        r.pid = spawn_python(copy, false);
        usleep(200 * 1000);
        struct collect c = {.orphans_ok = true};
        record_python(&r, "python3.99", &c);
        cr_assert(fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", " stopped: ", 0, 10000));
        size_t on = 0, native = 0, python = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                const struct sample *s = &c.s[k];
                if (s->pid != (uint32_t) r.pid || s->off_cpu)
                        continue;
                on++;
                for (size_t j = 0; j < s->n_names; j++) {
                        char fn[256];
                        native += s->names[j] && strcmp(s->names[j], "_PyEval_EvalFrameDefault") == 0;
                        python += s->names[j] && python_frame(s->names[j], fn, sizeof(fn));
                }
        }
        char said[64];
        snprintf(said, sizeof(said), "pid %d runs CPython 3.99 ", (int) r.pid);
        unsigned times = fixture_log_count(&inst, said, "whose layout is not known");
        char *stats = fixture_log_last(&inst, "linux.bpf_stack instance ", ": CPython: ");
        cr_log_info("python3.99: %zu on-CPU samples, %zu evaluation frames, %zu Python frames; said %u times; %s", on,
                    native, python, times, stats ? stats : "(no CPython line)");
        cr_assert_gt(on, 0, "samples of python3.99");
        cr_assert_eq(python, 0, "Python frames for a layout not known");
        cr_assert_gt(native, 0, "its stacks stay native");
        cr_assert_eq(times, 1, "said once in the log: %u", times);
        cr_assert(stats && strstr(stats, " 1 with a layout not known"), "counted: %s", stats ? stats : "");
        int64_t unknown = 0;
        cr_assert(counter_value(&c, "linux.bpf_stack python: CPython processes left native (layout not known)",
                                &unknown) &&
                          unknown == 1,
                  "the trace counts it: %lld", (long long) unknown);
        free(stats);
        collect_free(&c);
}
