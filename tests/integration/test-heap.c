/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* android.heapprofd through the real traced and the heap plugin's host,
 * with tests/heap/heap-workload running under the real libtraced-heap.so:
 * the trace's ProfilePacket dumps are read back with their interned
 * callstacks, as trace_processor reads them. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interned-names.h"
#include "plugin-fixture.h"
#include "test-consumer.h"
#include "test-scratch.h"

#include "perfetto/trace/trace_packet.pb-c.h"

static struct traced_instance inst;
static sd_event *ev;
static char heap_dir[512];

static void setup(void) {
        /* The plugin's state page and socket, and the workload's, in a
         * directory of the test's own (traced passes the variable on). */
        cr_assert_eq(test_mkdtemp(heap_dir, sizeof(heap_dir), "heap-dir-"), 0);
        cr_assert_eq(chmod(heap_dir, 0755), 0);
        /* Owned by the plugin hosts' user, as tmpfiles.d makes
         * /run/traced-heap (a host runs as root where that user is not). */
        struct passwd *pw = getpwnam("traced-plugin");
        if (pw)
                cr_assert_eq(chown(heap_dir, pw->pw_uid, pw->pw_gid), 0);
        /* Its state page as tmpfiles.d makes it at boot: a line of text
         * (the plugin makes it a page at its first start). */
        char state[600];
        snprintf(state, sizeof(state), "%s/state", heap_dir);
        FILE *f = fopen(state, "w");
        cr_assert_not_null(f);
        fputs("traced-heap state page", f);
        cr_assert_eq(fclose(f), 0);
        if (pw)
                cr_assert_eq(chown(state, pw->pw_uid, pw->pw_gid), 0);
        setenv("TRACED_HEAP_DIR", heap_dir, 1);
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
        if (!test_keep_scratch())
                (void) test_scratch_remove(heap_dir);
}

TestSuite(heap, .init = setup, .fini = teardown, .timeout = 120);

/* ---- the workload ---- */

extern char **environ;

static pid_t spawn_workload(const char *mode, const char *file) {
        char preload[600], dir_env[600];
        snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", HEAP_PRELOAD_LIB);
        snprintf(dir_env, sizeof(dir_env), "TRACED_HEAP_DIR=%s", heap_dir);
        char *envp[] = { preload, dir_env, (char *) "PATH=/usr/bin:/bin", NULL };
        char *argv[] = { (char *) HEAP_WORKLOAD, (char *) mode, (char *) file, NULL };
        pid_t pid;
        int r = posix_spawn(&pid, HEAP_WORKLOAD, NULL, NULL, argv, envp);
        cr_assert_eq(r, 0, "%s: %s", HEAP_WORKLOAD, strerror(r));
        return pid;
}

static bool wait_file(const char *path, unsigned ms) {
        for (unsigned waited = 0; waited < ms; waited += 20) {
                if (access(path, F_OK) == 0)
                        return true;
                usleep(20 * 1000);
        }
        return false;
}

static unsigned long read_count(const char *path) {
        FILE *f = fopen(path, "r");
        unsigned long n = 0;
        if (f) {
                if (fscanf(f, "%lu", &n) != 1)
                        n = 0;
                fclose(f);
        }
        return n;
}

static bool alive(pid_t pid) {
        int status;
        return waitpid(pid, &status, WNOHANG) == 0;
}

static void stop_workload(pid_t pid) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

/* ---- reading the trace ---- */

struct site {
        char *names; /* the callstack's function names, leaf first, ' '-separated */
        uint64_t allocated, freed, alloc_count, free_count;
};

struct collect {
        pid_t pid;
        /* interned state of the heap plugin's sequence (the one
         * sequence of the trace that interns) */
        struct interned_names names;
        /* the last dump of pid */
        struct site *sites;
        size_t n_sites;
        size_t dumps, pids_dumped;
        /* ProfilePacket.index counts the packets of a sequence from 0, as
         * trace_processor checks (else heapprofd_missing_packet) */
        uint32_t index_seq;
        uint64_t index_next;
        size_t index_gaps;
        uint64_t pids[64];
        bool buffer_overran, disconnected, corrupted;
        uint64_t heap_samples, interval;
};


