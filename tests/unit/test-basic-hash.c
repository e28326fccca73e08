/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <string.h>

#include "basic/hash.h"

/* Published FNV-1a test vectors: the values must never move, a relay's
 * machine id is derived from them. */
Test(basic_hash, fnv1a64_known_values) {
        cr_assert_eq(fnv1a64("", 0), UINT64_C(0xcbf29ce484222325));
        cr_assert_eq(fnv1a64("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
        cr_assert_eq(fnv1a64("foobar", 6), UINT64_C(0x85944171f73967e8));
        cr_assert_eq(fnv1a64_str("foobar"), UINT64_C(0x85944171f73967e8));
        cr_assert_eq(fnv1a64_str(""), FNV1A64_OFFSET);
}

Test(basic_hash, fnv1a32_known_values) {
        cr_assert_eq(fnv1a32("", 0), UINT32_C(0x811c9dc5));
        cr_assert_eq(fnv1a32("a", 1), UINT32_C(0xe40c292c));
        cr_assert_eq(fnv1a32("foobar", 6), UINT32_C(0xbf9cf968));
}

Test(basic_hash, update_continues_where_it_stopped) {
        const char *s = "perfetto trace packet";
        size_t n = strlen(s);
        for (size_t cut = 0; cut <= n; cut++)
                cr_assert_eq(fnv1a64_update(fnv1a64(s, cut), s + cut, n - cut), fnv1a64(s, n));
}

Test(basic_hash, step_over_a_byte_is_fnv1a) {
        uint64_t h = FNV1A64_OFFSET;
        for (const char *c = "foobar"; *c; c++)
                h = fnv1a64_step(h, (uint8_t) *c);
        cr_assert_eq(h, fnv1a64_str("foobar"));
}

Test(basic_hash, hash_u64_spreads_and_is_a_bijection_on_samples) {
        cr_assert_eq(hash_u64(0), 0);
        /* Neighbouring keys land far apart in the low bits. */
        size_t same_low_byte = 0;
        for (uint64_t k = 1; k < 4096; k++)
                if ((hash_u64(k) & 0xff) == (hash_u64(k - 1) & 0xff))
                        same_low_byte++;
        cr_assert_lt(same_low_byte, 64);
        for (uint64_t k = 1; k < 4096; k++)
                cr_assert_neq(hash_u64(k), hash_u64(k + 4096));
}
