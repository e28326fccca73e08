/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* How linux.bpf_stack walked the user stacks of a trace, read from the
 * counter tracks it writes ("linux.bpf_stack unwind: ..."; each value is
 * the count so far, so the last one is the total): whole by the unwind
 * tables, by frame pointers because the tables were not loaded yet, or
 * cut short and where. summary and report print it, and warn when most
 * stacks fell back or were cut. */

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

struct stack_walks {
        struct {
                uint64_t uuid;
                enum stack_walk what;
        } tracks[STACK_WALKS_MAX_TRACKS];
        size_t n_tracks;
        int64_t count[_WALK_MAX];
        uint64_t count_ts[_WALK_MAX];
        bool seen;
};

/* Reads one serialized TracePacket (a TrackDescriptor of one of those
 * counters, or a TrackEvent with its value); other packets are ignored. */
void stack_walks_packet(struct stack_walks *w, const uint8_t *d, size_t n);
/* All walks, and those that were not whole by the tables. */
uint64_t stack_walks_total(const struct stack_walks *w);
uint64_t stack_walks_cut(const struct stack_walks *w);
/* A few lines, each starting with prefix; then a warning line when more
 * than half fell back to frame pointers or were cut. Nothing when the
 * trace has no such counters. */
void stack_walks_print(FILE *f, const struct stack_walks *w, const char *prefix);
