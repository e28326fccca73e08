/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* summary and report on what profilers write: linux.bpf_stack's unwind
 * counters (how the user stacks were walked), and a trace with perf
 * samples and /proc figures but no scheduling events. */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "stack-walks.h"
#include "summary.h"
#include "test-packets.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

static void counter_descriptor(TracePacket *pkt, uint64_t uuid, const char *name) {
        TrackDescriptor td;
        CounterDescriptor cd;
        TracePacket_begin_track_descriptor(pkt, &td);
        TrackDescriptor_set_uuid(&td, uuid);
        TrackDescriptor_set_name(&td, name);
        TrackDescriptor_begin_counter(&td, &cd);
        CounterDescriptor_set_unit(&cd, CounterDescriptor_UNIT_COUNT);
        TrackDescriptor_end_counter(&td, &cd);
        TracePacket_end_track_descriptor(pkt, &td);
}

static void counter_value(TracePacket *pkt, uint64_t uuid, uint64_t ts, int64_t v) {
        TrackEvent ev;
        TracePacket_set_timestamp(pkt, ts);
        TracePacket_begin_track_event(pkt, &ev);
        TrackEvent_set_type(&ev, TrackEvent_TYPE_COUNTER);
        TrackEvent_set_track_uuid(&ev, uuid);
        TrackEvent_set_counter_value(&ev, v);
        TracePacket_end_track_event(pkt, &ev);
}

/* Ends the packet in tp and hands it to fn. */
static void emit(struct test_packet *tp, void (*fn)(void *, const uint8_t *, size_t), void *userdata) {
        ssize_t n = test_packet_end(tp);
        cr_assert_geq(n, 0);
        fn(userdata, tp->buf, (size_t) n);
}

/* The plugin's counters: whole, frame pointers, cut without unwind info;
 * the values of the last second come first in the file. */
static void walks(void (*fn)(void *, const uint8_t *, size_t), void *userdata, int64_t whole, int64_t fp, int64_t cut) {
        static const char *const names[] = {
                "linux.bpf_stack unwind: walks whole",
                "linux.bpf_stack unwind: stacks by frame pointers (tables not in yet)",
                "linux.bpf_stack unwind: walks ended without unwind info",
                "linux.bpf_stack unwind: table bytes",
        };
        const int64_t last[] = { whole, fp, cut, 4096 };
        struct test_packet tp = {};
        for (size_t i = 0; i < 4; i++) {
                counter_descriptor(test_packet_begin(&tp), 100 + i, names[i]);
                emit(&tp, fn, userdata);
        }
        for (size_t i = 0; i < 4; i++) {
                counter_value(test_packet_begin(&tp), 100 + i, 2000, last[i]);
                emit(&tp, fn, userdata);
                counter_value(test_packet_begin(&tp), 100 + i, 1000, last[i] / 2);
                emit(&tp, fn, userdata);
        }
        test_packet_done(&tp);
}

static void to_summary(void *userdata, const uint8_t *d, size_t n) {
        summary_add_packet(userdata, d, n);
}

static char *summary_text(void (*fill)(struct summary *)) {
        struct summary *s = calloc(1, sizeof(*s));
        cr_assert_not_null(s);
        summary_init(s);
        fill(s);
        summary_finish(s);
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);
        summary_print(f, s, 10);
        fclose(f);
        summary_done(s);
        free(s);
        return out;
}

static void fill_fp(struct summary *s) {
        walks(to_summary, s, 102, 2606, 0);
}

static void fill_cut(struct summary *s) {
        walks(to_summary, s, 100, 10, 300);
}

