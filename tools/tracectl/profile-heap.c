/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Heap profiles: the ProfilePacket dumps android.heapprofd writes (ours and
 * upstream's heapprofd). Each dump of a process's heap holds the totals of
 * every callsite since the profile began, so a dump replaces the one before
 * it: what is kept per (process, heap) is the last dump (the last at or
 * before --until) and, with --since, the last dump before it, which is
 * taken off. The callsites' frames resolve to leaves of the allocation
 * tree when the dump is read (the sequence's interning may be cleared
 * later); the trees get their values at profile_finish. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "profile-internal.h"

/* ProfilePacket (protos/perfetto/trace/profiling/profile_packet.proto) */
enum {
        PP_CALLSTACKS = 3,
        PP_PROCESS_DUMPS = 5,
        PP_CONTINUED = 6,
        PHS_PID = 1,
        PHS_SAMPLES = 2,
        PHS_STATS = 5,
        PHS_DISCONNECTED = 6,
        PHS_BUFFER_OVERRAN = 7,
        PHS_BUFFER_CORRUPTED = 8,
        PHS_HEAP_NAME = 11,
        PHS_INTERVAL = 12,
        PHS_CLIENT_ERROR = 14,
        PHS_SAMPLES_DROPPED = 1000,
        HS_CALLSTACK = 1,
        HS_ALLOCATED = 2,
        HS_FREED = 3,
        HS_SELF_MAX = 8,
        HS_ALLOC_COUNT = 5,
        HS_FREE_COUNT = 6,
        ST_UNWIND_ERRORS = 1,
        ST_HEAP_SAMPLES = 2,
};

static struct profile_heap *heap_get(struct profile *p, int32_t pid, const uint8_t *name, size_t name_len) {
        for (size_t i = 0; i < p->n_heaps; i++) {
                struct profile_heap *h = &p->heaps[i];
                if (h->pid == pid && strlen(h->name) == name_len && memcmp(h->name, name, name_len) == 0)
                        return h;
        }
        if (GREEDY_REALLOC(p->heaps, p->cap_heaps, p->n_heaps + 1) < 0)
                return NULL;
        char *n = strndup((const char *) name, name_len);
        if (!n)
                return NULL;
        struct profile_heap *h = &p->heaps[p->n_heaps++];
        *h = (struct profile_heap) { .pid = pid, .name = n };
        return h;
}

/* The leaf of stack under the heap's thread node in the allocation tree. */
static int heap_leaf(struct profile *p, struct profile_seq *s, int32_t pid, uint64_t stack, uint32_t *ret) {
        struct profile_tree *t = &p->trees[PROFILE_HEAP_ALLOC];
        uint32_t thread = profile_tree_child(t, 0, NODE_PROCESS, (uint32_t) pid);
        if (thread == UINT32_MAX)
                return -ENOMEM;
        struct seq_callstack *c;
        uint32_t missing;
        const uint32_t *syms;
        size_t nf;
        if (profile_seq_stack(p, s, stack, &c, &missing, &syms, &nf) < 0)
                return -ENOMEM;
        size_t before = t->n_nodes;
        thread = profile_tree_child(t, thread, NODE_THREAD, (uint32_t) pid);
        if (thread == UINT32_MAX)
                return -ENOMEM;
        if (t->n_nodes > before && profile_guess_name(p, pid, syms, nf) < 0)
                return -ENOMEM;
        if (c && c->cache_thread == thread + 1 && c->cache_kind == PROFILE_HEAP_ALLOC) {
                *ret = c->cache_leaf;
                return 0;
        }
        uint32_t node = profile_walk_frames(p, t, thread, syms, nf);
        if (node == UINT32_MAX)
                return -ENOMEM;
        if (c) {
                c->cache_thread = thread + 1;
                c->cache_leaf = node;
                c->cache_kind = PROFILE_HEAP_ALLOC;
        }
        *ret = node;
        return 0;
}

static int heap_sample(struct profile *p, struct profile_seq *s, int32_t pid, const uint8_t *d, size_t n,
                       struct profile_heap_entry *ret) {
        size_t pos = 0;
        struct pbr_field f;
        uint64_t stack = 0, max = 0;
        bool have_max = false;
        *ret = (struct profile_heap_entry) {};
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.wire_type != 0)
                        continue;
                switch (f.number) {
                case HS_CALLSTACK:
                        stack = f.varint;
                        break;
                case HS_ALLOCATED:
                        ret->allocated = f.varint;
                        break;
                case HS_FREED:
                        ret->freed = f.varint;
                        break;
                case HS_ALLOC_COUNT:
                        ret->allocs = f.varint;
                        break;
                case HS_FREE_COUNT:
                        ret->frees = f.varint;
                        break;
                case HS_SELF_MAX:
                        max = f.varint;
                        have_max = true;
                        break;
                default:
                        break;
                }
        }
        if (have_max) {
                /* A dump_at_max profile: the callsite's bytes at the peak. */
                ret->allocated = max;
                ret->freed = 0;
                ret->frees = 0;
        }
        /* Counters out of order would read as a huge unreleased amount. */
        if (ret->freed > ret->allocated)
                ret->freed = ret->allocated;
        if (ret->frees > ret->allocs)
                ret->frees = ret->allocs;
        return heap_leaf(p, s, pid, stack, &ret->leaf);
}

