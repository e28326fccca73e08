/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One process's heap profile as the plugin keeps it: its callsites (an
 * unwound stack, as return addresses, innermost first) with the bytes and
 * counts allocated and freed there since the profile started, and its
 * live sampled allocations (address -> callsite and the bytes the sample
 * stands for), so that a free is charged where the block came from.
 *
 * Callsites are kept as addresses, not as interned ids: the ids are
 * handed out when a dump is written, so a cleared sequence state costs
 * nothing here. Errors are negative errno; not thread-safe.
 */

#include <stddef.h>
#include <stdint.h>

#include "basic/hashmap.h"

struct heap_callsite {
        uint64_t *pcs;
        uint32_t n_pcs;
        int32_t unwind_error; /* Profiling.StackUnwindError of the first sample here */
        uint64_t hash;
        uint32_t next; /* index + 1 of the next callsite of the same hash; 0: none */
        uint64_t allocated, freed, alloc_count, free_count;
};

struct heap_callsites {
        struct heap_callsite *v;
        size_t n, cap;
        struct hashmap by_hash; /* hash -> index + 1 of the first of that hash */
        struct hashmap live;    /* address -> weight << 24 | index */
        uint64_t unknown_frees; /* frees of addresses not live (their sample was lost) */
        uint64_t lost_frees;    /* live addresses allocated again (their free was lost) */
};

void heap_callsites_done(struct heap_callsites *c);
/* An allocation sampled at addr, standing for weight bytes, with its stack.
 * An address already live (its free was lost) is charged as freed first. */
int heap_callsites_alloc(struct heap_callsites *c, uint64_t addr, const uint64_t *pcs, size_t n, int unwind_error,
                         uint64_t weight);
/* A free of a sampled allocation. */
void heap_callsites_free(struct heap_callsites *c, uint64_t addr);