/* "leaf middle ... root" of an interned callstack. */
static char *stack_names(struct collect *c, uint64_t iid) {
        cr_assert_lt(iid, c->names.n_cs, "callstack %llu was interned before its use", (unsigned long long) iid);
        cr_assert_not_null(c->names.cs[iid], "callstack %llu was interned", (unsigned long long) iid);
        size_t len = 0;
        char *out = calloc(1, 1);
        for (size_t k = c->names.cs_n[iid]; k-- > 0;) {
                uint64_t f = c->names.cs[iid][k];
                cr_assert_lt(f, c->names.n_frame, "frame %llu was interned", (unsigned long long) f);
                uint64_t fn = c->names.frame_fn[f];
                const char *name = fn && fn < c->names.n_fn && c->names.fn[fn] ? c->names.fn[fn] : "?";
                out = realloc(out, len + strlen(name) + 2);
                len += (size_t) sprintf(out + len, "%s%s", len ? " " : "", name);
        }
        return out;
}

static void collect_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct collect *c = userdata;
        bool profile = p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROFILE_PACKET;
        if (!profile && !p->interned_data)
                return;
        if (p->interned_data)
                interned_names_add(&c->names, p->interned_data);
        if (!profile)
                return;
        if (c->index_next == 0)
                c->index_seq = p->trusted_packet_sequence_id;
        if (p->trusted_packet_sequence_id == c->index_seq) {
                if (p->profile_packet->index != c->index_next)
                        c->index_gaps++;
                c->index_next = p->profile_packet->index + 1;
        }
        for (size_t k = 0; k < p->profile_packet->n_process_dumps; k++) {
                const Perfetto__Protos__ProfilePacket__ProcessHeapSamples *d = p->profile_packet->process_dumps[k];
                c->dumps++;
                bool seen = false;
                for (size_t i = 0; i < c->pids_dumped; i++)
                        seen |= c->pids[i] == d->pid;
                if (!seen && c->pids_dumped < 64)
                        c->pids[c->pids_dumped++] = d->pid;
                if (d->pid != (uint64_t) c->pid)
                        continue;
                cr_assert_str_eq(d->heap_name, "libc.malloc");
                c->interval = d->sampling_interval_bytes;
                c->buffer_overran = d->buffer_overran;
                c->disconnected = d->disconnected;
                c->corrupted = d->buffer_corrupted;
                c->heap_samples = d->stats ? d->stats->heap_samples : 0;
                for (size_t i = 0; i < c->n_sites; i++)
                        free(c->sites[i].names);
                free(c->sites);
                c->n_sites = d->n_samples;
                c->sites = calloc(d->n_samples + 1, sizeof(*c->sites));
                for (size_t i = 0; i < d->n_samples; i++) {
                        const Perfetto__Protos__ProfilePacket__HeapSample *s = d->samples[i];
                        c->sites[i] = (struct site) { .names = stack_names(c, s->callstack_id),
                                                      .allocated = s->self_allocated, .freed = s->self_freed,
                                                      .alloc_count = s->alloc_count, .free_count = s->free_count };
                }
        }
}

static void collect_free(struct collect *c) {
        interned_names_free(&c->names);
        for (size_t i = 0; i < c->n_sites; i++)
                free(c->sites[i].names);
        free(c->sites);
}

/* The totals of the callsites whose innermost named frame of the
 * workload's is fn. */
static void site_totals(const struct collect *c, const char *fn, uint64_t *alloc, uint64_t *freed) {
        *alloc = *freed = 0;
        for (size_t i = 0; i < c->n_sites; i++) {
                const char *at = strstr(c->sites[i].names, fn);
                if (at && (at == c->sites[i].names || at[-1] == ' ') && (at[strlen(fn)] == ' ' || !at[strlen(fn)])) {
                        *alloc += c->sites[i].allocated;
                        *freed += c->sites[i].freed;
                }
        }
}

static char *heap_config(const char *target, const char *extra) {
        char *text;
        cr_assert_gt(asprintf(&text,
                              "buffers { size_kb: 65536 }\n"
                              "data_sources { config { name: \"android.heapprofd\" heapprofd_config {\n"
                              "  %s\n  %s\n} } }\n"
                              "write_into_file: true file_write_period_ms: 250\n",
                              target, extra ? extra : ""),
                     0);
        return text;
}

