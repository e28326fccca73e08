/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl record's config: quick flags and files into a TraceConfig,
 * checked against what the service offers. */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/closest-name.h"
#include "basic/macro.h"
#include "pbtxt/pb-check.h"
#include "pbtxt/pbtxt.h"
#include "config-lint.h"
#include "record-config.h"

/* --ds linux.sys_stats: each source's period. */
#define QUICK_SYS_STATS_PERIOD_MS 1000u

int parse_duration_ms(const char *s, uint32_t *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v < 0)
                return -EINVAL;
        double mult;
        if (strcmp(end, "ms") == 0)
                mult = 1;
        else if (strcmp(end, "s") == 0 || *end == '\0')
                mult = 1000;
        else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
                mult = 60000;
        else if (strcmp(end, "h") == 0)
                mult = 3600000;
        else if (strcmp(end, "d") == 0)
                mult = 24.0 * 3600000;
        else
                return -EINVAL;
        double ms = v * mult;
        if (ms > TRACECTL_MAX_DURATION_MS)
                return -ERANGE;
        *ret = (uint32_t) ms;
        return 0;
}

int parse_size_kb(const char *s, uint32_t *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v <= 0)
                return -EINVAL;
        char unit[8] = {};
        for (size_t i = 0; end[i] && i < sizeof(unit) - 1; i++)
                unit[i] = (char) tolower((unsigned char) end[i]);
        double kb;
        if (strcmp(unit, "kb") == 0 || strcmp(unit, "k") == 0)
                kb = v;
        else if (strcmp(unit, "mb") == 0 || strcmp(unit, "m") == 0 || unit[0] == '\0')
                kb = v * 1024;
        else if (strcmp(unit, "gb") == 0 || strcmp(unit, "g") == 0)
                kb = v * 1024 * 1024;
        else
                return -EINVAL;
        if (kb > UINT32_MAX || kb < 1)
                return -ERANGE;
        *ret = (uint32_t) kb;
        return 0;
}

