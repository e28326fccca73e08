/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What producers reported they could not do for a session's data sources
 * (TraceStats.traced_data_source_errors): the service answers them to
 * GetTraceStats while the session runs and writes them with the trace's
 * last TraceStats. tracectl prints each once, naming the data source and
 * the config field. */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "perfetto/common/trace_stats.pb-c.h"

/* "linux.ftrace: ftrace_events "sched/sched_swich": no such event (...)";
 * an instance lost with its producer (kind KIND_INSTANCE_LOST) names the
 * producer too: "linux.x of traced.x: lost before it started: its plugin
 * host (pid 12) was killed by SIGSEGV". */
void ds_error_format(const Perfetto__Protos__TraceStats__TracedDataSourceError *e, char *buf, size_t size);

/* Whether st holds errors past the first n_printed. */
static inline bool ds_errors_new(const Perfetto__Protos__TraceStats *st, size_t n_printed) {
        return st && st->n_traced_data_source_errors > n_printed;
}

static inline bool ds_error_is_loss(const Perfetto__Protos__TraceStats__TracedDataSourceError *e) {
        return e->has_kind && e->kind == PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_INSTANCE_LOST;
}

/* Prints the errors of st from index *n_printed on (the service only
 * appends), as "tracectl: ERROR" lines on f, and moves *n_printed on;
 * *n_lost (may be NULL) counts those of them that are lost instances.
 * Returns how many errors st holds in all. */
size_t ds_errors_print_new(const Perfetto__Protos__TraceStats *st, size_t *n_printed, size_t *n_lost, FILE *f);

/* The last TraceStats of the trace file at path, or NULL (none, or the
 * file cannot be read). Free with perfetto__protos__trace_stats__free_unpacked. */
Perfetto__Protos__TraceStats *ds_errors_last_trace_stats(const char *path);
