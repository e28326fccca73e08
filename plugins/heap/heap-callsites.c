/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/hash.h"
#include "heap-callsites.h"

#define INDEX_BITS 24u
#define INDEX_MASK ((1u << INDEX_BITS) - 1u)
#define WEIGHT_MAX ((UINT64_C(1) << (64 - INDEX_BITS)) - 1u)

void heap_callsites_done(struct heap_callsites *c) {
        for (size_t k = 0; k < c->n; k++)
                free(c->v[k].pcs);
        free(c->v);
        hashmap_clear(&c->by_hash);
        hashmap_clear(&c->live);
        *c = (struct heap_callsites) { 0 };
}

static uint64_t stack_hash(const uint64_t *pcs, size_t n, int unwind_error) {
        uint64_t h = fnv1a64(pcs, n * sizeof(*pcs));
        return fnv1a64_step(h, (uint64_t) (uint32_t) unwind_error);
}

/* The callsite of this stack, added when new: its index, or negative errno. */
static int64_t callsite(struct heap_callsites *c, const uint64_t *pcs, size_t n, int unwind_error) {
        uint64_t h = stack_hash(pcs, n, unwind_error), first = 0;
        if (hashmap_get(&c->by_hash, h, &first))
                for (uint64_t i = first; i; i = c->v[i - 1].next) {
                        const struct heap_callsite *s = &c->v[i - 1];
                        if (s->n_pcs == n && s->unwind_error == unwind_error &&
                            memcmp(s->pcs, pcs, n * sizeof(*pcs)) == 0)
                                return (int64_t) (i - 1);
                }
        if (c->n >= INDEX_MASK)
                return -E2BIG;
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 64;
                struct heap_callsite *v = realloc(c->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                c->v = v;
                c->cap = cap;
        }
        uint64_t *copy = malloc((n ? n : 1) * sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        if (n)
                memcpy(copy, pcs, n * sizeof(*pcs));
        int r = hashmap_put(&c->by_hash, h, c->n + 1);
        if (r < 0) {
                free(copy);
                return r;
        }
        c->v[c->n] = (struct heap_callsite) { .pcs = copy, .n_pcs = (uint32_t) n, .unwind_error = unwind_error,
                                              .hash = h, .next = (uint32_t) first };
        return (int64_t) c->n++;
}

void heap_callsites_free(struct heap_callsites *c, uint64_t addr) {
        uint64_t v;
        if (!hashmap_remove(&c->live, addr, &v)) {
                c->unknown_frees++;
                return;
        }
        struct heap_callsite *s = &c->v[v & INDEX_MASK];
        s->freed += v >> INDEX_BITS;
        s->free_count++;
}

int heap_callsites_alloc(struct heap_callsites *c, uint64_t addr, const uint64_t *pcs, size_t n, int unwind_error,
                         uint64_t weight) {
        int64_t i = callsite(c, pcs, n, unwind_error);
        if (i < 0)
                return (int) i;
        if (weight > WEIGHT_MAX)
                weight = WEIGHT_MAX;
        uint64_t old;
        if (hashmap_get(&c->live, addr, &old)) {
                /* Its free never came (the ring was full): it was freed
                 * before this allocation got the address back. */
                c->lost_frees++;
                heap_callsites_free(c, addr);
        }
        int r = hashmap_put(&c->live, addr, weight << INDEX_BITS | (uint64_t) i);
        if (r < 0)
                return r;
        c->v[i].allocated += weight;
        c->v[i].alloc_count++;
        return 0;
}
