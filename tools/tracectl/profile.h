/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The profile of a trace: PerfSample packets and their interned callstacks
 * (per packet sequence, as upstream traced_perf and our perf and bpfstack
 * plugins write them) folded, packet by packet, into one call tree per
 * thread. Memory grows with the number of distinct frames and call paths,
 * never with the number of samples. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/hashmap.h"
#include "name-history.h"
#include "stack-walks.h"

/* What a sample counts. On-CPU samples count 1 each; off-CPU samples weigh
 * the time the thread was blocked, in nanoseconds. Heap profiles count
 * objects and weigh bytes: not released at the last dump (in use), or
 * allocated since the profile began. */
enum profile_kind {
        PROFILE_ON_CPU,
        PROFILE_OFF_CPU,
        PROFILE_HEAP_INUSE,
        PROFILE_HEAP_ALLOC,
        _PROFILE_KIND_MAX,
};

static inline bool profile_kind_heap(enum profile_kind k) {
        return k == PROFILE_HEAP_INUSE || k == PROFILE_HEAP_ALLOC;
}

struct profile_filter {
        int64_t pid, tid, cpu;   /* -1: any */
        const char *comm;        /* NULL: any; compared with the process and the thread name */
        bool kernel_only, user_only;
        enum profile_kind kind;  /* which samples make the tree */
        bool kind_explicit;      /* the user chose it (else on-CPU, or off-CPU when only those exist) */
        bool have_since, have_until;
        uint64_t since_ns, until_ns; /* relative to the first sample's timestamp */
        bool addresses;          /* one frame per address (pprof's locations), not per function */
};

/* A mapping of a process as the trace recorded it (Mapping in
 * profile_common.proto): distinct ones, across sequences. */
struct profile_map {
        char *path;     /* or NULL */
        char *build_id; /* hex, or NULL */
        uint64_t start, end, exact_offset, load_bias;
        bool kernel;
};

/* A distinct frame: its label (function name, or module+offset with the
 * build id when not symbolized) and module. With filter.addresses, frames
 * at different addresses (map, rel_pc) are distinct even in one function. */
struct profile_sym {
        char *name;
        char *module; /* basename of the mapping, or NULL */
        char *path;   /* the mapping's path, or NULL */
        char *build_id;
        bool kernel;
        bool symbolized;
        uint32_t map;    /* index into profile.maps, UINT32_MAX: none */
        uint64_t rel_pc; /* with a map: the address, a virtual address of the file */
};

enum profile_node_kind {
        NODE_ROOT,
        NODE_PROCESS, /* value: pid */
        NODE_THREAD,  /* value: tid */
        NODE_FRAME,   /* value: sym index */
        NODE_COMM,    /* value: sym index of the comm (merged trees) */
};

struct profile_node {
        uint32_t parent, first_child, next_sibling;
        uint32_t kind, value;
        uint32_t depth;
        /* [0]: samples; [1]: weight (samples on CPU, blocked ns off CPU) */
        uint64_t self[2], total[2];
};

struct profile_tree {
        struct profile_node *nodes;
        size_t n_nodes, cap_nodes;
        struct hashmap children; /* (parent, kind, value) -> node */
};

struct profile_task {
        int32_t id;
        int32_t tgid;
        struct name_history names; /* from the trace's process tree entries */
        uint64_t last_sample_ts;   /* named as it was then */
        bool sampled;
        uint64_t stacks, stacks_cut; /* samples with a callstack; of those, with an unwind error */
        char *guess;     /* processes without a name: their executable, else "[pid N]" */
};

/* A callsite of a heap dump: its leaf in the allocation tree, its totals. */
struct profile_heap_entry {
        uint32_t leaf;
        uint64_t allocated, freed, allocs, frees;
};

