/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf on the real kernel, through the real traced and the perf
 * plugin's host: a program with a known call chain (main -> chain_outer ->
 * chain_middle -> chain_leaf, built four ways) sampled at 999 Hz; the
 * stacks are read back from the trace's interned data (function names,
 * frames, callstacks) as trace_processor would. */

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
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "plugin-fixture.h"
#include "profiling/jit-map.h"

#include "perfetto/trace/trace_packet.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(perf, .init = setup, .fini = teardown, .timeout = 120);

#define SKIP(...)                          \
        do {                               \
                teardown();                \
                cr_skip_test(__VA_ARGS__); \
        } while (0)

/* Software perf events with user registers and stack copies: what the
 * plugin needs from the kernel. */
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

/* ---- reading the trace ---- */

struct stack {
        uint64_t *frames; /* frame iids, root first */
        size_t n;
};

struct sample {
        uint32_t pid, cpu;
        uint64_t ts;
        int cpu_mode;
        bool skipped;
        int skip_reason;
        bool has_stack;
        char **names; /* leaf first; NULL entries: unnamed */
        size_t n_names;
};

struct collect {
        /* interned state of the perf sequence (iid-indexed) */
        uint32_t seq;
        char **fn;
        size_t n_fn;
        uint64_t *frame_fn;
        size_t n_frame;
        struct stack *cs;
        size_t n_cs;
        bool saw_defaults;
        bool defaults_have_timebase;
        /* results */
        struct sample *s;
        size_t n_s, cap_s;
        uint64_t lost;
        size_t skipped_scope, unwind_errors, clears;
        bool saw_trace_stats;
};

static void grow(void **p, size_t *n, size_t need, size_t elem) {
        if (need <= *n)
                return;
        size_t cap = need * 2;
        *p = realloc(*p, cap * elem);
        cr_assert_not_null(*p);
        memset((char *) *p + *n * elem, 0, (cap - *n) * elem);
        *n = cap;
}

static void clear_interned(struct collect *c) {
        for (size_t k = 0; k < c->n_fn; k++) {
                free(c->fn[k]);
                c->fn[k] = NULL;
        }
        for (size_t k = 0; k < c->n_cs; k++) {
                free(c->cs[k].frames);
                c->cs[k] = (struct stack) {};
        }
        if (c->frame_fn)
                memset(c->frame_fn, 0, c->n_frame * sizeof(*c->frame_fn));
}

static void collect_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct collect *c = userdata;
        /* perf_sample and trace_stats share a oneof (a union). */
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
                c->saw_trace_stats = true;
        const Perfetto__Protos__PerfSample *ps =
                p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE ? p->perf_sample : NULL;
        bool ours = ps || p->trace_packet_defaults || p->interned_data;
        if (!ours)
                return;
        if (c->seq == 0)
                c->seq = p->trusted_packet_sequence_id;
        cr_assert_eq(p->trusted_packet_sequence_id, c->seq, "one sequence for the samples");
        if (p->has_sequence_flags && (p->sequence_flags & 1)) {
                clear_interned(c);
                c->clears++;
        }
        if (p->trace_packet_defaults && p->trace_packet_defaults->perf_sample_defaults) {
                c->saw_defaults = true;
                c->defaults_have_timebase = p->trace_packet_defaults->perf_sample_defaults->timebase != NULL;
        }
        const Perfetto__Protos__InternedData *d = p->interned_data;
        if (d) {
                for (size_t k = 0; k < d->n_function_names; k++) {
                        uint64_t iid = d->function_names[k]->iid;
                        grow((void **) &c->fn, &c->n_fn, iid + 1, sizeof(*c->fn));
                        free(c->fn[iid]);
                        c->fn[iid] = strndup((const char *) d->function_names[k]->str.data,
                                             d->function_names[k]->str.len);
                }
                for (size_t k = 0; k < d->n_frames; k++) {
                        uint64_t iid = d->frames[k]->iid;
                        grow((void **) &c->frame_fn, &c->n_frame, iid + 1, sizeof(*c->frame_fn));
                        c->frame_fn[iid] = d->frames[k]->function_name_id;
                }
                for (size_t k = 0; k < d->n_callstacks; k++) {
                        uint64_t iid = d->callstacks[k]->iid;
                        grow((void **) &c->cs, &c->n_cs, iid + 1, sizeof(*c->cs));
                        free(c->cs[iid].frames);
                        c->cs[iid].n = d->callstacks[k]->n_frame_ids;
                        c->cs[iid].frames = malloc((c->cs[iid].n + 1) * sizeof(uint64_t));
                        memcpy(c->cs[iid].frames, d->callstacks[k]->frame_ids, c->cs[iid].n * sizeof(uint64_t));
                }
        }
        if (!ps)
                return;
        cr_assert(c->saw_defaults, "TracePacketDefaults come before the first sample (seq %u, flags %u, ts %llu)", p->trusted_packet_sequence_id, p->sequence_flags, (unsigned long long) p->timestamp);
        cr_assert(p->has_sequence_flags && (p->sequence_flags & 2), "samples say they need the sequence's state");
        if (ps->has_kernel_records_lost && ps->kernel_records_lost) {
                c->lost += ps->kernel_records_lost;
                return;
        }
        if (ps->optional_unwind_error_case == PERFETTO__PROTOS__PERF_SAMPLE__OPTIONAL_UNWIND_ERROR_UNWIND_ERROR)
                c->unwind_errors++;
        grow((void **) &c->s, &c->cap_s, c->n_s + 1, sizeof(*c->s));
        struct sample *s = &c->s[c->n_s++];
        s->pid = ps->pid;
        s->cpu = ps->cpu;
        s->ts = p->timestamp;
        s->cpu_mode = ps->cpu_mode;
        s->skipped = ps->optional_sample_skipped_reason_case ==
                     PERFETTO__PROTOS__PERF_SAMPLE__OPTIONAL_SAMPLE_SKIPPED_REASON_SAMPLE_SKIPPED_REASON;
        s->skip_reason = s->skipped ? (int) ps->sample_skipped_reason : 0;
        if (s->skipped && ps->sample_skipped_reason ==
                                  PERFETTO__PROTOS__PERF_SAMPLE__SAMPLE_SKIP_REASON__PROFILER_SKIP_NOT_IN_SCOPE)
                c->skipped_scope++;
        if (!ps->has_callstack_iid)
                return;
        cr_assert_lt(ps->callstack_iid, c->n_cs, "callstack %llu was interned before its use",
                     (unsigned long long) ps->callstack_iid);
        const struct stack *st = &c->cs[ps->callstack_iid];
        cr_assert_not_null(st->frames, "callstack %llu was interned", (unsigned long long) ps->callstack_iid);
        s->has_stack = true;
        s->n_names = st->n;
        s->names = calloc(st->n + 1, sizeof(char *));
        for (size_t k = 0; k < st->n; k++) {
                uint64_t f = st->frames[st->n - 1 - k];
                cr_assert_lt(f, c->n_frame, "frame %llu was interned", (unsigned long long) f);
                uint64_t name = c->frame_fn[f];
                s->names[k] = name && name < c->n_fn ? c->fn[name] : NULL;
        }
}