/* ---- callsites and bytes ---- */

struct callsites_run {
        pid_t pid;
        char done[600];
};

static void run_callsites(void *userdata) {
        struct callsites_run *r = userdata;
        cr_assert_eq(kill(r->pid, SIGUSR1), 0);
        cr_assert(wait_file(r->done, 30000), "the workload allocated");
        /* What its ring holds is read on the next turn. */
        usleep(200 * 1000);
}

static void within(const char *what, uint64_t got, uint64_t want, unsigned percent) {
        double d = (double) got - (double) want;
        cr_assert(d * 100.0 <= (double) want * percent && -d * 100.0 <= (double) want * percent,
                  "%s: %llu bytes, expected %llu +- %u %%", what, (unsigned long long) got,
                  (unsigned long long) want, percent);
}

static void record_callsites(uint64_t interval, struct collect *c) {
        struct callsites_run r = { 0 };
        snprintf(r.done, sizeof(r.done), "%s/done", heap_dir);
        r.pid = spawn_workload("callsites", r.done);
        char target[128], extra[128];
        snprintf(target, sizeof(target), "pid: %d", (int) r.pid);
        /* Every sample kept, however slow the plugin (a sanitized build
         * beside other tests): what is measured is the accuracy. */
        snprintf(extra, sizeof(extra), "sampling_interval_bytes: %llu block_client: true",
                 (unsigned long long) interval);
        char *cfg = heap_config(target, extra);
        *c = (struct collect) { .pid = r.pid };
        fixture_record(&inst, ev, "android.heapprofd", cfg, run_callsites, &r, collect_packet, c);
        free(cfg);
        cr_assert(alive(r.pid), "the workload outlived its profile");
        stop_workload(r.pid);
        unlink(r.done);
        for (size_t i = 0; i < c->n_sites; i++)
                cr_log_info("site %s: %llu allocated (%llu), %llu freed (%llu)", c->sites[i].names,
                            (unsigned long long) c->sites[i].allocated, (unsigned long long) c->sites[i].alloc_count,
                            (unsigned long long) c->sites[i].freed, (unsigned long long) c->sites[i].free_count);
        cr_assert_gt(c->dumps, 0, "the trace holds a dump");
        cr_assert_eq(c->interval, interval);
        cr_assert(!c->buffer_overran && !c->corrupted, "nothing was lost");
}

/* From the plugin's line on the instance's end: how many samples it read,
 * and how many of those came with a stack template's words only. */
static void template_counts(uint64_t *ret_samples, uint64_t *ret_sparse) {
        cr_assert(fixture_wait_log(&inst, ev, "android.heapprofd instance ", " stopped: ", 0, 10000),
                  "the plugin says what the instance read");
        char *line = fixture_log_last(&inst, "android.heapprofd instance ", " stopped: ");
        cr_assert_not_null(line);
        const char *p = strstr(line, " processes, ");
        unsigned long long samples = 0, errors = 0, sparse = 0;
        cr_assert(p && sscanf(p, " processes, %llu samples (%llu with unwind errors, %llu with a stack template",
                               &samples, &errors, &sparse) == 3,
                  "the line counts them: %s", line);
        cr_log_info("%s", line);
        free(line);
        *ret_samples = samples;
        *ret_sparse = sparse;
}

