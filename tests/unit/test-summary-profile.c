/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* summary and report on what profilers write: linux.bpf_stack's unwind
 * counters (how the user stacks were walked), and a trace with perf
 * samples and /proc figures but no scheduling events. */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "basic/pbw.h"
#include "profile.h"
#include "stack-walks.h"
#include "summary.h"

static void counter_descriptor(struct pbw *pkt, uint64_t uuid, const char *name) {
        struct pbw td = {}, cd = {};
        pbw_reset(pkt);
        pbw_varint(&cd, 3, 2);
        pbw_varint(&td, 1, uuid);
        pbw_string(&td, 2, name);
        pbw_message(&td, 8, &cd);
        pbw_message(pkt, 60, &td);
        pbw_done(&td);
        pbw_done(&cd);
}

static void counter_value(struct pbw *pkt, uint64_t uuid, uint64_t ts, int64_t v) {
        struct pbw ev = {};
        pbw_reset(pkt);
        pbw_varint(&ev, 9, 4);
        pbw_varint(&ev, 11, uuid);
        pbw_varint(&ev, 30, (uint64_t) v);
        pbw_varint(pkt, 8, ts);
        pbw_message(pkt, 11, &ev);
        pbw_done(&ev);
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
        struct pbw pkt = {};
        for (size_t i = 0; i < 4; i++) {
                counter_descriptor(&pkt, 100 + i, names[i]);
                fn(userdata, pkt.buf, pkt.len);
        }
        for (size_t i = 0; i < 4; i++) {
                counter_value(&pkt, 100 + i, 2000, last[i]);
                fn(userdata, pkt.buf, pkt.len);
                counter_value(&pkt, 100 + i, 1000, last[i] / 2);
                fn(userdata, pkt.buf, pkt.len);
        }
        pbw_done(&pkt);
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
        struct pbw pkt = {}, tree = {}, proc = {}, stats = {}, sp = {}, ps = {};
        pbw_varint(&proc, 1, 300);
        pbw_string(&proc, 3, "/usr/bin/python3");
        pbw_message(&tree, 1, &proc);
        pbw_varint(&pkt, 8, 1000);
        pbw_message(&pkt, 2, &tree);
        summary_add_packet(s, pkt.buf, pkt.len);
        for (uint64_t k = 0; k < 2; k++) {
                pbw_reset(&pkt);
                pbw_reset(&stats);
                pbw_reset(&sp);
                pbw_varint(&sp, 1, 300);
                pbw_varint(&sp, 3, 4096);                 /* vm_rss_kb */
                pbw_varint(&sp, 21, 1000000 + k * 5000000); /* runtime_user_mode */
                pbw_message(&stats, 1, &sp);
                pbw_varint(&pkt, 8, 1000 + k * 1000000000);
                pbw_message(&pkt, 9, &stats);
                summary_add_packet(s, pkt.buf, pkt.len);
        }
        for (uint64_t k = 0; k < 3; k++) {
                pbw_reset(&pkt);
                pbw_reset(&ps);
                pbw_varint(&ps, 2, 300);
                pbw_varint(&ps, 3, 300);
                pbw_varint(&ps, 4, 1);
                pbw_varint(&pkt, 8, 2000 + k);
                pbw_message(&pkt, 66, &ps);
                summary_add_packet(s, pkt.buf, pkt.len);
        }
        pbw_done(&pkt);
        pbw_done(&tree);
        pbw_done(&proc);
        pbw_done(&stats);
        pbw_done(&sp);
        pbw_done(&ps);
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
