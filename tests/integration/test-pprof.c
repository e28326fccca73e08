/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl report --pprof on recordings of the real traced with this
 * build's linux.perf and linux.bpf_stack plugins, of a program built -O2
 * -g (tests/pprof/inlined.c): the profile keeps profile.proto's rules
 * (pprof-check.h) and go tool pprof reads it; its top functions and self
 * counts are report's; leaf locations carry file and line, and the
 * inlined function is a line of its caller's location. Then the program
 * stripped, its debug file served by a real debuginfod on a loopback
 * port: frames named and lines found only when the user opts in. */

#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"
#include "pprof-check.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;
static pid_t server = -1;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        if (server > 0) {
                kill(server, SIGTERM);
                waitpid(server, NULL, 0);
                server = -1;
        }
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(pprof, .init = setup, .fini = teardown, .timeout = 180);

#define SKIP(...)                                                                                                      \
        do {                                                                                                           \
                teardown();                                                                                            \
                cr_skip_test(__VA_ARGS__);                                                                             \
        } while (0)

static bool perf_usable(void) {
        struct perf_event_attr a = {
                .size = sizeof(a),
                .type = PERF_TYPE_SOFTWARE,
                .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_period = 1000000,
                .disabled = 1,
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

static bool bpf_usable(void) {
        libbpf_set_print(quiet);
        return access("/sys/kernel/btf/vmlinux", R_OK) == 0 &&
               libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) == 1 &&
               libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
}

static bool have_go(void) {
        return system("go version >/dev/null 2>&1") == 0;
}

struct run {
        const char *argv[4];
        pid_t pid;
};

static void run_and_wait(void *userdata) {
        struct run *r = userdata;
        int e = posix_spawn(&r->pid, r->argv[0], NULL, NULL, (char *const *) r->argv, environ);
        cr_assert_eq(e, 0, "%s: %s", r->argv[0], strerror(e));
        int status;
        cr_assert_eq(waitpid(r->pid, &status, 0), r->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s ran", r->argv[0]);
        usleep(300 * 1000);
}

static void nothing(const Perfetto__Protos__TracePacket *p, void *userdata) {
}

/* Runs the program once linux.perf's instance opened its events. */
static void run_once_perf_ready(void *userdata) {
        cr_assert(fixture_wait_log(&inst, ev, "linux.perf instance ", " CPUs, frequency ", 0, 60000),
                  "the linux.perf instance never started");
        run_and_wait(userdata);
}

/* Runs the program once linux.bpf_stack's instance is set up (loading the
 * BPF programs takes a while; what runs before is not recorded). */
static void run_once_bpf_ready(void *userdata) {
        cr_assert(fixture_wait_log(&inst, ev, "linux.bpf_stack instance ", ": on-CPU ", 0, 60000),
                  "the linux.bpf_stack instance was never set up");
        run_and_wait(userdata);
}

static void record_perf(const char *program, struct run *r) {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "buffers { size_kb: 65536 }\n"
                 "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
                 "  timebase { frequency: 499 counter: SW_CPU_CLOCK }\n"
                 "  callstack_sampling { scope { target_cmdline: \"%s\" } kernel_frames: false\n"
                 "    user_frames: UNWIND_FRAME_POINTER }\n"
                 "} } }\n"
                 "write_into_file: true file_write_period_ms: 250\n",
                 program);
        char bin[512];
        snprintf(bin, sizeof(bin), "%s/%s", PPROF_TEST_BIN_DIR, program);
        *r = (struct run){.argv = {strdup(bin), "2", NULL}};
        fixture_record(&inst, ev, "linux.perf", cfg, run_once_perf_ready, r, nothing, NULL);
        free((char *) r->argv[0]);
}

/* Runs a shell command line (tracectl's path as $T, the trace as $F): its
 * exit code; its stdout and stderr in *ret_out and *ret_err (if not NULL). */
static int run(const char *line, char **ret_out, char **ret_err) {
        char *cmd, out[512], err[512];
        snprintf(out, sizeof(out), "%s/cmd.out", inst.dir);
        snprintf(err, sizeof(err), "%s/cmd.err", inst.dir);
        cr_assert_gt(asprintf(&cmd, "%s >%s 2>%s", line, out, err), 0);
        int st = system(cmd);
        free(cmd);
        const char *paths[] = {out, err};
        char **rets[] = {ret_out, ret_err};
        for (int i = 0; i < 2; i++) {
                FILE *f = fopen(paths[i], "re");
                cr_assert_not_null(f);
                char *text = NULL;
                size_t size = 0;
                FILE *m = open_memstream(&text, &size);
                char buf[4096];
                size_t n;
                while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                        fwrite(buf, 1, n, m);
                fclose(m);
                fclose(f);
                unlink(paths[i]);
                if (rets[i])
                        *rets[i] = text;
                else
                        free(text);
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int sh(const char *env, const char *args, char **ret_out, char **ret_err) {
        char *line;
        cr_assert_gt(asprintf(&line, "%s %s %s %s/recorded.pftrace", env ? env : "", TRACECTL_BINARY, args, inst.dir),
                     0);
        int rc = run(line, ret_out, ret_err);
        free(line);
        return rc;
}

static void pprof_of(const char *env, const char *args, struct pp_profile *pp, char **ret_err) {
        char *a, *err, pb[512];
        snprintf(pb, sizeof(pb), "%s/profile.pb.gz", inst.dir);
        cr_assert_gt(asprintf(&a, "report %s --pprof %s", args, pb), 0);
        int rc = sh(env, a, NULL, &err);
        cr_assert_eq(rc, 0, "tracectl %s: exit %d\n%s", a, rc, err);
        free(a);
        cr_log_info("%s", err);
        cr_assert_eq(pp_read(pb, pp), 0);
        const char *bad = pp_check(pp);
        cr_assert_null(bad, "the profile breaks pprof's rules: %s", bad);
        if (have_go()) {
                char *cmd;
                cr_assert_gt(asprintf(&cmd, "go tool pprof -raw -symbolize=none %s >/dev/null", pb), 0);
                cr_assert_eq(system(cmd), 0, "go tool pprof cannot read the profile: %s", cmd);
                free(cmd);
        } else
                cr_log_warn("go tool pprof is not installed (tools/install-deps.sh installs golang-go)");
        if (!getenv("PPROF_KEEP"))
                unlink(pb);
        if (ret_err)
                *ret_err = err;
        else
                free(err);
}

static const char *function_of(const struct pp_profile *pp, const struct pp_location *l, size_t i,
                               const char **ret_file) {
        const struct pp_function *f = i < l->n_lines ? pp_function(pp, l->lines[i].function_id) : NULL;
        if (ret_file)
                *ret_file = f ? pp_string(pp, f->filename) : NULL;
        return f ? pp_string(pp, f->name) : NULL;
}

/* Leaf locations with file and line, of the samples; and whether one
 * location holds pp_mix inlined into pp_hot. */
static void check_lines(const struct pp_profile *pp, double *ret_with_lines, bool *ret_inlined) {
        int col = pp_sample_type(pp, "samples");
        cr_assert_geq(col, 0);
        int64_t all = 0, lined = 0;
        *ret_inlined = false;
        for (size_t i = 0; i < pp->n_samples; i++) {
                const struct pp_sample *s = &pp->samples[i];
                if (s->n_locations == 0)
                        continue;
                const struct pp_location *l = pp_location(pp, s->location_ids[0]);
                const char *file = NULL;
                (void) function_of(pp, l, 0, &file);
                all += s->values[col];
                if (l->n_lines && l->lines[0].line > 0 && file && file[0])
                        lined += s->values[col];
                if (l->n_lines >= 2 && strcmp(function_of(pp, l, 0, NULL), "pp_mix") == 0 &&
                    strcmp(function_of(pp, l, 1, NULL), "pp_hot") == 0 && strstr(file, "inlined.c"))
                        *ret_inlined = true;
        }
        cr_assert_gt(all, 0);
        *ret_with_lines = (double) lined / (double) all;
}

/* report's "by self" table of the process: function -> self samples. */
struct flat {
        char name[128];
        long long n;
};

static size_t report_self(const char *text, struct flat *v, size_t max) {
        const char *s = strstr(text, "# by self\n");
        cr_assert_not_null(s, "%s", text);
        s = strchr(strchr(s, '\n') + 1, '\n') + 1;
        size_t n = 0;
        while (n < max && s && *s && *s != '#') {
                double a, b;
                unsigned long long self, total;
                if (sscanf(s, " %lf%% %llu %lf%% %llu %127s", &a, &self, &b, &total, v[n].name) == 5 && self)
                        v[n++].n = (long long) self;
                s = strchr(s, '\n');
                s = s ? s + 1 : NULL;
        }
        return n;
}

static long long pprof_flat(const struct pp_profile *pp, const char *function) {
        int col = pp_sample_type(pp, "samples");
        long long n = 0;
        for (size_t i = 0; i < pp->n_samples; i++) {
                const struct pp_location *l = pp_location(pp, pp->samples[i].location_ids[0]);
                /* pprof's flat: the innermost line's function */
                const char *f = l->n_lines ? function_of(pp, l, 0, NULL) : NULL;
                if (f && strcmp(f, function) == 0)
                        n += pp->samples[i].values[col];
        }
        return n;
}

Test(pprof, perf_lines_inlines_and_report_counts) {
        if (!perf_usable())
                SKIP("perf_event_open is not available here");
        struct run r;
        record_perf("inlined", &r);
        char args[512], *out;
        snprintf(args, sizeof(args), "--no-debuginfod --pid %d", (int) r.pid);
        struct pp_profile pp;
        pprof_of(NULL, args, &pp, NULL);
        double with_lines;
        bool inlined;
        cr_assert_gt(pp.n_samples, 0);
        check_lines(&pp, &with_lines, &inlined);
        cr_log_info("%.1f %% of the samples' leaf locations have file and line", 100 * with_lines);
        cr_assert_geq(with_lines, 0.95, "only %.1f %% of leaf locations have file and line", 100 * with_lines);
        cr_assert(inlined, "no location holds pp_mix inlined into pp_hot as two lines");
        for (size_t i = 0; i < pp.n_mappings; i++)
                if (strstr(pp_string(&pp, pp.mappings[i].filename), "/inlined")) {
                        cr_assert(pp.mappings[i].has_line_numbers && pp.mappings[i].has_inline_frames);
                        cr_assert_neq(pp.mappings[i].build_id, 0, "the mapping keeps its build ID");
                }

        /* What pprof counts as a function's own (its innermost line) is
         * what report counts: report too shows the inlined function. */
        snprintf(args, sizeof(args), "report --no-debuginfod --top 10 --pid %d", (int) r.pid);
        cr_assert_eq(sh(NULL, args, &out, NULL), 0);
        struct flat v[10];
        size_t n = report_self(out, v, 10);
        cr_assert_gt(n, 0, "%s", out);
        cr_assert_str_eq(v[0].name, "pp_mix", "%s", out);
        for (size_t i = 0; i < n; i++)
                if (!strstr(v[i].name, "+0x")) /* not symbolized: an address to pprof */
                        cr_assert_eq(pprof_flat(&pp, v[i].name), v[i].n, "%s: report %lld self samples, pprof %lld",
                                     v[i].name, v[i].n, pprof_flat(&pp, v[i].name));
        pp_free(&pp);
        if (have_go()) {
                /* and go tool pprof -top's own table */
                char *top;
                snprintf(args, sizeof(args), "report --no-debuginfod --pid %d --pprof %s/top.pb.gz", (int) r.pid,
                         inst.dir);
                cr_assert_eq(sh(NULL, args, NULL, NULL), 0);
                snprintf(args, sizeof(args),
                         "go tool pprof -top -nodecount=1000 -nodefraction=0 -edgefraction=0 -symbolize=none "
                         "%s/top.pb.gz",
                         inst.dir);
                cr_assert_eq(run(args, &top, NULL), 0);
                snprintf(args, sizeof(args), "%s/top.pb.gz", inst.dir);
                unlink(args);
                for (size_t i = 0; i < n; i++) {
                        if (strstr(v[i].name, "+0x"))
                                continue;
                        const char *at = strstr(top, v[i].name);
                        cr_assert_not_null(at, "%s is not in go tool pprof -top:\n%s", v[i].name, top);
                        const char *line = at;
                        while (line > top && line[-1] != '\n')
                                line--;
                        long long flat = strtoll(line, NULL, 10);
                        cr_assert_eq(flat, v[i].n, "%s: report %lld, go tool pprof -top %lld:\n%s", v[i].name, v[i].n,
                                     flat, top);
                }
                free(top);
        }
        free(out);
}

Test(pprof, bpf_stack_on_and_off_cpu) {
        if (!bpf_usable())
                SKIP("BPF perf_event programs, ring buffers or BTF are not available here");
        char bin[512];
        snprintf(bin, sizeof(bin), "%s/inlined", PPROF_TEST_BIN_DIR);
        struct run r = {.argv = {bin, "2", "sleep", NULL}};
        fixture_record(&inst, ev, "linux.bpf_stack",
                       "buffers { size_kb: 65536 }\n"
                       "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config {\n"
                       "  frequency: 199 filter: \"comm=inlined\"\n"
                       "} } }\n"
                       "write_into_file: true file_write_period_ms: 250\n",
                       run_once_bpf_ready, &r, nothing, NULL);
        char args[128];
        snprintf(args, sizeof(args), "--no-debuginfod --pid %d", (int) r.pid);
        struct pp_profile pp;
        pprof_of(NULL, args, &pp, NULL);
        int on = pp_sample_type(&pp, "samples"), cpu = pp_sample_type(&pp, "cpu"),
            off = pp_sample_type(&pp, "off_cpu_samples"), blocked = pp_sample_type(&pp, "off_cpu");
        cr_assert(on >= 0 && cpu >= 0 && off >= 0 && blocked >= 0, "sample types: %d %d %d %d", on, cpu, off, blocked);
        int64_t sum[4] = {};
        for (size_t i = 0; i < pp.n_samples; i++) {
                const struct pp_sample *s = &pp.samples[i];
                sum[0] += s->values[on];
                sum[1] += s->values[cpu];
                sum[2] += s->values[off];
                sum[3] += s->values[blocked];
                int64_t pid;
                cr_assert(pp_label_num(&pp, s, "pid", &pid) && pid == r.pid);
                cr_assert_str_eq(pp_label_str(&pp, s, "process"), "inlined");
                cr_assert_not_null(pp_label_str(&pp, s, "thread"));
        }
        cr_log_info("on-CPU %lld samples, %lld ns; off-CPU %lld samples, %lld ns", (long long) sum[0],
                    (long long) sum[1], (long long) sum[2], (long long) sum[3]);
        cr_assert_gt(sum[0], 0);
        cr_assert_eq(sum[1], sum[0] * (1000000000 / 199), "CPU time is samples times the period");
        cr_assert_gt(sum[2], 0);
        /* about half of 2 s asleep, in 10 ms naps */
        cr_assert_gt(sum[3], 200000000, "off-CPU time: %lld ns", (long long) sum[3]);
        pp_free(&pp);
}

/* --- debuginfod ------------------------------------------------------------ */

static int free_port(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        cr_assert_eq(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
        cr_assert_eq(getsockname(fd, (struct sockaddr *) &a, &len), 0);
        close(fd);
        return ntohs(a.sin_port);
}

/* The HTTP status of GET path on 127.0.0.1:port, 0 when not answered. */
static int http_status(int port, const char *path) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        struct sockaddr_in a = {
                .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int status = 0;
        if (connect(fd, (struct sockaddr *) &a, sizeof(a)) == 0) {
                char req[512], buf[256] = "";
                int k = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
                if (write(fd, req, (size_t) k) == k && read(fd, buf, sizeof(buf) - 1) > 0)
                        (void) sscanf(buf, "HTTP/%*s %d", &status);
        }
        close(fd);
        return status;
}

static void build_id_of(const char *path, char *buf, size_t size) {
        char *cmd;
        cr_assert_gt(asprintf(&cmd, "readelf -n %s | sed -n 's/.*Build ID: //p'", path), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        cr_assert_not_null(fgets(buf, (int) size, p));
        buf[strcspn(buf, "\n")] = 0;
        pclose(p);
        free(cmd);
        cr_assert_gt(strlen(buf), 8);
}

Test(pprof, debuginfod_names_a_stripped_program) {
        if (!perf_usable())
                SKIP("perf_event_open is not available here");
        if (access("/usr/bin/debuginfod", X_OK) < 0)
                SKIP("debuginfod is not installed (tools/install-deps.sh installs it)");
        struct run r;
        record_perf("inlined-stripped", &r);
        char args[512], env[1024], *out, *err;

        /* Not opted in: the frames of the stripped program stay unnamed,
         * even with DEBUGINFOD_URLS pointing somewhere and --no-debuginfod. */
        snprintf(args, sizeof(args), "report --no-debuginfod --pid %d", (int) r.pid);
        cr_assert_eq(sh("DEBUGINFOD_URLS=http://127.0.0.1:1", args, &out, &err), 0, "%s", err);
        cr_assert_null(strstr(out, "pp_hot"), "%s", out);
        cr_assert_not_null(strstr(out, "inlined-stripped+0x"), "%s", out);
        free(out);
        free(err);

        /* The server: the debug file alone, in a directory of its own. */
        int port = free_port();
        char dir[512], db[512], port_s[16], bid[256], path[512];
        snprintf(dir, sizeof(dir), "%s/debug", PPROF_TEST_BIN_DIR);
        snprintf(db, sizeof(db), "%s/debuginfod.sqlite", inst.dir);
        snprintf(port_s, sizeof(port_s), "%d", port);
        const char *argv[] = {"/usr/bin/debuginfod", "-F", "-p", port_s, "-d", db, "-t", "0", "-g", "0", dir, NULL};
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        int e = posix_spawn(&server, argv[0], &fa, NULL, (char *const *) argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(e, 0, "debuginfod: %s", strerror(e));
        snprintf(path, sizeof(path), "%s/inlined-stripped", PPROF_TEST_BIN_DIR);
        build_id_of(path, bid, sizeof(bid));
        snprintf(path, sizeof(path), "/buildid/%s/debuginfo", bid);
        int status = 0;
        for (int i = 0; i < 600 && status != 200; i++) {
                status = http_status(port, path);
                if (status != 200)
                        usleep(100 * 1000);
        }
        cr_assert_eq(status, 200, "debuginfod on port %d did not serve %s within 60 s", port, path);

        /* Opted in: named, with lines and the inlined function. */
        snprintf(env, sizeof(env), "DEBUGINFOD_CACHE_PATH=%s/debuginfod-cache", inst.dir);
        snprintf(args, sizeof(args), "report --debuginfod=http://127.0.0.1:%d --pid %d", port, (int) r.pid);
        cr_assert_eq(sh(env, args, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "pp_hot"), "%s\n%s", out, err);
        cr_assert_not_null(strstr(err, "1 files from debuginfod"), "%s", err);
        free(out);
        free(err);
        /* The same through DEBUGINFOD_URLS, as elfutils documents it. */
        snprintf(env, sizeof(env), "DEBUGINFOD_CACHE_PATH=%s/debuginfod-cache2 DEBUGINFOD_URLS=http://127.0.0.1:%d",
                 inst.dir, port);
        struct pp_profile pp;
        snprintf(args, sizeof(args), "--pid %d", (int) r.pid);
        pprof_of(env, args, &pp, NULL);
        double with_lines;
        bool inlined;
        check_lines(&pp, &with_lines, &inlined);
        cr_log_info("with debuginfod: %.1f %% of leaf locations have file and line", 100 * with_lines);
        cr_assert_geq(with_lines, 0.95);
        cr_assert(inlined);
        pp_free(&pp);

        /* A server that does not answer: the report still comes, says so. */
        kill(server, SIGTERM);
        waitpid(server, NULL, 0);
        server = -1;
        snprintf(env, sizeof(env), "DEBUGINFOD_CACHE_PATH=%s/debuginfod-cache3", inst.dir);
        snprintf(args, sizeof(args), "report --debuginfod=http://127.0.0.1:%d --debuginfod-timeout 5 --pid %d", port,
                 (int) r.pid);
        cr_assert_eq(sh(env, args, &out, &err), 0, "%s", err);
        cr_assert_null(strstr(out, "pp_hot"), "%s", out);
        cr_assert_not_null(strstr(err, "debuginfod server failed or timed out"), "%s", err);
        free(out);
        free(err);
        char rm[4096];
        snprintf(rm, sizeof(rm), "rm -rf %s/debuginfod-cache %s/debuginfod-cache2 %s/debuginfod-cache3 %s*", inst.dir,
                 inst.dir, inst.dir, db);
        cr_assert_eq(system(rm), 0);
}