Test(heap, callsites_within_ten_percent_at_4096) {
        struct collect c;
        record_callsites(4096, &c);
        uint64_t a, f, unreleased = 0, samples, sparse;
        cr_assert(!c.buffer_overran, "no sample was dropped");
        /* Many samples carried a template's words, not their stack: the
         * figures below are theirs too. (The workload's call sites are a
         * few, each called from one place. How many depends on how soon
         * the plugin first reads the ring, which makes the templates:
         * from 29 % to 60 % of them on an idle 2-CPU VM, so a tenth.) */
        template_counts(&samples, &sparse);
        cr_assert_gt(samples, 1000);
        cr_assert_gt(sparse * 10, samples, "%llu of %llu samples from templates", (unsigned long long) sparse,
                     (unsigned long long) samples);
        site_totals(&c, "small_kept", &a, &f);
        within("small_kept allocated", a, 200000 * 64, 10);
        cr_assert_eq(f, 0, "small_kept freed nothing: %llu", (unsigned long long) f);
        unreleased += a - f;
        site_totals(&c, "large_freed", &a, &f);
        within("large_freed allocated", a, 8 * 512 * 1024, 10);
        within("large_freed freed", f, 8 * 512 * 1024, 10);
        unreleased += a - f;
        site_totals(&c, "medium_half", &a, &f);
        within("medium_half allocated", a, 4000 * 4000, 10);
        within("medium_half freed", f, 2000 * 4000, 10);
        unreleased += a - f;
        within("unreleased", unreleased, 200000 * 64 + 2000 * 4000, 10);
        /* Every callsite is one of the program's (and main's): no stack
         * invented, none left with the hooks' own frames on top. */
        for (size_t i = 0; i < c.n_sites; i++) {
                cr_assert(strstr(c.sites[i].names, "main"), "a stack reaching main: %s", c.sites[i].names);
                cr_assert_null(strstr(c.sites[i].names, "send_alloc"), "the hooks' frames are off: %s",
                               c.sites[i].names);
        }
        collect_free(&c);
}

/* ---- tracectl record --heap, tracectl report ---- */

/* The value of the folded stacks ending in fn, summed. */
static uint64_t folded_sum(const char *args, const char *trace, const char *fn) {
        char cmd[1600], line[4096];
        snprintf(cmd, sizeof(cmd), "%s report --no-debuginfod %s %s", TRACECTL_BINARY, args, trace);
        FILE *f = popen(cmd, "r");
        cr_assert_not_null(f);
        uint64_t sum = 0;
        size_t k = strlen(fn);
        while (fgets(line, sizeof(line), f)) {
                char *sp = strrchr(line, ' ');
                if (!sp || (size_t) (sp - line) < k + 1)
                        continue;
                if (strncmp(sp - k, fn, k) == 0 && sp[-(ssize_t) k - 1] == ';')
                        sum += strtoull(sp + 1, NULL, 10);
        }
        cr_assert_eq(pclose(f), 0, "%s failed", cmd);
        return sum;
}

Test(heap, tracectl_record_heap_and_report) {
        char done[600], out[600], pid_arg[32];
        snprintf(done, sizeof(done), "%s/done", heap_dir);
        snprintf(out, sizeof(out), "%s/heap.pftrace", inst.dir);
        pid_t w = spawn_workload("callsites", done);
        snprintf(pid_arg, sizeof(pid_arg), "%d", (int) w);
        struct test_consumer cons = {};
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, ev, "android.heapprofd", 1, 5000), "android.heapprofd registered");
        test_consumer_free(&cons);
        unsigned started = fixture_log_count(&inst, FIXTURE_HEAP_STARTED);
        const char *argv[] = { TRACECTL_BINARY, "--socket", inst.consumer_path, "record", "-t", "5s", "--heap",
                               pid_arg, "--no-summary", "-o", out, NULL };
        pid_t tc;
        cr_assert_eq(posix_spawn(&tc, TRACECTL_BINARY, NULL, NULL, (char *const *) argv, environ), 0);
        cr_assert(fixture_wait_log(&inst, ev, FIXTURE_HEAP_STARTED, started, 30000), "the plugin profiles");
        /* The process joins at its next allocation after the start. */
        usleep(300 * 1000);
        cr_assert_eq(kill(w, SIGUSR1), 0);
        cr_assert(wait_file(done, 30000), "the workload allocated");
        int status;
        cr_assert_eq(waitpid(tc, &status, 0), tc);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tracectl record --heap succeeded");
        cr_assert(alive(w), "the workload outlived its profile");
        stop_workload(w);
        unlink(done);

        /* What is in use at the end, and what was allocated, per callsite,
         * as the folded stacks of tracectl report give them. */
        within("small_kept in use", folded_sum("--folded", out, "small_kept"), 200000 * 64, 10);
        within("medium_half in use", folded_sum("--folded", out, "medium_half"), 2000 * 4000, 10);
        cr_assert_eq(folded_sum("--folded", out, "large_freed"), 0, "large_freed freed everything");
        within("large_freed allocated", folded_sum("--alloc --folded", out, "large_freed"), 8 * 512 * 1024, 10);
        within("medium_half allocated", folded_sum("--alloc --folded", out, "medium_half"), 4000 * 4000, 10);

        /* The text report names the process and its sampling. */
        char cmd[1400], text[8192];
        snprintf(cmd, sizeof(cmd), "%s report --no-debuginfod %s", TRACECTL_BINARY, out);
        FILE *f = popen(cmd, "r");
        cr_assert_not_null(f);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = 0;
        cr_assert_eq(pclose(f), 0);
        cr_assert_not_null(strstr(text, "sampled every 4096 bytes"), "%s", text);
        cr_assert_not_null(strstr(text, "# Process heap-workload"), "%s", text);
        cr_assert_not_null(strstr(text, "0 dropped for a full buffer"), "%s", text);
        unlink(out);
}

