/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the trace file a tracectl child left holds: the raw producer's
 * packets, and why the service ended the session. */

#include <stdbool.h>
#include <stddef.h>

/* The raw producer's packets (raw-producer.h) with payload_size bytes in
 * the trace file at path: asserts that it is a trace, that they come in
 * order from the first with none missing and none damaged; their count. */
size_t tracectl_count_test_packets(const char *path, size_t payload_size);
/* traced_end_reason of the last TraceStats in the trace file at path (0
 * when it has none), and whether it has one. */
int tracectl_trace_end_reason(const char *path, bool *ret_have_stats);