/* One heap of one process (ProcessHeapSamples): its last dump. */
struct profile_heap {
        int32_t pid;
        char *name; /* "libc.malloc", or "" */
        uint64_t dumps;
        bool have_cur;
        struct profile_heap_entry *cur, *base; /* the last dump; the last before --since */
        size_t n_cur, cap_cur, n_base, cap_base;
        uint32_t dump_seq;   /* sequence (+1) and dump the entries are of */
        uint64_t dump_id;
        /* as the last dump says */
        uint64_t interval, dropped, unwind_errors, samples;
        bool overran, corrupted, disconnected;
};

struct profile_heap_totals {
        uint64_t heaps, dropped, unwind_errors, samples, overran, corrupted;
        uint64_t interval_min, interval_max;
};

struct profile_seq; /* per packet sequence interning state, in profile-internal.h */
struct debuginfo;   /* debuginfo.h */

struct profile {
        struct profile_filter filter;
        /* interning, across sequences */
        struct profile_sym *syms;
        size_t n_syms, cap_syms;
        struct hashmap sym_index; /* hash(name, module) -> sym */
        struct profile_map *maps;
        size_t n_maps, cap_maps;
        struct hashmap map_index;
        /* names frames the trace left unsymbolized, when set (borrowed) */
        struct debuginfo *debuginfo;
        uint64_t frames_named; /* distinct frames named so */
        /* functions inlined at a frame's address (its DWARF, through
         * debuginfo) become frames of their own, as pprof's lines do;
         * not with filter.addresses, where they are lines of a location */
        bool inline_frames;
        struct profile_seq **seqs;
        size_t n_seqs;
        struct hashmap seq_index;
        struct profile_seq *last_seq;
        struct profile_task *tasks;
        size_t n_tasks, cap_tasks;
        struct hashmap task_index; /* (kind << 32 | id) -> task */
        /* the call trees, one per kind: root, process, thread, frames
         * root first; tree is the one reported (profile_finish) */
        struct profile_tree trees[_PROFILE_KIND_MAX];
        struct profile_tree *tree;
        struct hashmap leaves[_PROFILE_KIND_MAX]; /* hash(thread, stack) -> leaf_entries */
        struct profile_leaf {
                uint32_t thread, leaf;
                uint64_t check;
        } *leaf_entries[_PROFILE_KIND_MAX];
        size_t n_leaf_entries[_PROFILE_KIND_MAX], cap_leaf_entries[_PROFILE_KIND_MAX];
        enum profile_kind kind;
        unsigned metric; /* index into self[] and total[] */
        /* what was seen */
        uint64_t packets, samples, samples_used, samples_no_stack, samples_filtered;
        uint64_t samples_kind[_PROFILE_KIND_MAX];
        uint64_t skipped[8];       /* by PerfSample.SampleSkipReason */
        uint64_t unwind_errors;    /* samples with a partial stack */
        uint64_t kernel_records_lost;
        uint64_t missing_interned; /* callstacks or frames referred to but never interned */
        uint64_t sequences_with_loss;
        bool have_first_ts;
        uint64_t first_ts, last_ts;
        char *timebase; /* description of the first sequence's timebase */
        /* What an on-CPU sample stands for (first sequence that says):
         * ns of CPU time (a clock timebase or a frequency), else a period
         * of events of the counter named. On-CPU nodes' self[1] sums the
         * ns of their samples' sequences. */
        uint64_t sample_ns, sample_period;
        char *sample_event;
        bool cpu_time_partial; /* some on-CPU samples came with no time */
        /* the trace's first ClockSnapshot: realtime = ts + realtime_delta */
        bool have_realtime;
        int64_t realtime_delta;
        bool mangled_names; /* show C++ and Rust names as the trace has them (else demangled) */
        struct stack_walks walks; /* how linux.bpf_stack walked user stacks */
        /* heap profiles (profile-heap.c) */
        struct profile_heap *heaps;
        size_t n_heaps, cap_heaps;
        uint64_t heap_dumps, heap_dumps_filtered;
        uint64_t heap_legacy;   /* dumps in ProfilePackets with their own callstacks: not read */
        bool heap_incomplete;   /* out of memory while building the heap trees */
        uint32_t *scratch;
        size_t cap_scratch;
};

