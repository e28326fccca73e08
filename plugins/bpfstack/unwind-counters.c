/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "unwind-counters.h"

static const struct {
        const char *name;
        CounterDescriptor_Unit unit;
} counters[UNWIND_COUNTER_MAX] = {
        [UNWIND_COUNTER_TABLE_BYTES] = { "linux.bpf_stack unwind: table bytes", CounterDescriptor_UNIT_SIZE_BYTES },
        [UNWIND_COUNTER_IMAGES] = { "linux.bpf_stack unwind: files with tables", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_IMAGES_REFUSED] = { "linux.bpf_stack unwind: files without usable tables", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_PROCESSES] = { "linux.bpf_stack unwind: process entries written", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_RESETS] = { "linux.bpf_stack unwind: table resets", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_COMPILE_NS] = { "linux.bpf_stack unwind: time compiling tables", CounterDescriptor_UNIT_TIME_NS },
        [UNWIND_COUNTER_USTACKS_NOT_KEPT] = { "linux.bpf_stack unwind: walked stacks not kept at switch-out",
                                              CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_END - 1] = { "linux.bpf_stack unwind: walks whole",
                                                                CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_DEPTH - 1] = { "linux.bpf_stack unwind: walks cut at max_depth",
                                                                  CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_NO_TABLES - 1] = {
                "linux.bpf_stack unwind: stacks by frame pointers (tables not in yet)", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_NO_MAPPING - 1] = {
                "linux.bpf_stack unwind: walks ended outside mapped files with tables", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_NO_CFI - 1] = {
                "linux.bpf_stack unwind: walks ended without unwind info", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_UNSUPPORTED - 1] = {
                "linux.bpf_stack unwind: walks ended at unsupported rules", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_READ_FAULT - 1] = {
                "linux.bpf_stack unwind: walks ended at unreadable frames", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_BAD_FRAME - 1] = {
                "linux.bpf_stack unwind: walks ended at bad frames", CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_PY_PROCESSES] = { "linux.bpf_stack python: processes with Python frames",
                                          CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_PY_UNKNOWN] = { "linux.bpf_stack python: CPython processes left native (layout not known)",
                                        CounterDescriptor_UNIT_COUNT },
        [UNWIND_COUNTER_PY_SAMPLES] = { "linux.bpf_stack python: samples with Python frames walked",
                                        CounterDescriptor_UNIT_COUNT },
};

const char *unwind_counter_name(unsigned counter) {
        return counter < UNWIND_COUNTER_MAX ? counters[counter].name : NULL;
}

void unwind_counters_values(const struct unwind_stats *st, const uint64_t stops[BPFSTACK_STOP_MAX],
                            uint64_t ustacks_not_kept, int64_t values[UNWIND_COUNTER_MAX]) {
        values[UNWIND_COUNTER_TABLE_BYTES] = (int64_t) (st->rows * sizeof(struct bpfstack_row));
        values[UNWIND_COUNTER_IMAGES] = (int64_t) st->images;
        values[UNWIND_COUNTER_IMAGES_REFUSED] = (int64_t) st->images_refused;
        values[UNWIND_COUNTER_PROCESSES] = (int64_t) st->procs_loaded;
        values[UNWIND_COUNTER_RESETS] = (int64_t) st->resets;
        values[UNWIND_COUNTER_COMPILE_NS] = (int64_t) (st->compile_us * 1000u);
        values[UNWIND_COUNTER_USTACKS_NOT_KEPT] = (int64_t) ustacks_not_kept;
        for (unsigned k = 1; k < BPFSTACK_STOP_MAX; k++)
                values[UNWIND_COUNTER_STOP_FIRST + k - 1] = (int64_t) stops[k];
        for (unsigned k = UNWIND_COUNTER_PY_PROCESSES; k < UNWIND_COUNTER_MAX; k++)
                values[k] = 0;
}

void unwind_counter_descriptor(struct TracePacket *pkt, uint64_t uuid_base, unsigned counter) {
        TrackDescriptor td;
        CounterDescriptor cd;
        TracePacket_begin_track_descriptor(pkt, &td);
        TrackDescriptor_set_uuid(&td, uuid_base + counter);
        TrackDescriptor_set_name(&td, counters[counter].name);
        TrackDescriptor_begin_counter(&td, &cd);
        CounterDescriptor_set_unit(&cd, counters[counter].unit);
        TrackDescriptor_end_counter(&td, &cd);
        TracePacket_end_track_descriptor(pkt, &td);
        /* Each descriptor starts the sequence's state again, and each value
         * depends on it: when a ring buffer overwrote the descriptor a value
         * refers to, trace_processor skips the value (a notice) instead of
         * reporting a counter on an unknown track (an import error). */
        TracePacket_set_sequence_flags(pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
}

void unwind_counter_value(struct TracePacket *pkt, uint64_t uuid_base, unsigned counter, uint64_t ts,
                          int64_t value) {
        TrackEvent ev;
        TracePacket_set_timestamp(pkt, ts);
        TracePacket_set_timestamp_clock_id(pkt, BuiltinClock_BUILTIN_CLOCK_BOOTTIME);
        TracePacket_begin_track_event(pkt, &ev);
        TrackEvent_set_type(&ev, TrackEvent_TYPE_COUNTER);
        TrackEvent_set_track_uuid(&ev, uuid_base + counter);
        TrackEvent_set_counter_value(&ev, value);
        TracePacket_end_track_event(pkt, &ev);
        TracePacket_set_sequence_flags(pkt, TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
}
