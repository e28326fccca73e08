/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "basic/hash.h"
#include "basic/hashmap.h"
#include "basic/macro.h"

#define MANY 100000u

Test(basic_hashmap, empty_map) {
        struct hashmap m = {};
        uint64_t v = 7;
        cr_assert_eq(hashmap_size(&m), 0);
        cr_assert_not(hashmap_get(&m, 0, &v));
        cr_assert_eq(v, 7);
        cr_assert_not(hashmap_remove(&m, 0, NULL));
        size_t it = 0;
        cr_assert_not(hashmap_next(&m, &it, NULL, NULL));
        cr_assert_null(hashmap_get_ptr(&m, 1));
        hashmap_clear(&m);
        hashmap_clear(&m);
}

Test(basic_hashmap, put_get_replace_remove) {
        struct hashmap m = {};
        cr_assert_eq(hashmap_put(&m, 0, 10), 1, "key 0 is an ordinary key");
        cr_assert_eq(hashmap_put(&m, UINT64_MAX, 20), 1);
        cr_assert_eq(hashmap_put(&m, 0, 11), 0, "replaced");
        cr_assert_eq(hashmap_size(&m), 2);
        uint64_t v;
        cr_assert(hashmap_get(&m, 0, &v));
        cr_assert_eq(v, 11);
        cr_assert(hashmap_get(&m, UINT64_MAX, NULL));
        cr_assert(hashmap_remove(&m, UINT64_MAX, &v));
        cr_assert_eq(v, 20);
        cr_assert_not(hashmap_remove(&m, UINT64_MAX, &v));
        cr_assert_not(hashmap_get(&m, UINT64_MAX, NULL));
        cr_assert_eq(hashmap_size(&m), 1);
        cr_assert(hashmap_remove(&m, 0, NULL));
        cr_assert_eq(hashmap_size(&m), 0);
        cr_assert_eq(hashmap_put(&m, UINT64_MAX, 21), 1, "back after removal");
        cr_assert(hashmap_get(&m, UINT64_MAX, &v));
        cr_assert_eq(v, 21);
        hashmap_clear(&m);
        cr_assert_eq(hashmap_size(&m), 0);
        cr_assert_null(m.slots);
}

Test(basic_hashmap, pointers) {
        struct hashmap m = {};
        int a, b;
        cr_assert_eq(hashmap_put_ptr(&m, 1, &a), 1);
        cr_assert_eq(hashmap_put_ptr(&m, 2, &b), 1);
        cr_assert_eq(hashmap_get_ptr(&m, 1), &a);
        cr_assert_eq(hashmap_get_ptr(&m, 2), &b);
        cr_assert_null(hashmap_get_ptr(&m, 3));
        hashmap_clear(&m);
}

Test(basic_hashmap, many_keys_grow) {
        struct hashmap m = {};
        size_t last_cap = 0, grows = 0;
        for (uint64_t k = 0; k < MANY; k++) {
                cr_assert_eq(hashmap_put(&m, k * 7919, k), 1);
                if (m.cap != last_cap) {
                        grows++;
                        cr_assert(last_cap == 0 || m.cap == 2 * last_cap);
                        last_cap = m.cap;
                }
                cr_assert_leq(m.n * 4, m.cap * 3);
        }
        cr_assert_eq(hashmap_size(&m), MANY);
        cr_assert_leq(grows, 13);
        for (uint64_t k = 0; k < MANY; k++) {
                uint64_t v;
                cr_assert(hashmap_get(&m, k * 7919, &v));
                cr_assert_eq(v, k);
                cr_assert_not(hashmap_get(&m, k * 7919 + 1, NULL));
        }
        /* Remove the odd ones, then check both halves. */
        for (uint64_t k = 1; k < MANY; k += 2)
                cr_assert(hashmap_remove(&m, k * 7919, NULL));
        cr_assert_eq(hashmap_size(&m), MANY / 2);
        for (uint64_t k = 0; k < MANY; k++)
                cr_assert_eq(hashmap_get(&m, k * 7919, NULL), k % 2 == 0);
        hashmap_clear(&m);
}

