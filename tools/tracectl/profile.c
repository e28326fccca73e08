/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Folds PerfSample packets (and heap dumps, profile-heap.c) into call trees. Packets are read with the
 * small protobuf reader (no allocation per packet): a trace of a million
 * samples is mostly PerfSample packets, and unpacking each into generated
 * structs would cost more than the rest of the report. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profile-internal.h"

/* TracePacket fields (protos/perfetto/trace/trace_packet.proto) */
enum {
        PKT_PROCESS_TREE = 2,
        PKT_CLOCK_SNAPSHOT = 6,
        PKT_TIMESTAMP = 8,
        PKT_SEQ_ID = 10,
        PKT_INTERNED_DATA = 12,
        PKT_SEQUENCE_FLAGS = 13,
        PKT_INCREMENTAL_STATE_CLEARED = 41,
        PKT_PREVIOUS_PACKET_DROPPED = 42,
        PKT_FIRST_PACKET_ON_SEQUENCE = 87,
        PKT_DEFAULTS = 59,
        PKT_PERF_SAMPLE = 66,
        PKT_PROFILE_PACKET = 37,
        PKT_TRACK_EVENT = 11,
        PKT_TRACK_DESCRIPTOR = 60,
        SEQ_INCREMENTAL_STATE_CLEARED = 1,
};

void profile_init(struct profile *p, const struct profile_filter *filter) {
        *p = (struct profile) {};
        if (filter)
                p->filter = *filter;
        else
                p->filter = (struct profile_filter) { .pid = -1, .tid = -1, .cpu = -1 };
        for (size_t k = 0; k < _PROFILE_KIND_MAX; k++)
                (void) profile_tree_child(&p->trees[k], UINT32_MAX, NODE_ROOT, 0);
        p->tree = &p->trees[PROFILE_ON_CPU];
}

void profile_done(struct profile *p) {
        profile_seqs_done(p);
        profile_names_done(p);
        profile_heaps_done(p);
        for (size_t k = 0; k < _PROFILE_KIND_MAX; k++) {
                profile_tree_done(&p->trees[k]);
                hashmap_clear(&p->leaves[k]);
                free(p->leaf_entries[k]);
        }
        free(p->timebase);
        free(p->sample_event);
        free(p->scratch);
        *p = (struct profile) {};
}

/* --- samples ------------------------------------------------------------ */

static bool frame_wanted(const struct profile *p, uint32_t sym) {
        bool k = p->syms[sym].kernel;
        return !((p->filter.kernel_only && !k) || (p->filter.user_only && k));
}

uint32_t profile_walk_frames(struct profile *p, struct profile_tree *t, uint32_t from, const uint32_t *syms,
                             size_t nf) {
        uint32_t node = from;
        for (size_t i = 0; i < nf && node != UINT32_MAX; i++)
                if (frame_wanted(p, syms[i]))
                        node = profile_tree_child(t, node, NODE_FRAME, syms[i]);
        return node;
}

/* (thread, stack) -> leaf, keyed by one 64-bit hash of both and checked
 * with the thread and a second, independent 64-bit hash of the stack. */
static bool leaf_lookup(struct profile *p, enum profile_kind kind, uint64_t key, uint32_t thread, uint64_t check,
                        uint32_t *ret) {
        uint64_t i;
        if (!hashmap_get(&p->leaves[kind], key, &i))
                return false;
        const struct profile_leaf *e = &p->leaf_entries[kind][i];
        if (e->thread != thread || e->check != check)
                return false;
        *ret = e->leaf;
        return true;
}

static int leaf_add(struct profile *p, enum profile_kind kind, uint64_t key, uint32_t thread, uint64_t check, uint32_t leaf) {
        if (hashmap_get(&p->leaves[kind], key, NULL))
                return 0; /* a collision: that key stays with its first stack */
        if (GREEDY_REALLOC_MIN(p->leaf_entries[kind], p->cap_leaf_entries[kind], p->n_leaf_entries[kind] + 1, 1024) < 0)
                return -ENOMEM;
        size_t i = p->n_leaf_entries[kind]++;
        p->leaf_entries[kind][i] = (struct profile_leaf) { .thread = thread, .leaf = leaf, .check = check };
        int r = hashmap_put(&p->leaves[kind], key, i);
        return r < 0 ? r : 0;
}