static void stats_of(const uint8_t *d, size_t n, uint64_t *ret_errors, uint64_t *ret_samples) {
        size_t pos = 0;
        struct pbr_field f;
        while (pbr_next(d, n, &pos, &f) > 0)
                if (f.wire_type == 0 && f.number == ST_UNWIND_ERRORS)
                        *ret_errors = f.varint;
                else if (f.wire_type == 0 && f.number == ST_HEAP_SAMPLES)
                        *ret_samples = f.varint;
}

/* One ProcessHeapSamples: a dump of one heap of one process. */
static int process_dump(struct profile *p, struct profile_seq *s, bool have_ts, uint64_t ts, const uint8_t *d,
                        size_t n) {
        size_t pos = 0;
        struct pbr_field f;
        int64_t pid = -1;
        const uint8_t *name = (const uint8_t *) "";
        size_t name_len = 0;
        uint64_t interval = 0, dropped = 0, errors = 0, samples = 0, client_error = 0;
        bool overran = false, corrupted = false, disconnected = false;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.number == PHS_PID && f.wire_type == 0)
                        pid = f.varint > INT32_MAX ? -1 : (int64_t) f.varint;
                else if (f.number == PHS_HEAP_NAME && f.wire_type == 2) {
                        name = f.data;
                        name_len = f.len;
                } else if (f.number == PHS_INTERVAL && f.wire_type == 0)
                        interval = f.varint;
                else if (f.number == PHS_SAMPLES_DROPPED && f.wire_type == 0)
                        dropped = f.varint;
                else if (f.number == PHS_BUFFER_OVERRAN && f.wire_type == 0)
                        overran = f.varint != 0;
                else if (f.number == PHS_BUFFER_CORRUPTED && f.wire_type == 0)
                        corrupted = f.varint != 0;
                else if (f.number == PHS_DISCONNECTED && f.wire_type == 0)
                        disconnected = f.varint != 0;
                else if (f.number == PHS_CLIENT_ERROR && f.wire_type == 0)
                        client_error = f.varint;
                else if (f.number == PHS_STATS && f.wire_type == 2)
                        stats_of(f.data, f.len, &errors, &samples);
        }
        if (pid < 0)
                return 0;
        p->heap_dumps++;
        if (have_ts) {
                if (!p->have_first_ts) {
                        p->first_ts = ts;
                        p->have_first_ts = true;
                }
                if (ts > p->last_ts)
                        p->last_ts = ts;
        }
        struct profile_heap *h = heap_get(p, (int32_t) pid, name, name_len);
        if (!h)
                return -ENOMEM;
        h->dumps++;
        const struct profile_filter *flt = &p->filter;
        uint64_t rel = have_ts && ts > p->first_ts ? ts - p->first_ts : 0;
        if ((flt->pid >= 0 && flt->pid != pid) || flt->tid >= 0 || flt->cpu >= 0 ||
            (flt->have_until && rel > flt->until_ns)) {
                p->heap_dumps_filtered++;
                return 0;
        }
        /* Before --since: the baseline taken off the last dump. */
        bool base = flt->have_since && rel < flt->since_ns;
        struct profile_heap_entry **v = base ? &h->base : &h->cur;
        size_t *nv = base ? &h->n_base : &h->n_cur, *cap = base ? &h->cap_base : &h->cap_cur;
        /* A packet continuing the sequence's last adds to the dump it
         * continues; else this dump replaces the last. */
        if (h->dump_seq != s->id + 1 || h->dump_id != s->heap_dump_id)
                *nv = 0;
        h->dump_seq = s->id + 1;
        h->dump_id = s->heap_dump_id;
        if (!base) {
                h->interval = interval;
                h->dropped = dropped;
                h->unwind_errors = errors;
                h->samples = samples;
                h->overran = overran || client_error == 1;
                h->corrupted = corrupted;
                h->disconnected = disconnected;
                h->have_cur = true;
        }
        pos = 0;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.number != PHS_SAMPLES || f.wire_type != 2)
                        continue;
                struct profile_heap_entry e;
                int r = heap_sample(p, s, (int32_t) pid, f.data, f.len, &e);
                if (r < 0)
                        return r;
                if (GREEDY_REALLOC_MIN(*v, *cap, *nv + 1, 64) < 0)
                        return -ENOMEM;
                (*v)[(*nv)++] = e;
        }
        return 0;
}

