/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "heap-template.h"

uint32_t heap_template_home(uint32_t depth) {
        uint32_t h = depth * 0x9e3779b1u;
        return (h ^ (h >> 15)) % HEAP_TEMPLATE_SLOTS;
}

static bool guards_hold(const struct heap_template *t, const uint8_t *sp, uint32_t copy) {
        for (unsigned g = 0; g < t->nguards; g++) {
                uint64_t v;
                if (t->guard_offs[g] > copy - 8)
                        return false;
                memcpy(&v, sp + t->guard_offs[g], sizeof(v));
                if (v != t->guard_vals[g])
                        return false;
        }
        return true;
}

static bool words_inside(const struct heap_template *t, uint32_t copy) {
        if (t->nwords > HEAP_TEMPLATE_WORDS || t->nguards == 0 || t->nguards > HEAP_TEMPLATE_GUARDS)
                return false;
        for (unsigned k = 0; k < t->nwords; k++)
                if (t->offs[k] > copy - 8)
                        return false;
        return true;
}

const struct heap_template *heap_template_find(const struct heap_template *table, const uint8_t *sp, uint32_t depth,
                                               uint32_t copy) {
        if (!table || copy < 8 || copy > depth)
                return NULL;
        uint32_t home = heap_template_home(depth);
        for (uint32_t k = 0; k < HEAP_TEMPLATE_PROBES; k++) {
                const struct heap_template *t = &table[(home + k) % HEAP_TEMPLATE_SLOTS];
                uint32_t state = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
                if (state == HEAP_TEMPLATE_EMPTY)
                        return NULL; /* slots fill in order and are never emptied */
                if (state == HEAP_TEMPLATE_LIVE && t->depth == depth && t->copy == copy && words_inside(t, copy) &&
                    guards_hold(t, sp, copy))
                        return t;
        }
        return NULL;
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

bool heap_template_make(struct heap_template *ret, const uint32_t *offs, size_t n, const uint8_t *stack, uint32_t copy,
                        uint32_t depth, const uint64_t *ras, size_t n_ras) {
        if (n == 0 || n > HEAP_TEMPLATE_WORDS || copy < 8 || copy > depth)
                return false;
        *ret = (struct heap_template) { .state = HEAP_TEMPLATE_LIVE, .depth = depth, .copy = copy,
                                        .nwords = (uint16_t) n };
        for (size_t k = 0; k < n; k++) {
                if (offs[k] > copy - 8)
                        return false;
                ret->offs[k] = offs[k];
        }
        /* Each return address's place: the first word read that holds it. */
        for (size_t r = 0; r < n_ras && ret->nguards < HEAP_TEMPLATE_GUARDS; r++)
                for (size_t k = 0; k < n; k++) {
                        uint64_t v;
                        memcpy(&v, stack + offs[k], sizeof(v));
                        if (v == ras[r]) {
                                ret->guard_offs[ret->nguards] = offs[k];
                                ret->guard_vals[ret->nguards++] = v;
                                break;
                        }
                }
        if (ret->nguards == 0)
                return false;
        qsort(ret->offs, n, sizeof(ret->offs[0]), cmp_u32);
        return true;
}

static bool same_key(const struct heap_template *a, const struct heap_template *b) {
        if (a->depth != b->depth || a->copy != b->copy || a->nguards != b->nguards)
                return false;
        for (unsigned g = 0; g < a->nguards; g++)
                if (a->guard_offs[g] != b->guard_offs[g] || a->guard_vals[g] != b->guard_vals[g])
                        return false;
        return true;
}

int heap_template_add(struct heap_template *table, const struct heap_template *t) {
        uint32_t home = heap_template_home(t->depth);
        for (uint32_t k = 0; k < HEAP_TEMPLATE_PROBES; k++) {
                uint32_t slot = (home + k) % HEAP_TEMPLATE_SLOTS;
                struct heap_template *s = &table[slot];
                uint32_t state = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
                if (state == HEAP_TEMPLATE_LIVE && same_key(s, t))
                        return -EEXIST;
                if (state != HEAP_TEMPLATE_EMPTY)
                        continue;
                struct heap_template copy = *t;
                copy.state = HEAP_TEMPLATE_EMPTY;
                memcpy(s, &copy, sizeof(copy));
                /* The words before the state: a reader that sees it live
                 * sees them. */
                __atomic_store_n(&s->state, HEAP_TEMPLATE_LIVE, __ATOMIC_RELEASE);
                return (int) slot;
        }
        return -ENOSPC;
}

const struct heap_template *heap_template_at(const struct heap_template *table, uint32_t slot, uint32_t nwords) {
        if (!table || slot >= HEAP_TEMPLATE_SLOTS)
                return NULL;
        const struct heap_template *t = &table[slot];
        if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == HEAP_TEMPLATE_EMPTY || t->nwords != nwords ||
            nwords > HEAP_TEMPLATE_WORDS)
                return NULL;
        return t;
}

void heap_template_kill(struct heap_template *table, uint32_t slot) {
        if (table && slot < HEAP_TEMPLATE_SLOTS &&
            __atomic_load_n(&table[slot].state, __ATOMIC_RELAXED) == HEAP_TEMPLATE_LIVE)
                __atomic_store_n(&table[slot].state, HEAP_TEMPLATE_DEAD, __ATOMIC_RELEASE);
}
