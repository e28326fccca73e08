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
                /* A write first, not a load: a page of the set no one
                 * touched yet is then mapped once, zeroed and writable. A
                 * load first maps the zero page, and the write after it
                 * copies it and flushes the TLB of every CPU the process
                 * runs on (an interrupt each). */
                uint64_t v = EMPTY;
                if (__atomic_compare_exchange_n(slot, &v, addr, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                        return true;
                while (v == TOMBSTONE)
                        if (__atomic_compare_exchange_n(slot, &v, addr, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                                return true;
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
