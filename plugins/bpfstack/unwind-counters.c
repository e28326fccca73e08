/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "unwind-counters.h"

#define CLOCK_ID_BOOTTIME 6u
/* TracePacket */
#define PACKET_TIMESTAMP 8
#define PACKET_TRACK_EVENT 11
#define PACKET_TIMESTAMP_CLOCK_ID 58
#define PACKET_TRACK_DESCRIPTOR 60
#define PACKET_SEQUENCE_FLAGS 13
/* TracePacket.sequence_flags */
#define SEQ_INCREMENTAL_STATE_CLEARED 1u
#define SEQ_NEEDS_INCREMENTAL_STATE 2u
/* TrackDescriptor, CounterDescriptor, TrackEvent */
#define TRACK_UUID 1
#define TRACK_NAME 2
#define TRACK_COUNTER 8
#define COUNTER_UNIT 3
#define COUNTER_UNIT_COUNT 2
#define COUNTER_UNIT_TIME_NS 1
#define COUNTER_UNIT_SIZE_BYTES 3
#define EVENT_TYPE 9
#define EVENT_TYPE_COUNTER 4
#define EVENT_TRACK_UUID 11
#define EVENT_COUNTER_VALUE 30

static const struct {
        const char *name;
        unsigned unit;
} counters[UNWIND_COUNTER_MAX] = {
        [UNWIND_COUNTER_TABLE_BYTES] = { "linux.bpf_stack unwind: table bytes", COUNTER_UNIT_SIZE_BYTES },
        [UNWIND_COUNTER_IMAGES] = { "linux.bpf_stack unwind: files with tables", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_IMAGES_REFUSED] = { "linux.bpf_stack unwind: files without usable tables", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_PROCESSES] = { "linux.bpf_stack unwind: process entries written", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_RESETS] = { "linux.bpf_stack unwind: table resets", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_COMPILE_NS] = { "linux.bpf_stack unwind: time compiling tables", COUNTER_UNIT_TIME_NS },
        [UNWIND_COUNTER_USTACKS_NOT_KEPT] = { "linux.bpf_stack unwind: walked stacks not kept at switch-out",
                                              COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_END - 1] = { "linux.bpf_stack unwind: walks whole",
                                                                COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_DEPTH - 1] = { "linux.bpf_stack unwind: walks cut at max_depth",
                                                                  COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_NO_TABLES - 1] = {
                "linux.bpf_stack unwind: stacks by frame pointers (tables not in yet)", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_NO_MAPPING - 1] = {
                "linux.bpf_stack unwind: walks ended outside mapped files with tables", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_NO_CFI - 1] = {
                "linux.bpf_stack unwind: walks ended without unwind info", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_UNSUPPORTED - 1] = {
                "linux.bpf_stack unwind: walks ended at unsupported rules", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_READ_FAULT - 1] = {
                "linux.bpf_stack unwind: walks ended at unreadable frames", COUNTER_UNIT_COUNT },
        [UNWIND_COUNTER_STOP_FIRST + BPFSTACK_STOP_BAD_FRAME - 1] = {
                "linux.bpf_stack unwind: walks ended at bad frames", COUNTER_UNIT_COUNT },
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
}

void unwind_counter_descriptor(struct pbw *pkt, uint64_t uuid_base, unsigned counter) {
        struct pbw td = {}, cd = {};
        pbw_reset(pkt);
        pbw_varint(&cd, COUNTER_UNIT, counters[counter].unit);
        pbw_varint(&td, TRACK_UUID, uuid_base + counter);
        pbw_string(&td, TRACK_NAME, counters[counter].name);
        pbw_message(&td, TRACK_COUNTER, &cd);
        pbw_message(pkt, PACKET_TRACK_DESCRIPTOR, &td);
        /* Each descriptor starts the sequence's state again, and each value
         * depends on it: when a ring buffer overwrote the descriptor a value
         * refers to, trace_processor skips the value (a notice) instead of
         * reporting a counter on an unknown track (an import error). */
        pbw_varint(pkt, PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        pbw_done(&td);
        pbw_done(&cd);
}

void unwind_counter_value(struct pbw *pkt, uint64_t uuid_base, unsigned counter, uint64_t ts, int64_t value) {
        struct pbw ev = {};
        pbw_reset(pkt);
        pbw_varint(&ev, EVENT_TYPE, EVENT_TYPE_COUNTER);
        pbw_varint(&ev, EVENT_TRACK_UUID, uuid_base + counter);
        pbw_varint(&ev, EVENT_COUNTER_VALUE, (uint64_t) value);
        pbw_varint(pkt, PACKET_TIMESTAMP, ts);
        pbw_varint(pkt, PACKET_TIMESTAMP_CLOCK_ID, CLOCK_ID_BOOTTIME);
        pbw_message(pkt, PACKET_TRACK_EVENT, &ev);
        pbw_varint(pkt, PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        pbw_done(&ev);
}