static char *read_all(const char *path, size_t *ret_len) {
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        if (!f)
                return NULL;
        size_t cap = 65536, len = 0;
        char *buf = malloc(cap + 1);
        while (buf) {
                size_t n = fread(buf + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
                if (len == cap) {
                        if (cap >= PBTXT_MAX_INPUT) {
                                free(buf);
                                buf = NULL;
                                errno = EFBIG;
                                break;
                        }
                        cap *= 2;
                        char *b = realloc(buf, cap + 1);
                        if (!b)
                                free(buf);
                        buf = b;
                }
        }
        if (f != stdin)
                fclose(f);
        if (buf) {
                buf[len] = '\0';
                *ret_len = len;
        }
        return buf;
}

/* Loads a TraceConfig; prints a positioned error and returns EXIT_CONFIG. */
int load_config(const char *path, bool txt, Perfetto__Protos__TraceConfig **ret, struct pbtxt_positions *ret_pos) {
        size_t len;
        _cleanup_free_ char *data = read_all(path, &len);
        if (!data) {
                fprintf(stderr, "tracectl: cannot read config %s: %s\n", path, strerror(errno));
                return EXIT_CONFIG;
        }
        if (txt) {
                ProtobufCMessage *m = NULL;
                _cleanup_free_ char *err = NULL;
                if (pbtxt_parse_positions(&perfetto__protos__trace_config__descriptor, data, len, path, &m, &err,
                                          ret_pos) < 0) {
                        fprintf(stderr, "%s\n", err ? err : "config: parse error");
                        return EXIT_CONFIG;
                }
                *ret = (Perfetto__Protos__TraceConfig *) m;
                return 0;
        }
        _cleanup_free_ char *range_err = NULL;
        if (pb_check_ranges(&perfetto__protos__trace_config__descriptor, (const uint8_t *) data, len, &range_err) < 0) {
                fprintf(stderr, "%s: %s\n", path, range_err ? range_err : "a value is out of range");
                return EXIT_CONFIG;
        }
        *ret = perfetto__protos__trace_config__unpack(NULL, len, (const uint8_t *) data);
        if (!*ret) {
                fprintf(stderr, "%s: not a binary TraceConfig%s\n", path,
                        memchr(data, '{', len) ? " (text format? add --txt)" : "");
                return EXIT_CONFIG;
        }
        return 0;
}

Perfetto__Protos__TraceConfig *quick_config(uint32_t duration_ms, uint32_t buffer_kb, char **events,
                                                   size_t n_events, char **extra_ds, size_t n_extra, bool process_stats,
                                                   uint32_t perf_hz, bool bpf_stacks, const char *heap_target) {
        /* Built as text and parsed, so quick flags and config files take
         * exactly the same path. */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        fprintf(f, "buffers { size_kb: %u fill_policy: RING_BUFFER }\n", buffer_kb);
        if (n_events > 0) {
                fprintf(f, "data_sources { config { name: \"linux.ftrace\" ftrace_config {");
                for (size_t i = 0; i < n_events; i++) {
                        fputs(" ftrace_events: \"", f);
                        for (const char *p = events[i]; *p; p++)
                                if (*p == '"' || *p == '\\')
                                        fprintf(f, "\\%c", *p);
                                else
                                        fputc(*p, f);
                        fputc('"', f);
                }
                /* Scheduling events in columns: a few bytes each. */
                fprintf(f, " compact_sched { enabled: true } } } }\n");
        }
        if (process_stats)
                /* The tree at start, new processes as they appear, and each
                 * process's memory and CPU time every second. */
                fprintf(f, "data_sources { config { name: \"linux.process_stats\" process_stats_config { "
                           "scan_all_processes_on_start: true record_thread_names: true "
                           "proc_stats_poll_ms: 1000 record_process_runtime: true } } }\n");
        if (perf_hz)
                /* Every CPU, every process: user stacks unwound with DWARF
                 * unwind tables, kernel stacks from the kernel. */
                fprintf(f, "data_sources { config { name: \"linux.perf\" perf_event_config { "
                           "timebase { frequency: %u counter: SW_CPU_CLOCK } "
                           "callstack_sampling { kernel_frames: true user_frames: UNWIND_DWARF } } } }\n",
                        perf_hz);
        if (bpf_stacks)
                /* Every process: on-CPU at 99 Hz (off the beat of timers),
                 * off-CPU each time a task comes back from blocking. */
                fprintf(f, "data_sources { config { name: \"linux.bpf_stack\" bpf_stack_config { "
                           "frequency: 99 on_cpu: true off_cpu: true } } }\n");
        if (heap_target) {
                /* A pid, or a command line (argv[0]'s last component, a
                 * glob) of processes preloading libtraced-heap.so. */
                fprintf(f, "data_sources { config { name: \"android.heapprofd\" heapprofd_config { ");
                if (heap_target[strspn(heap_target, "0123456789")] == '\0')
                        fprintf(f, "pid: %s", heap_target);
                else {
                        fputs("process_cmdline: \"", f);
                        for (const char *c = heap_target; *c; c++)
                                if (*c == '"' || *c == '\\')
                                        fprintf(f, "\\%c", *c);
                                else
                                        fputc(*c, f);
                        fputc('"', f);
                }
                /* A profile asked for by hand is wanted whole: a burst of
                 * allocations that outruns the plugin waits for it (as the
                 * Perfetto UI's default) rather than losing samples. */
                fprintf(f, " sampling_interval_bytes: %u block_client: true } } }\n", QUICK_HEAP_INTERVAL);
        }
        for (size_t i = 0; i < n_extra; i++) {
                fprintf(f, "data_sources { config { name: \"%s\"", extra_ds[i]);
                if (strcmp(extra_ds[i], "linux.sys_stats") == 0)
                        /* Without a period it records nothing: memory, CPU
                         * times, forks and frequencies every second. */
                        fprintf(f, " sys_stats_config { meminfo_period_ms: %u vmstat_period_ms: %u "
                                   "stat_period_ms: %u stat_counters: STAT_CPU_TIMES stat_counters: STAT_FORK_COUNT "
                                   "cpufreq_period_ms: %u }",
                                QUICK_SYS_STATS_PERIOD_MS, QUICK_SYS_STATS_PERIOD_MS, QUICK_SYS_STATS_PERIOD_MS,
                                QUICK_SYS_STATS_PERIOD_MS);
                fprintf(f, " } }\n");
        }
        if (duration_ms)
                fprintf(f, "duration_ms: %u\n", duration_ms);
        /* The file is written as the trace goes: producers flush
         * periodically too, so what they hold reaches it. */
        fprintf(f, "flush_period_ms: %u\n", CONFIG_LINT_FLUSH_PERIOD_MS);
        fclose(f);
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        int r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len, "<quick flags>", &m, &err);
        if (r < 0)
                fprintf(stderr, "%s\n", err ? err : "bad quick flags");
        free(err);
        free(text);
        return (Perfetto__Protos__TraceConfig *) m;
}