void profile_init(struct profile *p, const struct profile_filter *filter);
void profile_done(struct profile *p);
/* Folds one serialized TracePacket in. 0, -EBADMSG for a packet that does
 * not decode (counted and skipped), -ENOMEM. */
int profile_add_packet(struct profile *p, const uint8_t *data, size_t len);
/* Picks the tree to report (the filter's kind; else on-CPU unless the
 * trace has only off-CPU samples), applies the comm filter, sums totals. */
void profile_finish(struct profile *p);

/* What the last dumps of the heaps say, summed. */
void profile_heap_totals(const struct profile *p, struct profile_heap_totals *ret);

/* Names for reports. */
const char *profile_process_name(const struct profile *p, int32_t pid);
const char *profile_thread_name(const struct profile *p, int32_t tid);
/* Samples of process pid with a callstack, and of those cut short (with an unwind error). */
void profile_process_stacks(const struct profile *p, int32_t pid, uint64_t *ret_stacks, uint64_t *ret_cut);
/* A frame's label with no ';' or newline, for folded stacks. */
const char *profile_node_label(const struct profile *p, const struct profile_node *n, char *buf, size_t size);

/* Trees */
void profile_tree_done(struct profile_tree *t);
/* Child of parent with (kind, value), created if absent; UINT32_MAX on ENOMEM. */
uint32_t profile_tree_child(struct profile_tree *t, uint32_t parent, uint32_t kind, uint32_t value);
/* Recomputes every node's total from the selfs. */
void profile_tree_totals(struct profile_tree *t);
/* The tree with processes of the same name merged and the thread level
 * dropped, as folded stacks and flamegraphs show it ("comm;frame;frame").
 * The comm of each process becomes a NODE_COMM node. */
int profile_merged_tree(struct profile *p, struct profile_tree *ret);
uint32_t profile_intern_name(struct profile *p, const char *name, const char *module, bool kernel, bool symbolized,
                             const char *path, const char *build_id);
/* A frame on map (UINT32_MAX: none) at rel_pc; with filter.addresses one
 * per address, else one per name as profile_intern_name. */
uint32_t profile_intern_frame(struct profile *p, const char *name, uint32_t map, uint64_t rel_pc, bool kernel,
                              bool symbolized);
/* The distinct mapping m (copied); UINT32_MAX on ENOMEM. */
uint32_t profile_intern_map(struct profile *p, const struct profile_map *m);

/* Outputs (report-text.c, report-folded.c, report-svg.c) */
#include <stdio.h>
struct report_options {
        size_t top_n;
        bool icicle;
        const char *title;
};
int report_text(FILE *f, struct profile *p, const struct report_options *o);
int report_folded(FILE *f, struct profile *p);
int report_svg(FILE *f, struct profile *p, const struct report_options *o);
/* report-pprof.c: p made with filter.addresses, after profile_finish.
 * Both kinds of samples unless the filter chose one. -ENODATA: no sample
 * passed the filters (nothing worth a file). */
struct pprof_writer;
struct pprof_stats {
        uint64_t samples, locations, locations_with_lines, functions, mappings;
};
int report_pprof(struct pprof_writer *w, struct profile *p, struct pprof_stats *ret_stats);
/* "samples", "ms" (off-CPU) or "KiB" (heap), for headers. */
const char *profile_unit(const struct profile *p);
/* A weight as the unit prints it. */
double profile_value(const struct profile *p, uint64_t w);
/* The children of node n sorted by label (then id); *ret is malloc'd. */
size_t profile_children_sorted(const struct profile *p, const struct profile_tree *t, uint32_t n, uint32_t **ret);
