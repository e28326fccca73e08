/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What linux.bpf_stack's unwind tables cost and how its walks ended, as
 * counter tracks of the trace (a TrackDescriptor with a CounterDescriptor
 * per figure, then TrackEvent TYPE_COUNTER values on CLOCK_BOOTTIME), so
 * trace_processor's counter tables and the UI show them over time. */

#include <stddef.h>
#include <stdint.h>

#include "bpfstack.h"
#include "unwind-tables.h"

enum {
        UNWIND_COUNTER_TABLE_BYTES,
        UNWIND_COUNTER_IMAGES,
        UNWIND_COUNTER_IMAGES_REFUSED,
        UNWIND_COUNTER_PROCESSES,
        UNWIND_COUNTER_RESETS,
        UNWIND_COUNTER_COMPILE_NS,
        UNWIND_COUNTER_USTACKS_NOT_KEPT,
        UNWIND_COUNTER_STOP_FIRST, /* then one per enum bpfstack_unwind_stop but NONE */
        /* CPython frames (set by the caller; unwind_counters_values
         * leaves them 0) */
        UNWIND_COUNTER_PY_PROCESSES = UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_MAX - 1,
        UNWIND_COUNTER_PY_UNKNOWN,
        UNWIND_COUNTER_PY_SAMPLES,
        UNWIND_COUNTER_MAX,
};

/* The track names, e.g. "linux.bpf_stack unwind: table bytes". */
const char *unwind_counter_name(unsigned counter);

/* Fills values (UNWIND_COUNTER_MAX of them) from the figures. */
void unwind_counters_values(const struct unwind_stats *st, const uint64_t stops[BPFSTACK_STOP_MAX],
                            uint64_t ustacks_not_kept, int64_t values[UNWIND_COUNTER_MAX]);

struct TracePacket; /* traced/pbzero/perfetto/trace/trace_packet.pbw.h */

/* One packet per call, written into pkt (just begun): the descriptor of
 * counter (uuid_base + counter), or its value at ts (CLOCK_BOOTTIME ns). */
void unwind_counter_descriptor(struct TracePacket *pkt, uint64_t uuid_base, unsigned counter);
void unwind_counter_value(struct TracePacket *pkt, uint64_t uuid_base, unsigned counter, uint64_t ts,
                          int64_t value);
