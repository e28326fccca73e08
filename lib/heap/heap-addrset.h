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