/* Keys that all land on one home slot: one long probe run, with removals
 * in its middle that lookups must step over. */
Test(basic_hashmap, colliding_keys) {
        struct hashmap m = {};
        cr_assert_eq(hashmap_reserve(&m, 1000), 0);
        size_t cap = m.cap, mask = cap - 1;
        uint64_t keys[200];
        size_t n = 0;
        size_t target = (size_t) hash_u64(12345) & mask;
        for (uint64_t k = 0; n < ELEMENTSOF(keys); k++)
                if (((size_t) hash_u64(k) & mask) == target)
                        keys[n++] = k;
        for (size_t i = 0; i < n; i++)
                cr_assert_eq(hashmap_put(&m, keys[i], i), 1);
        cr_assert_eq(m.cap, cap, "reserve made room");
        for (size_t i = 0; i < n; i += 3)
                cr_assert(hashmap_remove(&m, keys[i], NULL));
        for (size_t i = 0; i < n; i++) {
                uint64_t v;
                cr_assert_eq(hashmap_get(&m, keys[i], &v), i % 3 != 0);
                if (i % 3)
                        cr_assert_eq(v, i);
        }
        /* Re-inserting takes the first tombstone back without growing
         * the load; replacing a key found after a tombstone keeps one
         * entry. */
        size_t removed = m.n_removed;
        cr_assert_eq(hashmap_put(&m, keys[0], 1000), 1);
        cr_assert_eq(m.n_removed, removed - 1);
        cr_assert_eq(hashmap_put(&m, keys[4], 1004), 0);
        cr_assert_eq(hashmap_size(&m), n - (n + 2) / 3 + 1);
        uint64_t v;
        cr_assert(hashmap_get(&m, keys[4], &v));
        cr_assert_eq(v, 1004);
        hashmap_clear(&m);
}

Test(basic_hashmap, iterate_all_once) {
        struct hashmap m = {};
        for (uint64_t k = 1; k <= 5000; k++)
                cr_assert_eq(hashmap_put(&m, k << 20, k), 1);
        uint8_t *seen = calloc(5001, 1);
        cr_assert_not_null(seen);
        size_t it = 0, count = 0;
        uint64_t k, v;
        while (hashmap_next(&m, &it, &k, &v)) {
                cr_assert_eq(k, v << 20);
                cr_assert_eq(seen[v]++, 0);
                count++;
        }
        cr_assert_eq(count, 5000);
        cr_assert_not(hashmap_next(&m, &it, &k, &v), "stays at the end");
        it = 0;
        count = 0;
        while (hashmap_next(&m, &it, NULL, NULL))
                count++;
        cr_assert_eq(count, 5000);
        free(seen);
        hashmap_clear(&m);
}

Test(basic_hashmap, remove_during_iteration) {
        struct hashmap m = {};
        for (uint64_t k = 0; k < MANY; k++)
                cr_assert_eq(hashmap_put(&m, k, k % 3), 1);
        size_t it = 0, visited = 0;
        uint64_t k, v;
        while (hashmap_next(&m, &it, &k, &v)) {
                visited++;
                if (v == 0)
                        cr_assert(hashmap_remove(&m, k, NULL));
        }
        cr_assert_eq(visited, MANY, "every entry met once");
        cr_assert_eq(hashmap_size(&m), MANY - (MANY + 2) / 3);
        for (k = 0; k < MANY; k++)
                cr_assert_eq(hashmap_get(&m, k, NULL), k % 3 != 0);
        hashmap_clear(&m);
}

/* Filling and emptying over and over: tombstones are dropped by rebuilds
 * at the same size, so the table does not grow without bound. */
Test(basic_hashmap, churn_keeps_the_size) {
        struct hashmap m = {};
        for (uint64_t round = 0; round < 200; round++) {
                for (uint64_t k = 0; k < 30; k++)
                        cr_assert_eq(hashmap_put(&m, round * 1000 + k, k), 1);
                for (uint64_t k = 0; k < 30; k++)
                        cr_assert(hashmap_remove(&m, round * 1000 + k, NULL));
                cr_assert_leq((m.n + m.n_removed) * 4, m.cap * 3);
        }
        cr_assert_eq(m.cap, 64);
        cr_assert_eq(hashmap_size(&m), 0);
        hashmap_clear(&m);
}