static void collect_free(struct collect *c) {
        clear_interned(c);
        free(c->fn);
        free(c->frame_fn);
        free(c->cs);
        for (size_t k = 0; k < c->n_s; k++)
                free(c->s[k].names);
        free(c->s);
}

static const char *const chain[] = { "chain_leaf", "chain_middle", "chain_outer", "main" };

/* Whether leaf, middle, outer and main follow one another (leaf first). */
static bool has_chain(const struct sample *s, size_t *ret_leaf_at) {
        for (size_t k = 0; k + 4 <= s->n_names; k++) {
                bool ok = true;
                for (size_t j = 0; j < 4 && ok; j++)
                        ok = s->names[k + j] && strcmp(s->names[k + j], chain[j]) == 0;
                if (ok) {
                        if (ret_leaf_at)
                                *ret_leaf_at = k;
                        return true;
                }
        }
        return false;
}

/* ---- the program ---- */

struct run {
        const char *argv[8];
        pid_t pid;
};

static pid_t spawn(const char *const *argv) {
        pid_t pid;
        int r = posix_spawn(&pid, argv[0], NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(r, 0, "%s: %s", argv[0], strerror(r));
        return pid;
}

static void run_and_wait(void *userdata) {
        struct run *r = userdata;
        r->pid = spawn(r->argv);
        int status;
        cr_assert_eq(waitpid(r->pid, &status, 0), r->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s ran", r->argv[0]);
        /* Samples from its last moments still travel through the rings. */
        usleep(300 * 1000);
}

static char *config(const char *scope, const char *mode, bool kernel, const char *extra) {
        char *text;
        cr_assert_gt(asprintf(&text,
                              "buffers { size_kb: 65536 }\n"
                              "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                              "  timebase { frequency: 999 counter: SW_CPU_CLOCK }\n"
                              "  callstack_sampling { scope { %s } kernel_frames: %s user_frames: %s }\n"
                              "  %s\n"
                              "} } }\n"
                              "write_into_file: true file_write_period_ms: 250\n",
                              scope, kernel ? "true" : "false", mode, extra ? extra : ""),
                     0);
        return text;
}

static void bin_path(char *buf, size_t size, const char *variant) {
        snprintf(buf, size, "%s/chain-%s", PERF_TEST_BIN_DIR, variant);
}

/* Records the variant for two seconds; checks >= 90 % of its samples
 * carry the whole chain. */
static void check_variant(const char *variant, const char *mode) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        char bin[512], scope[128];
        bin_path(bin, sizeof(bin), variant);
        snprintf(scope, sizeof(scope), "target_cmdline: \"chain-%s\"", variant);
        struct run r = { .argv = { bin, "2", NULL } };
        struct collect c = {};
        char *cfg = config(scope, mode, false, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, run_and_wait, &r, collect_packet, &c);
        free(cfg);
        size_t total = 0, ok = 0, skipped[8] = { 0 };
        for (size_t k = 0; k < c.n_s; k++) {
                if (c.s[k].pid != (uint32_t) r.pid)
                        continue;
                if (c.s[k].skipped) {
                        skipped[(unsigned) c.s[k].skip_reason < 8 ? c.s[k].skip_reason : 0]++;
                        continue;
                }
                total++;
                ok += has_chain(&c.s[k], NULL);
        }
        cr_log_info("chain-%s, %s: %zu of %zu samples with leaf, middle, outer, main; skipped: %zu not in scope, "
                    "%zu not queued, %zu other",
                    variant, mode, ok, total,
                    skipped[PERFETTO__PROTOS__PERF_SAMPLE__SAMPLE_SKIP_REASON__PROFILER_SKIP_NOT_IN_SCOPE],
                    skipped[PERFETTO__PROTOS__PERF_SAMPLE__SAMPLE_SKIP_REASON__PROFILER_SKIP_UNWIND_ENQUEUE],
                    skipped[0] + skipped[PERFETTO__PROTOS__PERF_SAMPLE__SAMPLE_SKIP_REASON__PROFILER_SKIP_READ_STAGE] +
                            skipped[PERFETTO__PROTOS__PERF_SAMPLE__SAMPLE_SKIP_REASON__PROFILER_SKIP_UNWIND_STAGE]);
        cr_assert(c.saw_trace_stats, "the trace is complete");
        /* The plugin's log counts the unwind errors the trace holds. */
        char *line = fixture_log_last(&inst, "linux.perf instance ", " stopped: ");
        const char *at = line ? strstr(line, " unwound (") : NULL;
        unsigned long long logged = 0;
        cr_assert(at && sscanf(at, " unwound (%llu with unwind errors", &logged) == 1, "no stop line: %s", line);
        cr_assert_eq(logged, c.unwind_errors, "the log counts %llu unwind errors, the trace holds %zu", logged,
                     c.unwind_errors);
        cr_assert_gt(total, 50, "samples of the program: %zu (pid %d); the plugin: %s", total, (int) r.pid, line);
        free(line);
        cr_assert_geq(ok * 10, total * 9, "chain-%s (%s): only %zu of %zu samples carry the chain", variant, mode,
                      ok, total);
        cr_assert_gt(c.skipped_scope, 0, "other processes are out of scope, and said so");
        collect_free(&c);
}

Test(perf, dwarf_O0_frame_pointers) {
        check_variant("O0-fp", "UNWIND_DWARF");
}
Test(perf, dwarf_O0_no_frame_pointers) {
        check_variant("O0-nofp", "UNWIND_DWARF");
}
Test(perf, dwarf_O2_frame_pointers) {
        check_variant("O2-fp", "UNWIND_DWARF");
}
Test(perf, dwarf_O2_no_frame_pointers) {
        check_variant("O2-nofp", "UNWIND_DWARF");
}
/* Unwind rules only in .debug_frame, as some toolchains and hand-written
 * assembly leave them. */
Test(perf, dwarf_O2_debug_frame_only) {
        check_variant("O2-debug-frame", "UNWIND_DWARF");
}
Test(perf, frame_pointers_O0) {
        check_variant("O0-fp", "UNWIND_FRAME_POINTER");
}
Test(perf, frame_pointers_O2) {
        check_variant("O2-fp", "UNWIND_FRAME_POINTER");
}

/* The text symbols' names of /proc/kallsyms, sorted (for bsearch). */
static int cmp_name(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static char **kallsyms_names(size_t *ret_n) {
        FILE *f = fopen("/proc/kallsyms", "re");
        cr_assert(f, "/proc/kallsyms: %s", strerror(errno));
        char line[1024], name[512], type;
        unsigned long long addr;
        char **v = NULL;
        size_t n = 0, cap = 0;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%llx %c %511s", &addr, &type, name) != 3 || (type != 't' && type != 'T'))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 4096;
                        v = realloc(v, cap * sizeof(*v));
                        cr_assert(v);
                }
                v[n++] = strdup(name);
        }
        fclose(f);
        qsort(v, n, sizeof(*v), cmp_name);
        *ret_n = n;
        return v;
}