Test(heap, every_large_allocation_seen_at_512k) {
        struct collect c;
        record_callsites(512 * 1024, &c);
        uint64_t a, f;
        site_totals(&c, "large_freed", &a, &f);
        /* Each block of 512 KiB is at least the interval: each is sampled,
         * for its own size. */
        cr_assert_eq(a, 8 * 512 * 1024, "large_freed: %llu bytes", (unsigned long long) a);
        cr_assert_eq(f, 8 * 512 * 1024, "large_freed freed: %llu bytes", (unsigned long long) f);
        collect_free(&c);
}

/* ---- forks, threads and exec ---- */

struct forks_run {
        pid_t pid;
        char done[600];
        int status;
};

static void run_forks(void *userdata) {
        struct forks_run *r = userdata;
        cr_assert_eq(kill(r->pid, SIGUSR1), 0);
        cr_assert_eq(waitpid(r->pid, &r->status, 0), r->pid);
}

Test(heap, forks_and_threads_unharmed) {
        struct forks_run r = { 0 };
        snprintf(r.done, sizeof(r.done), "%s/forks-done", heap_dir);
        char *cfg = heap_config("process_cmdline: \"heap-workload\"", "sampling_interval_bytes: 1024");
        r.pid = spawn_workload("forks", r.done);
        struct collect c = { .pid = r.pid };
        fixture_record(&inst, ev, "android.heapprofd", cfg, run_forks, &r, collect_packet, &c);
        free(cfg);
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "the workload's threads, forks and exec ran "
                                                                     "(status %d)",
                  r.status);
        cr_assert(access(r.done, F_OK) == 0);
        cr_assert_gt(c.heap_samples, 0, "the parent was profiled");
        cr_assert_gt(c.pids_dumped, 1, "children were profiled too (%zu processes)", c.pids_dumped);
        cr_assert_eq(c.index_gaps, 0, "ProfilePacket.index counts the packets of the sequence");
        collect_free(&c);
}

/* ---- sampled blocks through every call of the family ---- */

static void run_blocks(void *userdata) {
        struct forks_run *r = userdata;
        cr_assert_eq(kill(r->pid, SIGUSR1), 0);
        for (int i = 0; i < 1500 && access(r->done, F_OK) != 0; i++) {
                pid_t w = waitpid(r->pid, &r->status, WNOHANG);
                cr_assert_eq(w, 0, "the workload exited in the session (status %d)", r->status);
                usleep(20 * 1000);
        }
        cr_assert(access(r->done, F_OK) == 0, "the workload allocated");
        usleep(200 * 1000);
}

/* At 64 bytes nearly every block is sampled: each then carries the
 * library's mark before it. Their contents, alignment and usable size
 * hold through realloc, in the session and after it, and their frees
 * reach the trace. */
