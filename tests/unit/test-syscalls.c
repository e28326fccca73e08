/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <string.h>

#include "summary-syscalls.h"
#include "syscalls.h"

Test(syscalls, names_by_architecture) {
        cr_assert_str_eq(syscall_name("x86_64", 0), "read");
        cr_assert_str_eq(syscall_name("x86_64", 257), "openat");
        cr_assert_str_eq(syscall_name("aarch64", 56), "openat");
        cr_assert_str_eq(syscall_name("i686", 3), "read");
        cr_assert_null(syscall_name("x86_64", 100000));
        cr_assert_null(syscall_name("x86_64", -1));
        /* An unknown or missing machine: this one's table. */
        cr_assert_str_eq(syscall_name("", 0), syscall_name(NULL, 0));
        syscalls_done();
}

Test(syscalls, counted_and_timed_per_call) {
        struct syscall_stats s = {};
        /* tid 10: read 100..150, failed; tid 11: read 120..420; write with no exit */
        syscall_stats_enter_nr(&s, 10, 100, 0);
        syscall_stats_enter_nr(&s, 11, 120, 0);
        syscall_stats_exit_nr(&s, 10, 150, 0, true);
        syscall_stats_exit_nr(&s, 11, 420, 0, false);
        syscall_stats_enter_nr(&s, 10, 500, 1);
        /* an exit whose entry came before the trace: counted as a failure only */
        syscall_stats_exit_nr(&s, 12, 600, 0, false);
        syscall_stats_event(&s, 13, 700, "sys_enter_openat", 0);
        syscall_stats_event(&s, 13, 1700, "sys_exit_openat", -2);
        syscall_stats_event(&s, 13, 1800, "sched_switch", 0);
        cr_assert_eq(s.calls, 4);
        cr_assert_eq(s.v[0].calls, 2);
        cr_assert_eq(s.v[0].errors, 1);
        cr_assert_eq(s.v[0].timed, 2);
        cr_assert_eq(s.v[0].total_ns, 350);
        cr_assert_eq(s.v[0].max_ns, 300);
        cr_assert_eq(s.v[1].calls, 1);
        cr_assert_eq(s.v[1].timed, 0);
        size_t *order, n = syscall_stats_sorted(&s, &order);
        cr_assert_eq(n, 3);
        char buf[48];
        cr_assert_str_eq(syscall_stats_name(&s, order[0], "x86_64", buf, sizeof(buf)), "openat");
        cr_assert_eq(s.v[order[0]].errors, 1);
        cr_assert_str_eq(syscall_stats_name(&s, order[1], "x86_64", buf, sizeof(buf)), "read");
        cr_assert_str_eq(syscall_stats_name(&s, order[2], "x86_64", buf, sizeof(buf)), "write");
        free(order);
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);
        syscall_stats_print(f, &s, "x86_64", 10);
        fclose(f);
        cr_assert_not_null(strstr(out, "Syscalls:       4 calls of 3 system calls"), "%s", out);
        cr_assert_not_null(strstr(out, "  read                              2        1        0.000      0.175      0.300\n"), "%s",
                           out);
        free(out);
        syscall_stats_done(&s);
        syscalls_done();
}
