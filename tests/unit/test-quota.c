/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/ports/quota.h"

#define MiB (1024u * 1024u)

Test(quota, cost_counts_name_descriptor_and_bookkeeping) {
        cr_assert_eq(registration_cost("abc", 100), REGISTRATION_OVERHEAD + 4 + 100);
}

Test(quota, producer_quota_first) {
        struct registration_usage u = { .producer = 8 * MiB - 100, .uid = 8 * MiB - 100, .all = 8 * MiB - 100 };
        cr_assert_null(registration_quota_refusal(&u, 100));
        const char *why = registration_quota_refusal(&u, 101);
        cr_assert_not_null(why);
        cr_assert(strstr(why, "producer's quota"), "%s", why);
}

Test(quota, uid_quota_across_producers) {
        /* A fresh producer of a uid that holds 32 MiB already. */
        struct registration_usage u = { .producer = 0, .uid = 32 * MiB, .all = 32 * MiB };
        const char *why = registration_quota_refusal(&u, 1);
        cr_assert_not_null(why);
        cr_assert(strstr(why, "user's quota"), "%s", why);
        u.uid = 31 * MiB;
        cr_assert_null(registration_quota_refusal(&u, MiB));
}

Test(quota, service_limit_across_uids) {
        struct registration_usage u = { .producer = 0, .uid = 0, .all = 256 * MiB - 10 };
        cr_assert_null(registration_quota_refusal(&u, 10));
        const char *why = registration_quota_refusal(&u, 11);
        cr_assert_not_null(why);
        cr_assert(strstr(why, "service's limit"), "%s", why);
}

Test(quota, no_overflow) {
        struct registration_usage u = { .producer = 1, .uid = 1, .all = 1 };
        cr_assert_not_null(registration_quota_refusal(&u, SIZE_MAX));
        u = (struct registration_usage) { .producer = SIZE_MAX, .uid = 0, .all = 0 };
        cr_assert_not_null(registration_quota_refusal(&u, 1));
}
