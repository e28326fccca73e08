/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* lib/basic/capability.c: capability names, masks as text, and what a
 * plugin's declaration is on this kernel. */

#include <criterion/criterion.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>

#include "basic/capability.h"

Test(capability, names_follow_the_kernel_numbers) {
        cr_assert_str_eq(capability_name(CAP_CHOWN), "CAP_CHOWN");
        cr_assert_str_eq(capability_name(CAP_DAC_OVERRIDE), "CAP_DAC_OVERRIDE");
        cr_assert_str_eq(capability_name(CAP_DAC_READ_SEARCH), "CAP_DAC_READ_SEARCH");
        cr_assert_str_eq(capability_name(CAP_SYS_PTRACE), "CAP_SYS_PTRACE");
        cr_assert_str_eq(capability_name(CAP_SYS_ADMIN), "CAP_SYS_ADMIN");
        cr_assert_str_eq(capability_name(CAP_SYSLOG), "CAP_SYSLOG");
        cr_assert_str_eq(capability_name(CAP_PERFMON), "CAP_PERFMON");
        cr_assert_str_eq(capability_name(CAP_BPF), "CAP_BPF");
        cr_assert_str_eq(capability_name(CAP_CHECKPOINT_RESTORE), "CAP_CHECKPOINT_RESTORE");
        cr_assert_null(capability_name(CAP_CHECKPOINT_RESTORE + 1));
        cr_assert_null(capability_name(63));
}

Test(capability, masks_are_named_in_order_and_unknown_ones_by_number) {
        char buf[256];
        cr_assert_str_eq(capability_mask_names(0, buf, sizeof(buf)), "none");
        uint64_t m = (1ull << CAP_SYSLOG) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_SYS_ADMIN);
        cr_assert_str_eq(capability_mask_names(m, buf, sizeof(buf)), "CAP_DAC_OVERRIDE CAP_SYS_ADMIN CAP_SYSLOG");
        cr_assert_str_eq(capability_mask_names((1ull << 62) | 1, buf, sizeof(buf)), "CAP_CHOWN 62");
}

Test(capability, a_short_buffer_is_cut_not_overrun) {
        char buf[12];
        memset(buf, 'x', sizeof(buf));
        capability_mask_names((1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_SYS_ADMIN), buf, 10);
        cr_assert_eq(strlen(buf), 9);
        cr_assert_eq(buf[11], 'x');
}

/* CAP_PERFMON gets CAP_SYS_ADMIN in its place only on a kernel without it
 * (cap_last_cap below 38); other declarations are kept as they are. */
Test(capability, perfmon_falls_back_to_sys_admin_only_before_linux_5_8) {
        uint64_t none = (1ull << CAP_SYSLOG) | (1ull << CAP_DAC_READ_SEARCH);
        cr_assert_eq(capability_for_kernel(none), none);
        cr_assert_eq(capability_for_kernel(0), 0);
        int last = -1;
        FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
        if (f) {
                if (fscanf(f, "%d", &last) != 1)
                        last = -1;
                fclose(f);
        }
        cr_assert_geq(last, 0, "no /proc/sys/kernel/cap_last_cap");
        uint64_t perf = (1ull << CAP_PERFMON) | (1ull << CAP_SYSLOG);
        uint64_t want = last < CAP_PERFMON ? perf | (1ull << CAP_SYS_ADMIN) : perf;
        cr_assert_eq(capability_for_kernel(perf), want);
}
