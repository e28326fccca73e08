/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* How the user stacks of a trace were walked.
 *
 * linux.bpf_stack's walks, read from the counter tracks it writes
 * ("linux.bpf_stack unwind: ..."; each value is the count so far, so the
 * last one is the total): whole by the unwind tables, by frame pointers
 * because the tables were not loaded yet, or cut short and where.
 *
 * The other profilers' (linux.perf, upstream traced_perf), read from
 * their samples: each sample's stack is whole, or cut short for the
 * reason its PerfSample.unwind_error gives.
 *
 * summary and report print both, and warn when most stacks fell back or
 * were cut. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum stack_walk {
        WALK_WHOLE,          /* by the tables, to the outermost frame */
        WALK_FRAME_POINTERS, /* the process's tables were not loaded (yet) */
        WALK_CUT_DEPTH,      /* cut at max_depth */
        WALK_CUT_NO_MAPPING, /* a pc outside every file with tables (JIT, vdso) */
        WALK_CUT_NO_CFI,     /* no unwind rule for a pc */
        WALK_CUT_UNSUPPORTED,
        WALK_CUT_READ_FAULT,
        WALK_CUT_BAD_FRAME,
        _WALK_MAX,
};

#define STACK_WALKS_MAX_TRACKS 64
/* Profiling.StackUnwindError values counted (higher ones count as 0). */
#define STACK_WALKS_ERRORS 16

struct stack_walks {
        struct {
                uint64_t uuid;
                enum stack_walk what;
        } tracks[STACK_WALKS_MAX_TRACKS];
        size_t n_tracks;
        int64_t count[_WALK_MAX];
        uint64_t count_ts[_WALK_MAX];
        bool seen;
        /* the samples' stacks (but linux.bpf_stack's), by unwind_error:
         * [1] (UNWIND_ERROR_NONE) holds the whole ones */
        uint64_t sampled[STACK_WALKS_ERRORS];
};

/* Reads one serialized TracePacket (a TrackDescriptor of one of those
 * counters, or a TrackEvent with its value); other packets are ignored. */
void stack_walks_packet(struct stack_walks *w, const uint8_t *d, size_t n);
/* A sample's stack, with its PerfSample.unwind_error (-1: none given,
 * the stack is whole). Not for linux.bpf_stack's samples (its counters
 * say more): see stack_walks_bpf_timebase. */
void stack_walks_sample(struct stack_walks *w, int64_t unwind_error);
/* Whether a sequence's timebase name is linux.bpf_stack's. */
bool stack_walks_bpf_timebase(const char *name, size_t len);
/* All walks, and those that were not whole by the tables. */
uint64_t stack_walks_total(const struct stack_walks *w);
uint64_t stack_walks_cut(const struct stack_walks *w);
/* The samples' stacks, and those cut short. */
uint64_t stack_walks_sampled(const struct stack_walks *w);
uint64_t stack_walks_sampled_cut(const struct stack_walks *w);
/* The name of an unwind error as JSON keys say it ("memory_invalid"). */
const char *stack_walks_error_key(size_t unwind_error);
/* A few lines, each starting with prefix; then a warning line when more
 * than half fell back to frame pointers or were cut. Nothing when the
 * trace has neither counters nor samples' stacks. */
void stack_walks_print(FILE *f, const struct stack_walks *w, const char *prefix);