Test(basic_hashmap, reserve) {
        struct hashmap m = {};
        cr_assert_eq(hashmap_reserve(&m, 0), 0);
        cr_assert_eq(m.cap, 64);
        cr_assert_eq(hashmap_reserve(&m, 48), 0);
        cr_assert_eq(m.cap, 64, "48 fit in 64");
        cr_assert_eq(hashmap_reserve(&m, 49), 0);
        cr_assert_eq(m.cap, 128);
        for (uint64_t k = 0; k < 96; k++)
                cr_assert_eq(hashmap_put(&m, k, k), 1);
        cr_assert_eq(m.cap, 128, "no growth within the reservation");
        cr_assert_eq(hashmap_reserve(&m, 10), 0);
        cr_assert_eq(m.cap, 128, "never shrinks");
        /* Tombstones count against a reservation: they are dropped. */
        for (uint64_t k = 0; k < 90; k++)
                cr_assert(hashmap_remove(&m, k, NULL));
        cr_assert_eq(hashmap_reserve(&m, 96), 0);
        cr_assert_eq(m.n_removed, 0);
        cr_assert_eq(m.cap, 128);
        for (uint64_t k = 90; k < 96; k++)
                cr_assert(hashmap_get(&m, k, NULL));
        hashmap_clear(&m);
}

Test(basic_hashmap, sizes_that_overflow_are_refused) {
        struct hashmap m = {};
        cr_assert_eq(hashmap_put(&m, 1, 2), 1);
        struct hashmap before = m;
        cr_assert_eq(hashmap_reserve(&m, SIZE_MAX), -ENOMEM);
        cr_assert_eq(hashmap_reserve(&m, (size_t) PTRDIFF_MAX / 17 + 1), -ENOMEM);
        cr_assert_eq(hashmap_reserve(&m, (size_t) PTRDIFF_MAX / 34), -ENOMEM, "its table would be too big");
        cr_assert_eq(memcmp(&m, &before, sizeof(m)), 0, "left as it was");
        cr_assert(hashmap_get(&m, 1, NULL));
        hashmap_clear(&m);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* A failing allocation while growing leaves the map as it was. (The
 * sanitizers' allocator reports the failure itself: not tested there.) */
Test(basic_hashmap, allocation_failure_while_growing) {
#ifdef UNDER_ASAN
        cr_skip_test("the address sanitizer's allocator dies on failures");
#else
        struct hashmap m = {};
        /* Full up to the load limit of a table big enough for its
         * successor to need fresh pages. */
        for (uint64_t k = 0; k < 49152; k++)
                cr_assert_eq(hashmap_put(&m, k, k), 1);
        cr_assert_eq(m.cap, 65536);
        struct hashmap before = m;
        /* RLIMIT_DATA covers malloc's heap and its private mappings (a
         * limit of 0 is not enforced: a page is the smallest). */
        cr_assert_eq(setrlimit(RLIMIT_DATA, &(struct rlimit){.rlim_cur = 4096, .rlim_max = RLIM_INFINITY}), 0);
        cr_assert_eq(hashmap_reserve(&m, 1u << 24), -ENOMEM);
        int r = hashmap_put(&m, 49152, 0);
        cr_assert_eq(setrlimit(RLIMIT_DATA, &(struct rlimit){.rlim_cur = RLIM_INFINITY, .rlim_max = RLIM_INFINITY}), 0);
        cr_assert_eq(r, -ENOMEM);
        cr_assert_eq(memcmp(&m, &before, sizeof(m)), 0);
        cr_assert_not(hashmap_get(&m, 49152, NULL));
        for (uint64_t k = 0; k < 49152; k++)
                cr_assert(hashmap_get(&m, k, NULL));
        cr_assert_eq(hashmap_put(&m, 49152, 0), 1, "works again with memory");
        cr_assert_eq(m.cap, 131072);
        hashmap_clear(&m);
#endif
}