/* System calls in the leaf: kernel frames sit above the user ones, named
 * as /proc/kallsyms names them (whether the plugin looked them up on demand
 * or read the file). */
Test(perf, kernel_frames_above_user_frames) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-nofp");
        struct run r = { .argv = { bin, "2", "syscalls", NULL } };
        struct collect c = {};
        char *cfg = config("target_cmdline: \"chain-O2-nofp\"", "UNWIND_DWARF", true, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, run_and_wait, &r, collect_packet, &c);
        free(cfg);
        size_t total = 0, ok = 0, kernel_above = 0, kernel_names = 0, n_ksyms;
        char **ksyms = kallsyms_names(&n_ksyms);
        for (size_t k = 0; k < c.n_s; k++) {
                size_t leaf;
                if (c.s[k].pid != (uint32_t) r.pid || c.s[k].skipped)
                        continue;
                total++;
                if (!has_chain(&c.s[k], &leaf))
                        continue;
                ok++;
                /* Kernel frames are leafward of chain_leaf, and named. */
                if (leaf > 0 && c.s[k].cpu_mode == PERFETTO__PROTOS__PROFILING__CPU_MODE__MODE_KERNEL &&
                    c.s[k].names[0] != NULL)
                        kernel_above++;
                /* A sample in the kernel: its leaf is a kernel function. */
                const char *name = c.s[k].names[0];
                if (leaf > 0 && c.s[k].cpu_mode == PERFETTO__PROTOS__PROFILING__CPU_MODE__MODE_KERNEL && name) {
                        cr_assert_not_null(bsearch(&name, ksyms, n_ksyms, sizeof(*ksyms), cmp_name),
                                           "kernel leaf %s is no function of /proc/kallsyms", name);
                        kernel_names++;
                }
        }
        for (size_t j = 0; j < n_ksyms; j++)
                free(ksyms[j]);
        free(ksyms);
        cr_assert_gt(kernel_names, 0, "no kernel leaf named");
        cr_log_info("syscalls: %zu samples, %zu with the chain, %zu with kernel frames above it", total, ok,
                    kernel_above);
        cr_assert_gt(total, 50);
        cr_assert_geq(ok * 10, total * 9, "%zu of %zu samples carry the chain", ok, total);
        cr_assert_gt(kernel_above * 4, ok, "kernel frames above the user ones in %zu of %zu", kernel_above, ok);
        collect_free(&c);
}

/* A shell script that execs the program: the process is sampled as the
 * shell first, then as the program; its maps follow the exec. */
