/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>

#include "name-history.h"

Test(name_history, the_name_in_effect_at_a_time) {
        struct name_history h = {};
        cr_assert_null(name_history_at(&h, 5));
        cr_assert_null(name_history_last(&h));
        /* In file order: an exec at 200, the scan at the start (100), a
         * process reusing the pid at 900. */
        cr_assert_eq(name_history_add(&h, 200, "python3"), 0);
        cr_assert_eq(name_history_add(&h, 100, "sh"), 0);
        cr_assert_eq(name_history_add(&h, 900, "bash"), 0);
        cr_assert_eq(name_history_add(&h, 300, ""), 0);
        cr_assert_eq(h.n, 3);
        cr_assert_str_eq(name_history_at(&h, 150), "sh");
        cr_assert_str_eq(name_history_at(&h, 200), "python3");
        cr_assert_str_eq(name_history_at(&h, 800), "python3");
        cr_assert_str_eq(name_history_at(&h, 900), "bash");
        /* Before everything: the earliest name. */
        cr_assert_str_eq(name_history_at(&h, 50), "sh");
        cr_assert_str_eq(name_history_last(&h), "bash");
        name_history_done(&h);
        cr_assert_eq(h.n, 0);
}

Test(name_history, same_time_the_last_added_and_no_duplicates) {
        struct name_history h = {};
        cr_assert_eq(name_history_add(&h, 0, "a"), 0);
        cr_assert_eq(name_history_add(&h, 0, "a"), 0);
        cr_assert_eq(h.n, 1);
        cr_assert_eq(name_history_add(&h, 0, "b"), 0);
        cr_assert_str_eq(name_history_at(&h, 0), "b");
        cr_assert_str_eq(name_history_at(&h, 7), "b");
        name_history_done(&h);
}
