/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl report: where the time went, from the PerfSample packets of a
 * trace, as text, folded stacks or an SVG flamegraph. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "trace-reader.h"
#include "tracectl.h"

static void help(void) {
        printf("Usage: tracectl report [OPTIONS] FILE\n"
               "\n"
               "Profiles from the callstack samples of a trace (perf, bpfstack, upstream\n"
               "traced_perf): top functions by self and total samples per process and\n"
               "thread, folded stacks, or an interactive SVG flamegraph.\n"
               "\n"
               "  --folded          folded stacks (comm;frame;...;frame count), for\n"
               "                    FlameGraph and inferno\n"
               "  --svg FILE        write an interactive flamegraph to FILE\n"
               "  --icicle          draw the graph top down (with --svg)\n"
               "  --title TEXT      the graph's title\n"
               "  --top N           functions per table (default 20)\n"
               "  --pid PID  --tid TID  --comm NAME  --cpu CPU\n"
               "                    only samples of that process, thread, name, CPU\n"
               "  --since SEC --until SEC\n"
               "                    time window, seconds after the first sample\n"
               "  --kernel | --user only kernel or only user frames of each stack\n"
               "  --on-cpu | --off-cpu\n"
               "                    which samples (default: on-CPU, or off-CPU when the\n"
               "                    trace has only those, weighted by blocked time)\n"
               "  --no-demangle     show C++ and Rust function names as the trace holds\n"
               "                    them (mangled), not demangled\n");
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

int cmd_report(int argc, char **argv) {
        enum { O_FOLDED = 0x100, O_SVG, O_ICICLE, O_TITLE, O_TOP, O_PID, O_TID, O_COMM, O_CPU, O_SINCE, O_UNTIL,
               O_KERNEL, O_USER, O_ON, O_OFF, O_NO_DEMANGLE };
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },   { "folded", no_argument, NULL, O_FOLDED },
                { "svg", required_argument, NULL, O_SVG }, { "icicle", no_argument, NULL, O_ICICLE },
                { "title", required_argument, NULL, O_TITLE }, { "top", required_argument, NULL, O_TOP },
                { "pid", required_argument, NULL, O_PID }, { "tid", required_argument, NULL, O_TID },
                { "comm", required_argument, NULL, O_COMM }, { "cpu", required_argument, NULL, O_CPU },
                { "since", required_argument, NULL, O_SINCE }, { "until", required_argument, NULL, O_UNTIL },
                { "kernel", no_argument, NULL, O_KERNEL }, { "user", no_argument, NULL, O_USER },
                { "on-cpu", no_argument, NULL, O_ON }, { "off-cpu", no_argument, NULL, O_OFF },
                { "no-demangle", no_argument, NULL, O_NO_DEMANGLE },
                {},
        };
        struct profile_filter flt = { .pid = -1, .tid = -1, .cpu = -1 };
        struct report_options ro = { .top_n = 20 };
        bool folded = false, mangled = false;
        const char *svg = NULL;
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
                        if (flt.kind_explicit && flt.kind != (c == O_OFF ? PROFILE_OFF_CPU : PROFILE_ON_CPU)) {
                                fprintf(stderr, "tracectl report: --on-cpu and --off-cpu exclude each other\n");
                                return EXIT_USAGE;
                        }
                        flt.kind = c == O_OFF ? PROFILE_OFF_CPU : PROFILE_ON_CPU;
                        flt.kind_explicit = true;
                        break;
                case O_NO_DEMANGLE:
                        mangled = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 1 != argc) {
                fprintf(stderr, "tracectl report: one trace file expected; see tracectl report --help\n");
                return EXIT_USAGE;
        }
        if (flt.kernel_only && flt.user_only) {
                fprintf(stderr, "tracectl report: --kernel and --user exclude each other\n");
                return EXIT_USAGE;
        }
        if (folded && svg) {
                fprintf(stderr, "tracectl report: choose one of --folded and --svg\n");
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
        const char *path = argv[optind];

        struct trace_reader rd;
        int r = trace_reader_open(&rd, path);
        if (r < 0) {
                fprintf(stderr, "tracectl report: cannot open %s: %s\n", path, strerror(-r));
                return EXIT_OTHER;
        }
        struct profile p;
        profile_init(&p, &flt);
        p.mangled_names = mangled;
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
        if (p.samples == 0) {
                fprintf(stderr, "tracectl report: %s has no callstack samples (PerfSample packets)\n", path);
                if (ret == EXIT_OK)
                        ret = EXIT_OTHER;
                goto out;
        }
        profile_finish(&p);
        if (p.samples_kind[p.kind == PROFILE_ON_CPU ? PROFILE_OFF_CPU : PROFILE_ON_CPU] && !flt.kind_explicit)
                fprintf(stderr, "tracectl report: the trace also has %" PRIu64 " off-CPU samples; --off-cpu shows them\n",
                        p.samples_kind[PROFILE_OFF_CPU]);
        if (folded)
                r = report_folded(stdout, &p);
        else if (svg) {
                FILE *f = fopen(svg, "we");
                if (!f) {
                        fprintf(stderr, "tracectl report: cannot create %s: %m\n", svg);
                        ret = EXIT_OTHER;
                        goto out;
                }
                r = report_svg(f, &p, &ro);
                if (fclose(f) != 0 && r >= 0)
                        r = -errno;
                if (r >= 0)
                        fprintf(stderr, "tracectl report: wrote %s\n", svg);
        } else
                r = report_text(stdout, &p, &ro);
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
        return ret;
}
