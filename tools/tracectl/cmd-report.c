/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl report: where the time went, from the PerfSample packets of a
 * trace, or where the memory went, from its heap dumps (ProfilePacket), as
 * text, folded stacks, an SVG flamegraph or pprof. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "debuginfo.h"
#include "pprof-writer.h"
#include "profile.h"
#include "report-dir.h"
#include "trace-reader.h"
#include "tracectl.h"

static void help(void) {
        printf("Usage: tracectl report [OPTIONS] FILE\n"
               "       tracectl report [OPTIONS] --pprof DIR/\n"
               "\n"
               "Profiles from the callstack samples of a trace (perf, bpfstack, upstream\n"
               "traced_perf) or its heap profiles (android.heapprofd): top functions by\n"
               "self and total per process and thread, folded stacks, an interactive SVG\n"
               "flamegraph, or pprof.\n"
               "\n"
               "  --folded          folded stacks (comm;frame;...;frame count), for\n"
               "                    FlameGraph and inferno\n"
               "  --svg FILE        write an interactive flamegraph to FILE\n"
               "  --pprof FILE      write a pprof profile (gzipped profile.proto) to FILE\n"
               "                    (\"-\": standard output), for go tool pprof, Pyroscope,\n"
               "                    Parca, speedscope; --pprof DIR/ (no FILE): one beside\n"
               "                    each closed trace of a rotating session's directory\n"
               "  --debuginfod[=URLS]\n"
               "                    name frames and find source lines of files that have\n"
               "                    no symbols here from debuginfod servers (URLS, else\n"
               "                    DEBUGINFOD_URLS, else /etc/debuginfod/*.urls)\n"
               "  --no-debuginfod   ask no server, even with DEBUGINFOD_URLS set\n"
               "  --no-inline       no frames for the functions inlined where the binary's\n"
               "                    DWARF says (the symbol table's functions only)\n"
               "  --debuginfod-timeout SEC\n"
               "                    longest wait for one file from a server (default 30)\n"
               "  --icicle          draw the graph top down (with --svg)\n"
               "  --title TEXT      the graph's title\n"
               "  --top N           functions per table (default 20)\n"
               "  --pid PID  --tid TID  --comm NAME  --cpu CPU\n"
               "                    only samples of that process, thread, name, CPU\n"
               "  --since SEC --until SEC\n"
               "                    time window, seconds after the first sample\n"
               "  --kernel | --user only kernel or only user frames of each stack\n"
               "  --on-cpu | --off-cpu | --inuse | --alloc\n"
               "                    which samples (default: on-CPU; else off-CPU, weighted\n"
               "                    by blocked time; else the heap profiles' bytes not\n"
               "                    released at their last dump, --inuse; --alloc: bytes\n"
               "                    allocated since the profile began). A heap profile is\n"
               "                    each heap's last dump (at or before --until; less the\n"
               "                    last before --since)\n"
               "  --no-demangle     show C++ and Rust function names as the trace holds\n"
               "                    them (mangled), not demangled\n");
}

/* What the lookups of files without symbols found, when it matters. */
static void debuginfo_report(const struct debuginfo *d, bool asked_servers) {
        struct debuginfo_stats st;
        debuginfo_stats(d, &st);
        if (asked_servers && st.files_debuginfod)
                fprintf(stderr, "tracectl report: %u files from debuginfod\n", st.files_debuginfod);
        if (st.debuginfod_gave_up)
                fprintf(stderr, "tracectl report: a debuginfod server failed or timed out; asked no more (see "
                                "--debuginfod-timeout)\n");
        if (st.files_missing) {
                fprintf(stderr, "tracectl report: %u files that frames are in were not found%s:\n",
                        st.files_missing, asked_servers ? "" : " here (--debuginfod asks servers by build ID)");
                debuginfo_print_problems(d, stderr, "  ");
        }
}

static int parse_int(const char *s, const char *what, int64_t *ret) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || *end || v < 0) {
                fprintf(stderr, "tracectl report: %s \"%s\" is not a non-negative number\n", what, s);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int parse_seconds(const char *s, const char *what, uint64_t *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || v < 0 || v > 1e9) {
                fprintf(stderr, "tracectl report: %s \"%s\" is not a number of seconds\n", what, s);
                return -EINVAL;
        }
        *ret = (uint64_t) (v * 1e9 + 0.5);
        return 0;
}

/* What a report writes, the same for every trace it reads. */
struct report_job {
        struct profile_filter flt;
        struct report_options ro;
        struct debuginfo *dbg;
        bool inline_frames, mangled, folded;
        const char *svg;
        bool dir; /* --pprof DIR/: one of many traces */
};

