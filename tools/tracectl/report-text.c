/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The text report: for each process, and each thread of processes with
 * several, the functions that took the most samples themselves (self) and
 * with their callees (total), as perf report --stdio lays them out. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "profile.h"

struct fstats {
        struct profile *p;
        const struct profile_tree *t;
        uint64_t *self, *total;
        uint32_t *onpath;
        uint32_t *touched;
        size_t n_touched;
        unsigned m;
};

static void visit(struct fstats *s, uint32_t n) {
        const struct profile_node *node = &s->t->nodes[n];
        if (node->total[0] == 0)
                return;
        bool frame = node->kind == NODE_FRAME;
        uint32_t sym = node->value;
        if (frame) {
                if (s->self[sym] == 0 && s->total[sym] == 0 && s->onpath[sym] == 0)
                        s->touched[s->n_touched++] = sym;
                s->self[sym] += node->self[s->m];
                /* Recursion counts a function once per stack. */
                if (s->onpath[sym]++ == 0)
                        s->total[sym] += node->total[s->m];
        }
        for (uint32_t c = node->first_child; c != UINT32_MAX; c = s->t->nodes[c].next_sibling)
                visit(s, c);
        if (frame)
                s->onpath[sym]--;
}

static struct fstats *sort_s;
static bool sort_by_total;

static int by_value(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        const uint64_t *v = sort_by_total ? sort_s->total : sort_s->self;
        const uint64_t *w = sort_by_total ? sort_s->self : sort_s->total;
        if (v[x] != v[y])
                return v[x] < v[y] ? 1 : -1;
        if (w[x] != w[y])
                return w[x] < w[y] ? 1 : -1;
        return strcmp(sort_s->p->syms[x].name, sort_s->p->syms[y].name);
}

static void table(FILE *f, struct fstats *s, bool by_total, uint64_t all, size_t top_n, const char *indent) {
        sort_s = s;
        sort_by_total = by_total;
        qsort(s->touched, s->n_touched, sizeof(uint32_t), by_value);
        const char *unit = profile_unit(s->p);
        fprintf(f, "%s# by %s\n", indent, by_total ? "total (with callees)" : "self");
        fprintf(f, "%s# %7s %10s %7s %10s  %-40s %s\n", indent, "Self%", unit, "Total%", unit, "Function", "Module");
        for (size_t i = 0; i < s->n_touched && i < top_n; i++) {
                uint32_t k = s->touched[i];
                if ((by_total ? s->total[k] : s->self[k]) == 0)
                        break;
                const struct profile_sym *sy = &s->p->syms[k];
                double self = profile_value(s->p, s->self[k]), total = profile_value(s->p, s->total[k]);
                fprintf(f, "%s  %6.2f%% %10.*f %6.2f%% %10.*f  %-40s %s%s\n", indent,
                        all ? 100.0 * (double) s->self[k] / (double) all : 0.0, s->m ? 3 : 0, self,
                        all ? 100.0 * (double) s->total[k] / (double) all : 0.0, s->m ? 3 : 0, total, sy->name,
                        sy->module ? sy->module : "[unknown]", sy->kernel ? " [k]" : "");
        }
}

static void block(FILE *f, struct fstats *s, uint32_t n, uint64_t all, size_t top_n, const char *indent) {
        for (size_t i = 0; i < s->n_touched; i++) {
                s->self[s->touched[i]] = 0;
                s->total[s->touched[i]] = 0;
        }
        s->n_touched = 0;
        visit(s, n);
        table(f, s, false, all, top_n, indent);
        fprintf(f, "%s#\n", indent);
        table(f, s, true, all, top_n, indent);
}

static int by_total_desc(const struct profile_tree *t, uint32_t a, uint32_t b, unsigned m) {
        if (t->nodes[a].total[m] != t->nodes[b].total[m])
                return t->nodes[a].total[m] < t->nodes[b].total[m] ? 1 : -1;
        return t->nodes[a].value < t->nodes[b].value ? -1 : t->nodes[a].value > t->nodes[b].value;
}

/* Children of n by total, descending (insertion sort: few processes). */
static size_t kids_by_total(const struct profile_tree *t, uint32_t n, unsigned m, uint32_t **ret) {
        size_t k = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                k++;
        uint32_t *v = malloc((k ? k : 1) * sizeof(uint32_t));
        *ret = v;
        if (!v)
                return 0;
        size_t i = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling) {
                size_t j = i++;
                while (j > 0 && by_total_desc(t, v[j - 1], c, m) > 0) {
                        v[j] = v[j - 1];
                        j--;
                }
                v[j] = c;
        }
        return k;
}