Test(perf, exec_through_a_shell_script) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-nofp");
        struct run r = { .argv = { PERF_EXEC_SHIM, bin, "2", NULL } };
        struct collect c = {};
        char *cfg = config("target_cmdline: \"sh\" target_cmdline: \"dash\" target_cmdline: \"bash\" "
                           "target_cmdline: \"exec-shim.sh\" target_cmdline: \"chain-O2-nofp\"",
                           "UNWIND_DWARF", false, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, run_and_wait, &r, collect_packet, &c);
        free(cfg);
        size_t before = 0, after = 0, ok = 0;
        uint64_t first_leaf = UINT64_MAX;
        for (size_t k = 0; k < c.n_s; k++)
                if (c.s[k].pid == (uint32_t) r.pid && !c.s[k].skipped && has_chain(&c.s[k], NULL) &&
                    c.s[k].ts < first_leaf)
                        first_leaf = c.s[k].ts;
        for (size_t k = 0; k < c.n_s; k++) {
                if (c.s[k].pid != (uint32_t) r.pid || c.s[k].skipped)
                        continue;
                if (c.s[k].ts < first_leaf) {
                        before++;
                        continue;
                }
                after++;
                ok += has_chain(&c.s[k], NULL);
        }
        cr_log_info("exec shim: %zu samples as the shell, %zu as the program, %zu with the chain", before, after,
                    ok);
        cr_assert_gt(after, 50);
        cr_assert_geq(ok * 10, after * 9, "%zu of %zu samples after the exec carry the chain", ok, after);
        collect_free(&c);
}

/* A process that exits while the session goes on: its samples are there,
 * unwound, and the trace ends normally. */
static void exit_early(void *userdata) {
        struct run *r = userdata;
        r->pid = spawn(r->argv);
        int status;
        cr_assert_eq(waitpid(r->pid, &status, 0), r->pid);
        sleep(1);
}

Test(perf, process_exiting_mid_recording) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        char bin[512];
        bin_path(bin, sizeof(bin), "O0-nofp");
        struct run r = { .argv = { bin, "0.7", NULL } };
        struct collect c = {};
        char *cfg = config("target_cmdline: \"chain-O0-nofp\"", "UNWIND_DWARF", false, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, exit_early, &r, collect_packet, &c);
        free(cfg);
        size_t total = 0, ok = 0;
        for (size_t k = 0; k < c.n_s; k++)
                if (c.s[k].pid == (uint32_t) r.pid && !c.s[k].skipped) {
                        total++;
                        ok += has_chain(&c.s[k], NULL);
                }
        cr_assert(c.saw_trace_stats, "the trace is complete");
        cr_assert_gt(total, 20);
        cr_assert_geq(ok * 10, total * 9, "%zu of %zu samples carry the chain", ok, total);
        collect_free(&c);
}

static void idle(void *userdata) {
        usleep(1500 * 1000);
}

/* A target that never appears: a complete trace, every sample marked out
 * of scope, nothing unwound. */
Test(perf, target_that_never_appears) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct collect c = {};
        char *cfg = config("target_cmdline: \"no-such-program-anywhere\" target_pid: 2147483000", "UNWIND_DWARF",
                           true, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, idle, NULL, collect_packet, &c);
        free(cfg);
        size_t stacks = 0;
        for (size_t k = 0; k < c.n_s; k++)
                stacks += c.s[k].has_stack;
        cr_assert(c.saw_trace_stats, "the trace is complete");
        cr_assert(c.saw_defaults && c.defaults_have_timebase, "the timebase is described");
        cr_assert_gt(c.skipped_scope, 100, "the CPUs were sampled: %zu", c.skipped_scope);
        cr_assert_eq(stacks, 0);
        collect_free(&c);
}

/* CPU 1 offline for a second while the recording runs, then back. */
static void offline_and_back(void *userdata) {
        struct fixture_hotplug *h = userdata;
        /* Two spinning programs keep both CPUs busy (an idle CPU is
         * hardly sampled). */
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-fp");
        const char *argv[] = { bin, "4", NULL };
        pid_t spin[2] = { spawn(argv), spawn(argv) };
        fixture_cpu_offline_and_back(h);
        for (int i = 0; i < 2; i++)
                cr_assert_eq(waitpid(spin[i], NULL, 0), spin[i]);
}

/* The same with the plugin host stopped from before CPU 1 goes offline
 * until after it is back: its loop never sees the CPU offline, as on a
 * loaded machine whose plugin is held up past a short offline stretch. */
static void offline_and_back_unseen(void *userdata) {
        struct fixture_hotplug *h = userdata;
        h->hold = fixture_plugin_host_pid(&inst, "perf.so");
        cr_assert_gt(h->hold, 0, "no plugin host runs perf.so");
        offline_and_back(userdata);
}

static void record_cpu_offline_and_back(bool unseen) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct fixture_hotplug h = { .online = "/sys/devices/system/cpu/cpu1/online" };
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || access(h.online, W_OK) < 0)
                SKIP("CPU 1 cannot be taken offline here (one CPU, no CPU hotplug, or a read-only sysfs)");
        int lock = fixture_hotplug_lock(true);
        struct collect c = {};
        char *cfg = config("", "UNWIND_DWARF", false, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, unseen ? offline_and_back_unseen : offline_and_back, &h,
                       collect_packet, &c);
        fixture_hotplug_unlock(lock);
        free(cfg);
        cr_assert(h.wrote, "CPU 1 did not go offline");
        cr_assert(!unseen || h.held, "the plugin host was not held");
        size_t before = 0, after = 0;
        for (size_t k = 0; k < c.n_s; k++)
                if (c.s[k].cpu == 1 && !c.s[k].skipped) {
                        if (c.s[k].ts > h.back)
                                after++;
                        else
                                before++;
                }
        cr_log_info("CPU 1: %zu samples before it went offline, %zu after it came back", before, after);
        if (before == 0 || after <= 100)
                traced_instance_dump_log(&inst);
        cr_assert(c.saw_trace_stats, "the trace is complete");
        cr_assert_gt(before, 0);
        cr_assert_gt(after, 100, "CPU 1 was not sampled after it came back online (%zu samples)", after);
        collect_free(&c);
}

/* A CPU that goes offline mid-recording and comes back is sampled again
 * (the kernel leaves its per-CPU event silent: the plugin opens it anew).
 * Other tests sampling CPUs hold the hotplug lock shared meanwhile. */