static int perf_sample(struct profile *p, struct profile_seq *s, bool have_ts, uint64_t ts, const uint8_t *d, size_t n) {
        size_t pos = 0;
        struct pbr_field f;
        bool have_stack = false, have_skip = false, have_pid = false, have_count = false, have_event = false;
        uint64_t cpu = UINT64_MAX, pid = 0, tid = 0, stack = 0, skip = 0, count = 0, lost = 0;
        bool unwind_error = false;
        int64_t error_code = -1;
        while (pbr_next(d, n, &pos, &f) > 0) {
                switch (f.number) {
                case 1:
                        cpu = f.varint;
                        break;
                case 2:
                        pid = f.varint;
                        have_pid = true;
                        break;
                case 3:
                        tid = f.varint;
                        break;
                case 4:
                        stack = f.varint;
                        have_stack = true;
                        break;
                case 6:
                        count = f.varint;
                        have_count = true;
                        break;
                case 16:
                        /* Written only for a sample with an error: any value but
                         * NONE (1), UNKNOWN (0) included. */
                        unwind_error = f.varint != 1;
                        error_code = f.varint > INT32_MAX ? 0 : (int64_t) f.varint;
                        break;
                case 17:
                        lost = f.varint;
                        break;
                case 18:
                        skip = f.varint;
                        have_skip = true;
                        break;
                case 19:
                        have_event = true;
                        break;
                default:
                        break;
                }
        }
        p->kernel_records_lost += lost;
        if (have_event || (!have_stack && !have_skip && !have_pid))
                return 0; /* a note, not a sample */
        p->samples++;
        if (have_ts) {
                if (!p->have_first_ts) {
                        p->first_ts = ts;
                        p->have_first_ts = true;
                }
                if (ts > p->last_ts)
                        p->last_ts = ts;
        }
        if (have_skip) {
                p->skipped[skip < ELEMENTSOF(p->skipped) ? skip : 0]++;
                p->samples_no_stack++;
                return 0;
        }
        if (!have_stack) {
                p->samples_no_stack++;
                return 0;
        }
        profile_task_sampled(p, (int32_t) pid, (int32_t) tid, have_ts, ts, unwind_error);
        enum profile_kind kind = s->kind;
        p->samples_kind[kind]++;
        const struct profile_filter *flt = &p->filter;
        uint64_t rel = have_ts && ts > p->first_ts ? ts - p->first_ts : 0;
        if ((flt->pid >= 0 && (uint64_t) flt->pid != pid) || (flt->tid >= 0 && (uint64_t) flt->tid != tid) ||
            (flt->cpu >= 0 && (uint64_t) flt->cpu != cpu) || (flt->have_since && rel < flt->since_ns) ||
            (flt->have_until && rel > flt->until_ns)) {
                p->samples_filtered++;
                return 0;
        }
        struct seq_callstack *c;
        uint32_t missing;
        const uint32_t *syms;
        size_t nf;
        if (profile_seq_stack(p, s, stack, &c, &missing, &syms, &nf) < 0)
                return -ENOMEM;
        if (unwind_error)
                p->unwind_errors++;
        if (!s->bpf)
                stack_walks_sample(&p->walks, error_code);

        struct profile_tree *t = &p->trees[kind];
        uint32_t thread;
        if (s->have_last && s->last_pid == pid && s->last_tid == tid && s->last_kind == kind)
                thread = s->last_thread;
        else {
                size_t before = t->n_nodes;
                thread = profile_tree_child(t, 0, NODE_PROCESS, (uint32_t) pid);
                if (thread == UINT32_MAX)
                        return -ENOMEM;
                if (t->n_nodes > before && profile_guess_name(p, (int32_t) pid, syms, nf) < 0)
                        return -ENOMEM;
                thread = profile_tree_child(t, thread, NODE_THREAD, (uint32_t) tid);
                if (thread == UINT32_MAX)
                        return -ENOMEM;
                s->have_last = true;
                s->last_pid = (uint32_t) pid;
                s->last_tid = (uint32_t) tid;
                s->last_kind = kind;
                s->last_thread = thread;
        }
        /* The leaf: the callstack's last one for this thread; else from
         * (thread, stack content) -> leaf, which outlives the clearing of
         * a sequence's interned state; else walked down from the thread. */
        uint32_t node;
        uint64_t leaf_key = c ? (c->hash ^ ((uint64_t) thread * 0x9e3779b97f4a7c15ULL)) : 0;
        if (c && c->cache_thread == thread + 1 && c->cache_kind == kind)
                node = c->cache_leaf;
        else if (c && leaf_lookup(p, kind, leaf_key, thread, c->check, &node)) {
                c->cache_thread = thread + 1;
                c->cache_leaf = node;
                c->cache_kind = kind;
        } else {
                node = profile_walk_frames(p, t, thread, syms, nf);
                if (node == UINT32_MAX)
                        return -ENOMEM;
                if (c) {
                        c->cache_thread = thread + 1;
                        c->cache_leaf = node;
                        c->cache_kind = kind;
                        if (leaf_add(p, kind, leaf_key, thread, c->check, node) < 0)
                                return -ENOMEM;
                }
        }
        if (node == thread && (flt->kernel_only || flt->user_only)) {
                /* --kernel or --user left nothing of this stack */
                p->samples_filtered++;
                return 0;
        }
        t->nodes[node].self[0] += 1;
        /* Off-CPU samples weigh their blocked time; a sample without one
         * weighs nothing in time but still counts as a sample. On-CPU ones
         * weigh the CPU time their timebase stands for (pprof's cpu). */
        t->nodes[node].self[1] += kind == PROFILE_OFF_CPU ? (have_count ? count : 0) : s->sample_ns;
        if (kind == PROFILE_ON_CPU && !s->sample_ns)
                p->cpu_time_partial = true;
        p->samples_used++;
        return 0;
}