/* How many of a process's stacks were cut short, when some were. */
static void process_walks(FILE *f, const struct profile *p, int32_t pid) {
        uint64_t stacks = 0, cut = 0;
        profile_process_stacks(p, pid, &stacks, &cut);
        if (cut)
                fprintf(f, "; %" PRIu64 " of its %" PRIu64 " stacks (%.0f%%) cut short by unwind errors%s", cut, stacks,
                        100.0 * (double) cut / (double) stacks, cut * 2 > stacks ? ": most callers are missing" : "");
        fputc('\n', f);
}

/* The other kinds the trace has, and the options that show them. */
static void other_kinds(FILE *f, const struct profile *p) {
        bool heap = p->heap_dumps > 0 && !profile_kind_heap(p->kind);
        bool on = p->samples_kind[PROFILE_ON_CPU] && p->kind != PROFILE_ON_CPU;
        bool off = p->samples_kind[PROFILE_OFF_CPU] && p->kind != PROFILE_OFF_CPU;
        bool in = profile_kind_heap(p->kind) && p->kind != PROFILE_HEAP_INUSE;
        bool al = profile_kind_heap(p->kind) && p->kind != PROFILE_HEAP_ALLOC;
        if (!heap && !on && !off && !in && !al)
                return;
        fprintf(f, " (not shown:");
        const char *sep = " ";
        if (on) {
                fprintf(f, "%s%" PRIu64 " on-CPU samples, --on-cpu", sep, p->samples_kind[PROFILE_ON_CPU]);
                sep = "; ";
        }
        if (off) {
                fprintf(f, "%s%" PRIu64 " off-CPU samples, --off-cpu", sep, p->samples_kind[PROFILE_OFF_CPU]);
                sep = "; ";
        }
        if (heap) {
                fprintf(f, "%sheap profiles, --inuse or --alloc", sep);
                sep = "; ";
        }
        if (in)
                fprintf(f, "%sbytes in use, --inuse", sep);
        if (al)
                fprintf(f, "%sbytes allocated, --alloc", sep);
        fputc(')', f);
}

static void heap_header(FILE *f, const struct profile *p) {
        struct profile_heap_totals h;
        profile_heap_totals(p, &h);
        fprintf(f, "# Heaps: %" PRIu64 " (%" PRIu64 " dumps read)", h.heaps, p->heap_dumps);
        if (h.interval_min && h.interval_min == h.interval_max)
                fprintf(f, ", sampled every %" PRIu64 " bytes", h.interval_min);
        else if (h.interval_min)
                fprintf(f, ", sampled every %" PRIu64 " to %" PRIu64 " bytes", h.interval_min, h.interval_max);
        fprintf(f, "; each as its last dump says\n");
        fprintf(f, "# Samples: %" PRIu64 " taken, %" PRIu64 " dropped for a full buffer", h.samples, h.dropped);
        if (h.overran)
                fprintf(f, " (in %" PRIu64 " of them: a larger shmem_size_bytes, or block_client, keeps them)",
                        h.overran);
        fprintf(f, "; %" PRIu64 " stacks cut short by unwind errors\n", h.unwind_errors);
        if (h.corrupted)
                fprintf(f, "# Damaged: %" PRIu64 " heaps whose buffer did not read: their profiles end early\n",
                        h.corrupted);
        if (p->missing_interned)
                fprintf(f, "# Damaged: %" PRIu64 " references to callstacks or frames never interned\n", p->missing_interned);
        if (p->heap_legacy)
                fprintf(f, "# Not read: %" PRIu64 " dumps whose packets carry their own callstacks (heapprofd before "
                           "it interned them)\n", p->heap_legacy);
        if (p->heap_incomplete)
                fprintf(f, "# Incomplete: out of memory while adding up the dumps\n");
        fprintf(f, "# Showing: %s, in KiB", p->kind == PROFILE_HEAP_INUSE
                                                    ? "bytes not released at the last dump (in use)"
                                                    : "bytes allocated since the profile began");
        other_kinds(f, p);
        if (p->heap_dumps_filtered)
                fprintf(f, "; %" PRIu64 " dumps filtered out", p->heap_dumps_filtered);
        fprintf(f, "\n#\n");
}

