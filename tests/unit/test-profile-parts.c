/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The parts of a profile that need no trace: frames interned once
 * (profile-names.c) and call trees (profile-tree.c). Whole traces go
 * through test-report. */

#include <criterion/criterion.h>
#include <stdlib.h>

#include "profile.h"

Test(profile_names, interned_once_per_name_module_and_ring) {
        struct profile p;
        profile_init(&p, NULL);
        uint32_t a = profile_intern_name(&p, "main", "app", false, true, "/usr/bin/app", NULL);
        uint32_t b = profile_intern_name(&p, "main", "app", false, true, NULL, NULL);
        uint32_t c = profile_intern_name(&p, "main", "lib.so", false, true, NULL, NULL);
        uint32_t d = profile_intern_name(&p, "main", "app", true, true, NULL, NULL);
        uint32_t e = profile_intern_name(&p, "main", NULL, false, true, NULL, NULL);
        cr_assert_eq(a, b);
        cr_assert_neq(a, c);
        cr_assert_neq(a, d);
        cr_assert_neq(a, e);
        cr_assert_eq(p.n_syms, 4);
        cr_assert_str_eq(p.syms[a].path, "/usr/bin/app"); /* the first definition stays */
        profile_done(&p);
}

Test(profile_names, unnamed_tasks) {
        struct profile p;
        profile_init(&p, NULL);
        cr_assert_str_eq(profile_process_name(&p, 0), "[idle]");
        cr_assert_str_eq(profile_process_name(&p, 42), "[unknown]");
        cr_assert_str_eq(profile_thread_name(&p, 42), "[unknown]");
        profile_done(&p);
}

Test(profile_tree, children_totals_and_order) {
        struct profile p;
        profile_init(&p, NULL);
        uint32_t zeta = profile_intern_name(&p, "zeta", NULL, false, true, NULL, NULL);
        uint32_t alpha = profile_intern_name(&p, "alpha", NULL, false, true, NULL, NULL);
        struct profile_tree *t = &p.trees[PROFILE_ON_CPU];
        uint32_t proc = profile_tree_child(t, 0, NODE_PROCESS, 7);
        uint32_t thr = profile_tree_child(t, proc, NODE_THREAD, 7);
        uint32_t z = profile_tree_child(t, thr, NODE_FRAME, zeta);
        uint32_t a = profile_tree_child(t, thr, NODE_FRAME, alpha);
        cr_assert_eq(profile_tree_child(t, thr, NODE_FRAME, zeta), z);
        cr_assert_eq(t->nodes[z].depth, 3);
        t->nodes[z].self[0] = 2;
        t->nodes[a].self[0] = 3;
        t->nodes[thr].self[0] = 1;
        profile_finish(&p);
        cr_assert_eq(p.tree, t);
        cr_assert_eq(t->nodes[0].total[0], 6);
        cr_assert_eq(t->nodes[proc].total[0], 6);
        cr_assert_eq(t->nodes[thr].total[0], 6);
        cr_assert_str_eq(profile_unit(&p), "samples");

        uint32_t *kids = NULL;
        cr_assert_eq(profile_children_sorted(&p, t, thr, &kids), 2);
        cr_assert_eq(kids[0], a);
        cr_assert_eq(kids[1], z);
        free(kids);

        /* Merged: the process becomes its name, the thread level goes. */
        struct profile_tree m;
        cr_assert_eq(profile_merged_tree(&p, &m), 0);
        uint32_t comm = m.nodes[0].first_child;
        cr_assert_neq(comm, UINT32_MAX);
        cr_assert_eq(m.nodes[comm].kind, NODE_COMM);
        cr_assert_eq(m.nodes[comm].total[0], 6);
        char buf[64];
        cr_assert_str_eq(profile_node_label(&p, &m.nodes[comm], buf, sizeof(buf)), "[unknown]");
        size_t frames = 0;
        for (uint32_t c = m.nodes[comm].first_child; c != UINT32_MAX; c = m.nodes[c].next_sibling) {
                cr_assert_eq(m.nodes[c].kind, NODE_FRAME);
                frames++;
        }
        cr_assert_eq(frames, 2);
        profile_tree_done(&m);
        profile_done(&p);
}

Test(profile_tree, labels_fit_folded_stacks) {
        struct profile p;
        profile_init(&p, NULL);
        uint32_t s = profile_intern_name(&p, "a;b\nc", NULL, false, true, NULL, NULL);
        struct profile_node n = { .kind = NODE_FRAME, .value = s };
        char buf[64];
        cr_assert_str_eq(profile_node_label(&p, &n, buf, sizeof(buf)), "a:b c");
        profile_done(&p);
}
