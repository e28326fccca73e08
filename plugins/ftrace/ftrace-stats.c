/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace's FtraceStats: what the kernel counted in the session's
 * instance and what the session could not do. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "ftrace-session.h"
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

/* An FtraceStats packet (TracePacket.ftrace_stats): the kernel's per-CPU
 * counters of our instance, at the start and at the end of the trace, so
 * overruns and drops are visible in the trace itself. */
void ftrace_stats_emit(struct ftrace_session *s, unsigned phase) {
        struct pbw st = {}, pkt = {};
        pbw_varint(&st, 1, phase);
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                char rel[64], text[1024];
                snprintf(rel, sizeof(rel), "per_cpu/cpu%d/stats", cpu);
                if (tracefs_read(s->root, rel, text, sizeof(text)) < 0)
                        continue;
                static const struct {
                        const char *key;
                        uint32_t field;
                        bool is_double;
                } keys[] = {
                        {"entries:", 2, false},        {"overrun:", 3, false},        {"commit overrun:", 4, false},
                        {"bytes:", 5, false},          {"oldest event ts:", 6, true}, {"now ts:", 7, true},
                        {"dropped events:", 8, false}, {"read events:", 9, false},
                };
                struct pbw c = {};
                pbw_varint(&c, 1, (uint64_t) cpu);
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                        const char *at = strstr(text, keys[k].key);
                        if (!at)
                                continue;
                        at += strlen(keys[k].key);
                        if (keys[k].is_double) {
                                double d = strtod(at, NULL);
                                uint64_t bits;
                                memcpy(&bits, &d, 8);
                                pbw_fixed64(&c, keys[k].field, bits);
                        } else
                                pbw_varint(&c, keys[k].field, strtoull(at, NULL, 10));
                }
                if (s->cpu_fds && s->cpu_fds[cpu] >= 0) /* traced_reader */
                        pbw_varint(&c, 1000, ftrace_drain_reader(s, cpu));
                pbw_message(&st, 2, &c);
                pbw_done(&c);
        }
        if (s->ksyms) {
                pbw_varint(&st, 3, ksyms_count(s->ksyms));                        /* kernel_symbols_parsed */
                pbw_varint(&st, 4, (ksyms_memory_bytes(s->ksyms) + 1023) / 1024); /* kernel_symbols_mem_kb */
        }
        if (s->atrace_error)
                pbw_string(&st, 5, s->atrace_error);
        for (size_t i = 0; i < s->n_unknown; i++)
                pbw_string(&st, 6, s->unknown_events[i]);
        for (size_t i = 0; i < s->n_failed; i++)
                pbw_string(&st, 7, s->failed_events[i]);
        if (s->preserve_buffer)
                pbw_varint(&st, 8, 1);
        for (unsigned e = 0; e < 32; e++)
                if (s->parse_errors & (1u << e))
                        pbw_varint(&st, 9, e); /* ftrace_parse_errors */
        pbw_message(&pkt, 34, &st);
        if (!pkt.error)
                (void) s->pl->api->write_packet(s->writer, pkt.buf, pkt.len);
        pbw_done(&st);
        pbw_done(&pkt);
}