/* One trace into the output the job asks for (pprof: that file); an exit
 * status, the reasons said on standard error. */
static int report_file(const struct report_job *j, const char *path, const char *pprof) {
        /* The file is made before the trace is read: a name that cannot be
         * written fails at once, and nothing is replaced until the end. */
        struct pprof_writer *pw = NULL;
        int r;
        if (pprof && (r = pprof_writer_open(pprof, &pw)) < 0) {
                fprintf(stderr, "tracectl report: cannot create %s: %s\n", pprof, strerror(-r));
                return EXIT_OTHER;
        }

        struct trace_reader rd;
        r = trace_reader_open(&rd, path);
        if (r < 0) {
                fprintf(stderr, "tracectl report: cannot open %s: %s\n", path, strerror(-r));
                pprof_writer_free(pw);
                return EXIT_OTHER;
        }
        struct profile p;
        struct profile_filter flt = j->flt;
        flt.addresses = pprof != NULL;
        profile_init(&p, &flt);
        p.debuginfo = j->dbg;
        p.inline_frames = j->inline_frames;
        p.mangled_names = j->mangled;
        const uint8_t *data;
        size_t len;
        uint64_t bad = 0;
        while ((r = trace_reader_next(&rd, &data, &len)) > 0) {
                int k = profile_add_packet(&p, data, len);
                if (k == -ENOMEM) {
                        r = k;
                        break;
                }
                bad += k < 0;
        }
        int ret = EXIT_OK;
        if (r == -ENOMEM) {
                fprintf(stderr, "tracectl report: out of memory\n");
                ret = EXIT_OTHER;
                goto out;
        }
        if (r < 0) {
                /* Report what was read, and say the rest is missing. */
                fprintf(stderr, "tracectl report: %s is truncated or damaged after %" PRIu64 " packets (byte %" PRIu64
                                "); reporting what comes before\n",
                        path, rd.n_packets, rd.offset);
                ret = EXIT_OTHER;
        } else if (rd.n_packets == 0) {
                fprintf(stderr, "tracectl report: %s is empty: it holds no trace packets\n", path);
                ret = EXIT_OTHER;
                goto out;
        }
        if (bad)
                fprintf(stderr, "tracectl report: %" PRIu64 " packets did not decode and were skipped\n", bad);
        if (p.samples == 0 && p.heap_dumps == 0) {
                fprintf(stderr, "tracectl report: %s has no callstack samples (PerfSample packets) and no heap "
                                "profiles (ProfilePacket)%s\n",
                        path, p.heap_legacy ? " that this version reads" : "");
                if (ret == EXIT_OK)
                        ret = j->dir ? REPORT_DIR_NO_SAMPLES : EXIT_OTHER;
                goto out;
        }
        profile_finish(&p);
        if (!flt.kind_explicit && !j->dir && !pprof) {
                if (p.kind == PROFILE_ON_CPU && p.samples_kind[PROFILE_OFF_CPU])
                        fprintf(stderr, "tracectl report: the trace also has %" PRIu64 " off-CPU samples; --off-cpu "
                                        "shows them\n",
                                p.samples_kind[PROFILE_OFF_CPU]);
                if (!profile_kind_heap(p.kind) && p.heap_dumps)
                        fprintf(stderr, "tracectl report: the trace also has heap profiles; --inuse or --alloc "
                                        "shows them\n");
        }
        if (pprof) {
                struct pprof_stats st;
                r = report_pprof(pw, &p, &st);
                if (r >= 0)
                        r = pprof_writer_commit(pw);
                if (r >= 0)
                        fprintf(stderr,
                                "tracectl report: wrote %s: %" PRIu64 " samples of distinct stacks, %" PRIu64
                                " locations (%" PRIu64 " with source lines), %" PRIu64 " functions, %" PRIu64 " mappings\n",
                                pprof, st.samples, st.locations, st.locations_with_lines, st.functions, st.mappings);
                else if (r == -ENODATA)
                        fprintf(stderr, "tracectl report: no samples with a callstack%s; %s not written\n",
                                p.samples_filtered ? " passed the filters" : "", pprof);
                else
                        fprintf(stderr, "tracectl report: cannot write %s: %s\n", pprof, strerror(-r));
                if (r < 0)
                        ret = EXIT_OTHER;
                r = 0;
        } else if (j->folded)
                r = report_folded(stdout, &p);
        else if (j->svg) {
                FILE *f = fopen(j->svg, "we");
                if (!f) {
                        fprintf(stderr, "tracectl report: cannot create %s: %m\n", j->svg);
                        ret = EXIT_OTHER;
                        goto out;
                }
                r = report_svg(f, &p, &j->ro);
                if (fclose(f) != 0 && r >= 0)
                        r = -errno;
                if (r >= 0)
                        fprintf(stderr, "tracectl report: wrote %s\n", j->svg);
        } else
                r = report_text(stdout, &p, &j->ro);
        if (r >= 0 && fflush(stdout) != 0)
                r = -errno;
        if (r < 0) {
                if (r != -EPIPE) /* the reader stopped early (| head) */
                        fprintf(stderr, "tracectl report: cannot write the report: %s\n", strerror(-r));
                ret = EXIT_OTHER;
        }
out:
        profile_done(&p);
        trace_reader_close(&rd);
        pprof_writer_free(pw);
        return ret;
}

