/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Call trees: nodes found by (parent, kind, value), totals summed from
 * the selfs, the tree a report shows, the merged tree of folded stacks
 * and flamegraphs, children in label order. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "profile-internal.h"

void profile_tree_done(struct profile_tree *t) {
        free(t->nodes);
        hashmap_clear(&t->children);
        *t = (struct profile_tree) {};
}

uint32_t profile_tree_child(struct profile_tree *t, uint32_t parent, uint32_t kind, uint32_t value) {
        uint64_t key = ((uint64_t) (parent + 1) << 35) | ((uint64_t) kind << 32) | value;
        uint64_t found;
        if (hashmap_get(&t->children, key, &found))
                return (uint32_t) found;
        if (GREEDY_REALLOC_MIN(t->nodes, t->cap_nodes, t->n_nodes + 1, 256) < 0)
                return UINT32_MAX;
        uint32_t i = (uint32_t) t->n_nodes;
        if (hashmap_put(&t->children, key, i) < 0)
                return UINT32_MAX;
        t->n_nodes++;
        t->nodes[i] = (struct profile_node) {
                .parent = parent,
                .first_child = UINT32_MAX,
                .next_sibling = UINT32_MAX,
                .kind = kind,
                .value = value,
        };
        if (parent != UINT32_MAX) {
                t->nodes[i].depth = t->nodes[parent].depth + 1;
                t->nodes[i].next_sibling = t->nodes[parent].first_child;
                t->nodes[parent].first_child = i;
        }
        return i;
}

void profile_tree_totals(struct profile_tree *t) {
        /* Children always come after their parent: sum from the end. */
        for (size_t i = 0; i < t->n_nodes; i++)
                for (size_t m = 0; m < 2; m++)
                        t->nodes[i].total[m] = t->nodes[i].self[m];
        for (size_t i = t->n_nodes; i-- > 1;)
                for (size_t m = 0; m < 2; m++)
                        t->nodes[t->nodes[i].parent].total[m] += t->nodes[i].total[m];
}

/* --- after the last packet ---------------------------------------------- */

static void zero_subtree(struct profile_tree *t, uint32_t n) {
        t->nodes[n].self[0] = t->nodes[n].self[1] = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                zero_subtree(t, c);
}

void profile_finish(struct profile *p) {
        if (p->heap_dumps && profile_heap_finish(p) < 0)
                p->heap_incomplete = true;
        if (p->filter.kind_explicit)
                p->kind = p->filter.kind;
        else if (p->samples_kind[PROFILE_ON_CPU] == 0 && p->samples_kind[PROFILE_OFF_CPU] > 0)
                p->kind = PROFILE_OFF_CPU;
        else if (p->samples_kind[PROFILE_ON_CPU] == 0 && p->heap_dumps > 0)
                p->kind = PROFILE_HEAP_INUSE; /* a heap profile only */
        else
                p->kind = PROFILE_ON_CPU;
        p->tree = &p->trees[p->kind];
        p->metric = p->kind == PROFILE_ON_CPU ? 0 : 1;
        /* Every tree (pprof writes every kind): the comm filter, totals. */
        for (size_t k = 0; k < _PROFILE_KIND_MAX; k++) {
                struct profile_tree *t = &p->trees[k];
                if (p->filter.comm && t->n_nodes) {
                        for (uint32_t pr = t->nodes[0].first_child; pr != UINT32_MAX; pr = t->nodes[pr].next_sibling) {
                                if (strcmp(profile_process_name(p, (int32_t) t->nodes[pr].value), p->filter.comm) == 0)
                                        continue;
                                for (uint32_t th = t->nodes[pr].first_child; th != UINT32_MAX;
                                     th = t->nodes[th].next_sibling)
                                        if (strcmp(profile_thread_name(p, (int32_t) t->nodes[th].value), p->filter.comm) != 0)
                                                zero_subtree(t, th);
                        }
                }
                profile_tree_totals(t);
        }
}

const char *profile_unit(const struct profile *p) {
        if (profile_kind_heap(p->kind))
                return "KiB";
        return p->metric == 1 ? "ms" : "samples";
}

double profile_value(const struct profile *p, uint64_t w) {
        if (profile_kind_heap(p->kind))
                return (double) w / 1024.0;
        return p->metric == 1 ? (double) w / 1e6 : (double) w;
}

static int merge(struct profile *p, const struct profile_tree *src, uint32_t n, struct profile_tree *dst, uint32_t at) {
        const struct profile_node *s = &src->nodes[n];
        uint32_t d = at;
        if (s->kind == NODE_PROCESS) {
                uint32_t comm = profile_intern_name(p, profile_process_name(p, (int32_t) s->value), NULL, false, true,
                                                    NULL, NULL);
                if (comm == UINT32_MAX)
                        return -ENOMEM;
                d = profile_tree_child(dst, at, NODE_COMM, comm);
        } else if (s->kind == NODE_FRAME)
                d = profile_tree_child(dst, at, NODE_FRAME, s->value);
        if (d == UINT32_MAX)
                return -ENOMEM;
        dst->nodes[d].self[0] += s->self[0];
        dst->nodes[d].self[1] += s->self[1];
        for (uint32_t c = s->first_child; c != UINT32_MAX; c = src->nodes[c].next_sibling) {
                if (src->nodes[c].total[0] == 0 && src->nodes[c].total[1] == 0)
                        continue;
                int r = merge(p, src, c, dst, d);
                if (r < 0)
                        return r;
        }
        return 0;
}

int profile_merged_tree(struct profile *p, struct profile_tree *ret) {
        *ret = (struct profile_tree) {};
        if (profile_tree_child(ret, UINT32_MAX, NODE_ROOT, 0) == UINT32_MAX)
                return -ENOMEM;
        int r = merge(p, p->tree, 0, ret, 0);
        if (r < 0) {
                profile_tree_done(ret);
                return r;
        }
        profile_tree_totals(ret);
        return 0;
}

static const struct profile *sort_p;
static const struct profile_tree *sort_t;

static int by_label(const void *a, const void *b) {
        const struct profile_node *x = &sort_t->nodes[*(const uint32_t *) a], *y = &sort_t->nodes[*(const uint32_t *) b];
        char bx[256], by[256];
        int c = strcmp(profile_node_label(sort_p, x, bx, sizeof(bx)), profile_node_label(sort_p, y, by, sizeof(by)));
        if (c != 0)
                return c;
        return x->value < y->value ? -1 : x->value > y->value;
}

size_t profile_children_sorted(const struct profile *p, const struct profile_tree *t, uint32_t n, uint32_t **ret) {
        size_t k = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                k++;
        *ret = NULL;
        if (k == 0)
                return 0;
        uint32_t *v = malloc(k * sizeof(uint32_t));
        if (!v)
                return 0;
        k = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                v[k++] = c;
        sort_p = p;
        sort_t = t;
        qsort(v, k, sizeof(uint32_t), by_label);
        *ret = v;
        return k;
}
