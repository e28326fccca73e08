/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sub-buffer size the ftrace plugin asks the kernel for: the default,
 * the environment's value, bounded by the buffer and the kernel. */

#include <criterion/criterion.h>
#include <errno.h>

#include "subbuf.h"

Test(subbuf, default_for_a_large_buffer) {
        cr_assert_eq(subbuf_choose_kb(NULL, 8192, 4), (int) SUBBUF_DEFAULT_KB);
}

Test(subbuf, a_small_buffer_keeps_enough_sub_buffers) {
        /* 1164 KiB / 32 = 36: 32 KiB, a power of two. */
        cr_assert_eq(subbuf_choose_kb(NULL, 1164, 4), 32);
        /* 256 KiB / 32 = 8. */
        cr_assert_eq(subbuf_choose_kb(NULL, 256, 4), 8);
        /* No more than a page: the kernel's own is kept. */
        cr_assert_eq(subbuf_choose_kb(NULL, 128, 4), 0);
        cr_assert_eq(subbuf_choose_kb(NULL, 64, 4), 0);
        cr_assert_eq(subbuf_choose_kb(NULL, 0, 4), 0);
}

Test(subbuf, the_environment_chooses) {
        cr_assert_eq(subbuf_choose_kb("16", 8192, 4), 16);
        cr_assert_eq(subbuf_choose_kb("24", 8192, 4), 16, "rounded down to a power of two");
        cr_assert_eq(subbuf_choose_kb("0", 8192, 4), 0, "0 keeps the kernel's");
        cr_assert_eq(subbuf_choose_kb("4", 8192, 4), 0, "a page is what the kernel has by default");
        cr_assert_eq(subbuf_choose_kb("4096", 1024 * 1024, 4), (int) SUBBUF_MAX_KB, "the kernel's bound");
        cr_assert_eq(subbuf_choose_kb("64", 1024, 16), 32, "a 16 KiB page still leaves 32 sub-buffers");
        cr_assert_eq(subbuf_choose_kb("16", 8192, 16), 0, "no larger than a 16 KiB page");
}

Test(subbuf, what_is_not_a_size_is_refused) {
        cr_assert_eq(subbuf_choose_kb("", 8192, 4), -EINVAL);
        cr_assert_eq(subbuf_choose_kb("64k", 8192, 4), -EINVAL);
        cr_assert_eq(subbuf_choose_kb("-64", 8192, 4), -EINVAL);
        cr_assert_eq(subbuf_choose_kb("99999999999999999999999", 8192, 4), -EINVAL);
}