Test(heap, sampled_blocks_of_every_call_stay_whole) {
        struct forks_run r = { 0 };
        snprintf(r.done, sizeof(r.done), "%s/blocks-done", heap_dir);
        r.pid = spawn_workload("blocks", r.done);
        char target[64];
        snprintf(target, sizeof(target), "pid: %d", (int) r.pid);
        char *cfg = heap_config(target, "sampling_interval_bytes: 64 block_client: true");
        struct collect c = { .pid = r.pid };
        fixture_record(&inst, ev, "android.heapprofd", cfg, run_blocks, &r, collect_packet, &c);
        free(cfg);
        cr_assert_eq(kill(r.pid, SIGUSR1), 0, "the workload waits for the session's end");
        cr_assert_eq(waitpid(r.pid, &r.status, 0), r.pid);
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
                  "every block held its contents, alignment and usable size (status %d)", r.status);
        uint64_t allocated = 0, freed = 0, frees = 0;
        for (size_t i = 0; i < c.n_sites; i++) {
                allocated += c.sites[i].allocated;
                freed += c.sites[i].freed;
                frees += c.sites[i].free_count;
        }
        cr_log_info("blocks: %llu samples, %llu bytes allocated, %llu freed in %llu frees",
                    (unsigned long long) c.heap_samples, (unsigned long long) allocated, (unsigned long long) freed,
                    (unsigned long long) frees);
        cr_assert_gt(c.heap_samples, 3000, "the blocks were sampled");
        /* A third of the blocks, and the reallocs' old blocks, were freed
         * in the session. */
        cr_assert_gt(frees, 1000, "the frees of sampled blocks were seen");
        cr_assert_lt(freed, allocated);
        collect_free(&c);
}

/* ---- joining and leaving a running process ---- */

static bool ring_mapped(pid_t pid) {
        char path[64], line[512];
        snprintf(path, sizeof(path), "/proc/%d/maps", (int) pid);
        FILE *f = fopen(path, "r");
        bool found = false;
        while (f && fgets(line, sizeof(line), f))
                found |= strstr(line, "traced-heap-ring") != NULL;
        if (f)
                fclose(f);
        return found;
}

struct loop_run {
        pid_t pid;
        char count[600];
        bool mapped_during;
};

static void run_loop(void *userdata) {
        struct loop_run *r = userdata;
        for (int i = 0; i < 100 && !(r->mapped_during = ring_mapped(r->pid)); i++)
                usleep(20 * 1000);
        usleep(500 * 1000);
}

Test(heap, joins_a_running_process_and_leaves_it) {
        struct loop_run r = { 0 };
        snprintf(r.count, sizeof(r.count), "%s/count", heap_dir);
        r.pid = spawn_workload("loop", r.count);
        cr_assert(wait_file(r.count, 10000), "the workload runs");
        cr_assert(!ring_mapped(r.pid), "no ring before a session");
        char target[64];
        snprintf(target, sizeof(target), "pid: %d", (int) r.pid);
        char *cfg = heap_config(target, "sampling_interval_bytes: 4096");
        struct collect c = { .pid = r.pid };
        fixture_record(&inst, ev, "android.heapprofd", cfg, run_loop, &r, collect_packet, &c);
        free(cfg);
        cr_assert(r.mapped_during, "the running process joined the session");
        cr_assert_gt(c.heap_samples, 0, "and was profiled");
        /* After the session, it leaves at its next call: its ring goes. */
        bool gone = false;
        for (int i = 0; i < 100 && !(gone = !ring_mapped(r.pid)); i++)
                usleep(20 * 1000);
        cr_assert(gone, "the process left the ended session");
        unsigned long before = read_count(r.count);
        usleep(300 * 1000);
        cr_assert(alive(r.pid) && read_count(r.count) > before, "and runs on");
        stop_workload(r.pid);
        collect_free(&c);
}

/* ---- a second session ---- */

/* The inode of the process's ring (its memfd, in /proc/PID/maps); 0: none. */
static unsigned long ring_inode(pid_t pid) {
        char path[64], line[512];
        snprintf(path, sizeof(path), "/proc/%d/maps", (int) pid);
        FILE *f = fopen(path, "r");
        unsigned long inode = 0;
        while (f && fgets(line, sizeof(line), f))
                if (strstr(line, "traced-heap-ring") && sscanf(line, "%*s %*s %*s %*s %lu", &inode) == 1)
                        break;
        if (f)
                fclose(f);
        return inode;
}

struct second_run {
        struct loop_run loop;
        unsigned long before, after;
};