/* The data source names registered with the service (pointers into st). */
static size_t registered_names(const Perfetto__Protos__TracingServiceState *st, const char **names, size_t max) {
        size_t n = 0;
        for (size_t k = 0; st && k < st->n_data_sources && n < max; k++) {
                const char *name = st->data_sources[k]->ds_descriptor ? st->data_sources[k]->ds_descriptor->name : NULL;
                bool dup = !name;
                for (size_t i = 0; i < n && !dup; i++)
                        dup = strcmp(names[i], name) == 0;
                if (!dup)
                        names[n++] = name;
        }
        return n;
}

/* A service that just started registers its plugins' data sources a
 * moment after it accepts (traced answers QueryServiceState once its
 * plugins are in, up to its start_timeout_sec; another service may answer
 * before): wait (a while) for those the config names. A
 * name one edit or so from a registered one is a typo and fails at once
 * (with --allow-missing it is waited for like any other); one that never
 * comes fails after the wait, or is recorded without with --allow-missing
 * or when it is optional (one tracectl added by itself). Returns an exit
 * code. */
int wait_for_data_sources(struct tracectl *t, const Perfetto__Protos__TraceConfig *cfg, bool allow_missing,
                          const char *optional) {
        for (unsigned waited = 0;; waited += 200) {
                Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
                ProtobufCMessage *reply = NULL;
                const char *missing = NULL;
                if (tracectl_call(t, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                                  -EBADF, &reply, TRACECTL_QUERY_AT_START_MS) < 0 || !reply)
                        return EXIT_OK; /* the service will say what it lacks */
                const Perfetto__Protos__TracingServiceState *st =
                        ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
                const char *names[64];
                size_t n_names = registered_names(st, names, ELEMENTSOF(names));
                for (size_t i = 0; i < cfg->n_data_sources && !missing; i++) {
                        const char *name = cfg->data_sources[i]->config ? cfg->data_sources[i]->config->name : NULL;
                        bool found = !name;
                        for (size_t k = 0; !found && k < n_names; k++)
                                found = strcmp(names[k], name) == 0;
                        if (!found)
                                missing = name;
                }
                int r = -EAGAIN;
                const char *close = missing ? closest_name(missing, names, n_names) : NULL;
                bool lenient = allow_missing || (missing && optional && strcmp(missing, optional) == 0);
                if (!missing)
                        r = EXIT_OK;
                else if (close && !lenient) {
                        fprintf(stderr, "tracectl: no producer offers data source \"%s\"; did you mean %s?\n", missing,
                                close);
                        r = EXIT_CONFIG;
                } else if (waited >= TRACECTL_DATA_SOURCE_WAIT_MS) {
                        fprintf(stderr, "tracectl: no producer offers data source \"%s\"%s (offered:", missing,
                                lenient ? "; recording without it" : "");
                        for (size_t k = 0; k < n_names; k++)
                                fprintf(stderr, " %s", names[k]);
                        fprintf(stderr, "%s)%s\n", n_names ? "" : " none",
                                lenient ? "" : "; --allow-missing records without it");
                        /* A plugin that would offer it may be one the
                         * service could not run: each is named, with why. */
                        for (size_t k = 0; st && k < st->n_traced_failed_plugins; k++) {
                                const Perfetto__Protos__TracingServiceState__TracedFailedPlugin *f =
                                        st->traced_failed_plugins[k];
                                fprintf(stderr, "tracectl: plugin %s, which may offer it, failed to load: %s\n",
                                        f->plugin ? f->plugin : "?", f->reason ? f->reason : "unknown reason");
                        }
                        r = lenient ? EXIT_OK : EXIT_SESSION_FAILED;
                } else if (waited == 0)
                        fprintf(stderr, "tracectl: waiting for data source %s\n", missing);
                protobuf_c_message_free_unpacked(reply, NULL);
                if (r != -EAGAIN)
                        return r;
                (void) usleep(200 * 1000);
        }
}
