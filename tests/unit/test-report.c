/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tracectl report, print and summary: the upstream traced_perf trace against
 * golden outputs, folded stacks parsed back, the SVG parsed as XML, a
 * million-sample trace in bounded memory, synthetic traces written with the
 * generated protobuf code for the filters, off-CPU weights, compact sched
 * and kernel thread names, and empty or truncated files.
 */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "perfetto/trace/trace_packet.pb-c.h"
#include "tools/tracectl/profile.h"
#include "tools/tracectl/summary.h"
#include "tools/tracectl/trace-reader.h"
#include "pprof-check.h"
#include "test-scratch.h"

#define PERF_TRACE TEST_DATA_DIR "/profiling/trace-perf-python3.pftrace"
#define TRACECTL TOP_BUILDDIR "/tracectl"

/* ---- helpers ------------------------------------------------------------ */

static char *slurp_text(const char *path) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));
        char *buf = NULL;
        size_t cap = 0, len = 0;
        for (;;) {
                if (cap - len < 4096) {
                        cap = cap ? cap * 2 : 65536;
                        buf = realloc(buf, cap + 1);
                        cr_assert_not_null(buf);
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
        }
        fclose(f);
        buf[len] = 0;
        return buf;
}

static void load(struct profile *p, const char *path, const struct profile_filter *flt) {
        struct trace_reader rd;
        cr_assert_eq(trace_reader_open(&rd, path), 0, "cannot open %s", path);
        profile_init(p, flt);
        const uint8_t *data;
        size_t len;
        int r;
        while ((r = trace_reader_next(&rd, &data, &len)) > 0)
                cr_assert_eq(profile_add_packet(p, data, len), 0);
        cr_assert_eq(r, 0, "%s is damaged", path);
        trace_reader_close(&rd);
        profile_finish(p);
}

/* Runs a report output into a string. */
static char *render(struct profile *p, int (*fn)(FILE *, struct profile *, const struct report_options *),
                    const struct report_options *o) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cr_assert_not_null(f);
        cr_assert_geq(fn(f, p, o), 0);
        fclose(f);
        return buf;
}

static int folded_fn(FILE *f, struct profile *p, const struct report_options *o) {
        (void) o;
        return report_folded(f, p);
}

