/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>

#include "basic/closest-name.h"

Test(closest_name, distances) {
        cr_assert_eq(name_distance("linux.ftrace", "linux.ftrace", 3), 0);
        cr_assert_eq(name_distance("linux.ftrce", "linux.ftrace", 3), 1);
        cr_assert_eq(name_distance("linux.frtace", "linux.ftrace", 3), 1, "a swap is one edit");
        cr_assert_eq(name_distance("sched_swich", "sched_switch", 3), 1);
        cr_assert_eq(name_distance("kitten", "sitting", 5), 3);
        cr_assert_eq(name_distance("abc", "xyzxyzxyz", 2), 3, "past the limit: limit + 1");
        cr_assert_eq(name_distance("", "ab", 3), 2);
}

Test(closest_name, picks_the_nearest_close_name) {
        const char *names[] = { "linux.process_stats", "linux.ftrace", "linux.perf", "linux.bpf_stack" };
        cr_assert_str_eq(closest_name("linux.ftrce", names, 4), "linux.ftrace");
        cr_assert_str_eq(closest_name("linux.pref", names, 4), "linux.perf");
        cr_assert_str_eq(closest_name("linux.bpf_stacks", names, 4), "linux.bpf_stack");
        cr_assert_null(closest_name("com.example.mine", names, 4), "nothing is that close");
        cr_assert_null(closest_name("linux.ftrace", names, 4), "the name itself is no suggestion");
        cr_assert_null(closest_name("x", NULL, 0));
}