static void header(FILE *f, const struct profile *p) {
        if (profile_kind_heap(p->kind)) {
                heap_header(f, p);
                return;
        }
        fprintf(f, "# Samples: %" PRIu64 " (%" PRIu64 " with a callstack, %" PRIu64 " without", p->samples,
                p->samples - p->samples_no_stack, p->samples_no_stack);
        static const char *const why[] = { "unknown", "read stage", "unwind stage", "unwind queue full", "out of scope" };
        for (size_t i = 0; i < ELEMENTSOF(p->skipped); i++)
                if (p->skipped[i])
                        fprintf(f, "; %" PRIu64 " skipped: %s", p->skipped[i], i < ELEMENTSOF(why) ? why[i] : "other");
        fprintf(f, ")\n");
        fprintf(f, "# Lost: %" PRIu64 " kernel records, %zu sequences with data losses; %" PRIu64
                   " stacks cut short by unwind errors\n",
                p->kernel_records_lost, (size_t) p->sequences_with_loss, p->unwind_errors);
        if (p->missing_interned)
                fprintf(f, "# Damaged: %" PRIu64 " references to callstacks or frames never interned\n", p->missing_interned);
        if (p->timebase)
                fprintf(f, "# Event: %s\n", p->timebase);
        stack_walks_print(f, &p->walks, "# ");
        if (p->have_first_ts)
                fprintf(f, "# Time span: %.3f s\n", (double) (p->last_ts - p->first_ts) / 1e9);
        fprintf(f, "# Showing: %s samples, in %s", p->kind == PROFILE_ON_CPU ? "on-CPU" : "off-CPU (blocked time)",
                p->kind == PROFILE_ON_CPU ? "samples" : "milliseconds blocked");
        other_kinds(f, p);
        if (p->samples_filtered)
                fprintf(f, "; %" PRIu64 " samples filtered out", p->samples_filtered);
        fprintf(f, "\n#\n");
}

int report_text(FILE *f, struct profile *p, const struct report_options *o) {
        const struct profile_tree *t = p->tree;
        unsigned m = p->metric;
        struct fstats s = {
                .p = p,
                .t = t,
                .m = m,
                .self = calloc(p->n_syms + 1, sizeof(uint64_t)),
                .total = calloc(p->n_syms + 1, sizeof(uint64_t)),
                .onpath = calloc(p->n_syms + 1, sizeof(uint32_t)),
                .touched = calloc(p->n_syms + 1, sizeof(uint32_t)),
        };
        int r = 0;
        if (!s.self || !s.total || !s.onpath || !s.touched) {
                r = -ENOMEM;
                goto out;
        }
        header(f, p);
        uint64_t all = t->nodes[0].total[m];
        uint32_t *procs;
        size_t np = kids_by_total(t, 0, m, &procs);
        for (size_t i = 0; i < np; i++) {
                const struct profile_node *pn = &t->nodes[procs[i]];
                if (pn->total[0] == 0)
                        continue;
                fprintf(f, "# Process %s (pid %u): %.*f %s, %.2f%%", profile_process_name(p, (int32_t) pn->value),
                        pn->value, m ? 3 : 0, profile_value(p, pn->total[m]), profile_unit(p),
                        all ? 100.0 * (double) pn->total[m] / (double) all : 0.0);
                process_walks(f, p, (int32_t) pn->value);
                uint32_t *threads;
                size_t nt = kids_by_total(t, procs[i], m, &threads);
                size_t live = 0;
                for (size_t k = 0; k < nt; k++)
                        live += t->nodes[threads[k]].total[0] > 0;
                if (live > 1)
                        for (size_t k = 0; k < nt; k++) {
                                const struct profile_node *tn = &t->nodes[threads[k]];
                                if (tn->total[0])
                                        fprintf(f, "#   thread %s (tid %u): %.*f %s\n", profile_thread_name(p, (int32_t) tn->value),
                                                tn->value, m ? 3 : 0, profile_value(p, tn->total[m]), profile_unit(p));
                        }
                fprintf(f, "#\n");
                block(f, &s, procs[i], all, o->top_n, "");
                fprintf(f, "\n");
                if (live > 1)
                        for (size_t k = 0; k < nt; k++) {
                                const struct profile_node *tn = &t->nodes[threads[k]];
                                if (!tn->total[0])
                                        continue;
                                fprintf(f, "    # Thread %s (tid %u) of %s (pid %u)\n", profile_thread_name(p, (int32_t) tn->value),
                                        tn->value, profile_process_name(p, (int32_t) pn->value), pn->value);
                                block(f, &s, threads[k], all, o->top_n, "    ");
                                fprintf(f, "\n");
                        }
                free(threads);
        }
        free(procs);
        if ((np == 0 || all == 0) && profile_kind_heap(p->kind))
                fprintf(f, "# No heap callsites%s.\n", p->heap_dumps_filtered ? " passed the filters" : "");
        else if (np == 0 || all == 0)
                fprintf(f, "# No samples with a callstack%s.\n", p->samples_filtered ? " passed the filters" : "");
out:
        free(s.self);
        free(s.total);
        free(s.onpath);
        free(s.touched);
        return r;
}
