/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Folded stacks, the input of FlameGraph's flamegraph.pl and inferno: one
 * line per distinct stack, "comm;outermost;...;innermost count". Off-CPU
 * counts are blocked microseconds (as bcc's offcputime -f writes them),
 * heap counts bytes. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

struct folded {
        FILE *f;
        struct profile *p;
        const struct profile_tree *t;
        char *line;
        size_t cap;
};

static int walk(struct folded *w, uint32_t n, size_t len) {
        const struct profile_node *node = &w->t->nodes[n];
        if (node->total[0] == 0)
                return 0;
        if (n != 0) {
                char buf[1024];
                const char *label = profile_node_label(w->p, node, buf, sizeof(buf));
                size_t k = strlen(label);
                if (len + k + 2 > w->cap) {
                        size_t cap = (len + k + 2) * 2;
                        char *l = realloc(w->line, cap);
                        if (!l)
                                return -ENOMEM;
                        w->line = l;
                        w->cap = cap;
                }
                if (len)
                        w->line[len++] = ';';
                memcpy(w->line + len, label, k);
                len += k;
        }
        if (node->self[0] && len) {
                uint64_t v = profile_kind_heap(w->p->kind) ? node->self[1]
                             : w->p->metric == 1            ? node->self[1] / 1000
                                                            : node->self[0];
                fprintf(w->f, "%.*s %" PRIu64 "\n", (int) len, w->line, v);
        }
        uint32_t *kids;
        size_t k = profile_children_sorted(w->p, w->t, n, &kids);
        int r = 0;
        for (size_t i = 0; i < k && r >= 0; i++)
                r = walk(w, kids[i], len);
        free(kids);
        return r;
}

int report_folded(FILE *f, struct profile *p) {
        struct profile_tree t;
        int r = profile_merged_tree(p, &t);
        if (r < 0)
                return r;
        struct folded w = { .f = f, .p = p, .t = &t };
        r = walk(&w, 0, 0);
        free(w.line);
        profile_tree_done(&t);
        return r;
}
