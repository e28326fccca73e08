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
 * live there (saturating at 255, which then stays), and a bit per bucket
 * that is set while its count is not 0. A free whose bucket's bit is
 * clear was never sampled: it needs no session and no look-up, so the
 * frees of a session cost a load each (sampled addresses are few: a set
 * look-up for each free cost a third of a malloc-heavy program's time at
 * 512 KiB).
 *
 * The frees read only the bits: 2 KiB, which mostly stays in the first
 * level cache (a byte per bucket, 16 KiB, was an L2 hit on most frees of
 * such a program, and 256 KiB missed it). 16384 buckets: a few thousand
 * live samples (4096 B in a program holding ten MiB) still leave nine
 * buckets in ten empty.
 */
#define HEAP_ADDRFILTER_BUCKETS (1u << 14)

struct heap_addrfilter {
        uint64_t bits[HEAP_ADDRFILTER_BUCKETS / 64];
        /* Changes take this spin lock (they are few: a sampled allocation
         * and its free), so a bit and its count change together. Held
         * only inside a hook, where the thread's own signal handlers do
         * not come back in; fork takes it (heap_addrfilter_lock). */
        uint32_t lock;
        uint8_t count[HEAP_ADDRFILTER_BUCKETS];
} __attribute__((aligned(64)));

static inline uint32_t heap_addrfilter_bucket(uint64_t addr) {
        /* No multiply: every free waits for this (a mix with one, 17
         * cycles to the bit, cost a malloc-heavy program a tenth of its
         * time). Allocations are 16-byte aligned; the higher bits fold
         * in the 256 KiB block, so that blocks at the same offset in
         * pages (mmap'ed ones) spread too. */
        return (uint32_t) (((addr >> 4) ^ (addr >> 18)) & (HEAP_ADDRFILTER_BUCKETS - 1));
}
/* Any thread: once heap_addrfilter_add(addr) returned, addr's bit stays
 * set until the del of every address counted in its bucket. */
void heap_addrfilter_add(struct heap_addrfilter *f, uint64_t addr);
void heap_addrfilter_del(struct heap_addrfilter *f, uint64_t addr);
/* Around fork: the child's filter is then not left locked. */
void heap_addrfilter_lock(struct heap_addrfilter *f);
void heap_addrfilter_unlock(struct heap_addrfilter *f);
static inline bool heap_addrfilter_maybe(const struct heap_addrfilter *f, uint64_t addr) {
        uint32_t b = heap_addrfilter_bucket(addr);
        return (__atomic_load_n(&f->bits[b / 64], __ATOMIC_RELAXED) >> (b % 64)) & 1u;
}
/* Takes off the filter every address s still holds (s is being freed). */
void heap_addrset_unfilter(const struct heap_addrset *s, struct heap_addrfilter *f);