Test(stack_walks, summary_says_how_stacks_were_walked_and_warns) {
        char *out = summary_text(fill_fp);
        cr_assert_not_null(strstr(out, "Stack walks:    2708 user stacks (linux.bpf_stack): 102 (4%) whole by unwind tables"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "2606 (96%) by frame pointers"), "%s", out);
        cr_assert_not_null(strstr(out, "Warning:        most user stacks fell back to frame pointers"), "%s", out);
        free(out);
        out = summary_text(fill_cut);
        cr_assert_not_null(strstr(out, "300 (73%) cut (300 without unwind info)"), "%s", out);
        cr_assert_not_null(strstr(out, "most user stacks were cut short"), "%s", out);
        cr_assert_null(strstr(out, "fell back"), "%s", out);
        free(out);
}

static void to_walks(void *userdata, const uint8_t *d, size_t n) {
        stack_walks_packet(userdata, d, n);
}

Test(stack_walks, none_said_without_the_counters_or_when_most_are_whole) {
        struct stack_walks w = {};
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);
        stack_walks_print(f, &w, "# ");
        walks(to_walks, &w, 900, 50, 50);
        cr_assert_eq(stack_walks_total(&w), 1000);
        cr_assert_eq(stack_walks_cut(&w), 50);
        stack_walks_print(f, &w, "# ");
        fclose(f);
        cr_assert(strncmp(out, "# Stack walks:", 14) == 0, "%s", out);
        cr_assert_null(strstr(out, "Warning"), "%s", out);
        free(out);
}

/* linux.process_stats and perf samples, no sched_switch. */
static void fill_perf_only(struct summary *s) {
        struct test_packet tp = {};
        TracePacket *pkt = test_packet_begin(&tp);
        ProcessTree tree;
        ProcessTree_Process proc;
        TracePacket_set_timestamp(pkt, 1000);
        TracePacket_begin_process_tree(pkt, &tree);
        ProcessTree_begin_processes(&tree, &proc);
        ProcessTree_Process_set_pid(&proc, 300);
        ProcessTree_Process_add_cmdline(&proc, "/usr/bin/python3");
        ProcessTree_end_processes(&tree, &proc);
        TracePacket_end_process_tree(pkt, &tree);
        emit(&tp, to_summary, s);
        for (uint64_t k = 0; k < 2; k++) {
                ProcessStats stats;
                ProcessStats_Process sp;
                pkt = test_packet_begin(&tp);
                TracePacket_set_timestamp(pkt, 1000 + k * 1000000000);
                TracePacket_begin_process_stats(pkt, &stats);
                ProcessStats_begin_processes(&stats, &sp);
                ProcessStats_Process_set_pid(&sp, 300);
                ProcessStats_Process_set_vm_rss_kb(&sp, 4096);
                ProcessStats_Process_set_runtime_user_mode(&sp, 1000000 + k * 5000000);
                ProcessStats_end_processes(&stats, &sp);
                TracePacket_end_process_stats(pkt, &stats);
                emit(&tp, to_summary, s);
        }
        for (uint64_t k = 0; k < 3; k++) {
                PerfSample ps;
                pkt = test_packet_begin(&tp);
                TracePacket_set_timestamp(pkt, 2000 + k);
                TracePacket_begin_perf_sample(pkt, &ps);
                PerfSample_set_pid(&ps, 300);
                PerfSample_set_tid(&ps, 300);
                PerfSample_set_callstack_iid(&ps, 1);
                TracePacket_end_perf_sample(pkt, &ps);
                emit(&tp, to_summary, s);
        }
        test_packet_done(&tp);
}

Test(summary_perf_only, shows_what_the_trace_has_not_zeros) {
        char *out = summary_text(fill_perf_only);
        cr_assert_not_null(strstr(out, "pid 300      python3"), "%s", out);
        cr_assert_not_null(strstr(out, "no sched_switch recorded"), "%s", out);
        cr_assert_null(strstr(out, "threads"), "%s", out);
        cr_assert_null(strstr(out, " 0.000 "), "%s", out);
        cr_assert_not_null(strstr(out, "  300      python3                       5.000        4.0\n"), "%s", out);
        free(out);
}