Test(perf, cpu_offline_and_back) {
        record_cpu_offline_and_back(false);
}

/* ... also when the plugin never saw the CPU offline: the event that went
 * silent is found by its stopped clock. */
Test(perf, cpu_offline_and_back_unseen) {
        record_cpu_offline_and_back(true);
}

/* ---- the plugin's own accounting ---- */

#define DROPPED_TRACKS "linux.perf samples dropped (CPU "

/* Counter tracks of one name prefix ("linux.perf samples dropped (CPU n)"):
 * the last value written on each. */
struct counter_tracks {
        const char *prefix;
        uint64_t uuid[64], last[64];
        size_t n;
        uint64_t events;
};

static bool counter_track_find(const struct counter_tracks *c, uint64_t uuid) {
        for (size_t i = 0; i < c->n; i++)
                if (c->uuid[i] == uuid)
                        return true;
        return false;
}

static void collect_counter_tracks(const Perfetto__Protos__TracePacket *p, struct counter_tracks *c) {
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR) {
                const Perfetto__Protos__TrackDescriptor *td = p->track_descriptor;
                if (td->has_uuid && td->name && strncmp(td->name, c->prefix, strlen(c->prefix)) == 0 &&
                    !counter_track_find(c, td->uuid) && c->n < ELEMENTSOF(c->uuid))
                        c->uuid[c->n++] = td->uuid;
        }
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT) {
                const Perfetto__Protos__TrackEvent *te = p->track_event;
                if (!te->has_track_uuid ||
                    te->counter_value_field_case != PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE)
                        return;
                for (size_t i = 0; i < c->n; i++)
                        if (c->uuid[i] == te->track_uuid) {
                                /* Counts since the start: they only grow. */
                                cr_assert_geq((uint64_t) te->counter_value, c->last[i]);
                                c->last[i] = (uint64_t) te->counter_value;
                                c->events++;
                                return;
                        }
        }
}

static uint64_t counter_tracks_sum(const struct counter_tracks *c) {
        uint64_t sum = 0;
        for (size_t i = 0; i < c->n; i++)
                sum += c->last[i];
        return sum;
}

/* The line the plugin logs once an instance stopped (it may come a little
 * after the session ended). */
static bool stop_line(char *buf, size_t size) {
        for (int tries = 0; tries < 100; tries++) {
                if (tries > 0)
                        usleep(100 * 1000);
                FILE *f = fopen(inst.log_path, "re");
                cr_assert_not_null(f);
                bool found = false;
                char line[2048];
                while (fgets(line, sizeof(line), f))
                        if (strstr(line, "linux.perf instance") && strstr(line, " stopped: ")) {
                                snprintf(buf, size, "%s", line);
                                found = true;
                        }
                fclose(f);
                if (found)
                        return true;
        }
        return false;
}

/* The number right before marker in line. */
static unsigned long long logged_count(const char *line, const char *marker) {
        const char *at = strstr(line, marker);
        cr_assert_not_null(at, "no \"%s\" in: %s", marker, line);
        while (at > line && at[-1] >= '0' && at[-1] <= '9')
                at--;
        cr_assert(at[0] >= '0' && at[0] <= '9', "no count before \"%s\" in: %s", marker, line);
        return strtoull(at, NULL, 10);
}

static unsigned long long logged_samples_of(const char *line) {
        unsigned long long n = 0;
        cr_assert_eq(sscanf(strstr(line, " stopped: "), " stopped: %llu samples", &n), 1, "%s", line);
        return n;
}

/* Whether text shows up in the log within timeout_ms. */
static bool log_shows(const char *text, unsigned timeout_ms) {
        for (unsigned waited = 0;; waited += 100) {
                FILE *f = fopen(inst.log_path, "re");
                cr_assert_not_null(f);
                bool found = false;
                char line[2048];
                while (!found && fgets(line, sizeof(line), f))
                        found = strstr(line, text) != NULL;
                fclose(f);
                if (found)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                usleep(100 * 1000);
        }
}

struct throttles {
        uint64_t tracks, counts, max, samples;
        uint64_t uuid[64];
        size_t n_uuid;
        struct counter_tracks dropped;
};

/* Track descriptors named "linux.perf throttled (CPU n)" and counter
 * events on them. */
static void collect_throttles(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct throttles *t = userdata;
        collect_counter_tracks(p, &t->dropped);
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE && !p->perf_sample->kernel_records_lost)
                t->samples++;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR) {
                const Perfetto__Protos__TrackDescriptor *td = p->track_descriptor;
                if (td->has_uuid && td->name && strncmp(td->name, "linux.perf throttled (", 22) == 0) {
                        t->tracks++;
                        if (t->n_uuid < ELEMENTSOF(t->uuid))
                                t->uuid[t->n_uuid++] = td->uuid;
                }
        }
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT) {
                const Perfetto__Protos__TrackEvent *te = p->track_event;
                if (!te->has_track_uuid ||
                    te->counter_value_field_case != PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE ||
                    counter_track_find(&t->dropped, te->track_uuid))
                        return;
                bool known = false;
                for (size_t i = 0; i < t->n_uuid; i++)
                        known |= t->uuid[i] == te->track_uuid;
                cr_assert(known, "a throttle count on a track not described before it");
                t->counts++;
                if ((uint64_t) te->counter_value > t->max)
                        t->max = (uint64_t) te->counter_value;
        }
}

static void spin_two(void *userdata) {
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-fp");
        const char *argv[] = { bin, "1.5", NULL };
        pid_t spin[2] = { spawn(argv), spawn(argv) };
        for (int i = 0; i < 2; i++)
                cr_assert_eq(waitpid(spin[i], NULL, 0), spin[i]);
}

