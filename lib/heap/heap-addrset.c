/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sched.h>

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

void heap_addrfilter_lock(struct heap_addrfilter *f) {
        for (unsigned spins = 0; __atomic_exchange_n(&f->lock, 1u, __ATOMIC_ACQUIRE); spins++)
                if (spins >= 64) {
                        /* Its holder is off its CPU. */
                        sched_yield();
                        spins = 0;
                }
}

void heap_addrfilter_unlock(struct heap_addrfilter *f) {
        __atomic_store_n(&f->lock, 0u, __ATOMIC_RELEASE);
}

void heap_addrfilter_add(struct heap_addrfilter *f, uint64_t addr) {
        uint32_t b = heap_addrfilter_bucket(addr);
        heap_addrfilter_lock(f);
        if (f->count[b] != UINT8_MAX)
                f->count[b]++;
        __atomic_fetch_or(&f->bits[b / 64], 1ull << (b % 64), __ATOMIC_RELEASE);
        heap_addrfilter_unlock(f);
}

void heap_addrfilter_del(struct heap_addrfilter *f, uint64_t addr) {
        uint32_t b = heap_addrfilter_bucket(addr);
        heap_addrfilter_lock(f);
        /* A saturated bucket no longer knows its count: it stays. */
        if (f->count[b] != UINT8_MAX && f->count[b] != 0 && --f->count[b] == 0)
                __atomic_fetch_and(&f->bits[b / 64], ~(1ull << (b % 64)), __ATOMIC_RELEASE);
        heap_addrfilter_unlock(f);
}

void heap_addrset_unfilter(const struct heap_addrset *s, struct heap_addrfilter *f) {
        for (uint64_t i = 0; i <= s->mask; i++) {
                uint64_t v = __atomic_load_n(&s->slots[i], __ATOMIC_RELAXED);
                if (v != EMPTY && v != TOMBSTONE)
                        heap_addrfilter_del(f, v);
        }
}