static void write_packet(FILE *f, const Perfetto__Protos__TracePacket *p) {
        uint8_t stack[512];
        size_t n = perfetto__protos__trace_packet__get_packed_size(p);
        uint8_t *b = n <= sizeof(stack) ? stack : malloc(n);
        cr_assert_not_null(b);
        perfetto__protos__trace_packet__pack(p, b);
        uint8_t hdr[11] = { 0x0a };
        size_t h = 1;
        for (size_t v = n;; v >>= 7) {
                hdr[h++] = (uint8_t) ((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                if (v < 0x80)
                        break;
        }
        cr_assert_eq(fwrite(hdr, 1, h, f), h);
        cr_assert_eq(fwrite(b, 1, n, f), n);
        if (b != stack)
                free(b);
}

/* The files of a test (traces it writes, tracectl's output) go in one
 * directory, made on first use and removed by the suites' .fini whether
 * the test passed or not. */
static char scratch[256];

static void remove_scratch(void) {
        cr_expect_eq(test_scratch_remove(scratch), 0, "could not remove %s", scratch);
        scratch[0] = '\0';
}

TestSuite(report, .fini = remove_scratch);
TestSuite(print, .fini = remove_scratch);
TestSuite(summary, .fini = remove_scratch);

static char *tmp_path(const char *name) {
        if (!scratch[0]) {
                int r = test_mkdtemp(scratch, sizeof(scratch), "test-report-");
                cr_assert_eq(r, 0, "%s", strerror(-r));
        }
        char *p;
        cr_assert_geq(asprintf(&p, "%s/%s", scratch, name), 0);
        return p;
}

/* Runs tracectl with args; returns its exit code, with stdout and stderr. */
static int run_tracectl(const char *args, char **ret_out, char **ret_err) {
        char *out = tmp_path("out"), *err = tmp_path("err"), *cmd;
        cr_assert_geq(asprintf(&cmd, "%s %s >%s 2>%s", TRACECTL, args, out, err), 0);
        int st = system(cmd);
        cr_assert(WIFEXITED(st), "%s did not exit", cmd);
        *ret_out = slurp_text(out);
        *ret_err = slurp_text(err);
        unlink(out);
        unlink(err);
        free(out);
        free(err);
        free(cmd);
        return WEXITSTATUS(st);
}

/* ---- a synthetic profile ------------------------------------------------ */

/* One sequence: app (main -> work -> spin | unsymbolized | spin -> kernel)
 * on- or off-CPU. */
enum { FN_MAIN = 1, FN_WORK, FN_SPIN, FN_KERNEL };
enum { CS_SPIN = 1, CS_UNSYM, CS_KERNEL };

/* The kernel's mapping: perf tools call it "[kernel.kallsyms]", upstream
 * traced_perf "kernel". */
static const char *kernel_mapping = "[kernel.kallsyms]";

static void write_profile_header(FILE *f, uint32_t seq, bool off_cpu) {
        Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__TracePacketDefaults d = PERFETTO__PROTOS__TRACE_PACKET_DEFAULTS__INIT;
        Perfetto__Protos__PerfSampleDefaults psd = PERFETTO__PROTOS__PERF_SAMPLE_DEFAULTS__INIT;
        Perfetto__Protos__PerfEvents__Timebase tb = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INIT;
        tb.name = (char *) (off_cpu ? "bpfstack off-cpu" : "bpfstack on-cpu");
        tb.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY;
        tb.frequency = 99;
        psd.timebase = &tb;
        d.perf_sample_defaults = &psd;
        p.trace_packet_defaults = &d;
        p.optional_trusted_packet_sequence_id_case =
                PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
        p.trusted_packet_sequence_id = seq;
        p.has_sequence_flags = true;
        p.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;

        Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
        Perfetto__Protos__InternedString s[8], *sp[8];
        const char *paths[] = { "usr", "bin", "app", kernel_mapping };
        for (size_t i = 0; i < 4; i++) {
                s[i] = (Perfetto__Protos__InternedString) PERFETTO__PROTOS__INTERNED_STRING__INIT;
                s[i].iid = i + 1;
                s[i].has_iid = true;
                s[i].has_str = true;
                s[i].str.data = (uint8_t *) paths[i];
                s[i].str.len = strlen(paths[i]);
                sp[i] = &s[i];
        }
        in.mapping_paths = sp;
        in.n_mapping_paths = 4;
        const char *fns[] = { "main", "work", "spin", "do_syscall_64" };
        Perfetto__Protos__InternedString fs[4], *fsp[4];
        for (size_t i = 0; i < 4; i++) {
                fs[i] = (Perfetto__Protos__InternedString) PERFETTO__PROTOS__INTERNED_STRING__INIT;
                fs[i].has_iid = fs[i].has_str = true;
                fs[i].iid = i + 1;
                fs[i].str.data = (uint8_t *) fns[i];
                fs[i].str.len = strlen(fns[i]);
                fsp[i] = &fs[i];
        }
        in.function_names = fsp;
        in.n_function_names = 4;
        static uint8_t bid[4] = { 0xab, 0xcd, 0x01, 0x23 };
        Perfetto__Protos__InternedString b = PERFETTO__PROTOS__INTERNED_STRING__INIT, *bp = &b;
        b.has_iid = b.has_str = true;
        b.iid = 1;
        b.str.data = bid;
        b.str.len = sizeof(bid);
        in.build_ids = &bp;
        in.n_build_ids = 1;
        uint64_t app_path[] = { 1, 2, 3 }, k_path[] = { 4 };
        Perfetto__Protos__Mapping m[2] = { PERFETTO__PROTOS__MAPPING__INIT, PERFETTO__PROTOS__MAPPING__INIT }, *mp[2];
        m[0].has_iid = m[0].has_build_id = true;
        m[0].iid = 1;
        m[0].build_id = 1;
        m[0].path_string_ids = app_path;
        m[0].n_path_string_ids = 3;
        m[1].has_iid = true;
        m[1].iid = 2;
        m[1].path_string_ids = k_path;
        m[1].n_path_string_ids = 1;
        mp[0] = &m[0];
        mp[1] = &m[1];
        in.mappings = mp;
        in.n_mappings = 2;
        Perfetto__Protos__Frame fr[5], *frp[5];
        for (size_t i = 0; i < 5; i++) {
                fr[i] = (Perfetto__Protos__Frame) PERFETTO__PROTOS__FRAME__INIT;
                fr[i].has_iid = fr[i].has_function_name_id = fr[i].has_mapping_id = fr[i].has_rel_pc = true;
                fr[i].iid = i + 1;
                fr[i].mapping_id = 1;
                frp[i] = &fr[i];
        }
        fr[0].function_name_id = FN_MAIN;
        fr[1].function_name_id = FN_WORK;
        fr[2].function_name_id = FN_SPIN;
        fr[3].function_name_id = 0; /* not symbolized */
        fr[3].rel_pc = 0x1234;
        fr[4].function_name_id = FN_KERNEL;
        fr[4].mapping_id = 2;
        in.frames = frp;
        in.n_frames = 5;
        uint64_t c1[] = { 1, 2, 3 }, c2[] = { 1, 2, 4 }, c3[] = { 1, 2, 3, 5 };
        Perfetto__Protos__Callstack cs[3], *csp[3];
        uint64_t *cf[] = { c1, c2, c3 };
        size_t cn[] = { 3, 3, 4 };
        for (size_t i = 0; i < 3; i++) {
                cs[i] = (Perfetto__Protos__Callstack) PERFETTO__PROTOS__CALLSTACK__INIT;
                cs[i].has_iid = true;
                cs[i].iid = i + 1;
                cs[i].frame_ids = cf[i];
                cs[i].n_frame_ids = cn[i];
                csp[i] = &cs[i];
        }
        in.callstacks = csp;
        in.n_callstacks = 3;
        p.interned_data = &in;
        write_packet(f, &p);
}

/* unwind_error: a Profiling.StackUnwindError, or -1 for none. */
static void write_sample_cut(FILE *f, uint32_t seq, uint64_t ts, uint32_t cpu, uint32_t pid, uint32_t tid,
                             uint64_t callstack, uint64_t count, int unwind_error) {
        Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__PerfSample s = PERFETTO__PROTOS__PERF_SAMPLE__INIT;
        s.has_cpu = s.has_pid = s.has_tid = s.has_callstack_iid = true;
        if (unwind_error >= 0) {
                s.optional_unwind_error_case = PERFETTO__PROTOS__PERF_SAMPLE__OPTIONAL_UNWIND_ERROR_UNWIND_ERROR;
                s.unwind_error = (Perfetto__Protos__Profiling__StackUnwindError) unwind_error;
        }
        s.cpu = cpu;
        s.pid = pid;
        s.tid = tid;
        s.callstack_iid = callstack;
        if (count) {
                s.has_timebase_count = true;
                s.timebase_count = count;
        }
        p.perf_sample = &s;
        p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE;
        p.has_timestamp = true;
        p.timestamp = ts;
        p.optional_trusted_packet_sequence_id_case =
                PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
        p.trusted_packet_sequence_id = seq;
        p.has_sequence_flags = true;
        p.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
        write_packet(f, &p);
}

static void write_sample(FILE *f, uint32_t seq, uint64_t ts, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t callstack,
                         uint64_t count) {
        write_sample_cut(f, seq, ts, cpu, pid, tid, callstack, count, -1);
}

static void write_process(FILE *f, int32_t pid, int32_t ppid, const char *cmdline, bool is_comm, int32_t tid,
                          const char *thread_name) {
        Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__ProcessTree t = PERFETTO__PROTOS__PROCESS_TREE__INIT;
        Perfetto__Protos__ProcessTree__Process pr = PERFETTO__PROTOS__PROCESS_TREE__PROCESS__INIT, *prp = &pr;
        Perfetto__Protos__ProcessTree__Thread th = PERFETTO__PROTOS__PROCESS_TREE__THREAD__INIT, *thp = &th;
        char *argv[] = { (char *) cmdline };
        pr.has_pid = pr.has_ppid = true;
        pr.pid = pid;
        pr.ppid = ppid;
        pr.cmdline = argv;
        pr.n_cmdline = 1;
        if (is_comm) {
                pr.has_cmdline_is_comm = true;
                pr.cmdline_is_comm = true;
        }
        t.processes = &prp;
        t.n_processes = 1;
        if (thread_name) {
                th.has_tid = th.has_tgid = true;
                th.tid = tid;
                th.tgid = pid;
                th.name = (char *) thread_name;
                t.threads = &thp;
                t.n_threads = 1;
        }
        p.process_tree = &t;
        p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE;
        p.has_timestamp = true;
        p.timestamp = 1;
        write_packet(f, &p);
}

/* ---- upstream traced_perf: golden outputs ------------------------------- */

static void check_golden(const char *got, const char *golden_name) {
        char *path;
        cr_assert_geq(asprintf(&path, "%s/profiling/%s", TEST_DATA_DIR, golden_name), 0);
        char *want = slurp_text(path);
        if (strcmp(got, want) != 0) {
                char *dump = tmp_path(golden_name);
                FILE *f = fopen(dump, "we");
                if (f) {
                        fputs(got, f);
                        fclose(f);
                }
                cr_assert_fail("output differs from %s; got it in %s (kept when TRACED_TEST_KEEP=1)", path, dump);
        }
        free(want);
        free(path);
}

Test(report, upstream_text_golden) {
        struct profile p;
        load(&p, PERF_TRACE, NULL);
        cr_assert_eq(p.samples, 213);
        cr_assert_eq(p.samples - p.samples_no_stack, 196, "samples with a callstack: %" PRIu64, p.samples - p.samples_no_stack);
        struct report_options o = { .top_n = 20 };
        char *text = render(&p, report_text, &o);
        check_golden(text, "trace-perf-python3.report.txt");
        /* Unsymbolized frames carry module, offset and build id. */
        cr_assert_not_null(strstr(text, "libc.so.6+0x27249 [buildid 93ac61ec5a8eb1396f9fbd350e3169a558528a40]"));
        free(text);
        profile_done(&p);
}

Test(report, upstream_folded_golden_and_parsed_back) {
        struct profile p;
        load(&p, PERF_TRACE, NULL);
        char *folded = render(&p, folded_fn, NULL);
        check_golden(folded, "trace-perf-python3.folded");

        /* Parse it as FlameGraph does: the count after the last space, the
         * frames split on ';', root first. */
        uint64_t sum = 0, eval_self = 0, lines = 0;
        char *save = NULL;
        for (char *line = strtok_r(folded, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *sp = strrchr(line, ' ');
                cr_assert_not_null(sp, "no count in \"%s\"", line);
                char *end;
                unsigned long long n = strtoull(sp + 1, &end, 10);
                cr_assert(*end == 0 && n > 0, "bad count in \"%s\"", line);
                *sp = 0;
                cr_assert(strncmp(line, "python3.11;", 11) == 0, "stack does not start with the comm: \"%s\"", line);
                const char *leaf = strrchr(line, ';');
                cr_assert_not_null(leaf);
                if (strcmp(leaf + 1, "_PyEval_EvalFrameDefault") == 0)
                        eval_self += n;
                sum += n;
                lines++;
        }
        cr_assert_eq(sum, 196, "folded counts add up to %" PRIu64, sum);
        cr_assert_eq(eval_self, 74);
        cr_assert_eq(lines, 24);
        free(folded);
        profile_done(&p);
}

/* ---- SVG ------------------------------------------------------------------ */

static const char *attr(xmlNode *n, const char *name) {
        static char buf[4][1024];
        static int k;
        xmlChar *v = xmlGetProp(n, (const xmlChar *) name);
        if (!v)
                return NULL;
        k = (k + 1) % 4;
        snprintf(buf[k], sizeof(buf[k]), "%s", (const char *) v);
        xmlFree(v);
        return buf[k];
}

static void collect_frames(xmlNode *n, xmlNode **out, size_t *n_out, size_t max) {
        for (; n; n = n->next) {
                if (n->type == XML_ELEMENT_NODE && strcmp((const char *) n->name, "g") == 0) {
                        const char *cls = attr(n, "class");
                        if (cls && strcmp(cls, "f") == 0) {
                                cr_assert_lt(*n_out, max);
                                out[(*n_out)++] = n;
                        }
                }
                collect_frames(n->children, out, n_out, max);
        }
}

static xmlNode *child(xmlNode *n, const char *name) {
        for (xmlNode *c = n->children; c; c = c->next)
                if (c->type == XML_ELEMENT_NODE && strcmp((const char *) c->name, name) == 0)
                        return c;
        return NULL;
}

static void check_svg(bool icicle) {
        struct profile p;
        load(&p, PERF_TRACE, NULL);
        struct report_options o = { .top_n = 20, .icicle = icicle };
        char *svg = render(&p, report_svg, &o);

        /* The distinct prefixes of the folded stacks are the frames. */
        char *folded = render(&p, folded_fn, NULL);
        size_t n_prefixes = 0;
        char **prefixes = NULL;
        char *save = NULL;
        for (char *line = strtok_r(folded, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                *strrchr(line, ' ') = 0;
                for (char *c = line;; c++)
                        if (*c == ';' || *c == 0) {
                                char *pre = strndup(line, (size_t) (c - line));
                                bool seen = false;
                                for (size_t i = 0; i < n_prefixes && !seen; i++)
                                        seen = strcmp(prefixes[i], pre) == 0;
                                if (seen)
                                        free(pre);
                                else {
                                        prefixes = realloc(prefixes, (n_prefixes + 1) * sizeof(char *));
                                        prefixes[n_prefixes++] = pre;
                                }
                                if (*c == 0)
                                        break;
                        }
        }

        xmlDoc *doc = xmlReadMemory(svg, (int) strlen(svg), "flame.svg", NULL, XML_PARSE_NONET);
        cr_assert_not_null(doc, "the SVG is not well-formed XML");
        xmlNode *root = xmlDocGetRootElement(doc);
        cr_assert_str_eq((const char *) root->name, "svg");
        cr_assert_not_null(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\""), "no SVG namespace");
        cr_assert_null(strstr(svg, "<script src"), "fetches a script");
        cr_assert_null(strstr(svg, "href=\"http"), "fetches something");
        xmlNode *frames[4096];
        size_t n = 0;
        collect_frames(root, frames, &n, 4096);
        /* One per frame: every prefix, plus the root ("all"). */
        cr_assert_eq(n, n_prefixes + 1, "%zu frames drawn, %zu distinct stack prefixes + root", n, n_prefixes);
        double total_w = 0;
        uint64_t total_v = 0;
        double root_y = 0;
        for (size_t i = 0; i < n; i++) {
                xmlNode *rect = child(frames[i], "rect"), *title = child(frames[i], "title");
                cr_assert_not_null(rect);
                cr_assert_not_null(title, "a frame without a tooltip");
                if (attr(frames[i], "data-d")[0] == '0' && attr(frames[i], "data-d")[1] == 0) {
                        total_w = strtod(attr(rect, "width"), NULL);
                        total_v = strtoull(attr(frames[i], "data-v"), NULL, 10);
                        root_y = strtod(attr(rect, "y"), NULL);
                }
        }
        cr_assert_eq(total_v, 196);
        cr_assert_float_eq(total_w, 1180.0, 0.01);
        for (size_t i = 0; i < n; i++) {
                xmlNode *rect = child(frames[i], "rect");
                double w = strtod(attr(rect, "width"), NULL), y = strtod(attr(rect, "y"), NULL);
                uint64_t v = strtoull(attr(frames[i], "data-v"), NULL, 10);
                cr_assert_float_eq(w / total_w, (double) v / (double) total_v, 1e-4, "frame %s: width %f for %" PRIu64,
                                   attr(frames[i], "data-name"), w, v);
                long d = strtol(attr(frames[i], "data-d"), NULL, 10);
                cr_assert_float_eq(y, root_y + (icicle ? 16.0 : -16.0) * (double) d, 1e-6);
        }
        /* The sum of the widths of a frame's children is at most its own. */
        xmlFreeDoc(doc);
        for (size_t i = 0; i < n_prefixes; i++)
                free(prefixes[i]);
        free(prefixes);
        free(folded);
        free(svg);
        profile_done(&p);
}

Test(report, svg_one_rect_per_frame_widths_proportional) {
        check_svg(false);
}

Test(report, svg_icicle_top_down) {
        check_svg(true);
}

/* ---- filters, kinds, weights ---------------------------------------------- */

static char *synthetic_profile(void) {
        char *path = tmp_path("synthetic.pftrace");
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        write_process(f, 100, 1, "/usr/bin/app", false, 101, "worker");
        write_profile_header(f, 1, false);
        write_profile_header(f, 2, true);
        uint64_t t0 = 1000000000;
        /* on-CPU: pid 100 tid 100 cpu 0: 6 spin, 2 unsym; tid 101 cpu 1: 3 kernel */
        for (int i = 0; i < 6; i++)
                write_sample(f, 1, t0 + (uint64_t) i * 10000000, 0, 100, 100, CS_SPIN, 0);
        for (int i = 0; i < 2; i++)
                write_sample(f, 1, t0 + 100000000 + (uint64_t) i * 10000000, 0, 100, 100, CS_UNSYM, 0);
        for (int i = 0; i < 3; i++)
                write_sample(f, 1, t0 + 2000000000ull + (uint64_t) i * 10000000, 1, 100, 101, CS_KERNEL, 0);
        /* off-CPU: 2 ms and 5 ms blocked */
        write_sample(f, 2, t0 + 50000000, 0, 100, 100, CS_KERNEL, 2000000);
        write_sample(f, 2, t0 + 60000000, 0, 100, 101, CS_UNSYM, 5000000);
        fclose(f);
        return path;
}

static uint64_t folded_count(const char *folded, const char *stack) {
        uint64_t n = 0;
        size_t k = strlen(stack);
        for (const char *l = folded; l && *l;) {
                const char *e = strchr(l, '\n');
                if (strncmp(l, stack, k) == 0 && l[k] == ' ')
                        n += strtoull(l + k + 1, NULL, 10);
                l = e ? e + 1 : NULL;
        }
        return n;
}

Test(report, filters_and_kinds) {
        char *path = synthetic_profile();
        struct profile p;
        struct profile_filter flt = { .pid = -1, .tid = -1, .cpu = -1 };

        load(&p, path, &flt);
        char *fo = render(&p, folded_fn, NULL);
        cr_assert_eq(folded_count(fo, "app;main;work;spin"), 6, "%s", fo);
        cr_assert_eq(folded_count(fo, "app;main;work;app+0x1234 [buildid abcd0123]"), 2, "%s", fo);
        cr_assert_eq(folded_count(fo, "app;main;work;spin;do_syscall_64"), 3, "%s", fo);
        free(fo);
        profile_done(&p);

        flt.tid = 101;
        load(&p, path, &flt);
        cr_assert_eq(p.tree->nodes[0].total[0], 3);
        profile_done(&p);

        flt.tid = -1;
        flt.cpu = 0;
        load(&p, path, &flt);
        cr_assert_eq(p.tree->nodes[0].total[0], 8);
        profile_done(&p);

        flt.cpu = -1;
        flt.have_since = true;
        flt.since_ns = 1500000000; /* only the kernel samples, 2 s in */
        load(&p, path, &flt);
        cr_assert_eq(p.tree->nodes[0].total[0], 3);
        profile_done(&p);

        flt.have_since = false;
        flt.kernel_only = true;
        load(&p, path, &flt);
        fo = render(&p, folded_fn, NULL);
        cr_assert_eq(folded_count(fo, "app;do_syscall_64"), 3, "%s", fo);
        cr_assert_eq(p.tree->nodes[0].total[0], 3, "samples without kernel frames count: %s", fo);
        cr_assert_eq(p.samples_filtered, 8 + 1); /* and the off-CPU one without kernel frames */
        free(fo);
        profile_done(&p);

        flt.kernel_only = false;
        flt.user_only = true;
        load(&p, path, &flt);
        fo = render(&p, folded_fn, NULL);
        cr_assert_eq(folded_count(fo, "app;main;work;spin"), 9, "%s", fo);
        free(fo);
        profile_done(&p);

        flt.user_only = false;
        flt.comm = "worker";
        load(&p, path, &flt);
        cr_assert_eq(p.tree->nodes[0].total[0], 3);
        profile_done(&p);

        /* Off-CPU: weighted by blocked time, in microseconds when folded. */
        flt.comm = NULL;
        flt.kind = PROFILE_OFF_CPU;
        flt.kind_explicit = true;
        load(&p, path, &flt);
        cr_assert_eq(p.tree->nodes[0].total[1], 7000000);
        fo = render(&p, folded_fn, NULL);
        cr_assert_eq(folded_count(fo, "app;main;work;spin;do_syscall_64"), 2000, "%s", fo);
        cr_assert_eq(folded_count(fo, "app;main;work;app+0x1234 [buildid abcd0123]"), 5000, "%s", fo);
        free(fo);
        struct report_options o = { .top_n = 5 };
        char *text = render(&p, report_text, &o);
        cr_assert_not_null(strstr(text, "off-CPU"), "%s", text);
        cr_assert_not_null(strstr(text, "7.000 ms"), "%s", text);
        free(text);
        profile_done(&p);

        unlink(path);
        free(path);
}

Test(report, upstream_kernel_mapping_is_kernel) {
        kernel_mapping = "kernel";
        char *path = synthetic_profile();
        struct profile p;
        struct profile_filter flt = { .pid = -1, .tid = -1, .cpu = -1, .kernel_only = true };
        load(&p, path, &flt);
        char *fo = render(&p, folded_fn, NULL);
        cr_assert_eq(folded_count(fo, "app;do_syscall_64"), 3, "%s", fo);
        free(fo);
        profile_done(&p);
        unlink(path);
        free(path);
}

Test(report, text_thread_tables) {
        char *path = synthetic_profile();
        char *out, *err, *args;
        cr_assert_geq(asprintf(&args, "report %s", path), 0);
        cr_assert_eq(run_tracectl(args, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "# Process app (pid 100): 11 samples"), "%s", out);
        cr_assert_not_null(strstr(out, "# Thread worker (tid 101) of app (pid 100)"), "%s", out);
        cr_assert_not_null(strstr(err, "2 off-CPU samples"), "%s", err);
        free(out);
        free(err);
        free(args);
        unlink(path);
        free(path);
}

/* ---- a million samples in bounded memory ---------------------------------- */

static long maxrss_kb(void) {
        struct rusage ru;
        cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
        return ru.ru_maxrss;
}

Test(report, million_samples_bounded_memory, .timeout = 600) {
        char *path = tmp_path("million.pftrace");
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        write_profile_header(f, 1, false);
        for (uint32_t i = 0; i < 1000000; i++)
                write_sample(f, 1, 1000000000ull + i * 1000ull, i % 4, 1000 + i % 50, 1000 + i % 200, 1 + i % 3, 0);
        cr_assert_eq(fclose(f), 0);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        long before = maxrss_kb();

        struct profile p;
        load(&p, path, NULL);
        char *fo = render(&p, folded_fn, NULL);
        long after = maxrss_kb();
        cr_assert_eq(p.samples, 1000000);
        cr_assert_eq(p.tree->nodes[0].total[0], 1000000);
        free(fo);
        profile_done(&p);
        unlink(path);
        free(path);

        /* 200 threads x 3 stacks: the tree is a few thousand nodes. Reading
         * the file whole, or keeping anything per sample, would grow the
         * peak by at least the file's size. */
        long grown = after - before;
        cr_log_info("trace %lld kB, peak RSS grew %ld kB", (long long) st.st_size / 1024, grown);
        cr_assert_gt(st.st_size, 16 * 1024 * 1024);
        cr_assert_lt(grown, 8 * 1024, "peak RSS grew by %ld kB reading a %lld kB trace", grown,
                     (long long) st.st_size / 1024);
}

/* ---- print: compact sched ------------------------------------------------- */

static void write_compact(FILE *f, uint32_t cpu, bool lost, size_t n_sw, const uint64_t *sw_ts, const int64_t *sw_state,
                          const int32_t *sw_pid, const uint32_t *sw_comm, size_t n_wk, const uint64_t *wk_ts,
                          const int32_t *wk_pid, const int32_t *wk_cpu, const uint32_t *wk_comm, char **table, size_t n_table) {
        Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__FtraceEventBundle b = PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__INIT;
        Perfetto__Protos__FtraceEventBundle__CompactSched c = PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__COMPACT_SCHED__INIT;
        int32_t prio[16];
        for (size_t i = 0; i < 16; i++)
                prio[i] = 120;
        c.intern_table = table;
        c.n_intern_table = n_table;
        c.switch_timestamp = (uint64_t *) sw_ts;
        c.n_switch_timestamp = n_sw;
        c.switch_prev_state = (int64_t *) sw_state;
        c.n_switch_prev_state = n_sw;
        c.switch_next_pid = (int32_t *) sw_pid;
        c.n_switch_next_pid = n_sw;
        c.switch_next_prio = prio;
        c.n_switch_next_prio = n_sw;
        c.switch_next_comm_index = (uint32_t *) sw_comm;
        c.n_switch_next_comm_index = n_sw;
        c.waking_timestamp = (uint64_t *) wk_ts;
        c.n_waking_timestamp = n_wk;
        c.waking_pid = (int32_t *) wk_pid;
        c.n_waking_pid = n_wk;
        c.waking_target_cpu = (int32_t *) wk_cpu;
        c.n_waking_target_cpu = n_wk;
        c.waking_prio = prio;
        c.n_waking_prio = n_wk;
        c.waking_comm_index = (uint32_t *) wk_comm;
        c.n_waking_comm_index = n_wk;
        b.has_cpu = true;
        b.cpu = cpu;
        if (lost) {
                b.has_lost_events = true;
                b.lost_events = true;
        }
        b.compact_sched = &c;
        p.ftrace_events = &b;
        p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS;
        p.optional_trusted_packet_sequence_id_case =
                PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
        p.trusted_packet_sequence_id = 3;
        write_packet(f, &p);
}

/* cpu 1: idle -> pipe (500) at 1000, pipe sleeps at 3000 (-> idle), and
 * at 9000 pipe sleeps again with no switch in recorded; cpu 0 woke it
 * onto cpu 1 at 6000, a bundle later in the file. */
static char *compact_trace(void) {
        char *path = tmp_path("compact.pftrace");
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        write_process(f, 500, 1, "/usr/bin/pipe", false, 500, "pipe");
        char *table1[] = { (char *) "swapper/1", (char *) "pipe" };
        uint64_t sw_ts[] = { 1000, 2000, 6000 }; /* deltas: 1000, 3000, 9000 */
        int64_t sw_state[] = { 0, 1, 1 };
        int32_t sw_pid[] = { 500, 0, 0 };
        uint32_t sw_comm[] = { 1, 0, 0 };
        write_compact(f, 1, false, 3, sw_ts, sw_state, sw_pid, sw_comm, 0, NULL, NULL, NULL, NULL, table1, 2);
        char *table0[] = { (char *) "pipe" };
        uint64_t wk_ts[] = { 6000 };
        int32_t wk_pid[] = { 500 }, wk_cpu[] = { 1 };
        uint32_t wk_comm[] = { 0 };
        write_compact(f, 0, false, 0, NULL, NULL, NULL, NULL, 1, wk_ts, wk_pid, wk_cpu, wk_comm, table0, 1);
        fclose(f);
        return path;
}

Test(print, compact_sched_one_line_per_event) {
        char *path = compact_trace(), *out, *err, *args;
        cr_assert_geq(asprintf(&args, "print %s", path), 0);
        cr_assert_eq(run_tracectl(args, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "cpu 1, 3 events (3 switches, 0 wakings compact)"), "%s", out);
        cr_assert_not_null(strstr(out, "         1000 cpu 1 sched_switch prev_comm=? prev_pid=? prev_state=R ==> "
                                       "next_comm=pipe next_pid=500 next_prio=120\n"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "         3000 cpu 1 sched_switch prev_comm=pipe prev_pid=500 prev_state=S ==> "
                                       "next_comm=swapper/1 next_pid=0 next_prio=120\n"),
                           "%s", out);
        /* idle does not sleep: whoever left was switched in unrecorded */
        cr_assert_not_null(strstr(out, "         9000 cpu 1 sched_switch prev_comm=? prev_pid=? prev_state=S ==> "
                                       "next_comm=swapper/1 next_pid=0 next_prio=120\n"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "         6000 cpu 0 sched_waking comm=pipe pid=500 prio=120 target_cpu=1\n"), "%s", out);
        cr_assert_null(strstr(out, "0 events, compact sched"));
        free(out);
        free(err);
        free(args);
        unlink(path);
        free(path);
}

/* ---- summary ------------------------------------------------------------- */

static void summarise(const char *path, struct summary *s) {
        struct trace_reader rd;
        cr_assert_eq(trace_reader_open(&rd, path), 0);
        summary_init(s);
        const uint8_t *data;
        size_t len;
        while (trace_reader_next(&rd, &data, &len) > 0)
                summary_add_packet(s, data, len);
        trace_reader_close(&rd);
        summary_finish(s);
}

Test(summary, switch_in_not_recorded_timed_from_waking) {
        char *path = compact_trace();
        struct summary s;
        summarise(path, &s);
        /* 1000..3000 switched in and out: 2000 ns; then woken at 6000 and
         * out at 9000 with no switch in: 3000 ns more. */
        uint64_t pipe_ns = 0;
        for (size_t i = 0; i < s.n_tasks; i++)
                if (s.tasks[i].pid == 500)
                        pipe_ns = s.tasks[i].runtime_ns;
        cr_assert_eq(pipe_ns, 5000, "pipe ran %" PRIu64 " ns", pipe_ns);
        cr_assert_eq(s.n_gaps, 1);
        cr_assert_eq(s.gaps_from_waking, 1);
        summary_done(&s);
        unlink(path);
        free(path);
}

Test(summary, kernel_thread_names_whole) {
        char buf[64];
        summary_cmdline_name("migration/0", true, 2, buf, sizeof(buf));
        cr_assert_str_eq(buf, "migration/0");
        summary_cmdline_name("kworker/u8:0-events_unbound", false, 2, buf, sizeof(buf));
        cr_assert_str_eq(buf, "kworker/u8:0-events_unbound");
        summary_cmdline_name("/usr/lib/systemd/systemd-journald", false, 1, buf, sizeof(buf));
        cr_assert_str_eq(buf, "systemd-journald");
        summary_cmdline_name("sshd: root@pts/0", false, 1, buf, sizeof(buf));
        cr_assert_str_eq(buf, "sshd: root@pts/0");

        char *path = tmp_path("kthreads.pftrace");
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        write_process(f, 17, 2, "migration/0", true, 17, NULL);
        write_process(f, 40, 2, "kworker/u8:0-events_unbound", true, 40, NULL);
        write_process(f, 300, 1, "/usr/sbin/cron", false, 300, NULL);
        char *table[] = { (char *) "migration/0", (char *) "kworker/u8:0", (char *) "cron" };
        uint64_t sw_ts[] = { 1000, 1000, 1000, 1000 };
        int64_t sw_state[] = { 0, 1, 1, 1 };
        int32_t sw_pid[] = { 17, 40, 300, 0 };
        uint32_t sw_comm[] = { 0, 1, 2, 0 };
        write_compact(f, 0, false, 4, sw_ts, sw_state, sw_pid, sw_comm, 0, NULL, NULL, NULL, NULL, table, 3);
        fclose(f);
        char *out, *err, *args;
        cr_assert_geq(asprintf(&args, "summary %s", path), 0);
        cr_assert_eq(run_tracectl(args, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, " migration/0 "), "%s", out);
        cr_assert_not_null(strstr(out, " kworker/u8:0-events_unbound"), "%s", out);
        cr_assert_not_null(strstr(out, " cron "), "%s", out);
        cr_assert_null(strstr(out, " u8:0"), "%s", out);
        free(out);
        free(err);
        free(args);
        unlink(path);
        free(path);
}

static void expect_failure(const char *cmd, const char *file, const char *message) {
        char *out, *err, *args;
        cr_assert_geq(asprintf(&args, "%s %s", cmd, file), 0);
        int rc = run_tracectl(args, &out, &err);
        cr_assert_neq(rc, 0, "tracectl %s succeeded", args);
        cr_assert_not_null(strstr(err, message), "tracectl %s: stderr \"%s\"", args, err);
        free(out);
        free(err);
        free(args);
}

Test(summary, empty_and_truncated_files_fail) {
        char *empty = tmp_path("empty.pftrace"), *cut = tmp_path("cut.pftrace");
        FILE *f = fopen(empty, "we");
        cr_assert_not_null(f);
        fclose(f);
        char *whole = slurp_text(PERF_TRACE); /* binary, but only its first bytes are used */
        f = fopen(cut, "we");
        cr_assert_not_null(f);
        FILE *in = fopen(PERF_TRACE, "re");
        cr_assert_not_null(in);
        char buf[5000];
        cr_assert_eq(fread(buf, 1, sizeof(buf), in), sizeof(buf));
        fclose(in);
        fwrite(buf, 1, sizeof(buf), f);
        fclose(f);
        free(whole);
        expect_failure("summary", empty, "is empty");
        expect_failure("report", empty, "is empty");
        expect_failure("summary", cut, "is truncated");
        expect_failure("report", cut, "is truncated");
        unlink(empty);
        unlink(cut);
        free(empty);
        free(cut);
}

/* A real capture: two compact bundles (cpu 0 and 1) recorded by traced's
 * ftrace plugin on Linux 6.18 (tests/data/ftrace/compact-sched.pftrace). */
Test(print, compact_sched_kernel_capture) {
        char *out, *err;
        cr_assert_eq(run_tracectl("print " TEST_DATA_DIR "/ftrace/compact-sched.pftrace", &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "cpu 0, 53 events (36 switches, 17 wakings compact)"), "%s", out);
        cr_assert_not_null(strstr(out, "cpu 1, 199 events (136 switches, 63 wakings compact)"), "%s", out);
        size_t switches = 0, wakings = 0;
        uint64_t last_ts[2] = { 0, 0 };
        long last_next[2] = { -1, -1 };
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned long long ts;
                unsigned cpu;
                char what[32];
                if (sscanf(line, " %llu cpu %u %31s", &ts, &cpu, what) != 3)
                        continue;
                cr_assert_lt(cpu, 2);
                cr_assert_geq(ts, last_ts[cpu], "time goes back on cpu %u: %s", cpu, line);
                last_ts[cpu] = ts;
                if (strcmp(what, "sched_waking") == 0) {
                        wakings++;
                        continue;
                }
                cr_assert_str_eq(what, "sched_switch");
                switches++;
                const char *prev = strstr(line, " prev_pid="), *next = strstr(line, " next_pid=");
                cr_assert(prev && next, "%s", line);
                if (prev[10] != '?')
                        cr_assert_eq(strtol(prev + 10, NULL, 10), last_next[cpu], "%s", line);
                last_next[cpu] = strtol(next + 10, NULL, 10);
        }
        cr_assert_eq(switches, 36 + 136);
        cr_assert_eq(wakings, 17 + 63);
        free(out);
        free(err);
}

/* ---- pprof ---------------------------------------------------------------- */

static char *pprof_of(const char *trace, const char *args, struct pp_profile *ret) {
        char *pb = tmp_path("profile.pb.gz"), *cmd, *out, *err;
        cr_assert_geq(asprintf(&cmd, "report --no-debuginfod %s --pprof %s %s", args, pb, trace), 0);
        int rc = run_tracectl(cmd, &out, &err);
        cr_assert_eq(rc, 0, "tracectl %s: %d\n%s", cmd, rc, err);
        cr_assert_not_null(strstr(err, "tracectl report: wrote "), "%s", err);
        cr_assert_eq(pp_read(pb, ret), 0, "%s is not a gzipped profile", pb);
        const char *bad = pp_check(ret);
        cr_assert_null(bad, "%s breaks pprof's rules: %s", pb, bad);
        free(cmd);
        free(out);
        free(err);
        return pb;
}

static const char *fn_name(const struct pp_profile *p, uint64_t location_id, size_t line) {
        const struct pp_location *l = pp_location(p, location_id);
        if (!l || line >= l->n_lines)
                return NULL;
        const struct pp_function *f = pp_function(p, l->lines[line].function_id);
        return f ? pp_string(p, f->name) : NULL;
}

static bool have_go(void) {
        return system("go version >/dev/null 2>&1") == 0;
}

Test(report, pprof_sample_types_labels_mappings) {
        char *trace = synthetic_profile();
        struct pp_profile pp;
        char *pb = pprof_of(trace, "", &pp);
        int cs = pp_sample_type(&pp, "samples"), cc = pp_sample_type(&pp, "cpu"),
            os = pp_sample_type(&pp, "off_cpu_samples"), ot = pp_sample_type(&pp, "off_cpu");
        cr_assert(cs == 0 && cc == 1 && os == 2 && ot == 3, "sample types %d %d %d %d", cs, cc, os, ot);
        cr_assert_str_eq(pp_string(&pp, pp.sample_types[cc][1]), "nanoseconds");
        cr_assert_str_eq(pp_string(&pp, pp.default_sample_type), "samples");
        cr_assert_str_eq(pp_string(&pp, pp.period_type[0]), "cpu");
        cr_assert_eq(pp.period, 1000000000 / 99);
        cr_assert_eq(pp.duration_nanos, 2020000000);
        int64_t sum[4] = {};
        bool unsym = false, kernel_own_mapping = false;
        for (size_t i = 0; i < pp.n_samples; i++) {
                const struct pp_sample *s = &pp.samples[i];
                for (int k = 0; k < 4; k++)
                        sum[k] += s->values[k];
                int64_t pid, tid;
                cr_assert(pp_label_num(&pp, s, "pid", &pid) && pid == 100);
                cr_assert(pp_label_num(&pp, s, "tid", &tid) && (tid == 100 || tid == 101));
                cr_assert_str_eq(pp_label_str(&pp, s, "process"), "app");
                cr_assert_str_eq(pp_label_str(&pp, s, "thread"), tid == 101 ? "worker" : "app");
                /* leaf first */
                cr_assert_str_eq(fn_name(&pp, s->location_ids[s->n_locations - 1], 0), "main");
                const struct pp_location *leaf = pp_location(&pp, s->location_ids[0]);
                const struct pp_mapping *m = pp_mapping(&pp, leaf->mapping_id);
                cr_assert_not_null(m);
                if (leaf->n_lines == 0) {
                        /* not symbolized: kept for a later symbolizer */
                        cr_assert_str_eq(pp_string(&pp, m->filename), "/usr/bin/app");
                        cr_assert_str_eq(pp_string(&pp, m->build_id), "abcd0123");
                        cr_assert_eq(leaf->address, 0x1234);
                        cr_assert_not(m->has_functions && m->has_line_numbers);
                        unsym = true;
                } else if (strcmp(fn_name(&pp, leaf->id, 0), "do_syscall_64") == 0) {
                        cr_assert_str_eq(pp_string(&pp, m->filename), "[kernel.kallsyms]");
                        kernel_own_mapping = true;
                } else
                        cr_assert_str_eq(fn_name(&pp, leaf->id, 0), "spin");
        }
        cr_assert(unsym && kernel_own_mapping);
        cr_assert_eq(sum[0], 11, "on-CPU samples");
        cr_assert_eq(sum[1], 11 * (1000000000 / 99), "CPU time");
        cr_assert_eq(sum[2], 2, "off-CPU samples");
        cr_assert_eq(sum[3], 7000000, "blocked ns");
        pp_free(&pp);

        /* One kind, chosen; and the filters report has. */
        free(pprof_of(trace, "--off-cpu --tid 101", &pp)); /* the same path as pb */
        cr_assert_eq(pp.n_sample_types, 2);
        cr_assert_str_eq(pp_string(&pp, pp.default_sample_type), "off_cpu");
        cr_assert_eq(pp.n_samples, 1);
        cr_assert_eq(pp.samples[0].values[1], 5000000);
        pp_free(&pp);
        if (have_go()) {
                char *cmd;
                cr_assert_geq(asprintf(&cmd, "go tool pprof -raw %s >/dev/null 2>&1", pb), 0);
                cr_assert_eq(system(cmd), 0, "%s", cmd);
                free(cmd);
        } else
                cr_log_warn("go tool pprof not installed (tools/install-deps.sh installs golang-go)");
        unlink(pb);
        unlink(trace);
        free(pb);
        free(trace);
}

/* function -> self samples from report's first "by self" table, or from
 * go tool pprof -top. */
struct flat {
        char name[128];
        long long n;
};

static size_t parse_report_self(const char *text, struct flat *v, size_t max) {
        const char *s = strstr(text, "# by self\n");
        cr_assert_not_null(s, "%s", text);
        s = strchr(strchr(s, '\n') + 1, '\n') + 1;
        size_t n = 0;
        while (n < max && s && *s && *s != '#') {
                double a, b;
                unsigned long long self, total;
                if (sscanf(s, " %lf%% %llu %lf%% %llu %127s", &a, &self, &b, &total, v[n].name) == 5)
                        v[n++].n = (long long) self;
                s = strchr(s, '\n');
                s = s ? s + 1 : NULL;
        }
        return n;
}

static size_t parse_pprof_top(const char *text, struct flat *v, size_t max) {
        const char *s = strstr(text, "flat%");
        cr_assert_not_null(s, "%s", text);
        s = strchr(s, '\n') + 1;
        size_t n = 0;
        while (n < max && s && *s) {
                long long flat, cum;
                if (sscanf(s, " %lld %*s %*s %lld %*s %127s", &flat, &cum, v[n].name) == 3)
                        v[n++].n = flat;
                s = strchr(s, '\n');
                s = s ? s + 1 : NULL;
        }
        return n;
}

Test(report, pprof_go_tool_pprof_top_is_report_self) {
        if (!have_go())
                cr_skip_test("go tool pprof is not installed (tools/install-deps.sh installs golang-go)");
        struct pp_profile pp;
        char *pb = pprof_of(PERF_TRACE, "", &pp);
        pp_free(&pp);
        char *cmd, *out, *err;
        cr_assert_geq(asprintf(&cmd, "report --no-debuginfod --top 10 %s", PERF_TRACE), 0);
        cr_assert_eq(run_tracectl(cmd, &out, &err), 0);
        free(cmd);
        struct flat want[10], got[1000];
        size_t nw = parse_report_self(out, want, 10);
        free(out);
        free(err);
        char *top = tmp_path("top.txt");
        cr_assert_geq(asprintf(&cmd, "go tool pprof -top -nodecount=1000 -nodefraction=0 -symbolize=none %s >%s 2>/dev/null", pb, top), 0);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        free(cmd);
        char *text = slurp_text(top);
        size_t ng = parse_pprof_top(text, got, 1000);
        cr_assert_eq(nw, 10);
        cr_assert_geq(ng, nw, "%s", text);
        for (size_t i = 0; i < nw; i++) {
                size_t j = 0;
                while (j < ng && strcmp(got[j].name, want[i].name) != 0)
                        j++;
                cr_assert_lt(j, ng, "%s (self %lld in report) is not in pprof's table:\n%s", want[i].name, want[i].n,
                             text);
                cr_assert_eq(got[j].n, want[i].n, "%s: report %lld, pprof %lld", want[i].name, want[i].n, got[j].n);
        }
        free(text);
        unlink(top);
        unlink(pb);
        free(top);
        free(pb);
}

Test(report, pprof_failure_leaves_the_file_alone) {
        char *out, *err;
        cr_assert_neq(run_tracectl("report --pprof /nonexistent-dir/x.pb.gz " PERF_TRACE, &out, &err), 0);
        cr_assert_not_null(strstr(err, "cannot create /nonexistent-dir/x.pb.gz"), "%s", err);
        free(out);
        free(err);
        /* A trace without samples: the old profile stays as it was. */
        char *pb = tmp_path("old.pb.gz"), *empty = tmp_path("empty.pftrace"), *cmd;
        FILE *f = fopen(pb, "we");
        cr_assert_not_null(f);
        fputs("old", f);
        fclose(f);
        f = fopen(empty, "we");
        cr_assert_not_null(f);
        write_process(f, 1, 0, "init", false, 1, NULL);
        fclose(f);
        cr_assert_geq(asprintf(&cmd, "report --pprof %s %s", pb, empty), 0);
        cr_assert_neq(run_tracectl(cmd, &out, &err), 0);
        cr_assert_not_null(strstr(err, "no callstack samples"), "%s", err);
        char *left = slurp_text(pb);
        cr_assert_str_eq(left, "old");
        free(left);
        free(cmd);
        free(out);
        free(err);
        unlink(pb);
        unlink(empty);
        free(pb);
        free(empty);
}

/* The stack-walk line from the samples' unwind errors: whole and cut, by
 * reason, most frequent first, in the report and the summary. */
Test(report, stack_walks_from_the_samples) {
        char *path = tmp_path("walks.pftrace");
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        write_process(f, 100, 1, "/usr/bin/app", false, 101, "worker");
        write_profile_header(f, 1, false);
        static const int errors[] = { -1, 2, 3, 2, -1, 2, 1 }; /* 1: UNWIND_ERROR_NONE, whole */
        for (size_t k = 0; k < sizeof(errors) / sizeof(*errors); k++)
                write_sample_cut(f, 1, 1000000000 + k * 1000000, 0, 100, 100, CS_SPIN, 0, errors[k]);
        fclose(f);
        struct profile p;
        struct profile_filter flt = { .pid = -1, .tid = -1, .cpu = -1 };
        load(&p, path, &flt);
        struct report_options ro = { .top_n = 5 };
        char *text = render(&p, report_text, &ro);
        const char *line = strstr(text, "# Stack walks:    7 stacks (linux.perf): 3 (43%) whole, 4 (57%) cut short:\n");
        cr_assert_not_null(line, "%s", text);
        const char *copy = strstr(line, "#                 3 past the stack copy"),
                   *info = strstr(line, "#                 1 without unwind info for a pc");
        cr_assert(copy && info && copy < info, "reasons, most frequent first:\n%s", text);
        cr_assert_not_null(strstr(text, "# Warning:        most stacks were cut short"), "%s", text);
        free(text);
        profile_done(&p);

        struct summary s;
        summarise(path, &s);
        cr_assert_eq(stack_walks_sampled(&s.walks), 7);
        cr_assert_eq(stack_walks_sampled_cut(&s.walks), 4);
        cr_assert_eq(s.walks.sampled[2], 3);
        summary_done(&s);
        char *out, *err, *args;
        cr_assert_gt(asprintf(&args, "summary --json %s", path), 0);
        cr_assert_eq(run_tracectl(args, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "\"sampled\":7,"), "%s", out);
        cr_assert_not_null(strstr(out, "\"sampled_cut\":4,"), "%s", out);
        const char *by = strstr(out, "\"sampled_cut_by\":{");
        cr_assert_not_null(by, "%s", out);
        cr_assert(strstr(by, "\"memory_invalid\":3") && strstr(by, "\"unwind_info\":1"), "%s", out);
        free(args);
        free(out);
        free(err);
        free(path);
}

/* A trace of n on-CPU samples 10 ms apart from t0 (n == 0: none). */
static void write_rotated_trace(const char *path, uint64_t t0, int n) {
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s", path);
        write_process(f, 100, 1, "/usr/bin/app", false, 101, "worker");
        if (n > 0)
                write_profile_header(f, 1, false);
        for (int i = 0; i < n; i++)
                write_sample(f, 1, t0 + (uint64_t) i * 10000000, 0, 100, 100, CS_SPIN, 0);
        fclose(f);
}

static int64_t pprof_samples(const char *path, int64_t *ret_duration) {
        struct pp_profile pp;
        cr_assert_eq(pp_read(path, &pp), 0, "%s is not a gzipped profile", path);
        const char *bad = pp_check(&pp);
        cr_assert_null(bad, "%s breaks pprof's rules: %s", path, bad);
        int64_t n = 0;
        for (size_t i = 0; i < pp.n_samples; i++)
                n += pp.samples[i].values[0];
        *ret_duration = pp.duration_nanos;
        pp_free(&pp);
        return n;
}

/* --pprof DIR/: a profile beside each closed trace of a rotating session's
 * directory, each with its own time range; the file still being written
 * is left alone, and a second run reads only what changed. */
Test(report, pprof_dir_one_profile_per_closed_file) {
        char *dir = tmp_path("rotated/"), *a, *b, *empty, *part, *cmd, *out, *err;
        cr_assert_eq(mkdir(dir, 0755), 0);
        cr_assert_geq(asprintf(&a, "%strace-20261202T040000Z-000001.pftrace", dir), 0);
        cr_assert_geq(asprintf(&b, "%strace-20261202T040000Z-000002.pftrace", dir), 0);
        cr_assert_geq(asprintf(&empty, "%strace-20261202T040000Z-000003.pftrace", dir), 0);
        cr_assert_geq(asprintf(&part, "%strace-20261202T040000Z-000004.pftrace.part", dir), 0);
        write_rotated_trace(a, 1000000000, 4);
        write_rotated_trace(b, 5000000000, 3);
        write_rotated_trace(empty, 0, 0);
        write_rotated_trace(part, 9000000000, 5);
        cr_assert_geq(asprintf(&cmd, "report --no-debuginfod --pprof %s", dir), 0);
        cr_assert_eq(run_tracectl(cmd, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(err, "2 profiles written, 0 already up to date, 1 traces without samples, 0 failed"),
                           "%s", err);
        free(out);
        free(err);
        char *pa, *pb, *pe, *pp;
        cr_assert_geq(asprintf(&pa, "%strace-20261202T040000Z-000001.pb.gz", dir), 0);
        cr_assert_geq(asprintf(&pb, "%strace-20261202T040000Z-000002.pb.gz", dir), 0);
        cr_assert_geq(asprintf(&pe, "%strace-20261202T040000Z-000003.pb.gz", dir), 0);
        cr_assert_geq(asprintf(&pp, "%strace-20261202T040000Z-000004.pb.gz", dir), 0);
        int64_t da, db;
        cr_assert_eq(pprof_samples(pa, &da), 4);
        cr_assert_eq(pprof_samples(pb, &db), 3);
        cr_assert(da == 30000000 && db == 20000000, "each profile spans its own file: %" PRId64 " and %" PRId64 " ns",
                  da, db);
        cr_assert_neq(access(pe, F_OK), 0, "a profile made of a trace without samples");
        cr_assert_neq(access(pp, F_OK), 0, "a profile made of the file still being written");

        /* Again: nothing new; then the newer trace of the first name. */
        cr_assert_eq(run_tracectl(cmd, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(err, "0 profiles written, 2 already up to date"), "%s", err);
        free(out);
        free(err);
        struct timespec later[2] = { { .tv_nsec = UTIME_NOW }, { .tv_sec = time(NULL) + 60 } };
        cr_assert_eq(utimensat(AT_FDCWD, a, later, 0), 0);
        cr_assert_eq(run_tracectl(cmd, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(err, "1 profiles written, 1 already up to date"), "%s", err);
        free(out);
        free(err);

        /* A trace file besides DIR/ is a usage error. */
        free(cmd);
        cr_assert_geq(asprintf(&cmd, "report --pprof %s %s", dir, a), 0);
        cr_assert_eq(run_tracectl(cmd, &out, &err), 2, "%s", err);
        free(out);
        free(err);
        const char *all[] = { a, b, empty, part, pa, pb };
        for (size_t i = 0; i < sizeof(all) / sizeof(*all); i++)
                unlink(all[i]);
        cr_assert_eq(rmdir(dir), 0, "rotated/ holds what the test did not make");
        free(a), free(b), free(empty), free(part), free(pa), free(pb), free(pe), free(pp), free(cmd), free(dir);
}