static int report_dir_one(void *userdata, const char *trace, const char *pprof) {
        return report_file(userdata, trace, pprof);
}

int cmd_report(int argc, char **argv) {
        enum { O_FOLDED = 0x100, O_SVG, O_ICICLE, O_TITLE, O_TOP, O_PID, O_TID, O_COMM, O_CPU, O_SINCE, O_UNTIL,
               O_KERNEL, O_USER, O_ON, O_OFF, O_INUSE, O_ALLOC, O_PPROF, O_DEBUGINFOD, O_NO_DEBUGINFOD, O_DEBUGINFOD_TIMEOUT, O_NO_INLINE, O_NO_DEMANGLE };
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },   { "folded", no_argument, NULL, O_FOLDED },
                { "svg", required_argument, NULL, O_SVG }, { "icicle", no_argument, NULL, O_ICICLE },
                { "title", required_argument, NULL, O_TITLE }, { "top", required_argument, NULL, O_TOP },
                { "pid", required_argument, NULL, O_PID }, { "tid", required_argument, NULL, O_TID },
                { "comm", required_argument, NULL, O_COMM }, { "cpu", required_argument, NULL, O_CPU },
                { "since", required_argument, NULL, O_SINCE }, { "until", required_argument, NULL, O_UNTIL },
                { "kernel", no_argument, NULL, O_KERNEL }, { "user", no_argument, NULL, O_USER },
                { "on-cpu", no_argument, NULL, O_ON }, { "off-cpu", no_argument, NULL, O_OFF },
                { "inuse", no_argument, NULL, O_INUSE }, { "alloc", no_argument, NULL, O_ALLOC },
                { "pprof", required_argument, NULL, O_PPROF }, { "debuginfod", optional_argument, NULL, O_DEBUGINFOD },
                { "no-debuginfod", no_argument, NULL, O_NO_DEBUGINFOD }, { "no-inline", no_argument, NULL, O_NO_INLINE },
                { "debuginfod-timeout", required_argument, NULL, O_DEBUGINFOD_TIMEOUT },
                { "no-demangle", no_argument, NULL, O_NO_DEMANGLE },
                {},
        };
        struct profile_filter flt = { .pid = -1, .tid = -1, .cpu = -1 };
        struct report_options ro = { .top_n = 20 };
        bool folded = false, mangled = false;
        const char *svg = NULL, *pprof = NULL, *urls = NULL;
        bool want_debuginfod = false, no_debuginfod = false, no_inline = false;
        unsigned timeout_s = 0;
        int64_t v;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return EXIT_OK;
                case O_FOLDED:
                        folded = true;
                        break;
                case O_SVG:
                        svg = optarg;
                        break;
                case O_PPROF:
                        pprof = optarg;
                        break;
                case O_DEBUGINFOD:
                        want_debuginfod = true;
                        urls = optarg;
                        break;
                case O_NO_DEBUGINFOD:
                        no_debuginfod = true;
                        break;
                case O_NO_INLINE:
                        no_inline = true;
                        break;
                case O_DEBUGINFOD_TIMEOUT:
                        if (parse_int(optarg, "--debuginfod-timeout", &v) < 0)
                                return EXIT_USAGE;
                        if (v < 1 || v > 3600) {
                                fprintf(stderr, "tracectl report: --debuginfod-timeout: %s is not within 1..3600 s\n", optarg);
                                return EXIT_USAGE;
                        }
                        timeout_s = (unsigned) v;
                        break;
                case O_ICICLE:
                        ro.icicle = true;
                        break;
                case O_TITLE:
                        ro.title = optarg;
                        break;
                case O_TOP:
                        if (parse_int(optarg, "--top", &v) < 0)
                                return EXIT_USAGE;
                        ro.top_n = (size_t) v;
                        break;
                case O_PID:
                        if (parse_int(optarg, "--pid", &flt.pid) < 0)
                                return EXIT_USAGE;
                        break;
                case O_TID:
                        if (parse_int(optarg, "--tid", &flt.tid) < 0)
                                return EXIT_USAGE;
                        break;
                case O_CPU:
                        if (parse_int(optarg, "--cpu", &flt.cpu) < 0)
                                return EXIT_USAGE;
                        break;
                case O_COMM:
                        flt.comm = optarg;
                        break;
                case O_SINCE:
                        if (parse_seconds(optarg, "--since", &flt.since_ns) < 0)
                                return EXIT_USAGE;
                        flt.have_since = true;
                        break;
                case O_UNTIL:
                        if (parse_seconds(optarg, "--until", &flt.until_ns) < 0)
                                return EXIT_USAGE;
                        flt.have_until = true;
                        break;
                case O_KERNEL:
                        flt.kernel_only = true;
                        break;
                case O_USER:
                        flt.user_only = true;
                        break;
                case O_ON:
                case O_OFF:
                case O_INUSE:
                case O_ALLOC: {
                        enum profile_kind k = c == O_ON    ? PROFILE_ON_CPU
                                              : c == O_OFF ? PROFILE_OFF_CPU
                                              : c == O_INUSE ? PROFILE_HEAP_INUSE
                                                             : PROFILE_HEAP_ALLOC;
                        if (flt.kind_explicit && flt.kind != k) {
                                fprintf(stderr, "tracectl report: --on-cpu, --off-cpu, --inuse and --alloc exclude "
                                                "each other\n");
                                return EXIT_USAGE;
                        }
                        flt.kind = k;
                        flt.kind_explicit = true;
                        break;
                }
                case O_NO_DEMANGLE:
                        mangled = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (flt.kernel_only && flt.user_only) {
                fprintf(stderr, "tracectl report: --kernel and --user exclude each other\n");
                return EXIT_USAGE;
        }
        if (folded + !!svg + !!pprof > 1) {
                fprintf(stderr, "tracectl report: choose one of --folded, --svg and --pprof\n");
                return EXIT_USAGE;
        }
        if (want_debuginfod && no_debuginfod) {
                fprintf(stderr, "tracectl report: --debuginfod and --no-debuginfod exclude each other\n");
                return EXIT_USAGE;
        }
        if (ro.icicle && !svg) {
                fprintf(stderr, "tracectl report: --icicle draws a graph; give --svg FILE too\n");
                return EXIT_USAGE;
        }
        if (flt.have_since && flt.have_until && flt.until_ns < flt.since_ns) {
                fprintf(stderr, "tracectl report: --until is before --since\n");
                return EXIT_USAGE;
        }
        bool dir = pprof && pprof[0] && pprof[strlen(pprof) - 1] == '/';
        if (dir ? optind != argc : optind + 1 != argc) {
                fprintf(stderr, dir ? "tracectl report: --pprof DIR/ reads the traces in DIR; give no trace file\n"
                                    : "tracectl report: one trace file expected; see tracectl report --help\n");
                return EXIT_USAGE;
        }

        _cleanup_free_ char *servers = NULL;
        int r = debuginfo_opt_in(urls, want_debuginfod, no_debuginfod, &servers);
        if (r == -ENOENT) {
                fprintf(stderr, "tracectl report: --debuginfod: no server known; give --debuginfod=URL or set "
                                "DEBUGINFOD_URLS\n");
                return EXIT_USAGE;
        }
        struct debuginfo *dbg = NULL;
        if (r >= 0)
                r = debuginfo_new(&(struct debuginfo_options) { .urls = servers, .timeout_s = timeout_s }, &dbg);
        if (r < 0) {
                fprintf(stderr, "tracectl report: out of memory\n");
                return EXIT_OTHER;
        }
        struct report_job j = {
                .flt = flt,
                .ro = ro,
                .dbg = dbg,
                .inline_frames = !no_inline,
                .mangled = mangled,
                .folded = folded,
                .svg = svg,
                .dir = dir,
        };
        int ret = dir ? report_dir(pprof, report_dir_one, &j) : report_file(&j, argv[optind], pprof);
        debuginfo_report(dbg, servers != NULL);
        debuginfo_free(dbg);
        return ret;
}
