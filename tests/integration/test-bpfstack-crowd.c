/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack system-wide among many processes: 100 sleepers that
 * wake now and then, and a few busy copies of python3 (each its own file,
 * so each copy's unwind tables are compiled anew, a few hundred ms each),
 * one of them running before the recording starts, while the session
 * flushes every 250 ms with a 2 s flush timeout. Table work must never
 * hold up a flush or the stop: traced's log must show the instance
 * stopped with its tables compiled, and no flush timed out. The files of
 * the copy running at the start are queued before sampling starts, the
 * trace reports the time spent compiling, and the busy copies' samples
 * are walked by the tables (python3 has no frame pointers: only a walk by
 * tables reaches _start). Nothing here depends on how fast the machine
 * is. */

#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpfstack-collect.h"
#include "plugin-fixture.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(bpfstack_crowd, .init = setup, .fini = teardown, .timeout = 180);

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        return 0;
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

#define SLEEPERS 100
#define BUSY 6
#define PYTHON "/usr/bin/python3"

struct crowd {
        pid_t first; /* the busy copy running before the recording */
        pid_t pids[SLEEPERS + BUSY];
        size_t n;
        char busy[BUSY][512];
};

static pid_t spawn(const char *const *argv) {
        pid_t pid;
        int e = posix_spawn(&pid, argv[0], NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(e, 0, "%s: %s", argv[0], strerror(e));
        return pid;
}

/* A copy of python3 of its own (another inode: another table to compile). */
static void copy_python(const char *to) {
        int in = open(PYTHON, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(in, 0, "%s: %s", PYTHON, strerror(errno));
        int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        cr_assert_geq(out, 0, "%s: %s", to, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        close(in);
        close(out);
}

static void run_crowd(void *userdata) {
        struct crowd *c = userdata;
        cr_assert(fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", ": on-CPU ", 0, 30000),
                  "the linux.bpf_stack instance was never set up");
        for (size_t k = 0; k < SLEEPERS; k++) {
                const char *argv[] = { "/bin/sh", "-c", "while :; do sleep 0.5; done", NULL };
                c->pids[c->n++] = spawn(argv);
                /* There for their processes and execs, not their CPU. */
                (void) setpriority(PRIO_PROCESS, (id_t) c->pids[c->n - 1], 10);
        }
        for (size_t k = 1; k < BUSY; k++) {
                const char *argv[] = { c->busy[k], "-c", "while True: pass", NULL };
                c->pids[c->n++] = spawn(argv);
        }
        /* Three seconds among them, flushing all along. */
        for (int i = 0; i < 30; i++) {
                (void) sd_event_run(ev, 100 * 1000);
        }
        /* Gone before the trace is read (and checked). */
        for (size_t k = 0; k < c->n; k++)
                (void) kill(c->pids[k], SIGKILL);
        (void) kill(c->first, SIGKILL);
        for (size_t k = 0; k < c->n; k++)
                (void) waitpid(c->pids[k], NULL, 0);
        (void) waitpid(c->first, NULL, 0);
}

/* The busy copies' on-CPU samples, and those walked to _start (Debian's
 * python3 reaches it from Py_BytesMain: its main jumps there). */
static void busy_walked(const struct collect *tr, const struct crowd *c, size_t *ret_all, size_t *ret_walked) {
        size_t all = 0, walked = 0;
        for (size_t k = 0; k < tr->n_s; k++) {
                const struct sample *s = &tr->s[k];
                bool busy = s->pid == (uint32_t) c->first;
                for (size_t j = SLEEPERS; j < c->n && !busy; j++)
                        busy = s->pid == (uint32_t) c->pids[j];
                if (!busy || s->off_cpu)
                        continue;
                all++;
                walked += ends_at_start(s);
        }
        *ret_all = all;
        *ret_walked = walked;
}

Test(bpfstack_crowd, flushes_and_stop_answered_among_many_processes) {
        const char *why = bpf_refused();
        if (why) {
                teardown();
                cr_skip_test("%s", why);
        }
        if (access(PYTHON, X_OK) < 0) {
                teardown();
                cr_skip_test("no %s to run busy (tools/install-deps.sh installs it)", PYTHON);
        }
        struct crowd c = {};
        for (size_t k = 0; k < BUSY; k++) {
                snprintf(c.busy[k], sizeof(c.busy[k]), "%s/python3-copy%zu", inst.dir, k);
                copy_python(c.busy[k]);
        }
        const char *cfg = "buffers { size_kb: 65536 }\n"
                          "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config { frequency: 99 } } }\n"
                          "write_into_file: true file_write_period_ms: 250\n"
                          "flush_period_ms: 250 flush_timeout_ms: 4000\n";
        /* The first copy runs before the recording starts. */
        const char *argv[] = {c.busy[0], "-c", "while True: pass", NULL};
        c.first = spawn(argv);
        struct collect tr = {.orphans_ok = true};
        fixture_record(&inst, ev, "linux.bpf_stack", cfg, run_crowd, &c, collect_packet, &tr);

        cr_assert(fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", " stopped: ", 0, 10000),
                  "the instance's stop line is in the log");
        /* Flushes and the stop wait behind whatever one turn of the
         * host's event loop does: with the tables compiled off the loop,
         * no turn takes as long as the longest compile. Counted in CPU
         * time, which a loaded machine does not stretch (a flush's answer
         * in wall time, which it does, timed out on one). */
        char *turn = fixture_log_last(&inst, "bpfstack: instance ", "the longest turn of the host's event loop");
        char *tables = fixture_log_last(&inst, "linux.bpf_stack instance ", " files compiled in ");
        const char *t = turn ? strstr(turn, " took ") : NULL, *cl = tables ? strstr(tables, "(longest ") : NULL;
        double turn_ms = -1, compile_ms = -1;
        cr_assert(t && sscanf(t, " took %lf ms", &turn_ms) == 1, "no loop turn in the log: %s", turn ? turn : "");
        cr_assert(cl && sscanf(cl, "(longest %lf ms", &compile_ms) == 1, "no compile time: %s", tables ? tables : "");
        cr_log_info("longest loop turn %.1f ms of CPU; longest compile %.0f ms; %u flushes timed out", turn_ms,
                    compile_ms, fixture_log_count(&inst, "flush ", "timed out waiting for producer"));
        cr_assert_lt(turn_ms, compile_ms, "a turn of the event loop (%.1f ms of CPU) took as long as a compile "
                                          "(%.0f ms): the tables were compiled on the loop",
                     turn_ms, compile_ms);
        free(turn);
        free(tables);
        /* The tables were worked on (else this proves nothing). */
        cr_assert_eq(fixture_log_count(&inst, " 0 files compiled in ", NULL), 0,
                     "the instance compiled unwind tables");
        cr_assert_eq(fixture_log_count(&inst, "linux.bpf_stack instance ", " files compiled in "), 1,
                     "the instance logged its table work");
        /* The busy copy running at the start had its files queued before
         * the BPF programs were loaded. */
        cr_assert_eq(fixture_log_count(&inst, "the files of ", " queued for unwind tables before sampling"), 1,
                     "the running processes' files were queued before sampling");
        cr_assert_eq(fixture_log_count(&inst, "the files of 0 processes", NULL), 0,
                     "a busy process was running when the recording started");
        int64_t compile_ns = 0;
        cr_assert(counter_value(&tr, "linux.bpf_stack unwind: time compiling tables", &compile_ns),
                  "the trace reports the time spent compiling tables");
        cr_assert_gt(compile_ns, 0);
        size_t all, walked;
        busy_walked(&tr, &c, &all, &walked);
        cr_log_info("busy copies: %zu of %zu on-CPU samples walked by tables to _start; %lld ms "
                    "compiling; %zu counter values or samples whose descriptor or stack was lost",
                    walked, all, (long long) (compile_ns / 1000000), tr.orphans);
        cr_assert_gt(all, 0, "the busy copies were sampled");
        cr_assert_gt(walked, 0, "no sample of the busy copies was walked by tables");
        collect_free(&tr);
}
