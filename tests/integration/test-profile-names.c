/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What `tracectl summary` and `tracectl report` call the processes and
 * frames of a profile, recorded by the real traced with this build's perf
 * and bpfstack plugins: the comm a task had when it was sampled, which the
 * plugins write into the trace, whether or not linux.process_stats ran
 * and whatever it read before an exec; C++ and Rust functions demangled;
 * the frames of processes gone before their samples were read named like
 * any other; stacks deeper than 16 KiB walked whole, and why the ones
 * deeper still are cut. The programs sampled are tests/profiling's. */

#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

TestSuite(profile_names, .init = setup, .fini = teardown, .timeout = 120);

#define SKIP(...)                          \
        do {                               \
                teardown();                \
                cr_skip_test(__VA_ARGS__); \
        } while (0)

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

static pid_t spawn(const char *const *argv) {
        pid_t pid;
        int r = posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(r, 0, "%s: %s", argv[0], strerror(r));
        return pid;
}

static void reap(pid_t pid) {
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the workload ran");
}

static void nothing(const Perfetto__Protos__TracePacket *p, void *userdata) {
}

/* tracectl ARGS on the trace just recorded: its exit code and stdout. */
static int tracectl(const char *args, char **ret_out) {
        char *cmd, *out = NULL;
        size_t size = 0;
        cr_assert_gt(asprintf(&cmd, "%s %s %s/recorded.pftrace", TRACECTL_BINARY, args, inst.dir), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        FILE *m = open_memstream(&out, &size);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, m);
        fclose(m);
        int st = pclose(p);
        free(cmd);
        *ret_out = out;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Folded stacks: every line's first element (the process). */
static void check_folded_names(const char *folded, const char *want, size_t *ret_lines) {
        size_t lines = 0;
        for (const char *l = folded; l && *l;) {
                const char *e = strchr(l, '\n');
                size_t k = strlen(want);
                cr_assert(strncmp(l, want, k) == 0 && l[k] == ';', "a stack not named %s: %.*s", want,
                          (int) (e ? e - l : (long) strlen(l)), l);
                lines++;
                l = e ? e + 1 : NULL;
        }
        *ret_lines = lines;
}

struct shim {
        pid_t pid;
        char go[512]; /* the shell waits for this file, created once recording */
};

static void wait_shim(void *userdata) {
        struct shim *s = userdata;
        FILE *f = fopen(s->go, "we");
        cr_assert_not_null(f);
        fclose(f);
        reap(s->pid);
        usleep(300 * 1000);
}

/* A shell started before the recording (linux.process_stats reads it as
 * "sh" at the start) execs python3 once the recording runs, as pyenv's
 * shims do: perf names the samples after the exec python3. */
Test(profile_names, perf_names_a_process_by_its_comm_after_exec) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct shim s;
        snprintf(s.go, sizeof(s.go), "%s/go", inst.dir);
        char *script;
        cr_assert_gt(asprintf(&script,
                              "while [ ! -e %s ]; do sleep 0.05; done\n"
                              "exec python3 -c 'import time\nt = time.time()\nwhile time.time() - t < 1.5: pass'",
                              s.go),
                     0);
        const char *argv[] = { "sh", "-c", script, NULL };
        s.pid = spawn(argv);
        free(script);
        fixture_record(&inst, ev, "linux.perf",
                       "buffers { size_kb: 65536 }\n"
                       "data_sources { config { name: \"linux.process_stats\" process_stats_config {\n"
                       "  scan_all_processes_on_start: true } } }\n"
                       "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                       "  timebase { frequency: 199 counter: SW_CPU_CLOCK }\n"
                       "  callstack_sampling { kernel_frames: false user_frames: UNWIND_FRAME_POINTER }\n"
                       "} } }\n"
                       "write_into_file: true file_write_period_ms: 250\n",
                       wait_shim, &s, nothing, NULL);
        char *out, args[64], line[64];
        snprintf(args, sizeof(args), "report --folded --pid %d", (int) s.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        size_t lines;
        check_folded_names(out, "python3", &lines);
        cr_assert_gt(lines, 0, "no samples of pid %d", (int) s.pid);
        free(out);
        cr_assert_eq(tracectl("summary", &out), 0);
        cr_log_info("%s", out);
        snprintf(line, sizeof(line), "pid %-8d python3 ", (int) s.pid);
        cr_assert_not_null(strstr(out, line), "summary does not say \"%s\":\n%s", line, out);
        free(out);
}

struct sleeper {
        pid_t pid;
};

static void run_sleeper(void *userdata) {
        struct sleeper *s = userdata;
        const char *argv[] = { "python3", "-c", "import time\nfor i in range(150): time.sleep(0.01)", NULL };
        s->pid = spawn(argv);
        reap(s->pid);
        usleep(300 * 1000);
}

/* Off-CPU stacks of python3 without linux.process_stats: named python3
 * (the comm the samples carry), not after a module of their frames. */
Test(profile_names, bpfstack_names_a_process_by_its_comm) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        struct sleeper s = {};
        fixture_record(&inst, ev, "linux.bpf_stack",
                       "buffers { size_kb: 65536 }\n"
                       "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                       "  frequency: 99 filter: \"comm=python3\"\n"
                       "} } }\n"
                       "write_into_file: true file_write_period_ms: 250\n",
                       run_sleeper, &s, nothing, NULL);
        char *out, args[64];
        snprintf(args, sizeof(args), "report --off-cpu --folded --pid %d", (int) s.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        size_t lines;
        check_folded_names(out, "python3", &lines);
        cr_assert_gt(lines, 0, "no off-CPU samples of pid %d", (int) s.pid);
        free(out);
        snprintf(args, sizeof(args), "report --off-cpu --pid %d", (int) s.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        cr_assert_null(strstr(out, "libc.so.6 "), "%s", out);
        /* How the user stacks were walked: the plugin's counters. */
        cr_assert_not_null(strstr(out, "# Stack walks:    "), "%s", out);
        cr_assert_not_null(strstr(out, " user stacks (linux.bpf_stack): "), "%s", out);
        free(out);
        cr_assert_eq(tracectl("summary", &out), 0);
        cr_log_info("%s", out);
        cr_assert_not_null(strstr(out, "\nStack walks:    "), "%s", out);
        free(out);
}

/* ---- frames ------------------------------------------------------------ */

struct prog {
        const char *argv[8];
        pid_t pid;
        const char *then[8]; /* a second program run after it, or none */
};

static void run_prog(void *userdata) {
        struct prog *r = userdata;
        r->pid = spawn(r->argv);
        reap(r->pid);
        if (r->then[0])
                reap(spawn(r->then));
        usleep(300 * 1000);
}

#define PROG(name) PROFILING_TEST_BIN_DIR "/" name

/* linux.perf at 999 Hz with DWARF user stacks and kernel stacks, as
 * `tracectl record --perf 999` asks for; scope: a callstack_sampling
 * scope, or "" for every process. */
static char *perf_config(const char *scope) {
        char *cfg;
        cr_assert_gt(asprintf(&cfg,
                              "buffers { size_kb: 65536 }\n"
                              "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                              "  timebase { frequency: 999 counter: SW_CPU_CLOCK }\n"
                              "  callstack_sampling { %s kernel_frames: true user_frames: UNWIND_DWARF }\n"
                              "} } }\n"
                              "write_into_file: true file_write_period_ms: 250\n",
                              scope),
                     0);
        return cfg;
}

/* Samples of the folded stacks in out whose line holds what (all: NULL). */
static uint64_t folded_count(const char *out, const char *what) {
        uint64_t n = 0;
        for (const char *l = out; l && *l;) {
                const char *e = strchr(l, '\n');
                size_t len = e ? (size_t) (e - l) : strlen(l);
                char *line = strndup(l, len);
                const char *sp = strrchr(line, ' ');
                if (sp && (!what || strstr(line, what)))
                        n += strtoull(sp + 1, NULL, 10);
                free(line);
                l = e ? e + 1 : NULL;
        }
        return n;
}

/* Functions compiled with C++ and Rust names (traced::demo::Burner::run,
 * traced::demo::rust_spin): demangled in the folded stacks, the text
 * report and the SVG, as the trace holds them with --no-demangle. */
Test(profile_names, report_demangles_cpp_and_rust_names) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct prog r = { .argv = { PROG("mangled"), "1.5", NULL } };
        char *cfg = perf_config("scope { target_cmdline: \"mangled\" }");
        fixture_record(&inst, ev, "linux.perf", cfg, run_prog, &r, nothing, NULL);
        free(cfg);
        char *out, args[1024];
        snprintf(args, sizeof(args), "report --folded --pid %d", (int) r.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        uint64_t all = folded_count(out, NULL), both = folded_count(out, ";traced::demo::Burner::run(double);traced::demo::rust_spin");
        cr_log_info("%" PRIu64 " samples, %" PRIu64 " in traced::demo::rust_spin under traced::demo::Burner::run", all, both);
        cr_assert_gt(both, 0, "no demangled stack:\n%s", out);
        cr_assert_null(strstr(out, "_ZN6traced"), "%s", out);
        free(out);

        snprintf(args, sizeof(args), "report --folded --no-demangle --pid %d", (int) r.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        cr_assert_eq(folded_count(out, ";_ZN6traced4demo6Burner3runEd;_RNvNtCs5GcW0ZNbygE_6traced4demo9rust_spin"), both,
                     "--no-demangle:\n%s", out);
        free(out);

        snprintf(args, sizeof(args), "report --pid %d", (int) r.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        cr_assert_not_null(strstr(out, " traced::demo::rust_spin "), "%s", out);
        free(out);

        char svg[512];
        snprintf(svg, sizeof(svg), "%s/flame.svg", inst.dir);
        snprintf(args, sizeof(args), "report --svg %s --pid %d", svg, (int) r.pid);
        cr_assert_eq(tracectl(args, &out), 0);
        free(out);
        FILE *f = fopen(svg, "re");
        cr_assert_not_null(f);
        char *text = NULL;
        size_t size = 0;
        cr_assert_gt(getdelim(&text, &size, '\0', f), 0);
        fclose(f);
        cr_assert_eq(unlink(svg), 0);
        cr_assert_not_null(strstr(text, "data-name=\"traced::demo::Burner::run(double)\""));
        cr_assert_null(strstr(text, "_ZN6traced"));
        free(text);
}

/* Children forked (and, in the second run, exec'd) two at a time, each
 * spinning 30 ms and gone long before the plugin reads /proc for them:
 * their frames are named (shortlived_spin), not left as bare addresses
 * ("[unknown]+0x7f..."), from the kernel's notes and their parent's maps. */
static void check_short_lived(const char *folded) {
        uint64_t all = folded_count(folded, NULL), spin = folded_count(folded, ";shortlived_spin"),
                 bare = folded_count(folded, "[unknown]+0x");
        cr_log_info("short-lived processes: %" PRIu64 " samples, %" PRIu64 " in shortlived_spin, %" PRIu64
                    " with a frame of no mapping",
                    all, spin, bare);
        cr_assert_gt(spin, 0, "no sample of the children named shortlived_spin:\n%s", folded);
        cr_assert_leq(bare * 20, all, "%" PRIu64 " of %" PRIu64 " samples hold frames of no mapping:\n%s", bare, all,
                      folded);
}

static struct prog short_lived(void) {
        return (struct prog) { .argv = { PROG("shortlived"), "40", "30", "fork", NULL },
                               .then = { PROG("shortlived"), "40", "30", "exec", NULL } };
}

Test(profile_names, perf_names_frames_of_short_lived_processes) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct prog r = short_lived();
        char *cfg = perf_config("");
        fixture_record(&inst, ev, "linux.perf", cfg, run_prog, &r, nothing, NULL);
        free(cfg);
        char *out;
        cr_assert_eq(tracectl("report --folded --comm shortlived", &out), 0);
        check_short_lived(out);
        free(out);
}

Test(profile_names, bpfstack_names_frames_of_short_lived_processes) {
        const char *why = bpf_refused();
        if (why)
                SKIP("%s", why);
        struct prog r = short_lived();
        fixture_record(&inst, ev, "linux.bpf_stack",
                       "buffers { size_kb: 65536 }\n"
                       "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                       "  frequency: 499\n"
                       "} } }\n"
                       "write_into_file: true file_write_period_ms: 250\n",
                       run_prog, &r, nothing, NULL);
        char *out;
        cr_assert_eq(tracectl("report --on-cpu --folded --comm shortlived", &out), 0);
        check_short_lived(out);
        free(out);
}

/* Records tests/profiling/deep at depth (frames of 1 KiB) under
 * linux.perf; its pid. Then tracectl report ARGS --pid PID: its output. */
static pid_t record_deep(const char *depth) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct prog r = { .argv = { PROG("deep"), depth, "1.5", NULL } };
        char *cfg = perf_config("scope { target_cmdline: \"deep\" }");
        fixture_record(&inst, ev, "linux.perf", cfg, run_prog, &r, nothing, NULL);
        free(cfg);
        return r.pid;
}

static char *report_pid(const char *args, pid_t pid) {
        char *out, buf[128];
        snprintf(buf, sizeof(buf), "report %s --pid %d", args, (int) pid);
        cr_assert_eq(tracectl(buf, &out), 0);
        return out;
}

/* Stacks 41 KiB deep (as a C++ compiler's are): whole, from main down. */
Test(profile_names, perf_walks_stacks_deeper_than_16_kib) {
        pid_t pid = record_deep("40");
        char *out = report_pid("--folded --user", pid);
        uint64_t spin = folded_count(out, ";deep_spin"), whole = folded_count(out, ";main;deep_descend;");
        cr_log_info("deep stacks: %" PRIu64 " samples in deep_spin, %" PRIu64 " of them from main", spin, whole);
        cr_assert_gt(spin, 0, "%s", out);
        cr_assert_geq(whole * 10, spin * 9, "%" PRIu64 " of %" PRIu64 " stacks reach main:\n%s", whole, spin, out);
        free(out);
        out = report_pid("", pid);
        cr_assert_not_null(strstr(out, "# Stack walks:    "), "%s", out);
        free(out);
}

/* Stacks past the 64 KiB the kernel copies: cut, and the stack-walk line
 * of the report and of the summary says why. */
Test(profile_names, perf_says_why_stacks_are_cut) {
        char *out = report_pid("", record_deep("100"));
        const char *line = strstr(out, "# Stack walks:    ");
        cr_assert_not_null(line, "%s", out);
        cr_log_info("%.400s", line);
        cr_assert_not_null(strstr(line, " stacks (linux.perf): "), "%s", out);
        cr_assert_not_null(strstr(line, " past the stack copy (deeper than the user stack the kernel copies"), "%s", out);
        cr_assert_not_null(strstr(out, "# Warning:        most stacks were cut short"), "%s", out);
        free(out);
        cr_assert_eq(tracectl("summary", &out), 0);
        cr_assert_not_null(strstr(out, "\nStack walks:    "), "%s", out);
        cr_assert_not_null(strstr(out, " past the stack copy"), "%s", out);
        free(out);
}