static const char max_rate_path[] = "/proc/sys/kernel/perf_event_max_sample_rate";

static bool write_text(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        bool ok = write(fd, text, strlen(text)) == (ssize_t) strlen(text);
        close(fd);
        return ok;
}

/* With kernel.perf_event_max_sample_rate at 1000, an event of a 100 us
 * period interrupts more often than the kernel allows: it throttles the
 * event, and the trace counts each time on a counter track per CPU. The
 * setting is the whole machine's: the test holds the CPU lock exclusively
 * (no other test records meanwhile) and puts the old value back. */
Test(perf, throttling_is_counted_in_the_trace) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        char old[32] = "";
        int fd = open(max_rate_path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, old, sizeof(old) - 1) : -1;
        if (fd >= 0)
                close(fd);
        if (n <= 0 || access(max_rate_path, W_OK) < 0)
                SKIP("kernel.perf_event_max_sample_rate cannot be changed here");
        old[n] = '\0';
        int lock = fixture_hotplug_lock(true);
        if (!write_text(max_rate_path, "1000")) {
                fixture_hotplug_unlock(lock);
                SKIP("kernel.perf_event_max_sample_rate cannot be changed here (refused)");
        }
        struct throttles t = { .dropped.prefix = DROPPED_TRACKS };
        fixture_record(&inst, ev, "linux.perf",
                       "buffers { size_kb: 65536 }\n"
                       "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                       "  timebase { period: 100000 counter: SW_CPU_CLOCK }\n"
                       "} } }\n"
                       "write_into_file: true file_write_period_ms: 250\n",
                       spin_two, NULL, collect_throttles, &t);
        cr_assert(write_text(max_rate_path, old), "kernel.perf_event_max_sample_rate not restored to %s", old);
        fixture_hotplug_unlock(lock);
        cr_log_info("throttling: %llu tracks, %llu counts, up to %llu on one CPU", (unsigned long long) t.tracks,
                    (unsigned long long) t.counts, (unsigned long long) t.max);
        /* The plugin's own count, from the line it logs once stopped. */
        char line[2048];
        if (!stop_line(line, sizeof(line)))
                traced_instance_dump_log(&inst);
        cr_assert(stop_line(line, sizeof(line)), "the plugin did not log its counts");
        unsigned long long logged = logged_count(line, " throttles, "), logged_samples = logged_samples_of(line);
        if (logged == 0 && t.counts == 0)
                SKIP("this kernel did not throttle a cpu-clock event of a 100 us period");
        cr_assert_eq(t.counts, logged, "the trace counts %llu throttles, the plugin saw %llu",
                     (unsigned long long) t.counts, logged);
        /* Every sample too, those drained at the stop included (they are
         * written before the plugin says it stopped), as a PerfSample or
         * on its CPU's count of dropped samples. */
        cr_assert_eq(logged_count(line, " packets and "), 0, "the writer refused nothing: %s", line);
        cr_assert_eq(t.samples + counter_tracks_sum(&t.dropped), logged_samples,
                     "the trace has %llu samples and %llu dropped, the plugin took %llu",
                     (unsigned long long) t.samples, (unsigned long long) counter_tracks_sum(&t.dropped),
                     logged_samples);
        cr_assert_gt(t.tracks, 0, "no throttle track in the trace");
        cr_assert_gt(t.counts, 0, "no throttle counted in the trace");
        cr_assert_geq(t.counts, t.max);
}

/* Rings of two pages read every two seconds: the kernel loses records,
 * and the trace says how many. */
Test(perf, ring_overflow_is_reported) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-fp");
        struct run r = { .argv = { bin, "1.5", NULL } };
        struct collect c = {};
        char *cfg = config("target_cmdline: \"chain-O2-fp\"", "UNWIND_DWARF", false,
                           "ring_buffer_pages: 8 ring_buffer_read_period_ms: 2000");
        fixture_record(&inst, ev, "linux.perf", cfg, run_and_wait, &r, collect_packet, &c);
        free(cfg);
        cr_log_info("ring overflow: %llu records lost, %zu samples kept", (unsigned long long) c.lost, c.n_s);
        cr_assert(c.saw_trace_stats, "the trace is complete");
        cr_assert_gt(c.lost, 0, "PerfSample.kernel_records_lost reports the overflow");
        collect_free(&c);
}

/* Samples that the queue to the worker has no room for, not even as a
 * note, are counted per CPU: on a counter track in the trace and in the
 * plugin's last log line. */
struct accounting {
        uint64_t samples; /* PerfSamples, but for the kernel's loss reports */
        struct counter_tracks dropped;
        bool saw_trace_stats;
};

static void collect_accounting(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct accounting *a = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
                a->saw_trace_stats = true;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE && !p->perf_sample->kernel_records_lost)
                a->samples++;
        collect_counter_tracks(p, &a->dropped);
}

static void spin_for(const char *seconds) {
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-fp");
        const char *argv[] = { bin, seconds, NULL };
        pid_t spin[2] = { spawn(argv), spawn(argv) };
        for (int i = 0; i < 2; i++)
                cr_assert_eq(waitpid(spin[i], NULL, 0), spin[i]);
}

static void spin_1500ms(void *userdata) {
        spin_for("1.5");
}

/* A footprint of 16 KiB bounds the queue at 256 items, and a ring read
 * once a second holds far more samples than that: each drain hands more
 * to the worker than the queue takes, whatever the worker's pace (a
 * drain's batch counts against the bound before the worker sees it). */
