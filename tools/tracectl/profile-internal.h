/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the files that build a profile, not by its readers (the
 * reports see profile.h only):
 *   profile.c        packets in, samples folded per process and thread
 *   profile-seq.c    a sequence's interned strings, mappings, frames and
 *                    callstacks, resolved to frames of the profile
 *   profile-names.c  distinct frames, processes and threads, and labels
 *   profile-tree.c   the call tree, its totals, merging and ordering */

#include "basic/pbr.h"
#include "profile.h"

/* An interned table of one sequence: iid -> element. */
struct seq_table {
        struct hashmap index;
        void *v;
        size_t n, cap, esz;
};

struct seq_callstack {
        uint64_t *frame_ids;
        size_t n_frames;
        uint32_t *syms; /* resolved on first use, root first; inlined functions
                         * (p->inline_frames) after the frame they are in */
        size_t n_syms;
        uint64_t hash, check; /* two independent hashes of syms */
        bool resolved;
        /* the leaf this callstack reached last, under which thread node
         * (+1; 0: none) of which tree: most samples repeat it */
        uint32_t cache_thread, cache_leaf, cache_kind;
};

struct profile_seq {
        uint32_t id;
        struct seq_table function_names, mapping_paths, build_ids, mappings, frames, callstacks;
        enum profile_kind kind;
        uint64_t sample_ns; /* CPU time of an on-CPU sample, 0: unknown */
        bool bpf; /* linux.bpf_stack's: its walks are told by its counters */
        bool lost;
        /* its last ProfilePacket goes on in the next; the dumps read so far */
        bool heap_continued;
        uint64_t heap_dump_id;
        /* the thread node of the last sample */
        bool have_last;
        uint32_t last_pid, last_tid, last_kind, last_thread;
};

/* profile-seq.c */
struct profile_seq *profile_seq_get(struct profile *p, uint32_t id);
/* Forgets what the sequence interned (its incremental state was cleared). */
void profile_seq_clear(struct profile_seq *s);
void profile_seqs_done(struct profile *p);
/* Adds an InternedData message; a second definition of an iid is ignored.
 * 0 or -ENOMEM. */
int profile_seq_interned_data(struct profile_seq *s, const uint8_t *d, size_t n);
/* Reads the sequence's TracePacketDefaults: its kind of samples, and the
 * profile's timebase from the first sequence that has one. */
void profile_seq_defaults(struct profile *p, struct profile_seq *s, const uint8_t *d, size_t n);
/* The callstack interned as iid, or NULL. */
struct seq_callstack *profile_seq_callstack(struct profile_seq *s, uint64_t iid);
/* Fills c->syms (and its hashes) on first use: 0 or -ENOMEM. */
int profile_seq_resolve_callstack(struct profile *p, struct profile_seq *s, struct seq_callstack *c);
/* The frames of callstack iid, root first: the callstack, resolved, in
 * *ret_c; or, when it was never interned (counted), NULL and the one frame
 * "[missing callstack]" in *missing. 0 or -ENOMEM. */
int profile_seq_stack(struct profile *p, struct profile_seq *s, uint64_t iid, struct seq_callstack **ret_c,
                      uint32_t *missing, const uint32_t **ret_syms, size_t *ret_n);

/* profile.c */
/* The node under from for the frames syms (root first) that --kernel or
 * --user keep, created as needed; UINT32_MAX on ENOMEM. */
uint32_t profile_walk_frames(struct profile *p, struct profile_tree *t, uint32_t from, const uint32_t *syms,
                             size_t nf);

/* profile-heap.c */
/* A ProfilePacket of sequence s: its heap dumps. 0 or -ENOMEM. */
int profile_heap_packet(struct profile *p, struct profile_seq *s, bool have_ts, uint64_t ts, const uint8_t *d,
                        size_t n);
/* The last dumps into the heap trees; their samples_kind. 0 or -ENOMEM. */
int profile_heap_finish(struct profile *p);
void profile_heaps_done(struct profile *p);

/* profile-names.c */
/* Reads a ProcessTree message of a packet at ts (0: none): names of
 * processes and threads. An entry names a task unless a later one did. */
void profile_process_tree(struct profile *p, uint64_t ts, const uint8_t *d, size_t n);
/* A sample with a callstack (cut: with an unwind error) of thread tid of
 * process pid at ts (the names shown are the ones in effect at their last
 * sample). */
void profile_task_sampled(struct profile *p, int32_t pid, int32_t tid, bool have_ts, uint64_t ts, bool cut);
/* Names process pid, if it has no name yet, after the frames of a stack. */
int profile_guess_name(struct profile *p, int32_t pid, const uint32_t *syms, size_t nf);
void profile_names_done(struct profile *p);