static void run_second_session(void *userdata) {
        struct second_run *r = userdata;
        for (int i = 0; i < 100 && !(r->before = ring_inode(r->loop.pid)); i++)
                usleep(20 * 1000);
        /* Another session of the plugin starts (it bumps the generation
         * every process watches) and ends. */
        struct test_consumer other;
        cr_assert_eq(test_consumer_connect(&other, ev, inst.consumer_path), 0);
        fixture_enable_text(&other, "buffers { size_kb: 1024 }\n"
                                    "data_sources { config { name: \"android.heapprofd\" heapprofd_config {\n"
                                    "  process_cmdline: \"no-such-program\" } } }\n",
                            -EBADF);
        spin_ms(ev, 500);
        r->after = ring_inode(r->loop.pid);
        test_consumer_free(&other);
        spin_ms(ev, 300);
}

Test(heap, another_session_leaves_a_process_its_ring) {
        struct second_run r = { 0 };
        snprintf(r.loop.count, sizeof(r.loop.count), "%s/count", heap_dir);
        r.loop.pid = spawn_workload("loop", r.loop.count);
        cr_assert(wait_file(r.loop.count, 10000), "the workload runs");
        char target[64];
        snprintf(target, sizeof(target), "pid: %d", (int) r.loop.pid);
        char *cfg = heap_config(target, "sampling_interval_bytes: 4096");
        struct collect c = { .pid = r.loop.pid };
        fixture_record(&inst, ev, "android.heapprofd", cfg, run_second_session, &r, collect_packet, &c);
        free(cfg);
        cr_assert_neq(r.before, 0, "the process joined the first session");
        cr_assert_eq(r.after, r.before, "it kept its ring while another session started (%lu, then %lu)", r.before,
                     r.after);
        cr_assert_gt(c.heap_samples, 0);
        stop_workload(r.loop.pid);
        collect_free(&c);
}

/* ---- a killed plugin host ---- */

static void run_kill_host(void *userdata) {
        struct loop_run *r = userdata;
        for (int i = 0; i < 100 && !(r->mapped_during = ring_mapped(r->pid)); i++)
                usleep(20 * 1000);
        pid_t host = fixture_plugin_host_pid(&inst, "heap");
        cr_assert_gt(host, 0, "the heap plugin's host runs");
        cr_assert_eq(kill(host, SIGKILL), 0);
        unsigned long before = read_count(r->count);
        sleep(2);
        cr_assert(alive(r->pid), "the profiled process outlived the plugin");
        cr_assert_gt(read_count(r->count), before + 10, "and kept running (%lu rounds before)", before);
}

Test(heap, a_killed_host_leaves_the_process_running) {
        struct loop_run r = { 0 };
        snprintf(r.count, sizeof(r.count), "%s/count", heap_dir);
        r.pid = spawn_workload("loop", r.count);
        cr_assert(wait_file(r.count, 10000), "the workload runs");
        char target[64];
        snprintf(target, sizeof(target), "pid: %d", (int) r.pid);
        /* A small ring and a blocking client: the worst case for a plugin
         * that is gone. */
        char *cfg = heap_config(target, "sampling_interval_bytes: 64 shmem_size_bytes: 65536 block_client: true "
                                        "block_client_timeout_us: 100000");
        struct collect c = { .pid = r.pid };
        fixture_record(&inst, ev, "android.heapprofd", cfg, run_kill_host, &r, collect_packet, &c);
        free(cfg);
        cr_assert(r.mapped_during, "the process joined the session");
        cr_assert(alive(r.pid));
        stop_workload(r.pid);
        collect_free(&c);
}

/* ---- a bad config ---- */

static void nothing(void *userdata) {
        (void) userdata;
}

Test(heap, a_config_naming_no_process_is_refused) {
        struct collect c = { .pid = -1 };
        char *cfg = heap_config("sampling_interval_bytes: 4096", NULL);
        unsigned before = fixture_log_count(&inst, "android.heapprofd", "no process named");
        fixture_record(&inst, ev, "android.heapprofd", cfg, nothing, NULL, collect_packet, &c);
        free(cfg);
        cr_assert_gt(fixture_log_count(&inst, "android.heapprofd", "no process named"), before,
                     "the plugin said what is wrong");
        cr_assert_eq(c.dumps, 0);
        collect_free(&c);
}