Test(perf, samples_beyond_the_queue_bound_are_counted) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct accounting a = { .dropped.prefix = DROPPED_TRACKS };
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                 "  timebase { frequency: %u counter: SW_CPU_CLOCK }\n"
                 "  ring_buffer_read_period_ms: 1000 max_enqueued_footprint_kb: 16\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 5000);
        fixture_record(&inst, ev, "linux.perf", cfg, spin_1500ms, NULL, collect_accounting, &a);
        char line[2048];
        if (!stop_line(line, sizeof(line)))
                traced_instance_dump_log(&inst);
        cr_assert(stop_line(line, sizeof(line)), "the plugin did not log its counts");
        cr_log_info("%s", line);
        unsigned long long samples = logged_samples_of(line), dropped = logged_count(line, " dropped (queue at its "),
                           bound = logged_count(line, "-item bound"), refused = logged_count(line, " packets and ");
        uint64_t in_trace = counter_tracks_sum(&a.dropped);
        cr_log_info("queue bound: %llu samples, %llu in the trace, %llu dropped (%llu in the trace, on %zu tracks)",
                    samples, (unsigned long long) a.samples, dropped, (unsigned long long) in_trace, a.dropped.n);
        cr_assert(a.saw_trace_stats, "the trace is complete");
        cr_assert_eq(bound, 16 * 1024 / 64, "the item bound follows max_enqueued_footprint_kb");
        cr_assert_gt(dropped, 0, "no sample found the queue at its bound: %s", line);
        cr_assert_gt(a.dropped.n, 0, "no \"" DROPPED_TRACKS "n)\" track in the trace");
        if (refused == 0) {
                cr_assert_eq(in_trace, dropped, "the trace counts %llu dropped samples, the plugin %llu",
                             (unsigned long long) in_trace, dropped);
                cr_assert_eq(a.samples + in_trace, samples,
                             "%llu samples in the trace and %llu dropped, of %llu the plugin took",
                             (unsigned long long) a.samples, (unsigned long long) in_trace, samples);
        } else {
                /* Packets the writer refused are missing from the trace
                 * (counts among them): only bounds hold. */
                cr_log_warn("the writer refused %llu packets: %s", refused, line);
                cr_assert_leq(in_trace, dropped);
                cr_assert_leq(a.samples + in_trace, samples);
        }
}

/* The service's core stopped (SIGSTOP) while the plugin goes on sampling:
 * the shared memory buffer fills, the writer refuses packets (the default
 * policy drops), and the plugin says so once in the log right away and
 * counts them in its last line. */
static pid_t service_core_pid(void) {
        FILE *f = fopen(inst.log_path, "re");
        cr_assert_not_null(f);
        char line[2048];
        int pid = 0;
        while (fgets(line, sizeof(line), f)) {
                const char *at = strstr(line, "Service core ");
                if (at)
                        (void) sscanf(at, "Service core %d running", &pid);
        }
        fclose(f);
        return (pid_t) pid;
}

static void core_stopped_until_refused(void *userdata) {
        bool *refused_seen = userdata;
        pid_t core = service_core_pid();
        cr_assert_gt(core, 0, "no \"Service core N running\" in the log");
        char bin[512];
        bin_path(bin, sizeof(bin), "O2-fp");
        const char *argv[] = { bin, "60", NULL };
        pid_t spin[2] = { spawn(argv), spawn(argv) };
        /* Niced: two spinners on a small machine would otherwise starve
         * the plugin that has to fill the buffer with their samples (and
         * every test running beside this one). */
        for (int i = 0; i < 2; i++)
                (void) setpriority(PRIO_PROCESS, (id_t) spin[i], 19);
        cr_assert_eq(kill(core, SIGSTOP), 0);
        /* 128 KiB of shared memory at a few MB of packets a second: the
         * wait ends as soon as the plugin reports the first refusal. */
        *refused_seen = log_shows("the trace writer refused a packet", 60000);
        cr_assert_eq(kill(core, SIGCONT), 0);
        for (int i = 0; i < 2; i++) {
                (void) kill(spin[i], SIGKILL);
                cr_assert_eq(waitpid(spin[i], NULL, 0), spin[i]);
        }
}

static void ignore_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
}

Test(perf, packets_the_writer_refuses_are_counted) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        bool refused_seen = false;
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 /* A small buffer fills soon however slowly the plugin
                  * runs (a sanitized build) or the machine schedules it. */
                 "producers { producer_name: \"traced.perf\" shm_size_kb: 128 }\n"
                 "data_sources { config { name: \"linux.perf\" buffer_exhausted_policy: BUFFER_EXHAUSTED_DROP\n"
                 "  perf_event_config { timebase { frequency: %u counter: SW_CPU_CLOCK } }\n"
                 "} }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 50000);
        fixture_record(&inst, ev, "linux.perf", cfg, core_stopped_until_refused, &refused_seen, ignore_packet, NULL);
        cr_assert(refused_seen, "the plugin never said the writer refused a packet");
        char line[2048];
        if (!stop_line(line, sizeof(line)))
                traced_instance_dump_log(&inst);
        cr_assert(stop_line(line, sizeof(line)), "the plugin did not log its counts");
        cr_log_info("%s", line);
        cr_assert_gt(logged_count(line, " packets and "), 0, "%s", line);
        cr_assert(strstr(line, "refused by the writer (first: "), "the first reason is named: %s", line);
}

/* A JavaScript function compiled by V8 runs in anonymous memory no ELF
 * file describes; node --perf-basic-prof names it in its perf map, and
 * the samples carry that name. */
