/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack's unwind counter packets, decoded as TracePackets: a
 * descriptor restarts the sequence's state and each value depends on it,
 * so a value whose descriptor a ring buffer overwrote is skipped by
 * trace_processor rather than counted on an unknown track. */

#include <criterion/criterion.h>

#include "test-packets.h"
#include "unwind-counters.h"

#include "perfetto/trace/trace_packet.pb-c.h"

static Perfetto__Protos__TracePacket *decode(struct test_packet *tp) {
        ssize_t n = test_packet_end(tp);
        cr_assert_geq(n, 0);
        Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, (size_t) n, tp->buf);
        cr_assert_not_null(p, "the packet does not decode");
        return p;
}

Test(unwind_counters, descriptor_restarts_the_sequence) {
        struct test_packet tp = {};
        unwind_counter_descriptor(test_packet_begin(&tp), 0x1000, UNWIND_COUNTER_RESETS);
        Perfetto__Protos__TracePacket *p = decode(&tp);
        cr_assert_eq(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR);
        cr_assert_eq(p->track_descriptor->uuid, 0x1000 + UNWIND_COUNTER_RESETS);
        cr_assert_str_eq(p->track_descriptor->name, unwind_counter_name(UNWIND_COUNTER_RESETS));
        cr_assert_not_null(p->track_descriptor->counter);
        cr_assert(p->has_sequence_flags);
        cr_assert_eq(p->sequence_flags, 1u, "SEQ_INCREMENTAL_STATE_CLEARED expected, got %u", p->sequence_flags);
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
        test_packet_done(&tp);
}

Test(unwind_counters, value_needs_its_descriptor) {
        struct test_packet tp = {};
        unwind_counter_value(test_packet_begin(&tp), 0x1000, UNWIND_COUNTER_COMPILE_NS, 123456789u, 42);
        Perfetto__Protos__TracePacket *p = decode(&tp);
        cr_assert_eq(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT);
        cr_assert_eq(p->timestamp, 123456789u);
        cr_assert_eq(p->track_event->track_uuid, 0x1000 + UNWIND_COUNTER_COMPILE_NS);
        cr_assert_eq(p->track_event->counter_value, 42);
        cr_assert(p->has_sequence_flags);
        cr_assert_eq(p->sequence_flags, 2u, "SEQ_NEEDS_INCREMENTAL_STATE expected, got %u", p->sequence_flags);
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
        test_packet_done(&tp);
}