/* The first ClockSnapshot: how far the trace's clock (its primary one,
 * BOOTTIME unless it says) is from the wall clock, for pprof's time_nanos. */
static void clock_snapshot(struct profile *p, const uint8_t *d, size_t n) {
        enum { CLOCK_ID_REALTIME = 1, CLOCK_ID_BOOTTIME = 6 };
        size_t pos = 0;
        struct pbr_field f, g;
        uint64_t primary = CLOCK_ID_BOOTTIME, realtime = 0, ts[64] = {};
        bool have[64] = {};
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.number == 2 && f.wire_type == 0)
                        primary = f.varint;
                if (f.number != 1 || f.wire_type != 2)
                        continue;
                size_t q = 0;
                uint64_t id = 0, v = 0;
                while (pbr_next(f.data, f.len, &q, &g) > 0)
                        if (g.number == 1 && g.wire_type == 0)
                                id = g.varint;
                        else if (g.number == 2 && g.wire_type == 0)
                                v = g.varint;
                if (id < ELEMENTSOF(ts)) {
                        ts[id] = v;
                        have[id] = true;
                }
        }
        if (primary >= ELEMENTSOF(ts) || !have[primary] || !have[CLOCK_ID_REALTIME])
                return;
        realtime = ts[CLOCK_ID_REALTIME];
        p->realtime_delta = (int64_t) (realtime - ts[primary]);
        p->have_realtime = true;
}

int profile_add_packet(struct profile *p, const uint8_t *data, size_t len) {
        size_t pos = 0;
        struct pbr_field f;
        uint32_t seq_id = 0;
        uint64_t flags = 0, ts = 0;
        bool cleared = false, have_ts = false, dropped = false, first = false, counter = false;
        const uint8_t *sample = NULL, *interned = NULL, *defs = NULL, *ptree = NULL, *heap = NULL;
        size_t sample_len = 0, interned_len = 0, defs_len = 0, ptree_len = 0, heap_len = 0;
        int r;

        p->packets++;
        while ((r = pbr_next(data, len, &pos, &f)) > 0) {
                switch (f.number) {
                case PKT_TIMESTAMP:
                        ts = f.varint;
                        have_ts = true;
                        break;
                case PKT_SEQ_ID:
                        seq_id = (uint32_t) f.varint;
                        break;
                case PKT_SEQUENCE_FLAGS:
                        flags = f.varint;
                        break;
                case PKT_INCREMENTAL_STATE_CLEARED:
                        cleared = f.varint != 0;
                        break;
                case PKT_PREVIOUS_PACKET_DROPPED:
                        dropped = f.varint != 0;
                        break;
                case PKT_FIRST_PACKET_ON_SEQUENCE:
                        first = f.varint != 0; /* nothing came before it to lose */
                        break;
                case PKT_INTERNED_DATA:
                        interned = f.data;
                        interned_len = f.len;
                        break;
                case PKT_DEFAULTS:
                        defs = f.data;
                        defs_len = f.len;
                        break;
                case PKT_PERF_SAMPLE:
                        sample = f.data;
                        sample_len = f.len;
                        break;
                case PKT_PROFILE_PACKET:
                        if (f.wire_type == 2) {
                                heap = f.data;
                                heap_len = f.len;
                        }
                        break;
                case PKT_PROCESS_TREE:
                        ptree = f.data;
                        ptree_len = f.len;
                        break;
                case PKT_CLOCK_SNAPSHOT:
                        if (!p->have_realtime && f.wire_type == 2)
                                clock_snapshot(p, f.data, f.len);
                        break;
                case PKT_TRACK_EVENT:
                case PKT_TRACK_DESCRIPTOR:
                        counter = true;
                        break;
                default:
                        break;
                }
        }
        if (r < 0)
                return -EBADMSG;
        if (counter)
                stack_walks_packet(&p->walks, data, len);
        if (ptree)
                profile_process_tree(p, have_ts ? ts : 0, ptree, ptree_len);
        if (!sample && !heap && !interned && !defs && !(flags & SEQ_INCREMENTAL_STATE_CLEARED) && !cleared)
                return 0;
        struct profile_seq *s = profile_seq_get(p, seq_id);
        if (!s)
                return -ENOMEM;
        if ((flags & SEQ_INCREMENTAL_STATE_CLEARED) || cleared)
                profile_seq_clear(s);
        if (dropped && !first && !s->lost) {
                s->lost = true;
                p->sequences_with_loss++;
        }
        if (defs)
                profile_seq_defaults(p, s, defs, defs_len);
        if (interned && (r = profile_seq_interned_data(s, interned, interned_len)) < 0)
                return r;
        if (heap && (r = profile_heap_packet(p, s, have_ts, ts, heap, heap_len)) < 0)
                return r;
        if (sample)
                return perf_sample(p, s, have_ts, ts, sample, sample_len);
        return 0;
}
