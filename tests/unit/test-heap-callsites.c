/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <string.h>

#include "heap/heap-callsites.h"

static const struct heap_callsite *site_of(const struct heap_callsites *c, const uint64_t *pcs, size_t n) {
        for (size_t k = 0; k < c->n; k++)
                if (c->v[k].n_pcs == n && memcmp(c->v[k].pcs, pcs, n * sizeof(*pcs)) == 0)
                        return &c->v[k];
        return NULL;
}

Test(heap_callsites, allocations_and_frees_are_charged_where_they_came_from) {
        struct heap_callsites c = { 0 };
        const uint64_t a[] = { 0x401000, 0x402000, 0x403000 }, b[] = { 0x401000, 0x402100 };
        for (uint64_t k = 0; k < 100; k++)
                cr_assert_eq(heap_callsites_alloc(&c, 0x10000 + k * 16, a, 3, 1, 4096), 0);
        for (uint64_t k = 0; k < 10; k++)
                cr_assert_eq(heap_callsites_alloc(&c, 0x90000 + k * 16, b, 2, 1, 100000), 0);
        cr_assert_eq(c.n, 2, "two stacks, two callsites");
        for (uint64_t k = 0; k < 100; k += 2)
                heap_callsites_free(&c, 0x10000 + k * 16);
        heap_callsites_free(&c, 0x90000);
        heap_callsites_free(&c, 0x12345678);
        const struct heap_callsite *sa = site_of(&c, a, 3), *sb = site_of(&c, b, 2);
        cr_assert(sa && sb);
        cr_assert_eq(sa->allocated, 100 * 4096);
        cr_assert_eq(sa->alloc_count, 100);
        cr_assert_eq(sa->freed, 50 * 4096);
        cr_assert_eq(sa->free_count, 50);
        cr_assert_eq(sb->allocated, 1000000);
        cr_assert_eq(sb->freed, 100000);
        cr_assert_eq(c.unknown_frees, 1, "a free of an address never sampled");
        heap_callsites_done(&c);
}

Test(heap_callsites, a_lost_free_is_charged_when_the_address_comes_back) {
        struct heap_callsites c = { 0 };
        const uint64_t a[] = { 1, 2 }, b[] = { 3 };
        cr_assert_eq(heap_callsites_alloc(&c, 0x5000, a, 2, 1, 64), 0);
        cr_assert_eq(heap_callsites_alloc(&c, 0x5000, b, 1, 1, 64), 0);
        const struct heap_callsite *sa = site_of(&c, a, 2), *sb = site_of(&c, b, 1);
        cr_assert(sa && sb);
        cr_assert_eq(sa->freed, 64);
        cr_assert_eq(c.lost_frees, 1);
        heap_callsites_free(&c, 0x5000);
        cr_assert_eq(sb->freed, 64);
        heap_callsites_done(&c);
}

Test(heap_callsites, the_same_pcs_with_another_error_are_another_site) {
        struct heap_callsites c = { 0 };
        const uint64_t a[] = { 1, 2 };
        cr_assert_eq(heap_callsites_alloc(&c, 0x10, a, 2, 1, 8), 0);
        cr_assert_eq(heap_callsites_alloc(&c, 0x20, a, 2, 5, 8), 0);
        cr_assert_eq(heap_callsites_alloc(&c, 0x30, a, 2, 1, 8), 0);
        cr_assert_eq(c.n, 2);
        cr_assert_eq(heap_callsites_alloc(&c, 0x40, NULL, 0, 2, 8), 0, "an empty stack is a site too");
        cr_assert_eq(c.n, 3);
        heap_callsites_done(&c);
}