Test(perf, javascript_functions_named_from_the_perf_map) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        const char *node = fixture_node_binary();
        if (!node)
                SKIP("node is not installed (tools/install-deps.sh installs Debian's nodejs)");
        struct run r = { .argv = { node, "--perf-basic-prof", "--interpreted-frames-native-stack", FIXTURE_NODE_PROGRAM, "2000",
                                    NULL } };
        struct collect c = {};
        char *cfg = config("target_cmdline: \"node\" target_cmdline: \"nodejs\"", "UNWIND_FRAME_POINTER", false, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, run_and_wait, &r, collect_packet, &c);
        free(cfg);
        char map[64];
        snprintf(map, sizeof(map), JIT_PERF_MAP_DIR "/perf-%d.map", (int) r.pid);
        (void) unlink(map); /* node leaves it behind */
        size_t total = 0, named = 0, outer = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                if (c.s[k].pid != (uint32_t) r.pid || c.s[k].skipped || c.s[k].cpu_mode != PERFETTO__PROTOS__PROFILING__CPU_MODE__MODE_USER)
                        continue;
                total++;
                bool busy = false, in_outer = false;
                for (size_t j = 0; j < c.s[k].n_names; j++) {
                        const char *n = c.s[k].names[j];
                        busy = busy || (n && strstr(n, "busyLoop"));
                        in_outer = in_outer || (busy && n && strstr(n, "outer"));
                }
                named += busy;
                outer += in_outer;
        }
        cr_log_info("node: %zu of %zu user samples name busyLoop, %zu of them under outer", named, total, outer);
        cr_assert_gt(total, 50, "user samples of node: %zu", total);
        /* Most of the program's time is in busyLoop; V8's start, its
         * compiler and GC threads are the rest. */
        cr_assert_geq(named * 2, total, "only %zu of %zu samples name busyLoop", named, total);
        /* Interpreted callers too: --interpreted-frames-native-stack
         * gives each its own named code. */
        cr_assert_geq(outer * 2, named, "frame pointers lead from busyLoop to its caller, named too: %zu of %zu",
                      outer, named);
        collect_free(&c);
}

/* The JVM names its compiled methods in a perf map when asked (JDK 17:
 * jcmd PID Compiler.perfmap, which writes the whole map anew each time):
 * samples taken after that name them. */
struct java_run {
        const char *java, *jcmd;
        pid_t pid;
        bool mapped; /* the map named busyLoop before the program was stopped */
};

static void run_java(void *userdata) {
        struct java_run *r = userdata;
        const char *argv[] = { r->java, PERF_JAVA_PROGRAM, "60000", NULL };
        r->pid = spawn(argv);
        char map[64], pid[16];
        snprintf(map, sizeof(map), JIT_PERF_MAP_DIR "/perf-%d.map", (int) r->pid);
        snprintf(pid, sizeof(pid), "%d", (int) r->pid);
        /* The JVM starts, compiles the source, then the hot method; it
         * may compile it again later (C2, on-stack replacement) at another
         * address: the map is asked for every half second to the end, as
         * whoever profiles a JVM this way does. */
        for (int i = 0, after = 0; i < 120 && after < 4; i++) {
                usleep(500 * 1000);
                after += r->mapped;
                const char *jargv[] = { r->jcmd, pid, "Compiler.perfmap", NULL };
                pid_t j;
                posix_spawn_file_actions_t fa;
                posix_spawn_file_actions_init(&fa);
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
                cr_assert_eq(posix_spawn(&j, r->jcmd, &fa, NULL, (char *const *) jargv, environ), 0);
                posix_spawn_file_actions_destroy(&fa);
                int status;
                cr_assert_eq(waitpid(j, &status, 0), j);
                FILE *f = fopen(map, "re");
                char line[512];
                while (f && fgets(line, sizeof(line), f))
                        if (strstr(line, "JitBusy.busyLoop"))
                                r->mapped = true;
                if (f)
                        fclose(f);
        }
        /* Sampled with the map there for two seconds and more. */
        kill(r->pid, SIGTERM);
        int status;
        cr_assert_eq(waitpid(r->pid, &status, 0), r->pid);
        usleep(300 * 1000);
        (void) unlink(map);
}

Test(perf, java_methods_named_from_the_jvm_perf_map) {
        if (!perf_usable())
                SKIP("perf_event_open with user registers and stacks is not available here");
        struct java_run r = { .java = "/usr/bin/java", .jcmd = "/usr/bin/jcmd" };
        if (access(r.java, X_OK) < 0 || access(r.jcmd, X_OK) < 0)
                SKIP("no JDK (java and jcmd) is installed (tools/install-deps.sh installs openjdk-17-jdk-headless)");
        struct collect c = {};
        char *cfg = config("target_cmdline: \"java\"", "UNWIND_FRAME_POINTER", false, NULL);
        fixture_record(&inst, ev, "linux.perf", cfg, run_java, &r, collect_packet, &c);
        free(cfg);
        cr_assert(r.mapped, "jcmd %d Compiler.perfmap never named JitBusy.busyLoop", (int) r.pid);
        /* The last second and a half of the program: the map was there. */
        uint64_t last = 0;
        for (size_t k = 0; k < c.n_s; k++)
                if (c.s[k].pid == (uint32_t) r.pid && c.s[k].ts > last)
                        last = c.s[k].ts;
        size_t total = 0, named = 0;
        for (size_t k = 0; k < c.n_s; k++) {
                if (c.s[k].pid != (uint32_t) r.pid || c.s[k].skipped ||
                    c.s[k].cpu_mode != PERFETTO__PROTOS__PROFILING__CPU_MODE__MODE_USER || c.s[k].ts + 1500000000u < last)
                        continue;
                total++;
                bool busy = false;
                for (size_t j = 0; j < c.s[k].n_names; j++)
                        busy = busy || (c.s[k].names[j] && strstr(c.s[k].names[j], "JitBusy.busyLoop"));
                named += busy;
        }
        cr_log_info("java: %zu of %zu user samples of its last 1.5 s name JitBusy.busyLoop", named, total);
        cr_assert_gt(total, 50, "user samples of java at the end: %zu", total);
        cr_assert_geq(named * 2, total, "only %zu of %zu samples name JitBusy.busyLoop", named, total);
        collect_free(&c);
}
