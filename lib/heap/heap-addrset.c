/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "heap-addrset.h"

#define EMPTY 0u
#define TOMBSTONE 1u

size_t heap_addrset_bytes(uint64_t n) {
        return (size_t) (n * sizeof(uint64_t));
}

void heap_addrset_init(struct heap_addrset *s, void *mem, uint64_t n) {
        s->slots = mem;
        s->mask = n - 1;
}

static uint64_t hash(uint64_t a) {
        /* Allocations are 16-byte aligned: mix the low bits in. */
        a ^= a >> 33;
        a *= 0xff51afd7ed558ccdull;
        a ^= a >> 33;
        return a;
}

bool heap_addrset_insert(struct heap_addrset *s, uint64_t addr) {
        uint64_t h = hash(addr);
        for (uint64_t i = 0; i < HEAP_ADDRSET_PROBES; i++) {
                uint64_t *slot = &s->slots[(h + i) & s->mask];
                uint64_t v = __atomic_load_n(slot, __ATOMIC_RELAXED);
                while (v == EMPTY || v == TOMBSTONE) {
                        if (__atomic_compare_exchange_n(slot, &v, addr, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                                return true;
                }
        }
        return false;
}

bool heap_addrset_remove(struct heap_addrset *s, uint64_t addr) {
        uint64_t h = hash(addr);
        for (uint64_t i = 0; i < HEAP_ADDRSET_PROBES; i++) {
                uint64_t *slot = &s->slots[(h + i) & s->mask];
                uint64_t v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
                if (v == EMPTY) /* slots never become empty again: it is not further */
                        return false;
                if (v == addr)
                        return __atomic_compare_exchange_n(slot, &v, TOMBSTONE, false, __ATOMIC_RELEASE,
                                                           __ATOMIC_RELAXED);
        }
        return false;
}

void heap_addrfilter_add(struct heap_addrfilter *f, uint64_t addr) {
        uint8_t *c = &f->count[heap_addrfilter_bucket(addr)];
        uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
        while (v != UINT8_MAX && !__atomic_compare_exchange_n(c, &v, (uint8_t) (v + 1), true, __ATOMIC_RELEASE,
                                                              __ATOMIC_RELAXED))
                ;
}

void heap_addrfilter_del(struct heap_addrfilter *f, uint64_t addr) {
        uint8_t *c = &f->count[heap_addrfilter_bucket(addr)];
        uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
        /* A saturated bucket no longer knows its count: it stays. */
        while (v != UINT8_MAX && v != 0 &&
               !__atomic_compare_exchange_n(c, &v, (uint8_t) (v - 1), true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                ;
}

void heap_addrset_unfilter(const struct heap_addrset *s, struct heap_addrfilter *f) {
        for (uint64_t i = 0; i <= s->mask; i++) {
                uint64_t v = __atomic_load_n(&s->slots[i], __ATOMIC_RELAXED);
                if (v != EMPTY && v != TOMBSTONE)
                        heap_addrfilter_del(f, v);
        }
}
