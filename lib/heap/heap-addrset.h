/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The addresses of a process's sampled allocations that are still live,
 * so that their frees (and only theirs) are sent to the plugin. An open
 * addressing table of a power of two of slots, updated with atomic
 * compare-and-swap by any thread, no lock and no allocation (it runs
 * inside malloc and free). A key is looked for in at most
 * HEAP_ADDRSET_PROBES slots from its hash; an insert that finds none of
 * them free fails (the allocation is then not sampled). Removed keys
 * leave a tombstone that a later insert reuses.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_ADDRSET_PROBES 64u

struct heap_addrset {
        uint64_t *slots;
        uint64_t mask; /* slots - 1 */
};

/* The memory a set of n slots (a power of two) takes. */
size_t heap_addrset_bytes(uint64_t n);
/* mem: heap_addrset_bytes(n) zeroed bytes. */
void heap_addrset_init(struct heap_addrset *s, void *mem, uint64_t n);
/* addr must not be 0 or 1. false: no room within the probes. */
bool heap_addrset_insert(struct heap_addrset *s, uint64_t addr);
/* true when addr was there (and is now removed). */
bool heap_addrset_remove(struct heap_addrset *s, uint64_t addr);

/*
 * A counting filter in front of the sets, for every session of the
 * process: per bucket of the address's hash, how many sampled addresses
 * live there (saturating at 255, which then stays). A free whose bucket
 * counts none was never sampled: it needs no session and no look-up, so
 * the frees of a session cost a load each (sampled addresses are few: a
 * set look-up for each free cost a third of a malloc-heavy program's time
 * at 512 KiB).
 */
/* 16 KiB: the load of each free mostly stays in the first level cache
 * (256 KiB missed it, and 32 KiB still cost a tenth of a malloc-heavy
 * program's time); a few thousand live samples (4096 B in a program
 * holding ten MiB) still leave nine buckets in ten empty. */
#define HEAP_ADDRFILTER_BUCKETS (1u << 14)

struct heap_addrfilter {
        uint8_t count[HEAP_ADDRFILTER_BUCKETS];
};

static inline uint32_t heap_addrfilter_bucket(uint64_t addr) {
        /* Another mix than the set's: a bucket's addresses spread over
         * its slots. */
        addr ^= addr >> 29;
        addr *= 0xbf58476d1ce4e5b9ull;
        addr ^= addr >> 32;
        return (uint32_t) (addr & (HEAP_ADDRFILTER_BUCKETS - 1));
}
void heap_addrfilter_add(struct heap_addrfilter *f, uint64_t addr);
void heap_addrfilter_del(struct heap_addrfilter *f, uint64_t addr);
static inline bool heap_addrfilter_maybe(const struct heap_addrfilter *f, uint64_t addr) {
        return __atomic_load_n(&f->count[heap_addrfilter_bucket(addr)], __ATOMIC_RELAXED) != 0;
}
/* Takes off the filter every address s still holds (s is being freed). */
void heap_addrset_unfilter(const struct heap_addrset *s, struct heap_addrfilter *f);
