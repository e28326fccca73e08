/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <string.h>

#include "basic/alloc.h"

/* Under the address sanitizer, an allocation too large to make fails
 * (NULL), as it does without it, instead of ending the program: failing
 * allocations are what some of these tests are about. */
const char *__asan_default_options(void);
__attribute__((visibility("default"), used)) const char *__asan_default_options(void) {
        return "allocator_may_return_null=1";
}

Test(basic_alloc, grows_by_doubling_from_the_first_size) {
        uint32_t *v = NULL;
        size_t cap = 0, reallocs = 0;
        for (size_t n = 0; n < 100000; n++) {
                size_t before = cap;
                cr_assert_eq(GREEDY_REALLOC(v, cap, n + 1), 0);
                cr_assert_geq(cap, n + 1);
                if (cap != before) {
                        reallocs++;
                        cr_assert_eq(cap, before ? before * 2 : 16);
                }
                v[n] = (uint32_t) n;
        }
        cr_assert_leq(reallocs, 14);
        for (size_t n = 0; n < 100000; n++)
                cr_assert_eq(v[n], n);
        free(v);
}

Test(basic_alloc, min_cap_and_big_jumps) {
        char *b = NULL;
        size_t cap = 0;
        cr_assert_eq(GREEDY_REALLOC_MIN(b, cap, 1, 4096), 0);
        cr_assert_eq(cap, 4096);
        cr_assert_eq(GREEDY_REALLOC_MIN(b, cap, 4096, 4096), 0);
        cr_assert_eq(cap, 4096, "no growth when it fits");
        cr_assert_eq(GREEDY_REALLOC_MIN(b, cap, 100000, 4096), 0);
        cr_assert_eq(cap, 100000, "need wins over doubling");
        memset(b, 1, cap);
        free(b);
}

Test(basic_alloc, overflow_is_refused_and_leaves_the_array) {
        uint64_t *v = NULL;
        size_t cap = 0;
        cr_assert_eq(GREEDY_REALLOC(v, cap, 4), 0);
        uint64_t *old = v;
        cr_assert_eq(GREEDY_REALLOC(v, cap, SIZE_MAX / 4), -ENOMEM);
        cr_assert_eq(GREEDY_REALLOC(v, cap, SIZE_MAX), -ENOMEM);
        cr_assert_eq(v, old);
        cr_assert_eq(cap, 16);
        free(v);
}

Test(basic_alloc, doubling_past_the_limit_falls_back_to_need) {
        /* A capacity whose double overflows in bytes: only need is asked
         * for (and refused here, being far too big to allocate). */
        void *p = NULL;
        size_t cap = (size_t) PTRDIFF_MAX / 16 + 1;
        cr_assert_eq(greedy_realloc(&p, &cap, cap + 1, 8, 16), -ENOMEM);
        cr_assert_eq(cap, (size_t) PTRDIFF_MAX / 16 + 1);
        cr_assert_null(p);
}