int profile_heap_packet(struct profile *p, struct profile_seq *s, bool have_ts, uint64_t ts, const uint8_t *d,
                        size_t n) {
        size_t pos = 0;
        struct pbr_field f;
        bool continued = false, legacy = false;
        while (pbr_next(d, n, &pos, &f) > 0)
                if (f.number == PP_CONTINUED && f.wire_type == 0)
                        continued = f.varint != 0;
                else if (f.number == PP_CALLSTACKS)
                        legacy = true;
        if (legacy) {
                /* Callstacks in the packet itself (heapprofd before it
                 * interned them per sequence): not read. */
                p->heap_legacy++;
                return 0;
        }
        if (!s->heap_continued)
                s->heap_dump_id++; /* a new dump */
        /* The dumps of this packet go on in the sequence's next one. */
        s->heap_continued = continued;
        pos = 0;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.number != PP_PROCESS_DUMPS || f.wire_type != 2)
                        continue;
                int r = process_dump(p, s, have_ts, ts, f.data, f.len);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- into the trees, after the last packet ---- */

/* The node of the in-use tree at the place of node a of the allocation tree. */
static uint32_t inuse_node(struct profile *p, uint32_t *map, uint32_t a) {
        if (map[a] != UINT32_MAX)
                return map[a];
        const struct profile_node *n = &p->trees[PROFILE_HEAP_ALLOC].nodes[a];
        uint32_t parent = n->kind == NODE_ROOT ? UINT32_MAX : inuse_node(p, map, n->parent);
        if (n->kind != NODE_ROOT && parent == UINT32_MAX)
                return UINT32_MAX;
        uint32_t kind = n->kind, value = n->value;
        uint32_t r = n->kind == NODE_ROOT ? 0 : profile_tree_child(&p->trees[PROFILE_HEAP_INUSE], parent, kind, value);
        map[a] = r;
        return r;
}

static uint64_t less(uint64_t a, uint64_t b) {
        return a > b ? a - b : 0;
}

int profile_heap_finish(struct profile *p) {
        struct profile_tree *alloc = &p->trees[PROFILE_HEAP_ALLOC], *inuse = &p->trees[PROFILE_HEAP_INUSE];
        uint32_t *map = malloc((alloc->n_nodes + 1) * sizeof(uint32_t));
        if (!map)
                return -ENOMEM;
        memset(map, 0xff, (alloc->n_nodes + 1) * sizeof(uint32_t));
        struct hashmap base = {};
        int r = 0;
        for (size_t i = 0; i < p->n_heaps && r >= 0; i++) {
                struct profile_heap *h = &p->heaps[i];
                hashmap_clear(&base);
                for (size_t k = 0; k < h->n_base && r >= 0; k++)
                        if (!hashmap_get(&base, h->base[k].leaf, NULL))
                                r = hashmap_put(&base, h->base[k].leaf, k);
                for (size_t k = 0; k < h->n_cur && r >= 0; k++) {
                        struct profile_heap_entry e = h->cur[k];
                        uint64_t b;
                        if (hashmap_get(&base, e.leaf, &b)) {
                                const struct profile_heap_entry *o = &h->base[b];
                                uint64_t live = less(e.allocated, e.freed), live_n = less(e.allocs, e.frees);
                                e.allocated = less(e.allocated, o->allocated);
                                e.allocs = less(e.allocs, o->allocs);
                                /* The growth of what is in use since then. */
                                live = less(live, less(o->allocated, o->freed));
                                live_n = less(live_n, less(o->allocs, o->frees));
                                e.freed = e.allocated - (live < e.allocated ? live : e.allocated);
                                e.frees = e.allocs - (live_n < e.allocs ? live_n : e.allocs);
                        }
                        alloc->nodes[e.leaf].self[0] += e.allocs;
                        alloc->nodes[e.leaf].self[1] += e.allocated;
                        uint32_t u = inuse_node(p, map, e.leaf);
                        if (u == UINT32_MAX) {
                                r = -ENOMEM;
                                break;
                        }
                        inuse->nodes[u].self[0] += e.allocs - e.frees;
                        inuse->nodes[u].self[1] += e.allocated - e.freed;
                        p->samples_kind[PROFILE_HEAP_ALLOC] += e.allocated > 0;
                        p->samples_kind[PROFILE_HEAP_INUSE] += e.allocated > e.freed;
                }
        }
        hashmap_clear(&base);
        free(map);
        return r;
}

void profile_heap_totals(const struct profile *p, struct profile_heap_totals *ret) {
        *ret = (struct profile_heap_totals) {};
        for (size_t i = 0; i < p->n_heaps; i++) {
                const struct profile_heap *h = &p->heaps[i];
                if (!h->have_cur)
                        continue;
                ret->heaps++;
                ret->dropped += h->dropped;
                ret->unwind_errors += h->unwind_errors;
                ret->samples += h->samples;
                ret->overran += h->overran;
                ret->corrupted += h->corrupted;
                if (h->interval && (!ret->interval_min || h->interval < ret->interval_min))
                        ret->interval_min = h->interval;
                if (h->interval > ret->interval_max)
                        ret->interval_max = h->interval;
        }
}

void profile_heaps_done(struct profile *p) {
        for (size_t i = 0; i < p->n_heaps; i++) {
                free(p->heaps[i].name);
                free(p->heaps[i].cur);
                free(p->heaps[i].base);
        }
        free(p->heaps);
        p->heaps = NULL;
        p->n_heaps = p->cap_heaps = 0;
}
