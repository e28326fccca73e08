/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace's FtraceStats: what the kernel counted in the session's
 * instance and what the session could not do. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "ftrace-session.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "tracefs.h"

static void note(char **list, size_t *n, const char *spec) {
        if (*n < MAX_STAT_EVENTS && (list[*n] = strdup(spec)))
                (*n)++;
}

void ftrace_stats_note_event(struct ftrace_session *s, const char *spec, int error) {
        if (error == -ENOENT)
                note(s->unknown_events, &s->n_unknown, spec);
        else
                note(s->failed_events, &s->n_failed, spec);
}

void ftrace_stats_free(struct ftrace_session *s) {
        for (size_t i = 0; i < s->n_unknown; i++)
                free(s->unknown_events[i]);
        for (size_t i = 0; i < s->n_failed; i++)
                free(s->failed_events[i]);
}

/* The number after key in a per-CPU stats file's text. */
static bool stat_u64(const char *text, const char *key, uint64_t *ret) {
        const char *at = strstr(text, key);
        if (!at)
                return false;
        *ret = strtoull(at + strlen(key), NULL, 10);
        return true;
}

static bool stat_double(const char *text, const char *key, double *ret) {
        const char *at = strstr(text, key);
        if (!at)
                return false;
        *ret = strtod(at + strlen(key), NULL);
        return true;
}

static void cpu_stats(struct ftrace_session *s, int cpu, const char *text, FtraceStats *st) {
        FtraceCpuStats c;
        uint64_t v;
        double d;
        FtraceStats_begin_cpu_stats(st, &c);
        FtraceCpuStats_set_cpu(&c, (uint64_t) cpu);
        if (stat_u64(text, "entries:", &v))
                FtraceCpuStats_set_entries(&c, v);
        if (stat_u64(text, "overrun:", &v))
                FtraceCpuStats_set_overrun(&c, v);
        if (stat_u64(text, "commit overrun:", &v))
                FtraceCpuStats_set_commit_overrun(&c, v);
        if (stat_u64(text, "bytes:", &v))
                FtraceCpuStats_set_bytes_read(&c, v);
        if (stat_double(text, "oldest event ts:", &d))
                FtraceCpuStats_set_oldest_event_ts(&c, d);
        if (stat_double(text, "now ts:", &d))
                FtraceCpuStats_set_now_ts(&c, d);
        if (stat_u64(text, "dropped events:", &v))
                FtraceCpuStats_set_dropped_events(&c, v);
        if (stat_u64(text, "read events:", &v))
                FtraceCpuStats_set_read_events(&c, v);
        if (s->cpu_fds && s->cpu_fds[cpu] >= 0)
                FtraceCpuStats_set_traced_reader(&c, (FtraceCpuStats_TracedReader) ftrace_drain_reader(s, cpu));
        FtraceStats_end_cpu_stats(st, &c);
}

/* An FtraceStats packet (TracePacket.ftrace_stats): the kernel's per-CPU
 * counters of our instance, at the start and at the end of the trace, so
 * overruns and drops are visible in the trace itself. */
void ftrace_stats_emit(struct ftrace_session *s, FtraceStats_Phase phase) {
        const struct traced_host_api *api = s->pl->api;
        TracePacket pkt;
        FtraceStats st;
        if (api->begin_packet(s->writer, &pkt.msg) < 0)
                return;
        TracePacket_begin_ftrace_stats(&pkt, &st);
        FtraceStats_set_phase(&st, phase);
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                char rel[64], text[1024];
                snprintf(rel, sizeof(rel), "per_cpu/cpu%d/stats", cpu);
                if (tracefs_read(s->root, rel, text, sizeof(text)) >= 0)
                        cpu_stats(s, cpu, text, &st);
        }
        if (s->ksyms) {
                FtraceStats_set_kernel_symbols_parsed(&st, (uint32_t) ksyms_count(s->ksyms));
                FtraceStats_set_kernel_symbols_mem_kb(&st, (uint32_t) ((ksyms_memory_bytes(s->ksyms) + 1023) / 1024));
        }
        if (s->atrace_error)
                FtraceStats_set_atrace_errors(&st, s->atrace_error);
        for (size_t i = 0; i < s->n_unknown; i++)
                FtraceStats_add_unknown_ftrace_events(&st, s->unknown_events[i]);
        for (size_t i = 0; i < s->n_failed; i++)
                FtraceStats_add_failed_ftrace_events(&st, s->failed_events[i]);
        if (s->preserve_buffer)
                FtraceStats_set_preserve_ftrace_buffer(&st, true);
        /* Page statuses are FtraceParseStatus values. */
        for (unsigned e = 0; e < 32; e++)
                if (s->parse_errors & (1u << e))
                        FtraceStats_add_ftrace_parse_errors(&st, (FtraceParseStatus) e);
        TracePacket_end_ftrace_stats(&pkt, &st);
        (void) api->end_packet(s->writer, &pkt.msg);
}
