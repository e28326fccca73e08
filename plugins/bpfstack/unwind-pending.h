/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The processes whose walks asked for unwind tables (their samples were
 * walked by frame pointers: no tables loaded yet), each with how much it
 * was sampled since it asked and a few of the pcs its samples were taken
 * at: the files holding those pcs are what its samples need first
 * (unwind_tables_load). Loaded hottest first; when the list is full, the
 * coldest process not waiting for compiles makes room. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PENDING_LOADS 256u
/* Sampled pcs kept per process: the latest distinct ones. */
#define PENDING_PCS 4u

struct pending_load {
        int pid;
        uint32_t hits;
        bool waiting; /* some of its files are being compiled */
        uint8_t n_pcs, next_pc;
        uint64_t pcs[PENDING_PCS];
};

struct pending_loads {
        struct pending_load v[PENDING_LOADS];
        size_t n;
};

/* A sample of pid weighing weight, taken at pc (0: not known). True when
 * pid was not in the list (added, or not: the list full of hotter ones). */
bool pending_add(struct pending_loads *l, int pid, uint32_t weight, uint64_t pc);
/* Most hits first. */
void pending_sort(struct pending_loads *l);
/* Whether a pc of p falls in [start, end); true also when p has none (all
 * its files are then needed alike). */
bool pending_hot(const struct pending_load *p, uint64_t start, uint64_t end);
