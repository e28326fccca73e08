/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack's list of processes waiting for unwind tables: hits
 * add up per process, the hottest is loaded first, a full list gives the
 * coldest place to a hotter newcomer but never one waiting for compiles,
 * and each process keeps its latest distinct sampled pcs, which tell the
 * files its samples need first from the others. */

#include <criterion/criterion.h>

#include "unwind-pending.h"

static struct pending_loads l;

static void clear(void) {
        l = (struct pending_loads){};
}

TestSuite(unwind_pending, .init = clear);

Test(unwind_pending, hits_add_up_and_hottest_first) {
        cr_assert(pending_add(&l, 10, 1, 0));
        cr_assert(pending_add(&l, 20, 64, 0));
        cr_assert_not(pending_add(&l, 10, 1, 0));
        cr_assert(pending_add(&l, 30, 5, 0));
        cr_assert_eq(l.n, 3);
        pending_sort(&l);
        cr_assert_eq(l.v[0].pid, 20);
        cr_assert_eq(l.v[1].pid, 30);
        cr_assert_eq(l.v[2].pid, 10);
        cr_assert_eq(l.v[2].hits, 2);
}

Test(unwind_pending, full_list_gives_the_coldest_place_not_a_waiting_one) {
        for (int k = 0; k < (int) PENDING_LOADS; k++)
                pending_add(&l, 1000 + k, 10, 0);
        l.v[0].hits = 1;
        l.v[0].waiting = true; /* coldest, but its compiles are under way */
        l.v[5].hits = 2;
        cr_assert(pending_add(&l, 7, 64, 0));
        cr_assert_eq(l.n, PENDING_LOADS);
        cr_assert_eq(l.v[0].pid, 1000, "a process waiting for compiles keeps its place");
        cr_assert_eq(l.v[5].pid, 7, "the coldest of the others makes room");
        /* Not hotter than the coldest: left out. */
        pending_add(&l, 8, 1, 0);
        for (size_t k = 0; k < l.n; k++)
                cr_assert_neq(l.v[k].pid, 8);
}

Test(unwind_pending, latest_distinct_pcs_kept) {
        pending_add(&l, 1, 1, 0x1000);
        pending_add(&l, 1, 1, 0x1000);
        pending_add(&l, 1, 1, 0);
        cr_assert_eq(l.v[0].n_pcs, 1, "the same pc once, an unknown one not at all");
        for (uint64_t pc = 0x2000; pc <= 0x6000; pc += 0x1000)
                pending_add(&l, 1, 1, pc);
        cr_assert_eq(l.v[0].n_pcs, PENDING_PCS);
        cr_assert_not(pending_hot(&l.v[0], 0x1000, 0x2000), "the oldest pc went");
        cr_assert(pending_hot(&l.v[0], 0x6000, 0x7000));
        cr_assert(pending_hot(&l.v[0], 0x3000, 0x4000));
}

Test(unwind_pending, hot_files_are_those_holding_a_sampled_pc) {
        pending_add(&l, 1, 64, 0x7f0000001234);
        cr_assert(pending_hot(&l.v[0], 0x7f0000000000, 0x7f0000100000));
        cr_assert_not(pending_hot(&l.v[0], 0x400000, 0x500000));
        cr_assert(pending_hot(&l.v[0], 0x7f0000001234, 0x7f0000001235), "start is in");
        cr_assert_not(pending_hot(&l.v[0], 0x7f0000001000, 0x7f0000001234), "end is not");
        /* No pc known: every file is needed alike. */
        pending_add(&l, 2, 1, 0);
        cr_assert(pending_hot(&l.v[1], 0x400000, 0x500000));
}
