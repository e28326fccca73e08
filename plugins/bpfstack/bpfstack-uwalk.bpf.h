/* SPDX-License-Identifier: GPL-2.0-only */
/* linux.bpf_stack's walk of a user stack by the unwind tables the plugin
 * loaded (frame pointers where no table covers a frame): included once,
 * by bpfstack.bpf.c, after its maps. */
#pragma once

/* --- user stacks by unwind tables ------------------------------------------ */

struct walk {
        __u64 ip, sp, bp;
        /* Where the caller's BP was saved, not read yet (0: bp holds it):
         * only a frame whose CFA is BP-based needs the value, and most
         * code without frame pointers has none. */
        __u64 bp_at;
        __u32 n;     /* the frames go into scratch */
        __u32 last;  /* the mapping of the previous frame: most callers share it */
        __u8 stop;
        __u8 unmapped; /* bpfstack_record's */
};

/* Binary searches run as bpf_loop callbacks: the verifier checks a
 * callback once, where it would walk every path of an unrolled search. */
struct map_search {
        const struct bpfstack_uproc *p;
        __u64 pc;
        __u32 lo, hi; /* the last mapping starting at or below pc is below lo */
};

static long map_search_step(__u32 i, void *ctx) {
        struct map_search *c = ctx;
        if (c->lo >= c->hi)
                return 1;
        __u32 mid = (c->lo + c->hi) / 2;
        if (mid >= BPFSTACK_UNWIND_MAPS)
                return 1;
        if (c->p->m[mid].start <= c->pc)
                c->lo = mid + 1;
        else
                c->hi = mid;
        return 0;
}

/* The mapping of p holding pc, or NULL; *last: its index, and the one
 * looked at first. */
static __always_inline const struct bpfstack_umap *find_map(const struct bpfstack_uproc *p, __u64 pc, __u32 *last) {
        const struct bpfstack_umap *m = &p->m[*last & (BPFSTACK_UNWIND_MAPS - 1)];
        if (*last < p->n && m->start <= pc && pc < m->end)
                return m;
        struct map_search c = { .p = p, .pc = pc, .hi = p->n };
        if (c.hi > BPFSTACK_UNWIND_MAPS)
                c.hi = BPFSTACK_UNWIND_MAPS;
        bpf_loop(8, map_search_step, &c, 0); /* 2^8 > BPFSTACK_UNWIND_MAPS */
        __u32 k = c.lo;
        if (k == 0 || k > BPFSTACK_UNWIND_MAPS)
                return NULL;
        *last = k - 1;
        m = &p->m[(k - 1) & (BPFSTACK_UNWIND_MAPS - 1)];
        return pc < m->end ? m : NULL;
}

struct row_search {
        __u32 lo, hi, rel; /* rows[lo].pc <= rel < rows[hi].pc */
};

/* Four halvings a call: fewer calls of the callback. */
static long row_search_step(__u32 i, void *ctx) {
        struct row_search *c = ctx;
        __u32 lo = c->lo, hi = c->hi;
        for (int k = 0; k < 4; k++) {
                if (lo + 1 >= hi)
                        break;
                __u32 mid = lo + (hi - lo) / 2;
                const struct bpfstack_row *r = bpf_map_lookup_elem(&unwind_rows, &mid);
                if (!r)
                        return 1;
                if (r->pc <= c->rel)
                        lo = mid;
                else
                        hi = mid;
        }
        c->lo = lo;
        c->hi = hi;
        return lo + 1 >= hi;
}

/* The row of m's table covering rel, or NULL: the page index narrows the
 * search to the rows of rel's page. */
static __always_inline const struct bpfstack_row *find_row(const struct bpfstack_umap *m, __u32 rel) {
        __u32 first = m->first_row, n = m->n_rows;
        if (n == 0)
                return NULL;
        const struct bpfstack_row *r = bpf_map_lookup_elem(&unwind_rows, &first);
        if (!r || r->pc > rel)
                return NULL;
        __u32 page = (rel - (r->pc & ~(BPFSTACK_PAGE - 1))) >> BPFSTACK_PAGE_SHIFT;
        struct row_search c = { .lo = first, .hi = first + n, .rel = rel };
        if (page < m->n_pages) {
                __u32 at = m->first_page + page;
                const struct bpfstack_page *pg = bpf_map_lookup_elem(&unwind_pages, &at);
                if (pg && pg->lo < pg->hi && pg->hi <= n) {
                        c.lo = first + pg->lo;
                        c.hi = first + pg->hi;
                }
        } else
                c.lo = first + n - 1; /* past the last page: the closing row */
        bpf_loop(7, row_search_step, &c, 0); /* 2^28 rows > the array's largest size */
        return bpf_map_lookup_elem(&unwind_rows, &c.lo);
}

/* A frame no table covers (code generated at run time in anonymous
 * memory: V8's, HotSpot's, CPython's perf trampolines; or a function with
 * no unwind rule) is left by its frame pointer, as those runtimes keep
 * one: the caller's BP saved at BP, the return address above it. The walk
 * goes on with the tables from the caller, or ends with why (the frame
 * pointer is not one: outside the stack above SP, or unreadable). */
static __always_inline long fp_step(struct walk *w, __u8 why) {
        if (w->bp_at) {
                if (bpf_probe_read_user(&w->bp, sizeof(w->bp), (const void *) w->bp_at) < 0) {
                        w->stop = why;
                        return 1;
                }
                w->bp_at = 0;
        }
        __u64 bp = w->bp, frame[2];
        /* A zero frame pointer ends the chain (_start clears it), as it
         * ends perf's and the kernel's walks by frame pointers. */
        if (bp == 0) {
                w->stop = BPFSTACK_STOP_END;
                return 1;
        }
        /* A frame pointer lies on the stack, above SP and not far. */
        if (bp < w->sp || bp - w->sp > BPFSTACK_FP_SPAN || (bp & 7) ||
            bpf_probe_read_user(frame, sizeof(frame), (const void *) bp) < 0) {
                w->stop = why;
                return 1;
        }
        if (frame[1] == 0) {
                w->stop = BPFSTACK_STOP_END;
                return 1;
        }
        w->ip = frame[1];
        w->sp = bp + 16;
        w->bp = frame[0];
        return 0;
}

/* One frame: records ip, then finds the caller's registers. 1 ends the
 * walk. */
__noinline int walk_frame(struct walk *w, const struct bpfstack_uproc *p) {
        if (!w)
                return 1;
        __u32 zero = 0;
        struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
        if (!sc)
                return 1;
        __u32 n = w->n;
        if (n >= max_depth || n >= BPFSTACK_MAX_DEPTH) {
                w->stop = BPFSTACK_STOP_DEPTH;
                return 1;
        }
        sc->frames[n] = w->ip;
        w->n = n + 1;

        if (!p) {
                w->stop = BPFSTACK_STOP_NO_TABLES;
                return 1;
        }
        /* A return address may be just past the end of its function (a
         * call that does not return): look up the call instead. */
        __u64 pc = n > 0 ? w->ip - 1 : w->ip;
        __u32 last = w->last;
        const struct bpfstack_umap *m = find_map(p, pc, &last);
        w->last = last;
        if (!m && n == 0 && (p->flags & BPFSTACK_UPROC_PARTIAL)) {
                w->stop = BPFSTACK_STOP_NO_TABLES;
                return 1;
        }
        if (!m) {
                if (!w->unmapped)
                        w->unmapped = (__u8) (n + 1);
                return fp_step(w, BPFSTACK_STOP_NO_MAPPING);
        }
        __u64 rel = pc - m->bias;
        const struct bpfstack_row *r = rel >> 32 ? NULL : find_row(m, (__u32) rel);
        __u8 kind = r ? r->kind & BPFSTACK_ROW_KIND_MASK : BPFSTACK_ROW_NONE;
        if (kind == BPFSTACK_ROW_OUTERMOST) {
                w->stop = BPFSTACK_STOP_END;
                return 1;
        }
        if (kind == BPFSTACK_ROW_NONE || !r)
                return fp_step(w, BPFSTACK_STOP_NO_CFI);
        if (kind == BPFSTACK_ROW_CFA_BP && w->bp_at) {
                if (bpf_probe_read_user(&w->bp, sizeof(w->bp), (const void *) w->bp_at) < 0) {
                        w->stop = BPFSTACK_STOP_READ_FAULT;
                        return 1;
                }
                w->bp_at = 0;
        }
        if (kind == BPFSTACK_ROW_REFUSED || (kind == BPFSTACK_ROW_CFA_BP && w->bp == 0)) {
                w->stop = BPFSTACK_STOP_UNSUPPORTED;
                return 1;
        }
        __u64 cfa = (kind == BPFSTACK_ROW_CFA_SP ? w->sp : w->bp) + (__s64) r->cfa_off;
        __u64 ra = 0;
        if (bpf_probe_read_user(&ra, sizeof(ra), (const void *) (cfa - 8)) < 0) {
                w->stop = BPFSTACK_STOP_READ_FAULT;
                return 1;
        }
        if (r->kind & BPFSTACK_ROW_BP_SAVED)
                w->bp_at = cfa + 8 * (__s64) r->bp_off8;
        else if (r->kind & BPFSTACK_ROW_BP_LOST) {
                w->bp = 0;
                w->bp_at = 0;
        }
        if (ra == 0) {
                w->stop = BPFSTACK_STOP_END;
                return 1;
        }
        if (cfa <= w->sp) {
                w->stop = BPFSTACK_STOP_BAD_FRAME;
                return 1;
        }
        w->ip = ra;
        w->sp = cfa;
        return 0;
}

/* A global function is checked once, whatever the walk's state: the loop
 * around it is checked as the same call again and again (with the frame's
 * work inline, a 6.18 verifier took each depth's states apart and went
 * over its limit of instructions). */
struct walk_loop {
        struct walk w;
        /* Beside the state the function gets, not in it: the verifier
         * forgets what the memory it passes holds, pointers included. */
        const struct bpfstack_uproc *p;
};

static long walk_step(__u32 i, void *ctx) {
        struct walk_loop *l = ctx;
        return walk_frame(&l->w, l->p) != 0;
}

/* Walks the user stack of task t (current) into scratch's frames: their
 * count, the reason the walk ended in *stop. */
static __always_inline __u32 walk_user_stack(struct task_struct *t, __u32 pid, __u8 *stop, __u8 *unmapped) {
        *stop = BPFSTACK_STOP_NONE;
        *unmapped = 0;
        /* t and regs are BTF pointers: read directly, no helper call. */
        if (!t->mm)
                return 0; /* a kernel thread */
        struct pt_regs *regs = (struct pt_regs *) bpf_task_pt_regs(t);
        if (!regs)
                return 0;
        struct walk_loop l = {};
        struct walk *wp = &l.w;
        wp->ip = regs->ip;
        wp->sp = regs->sp;
        wp->bp = regs->bp;
        if (!wp->ip)
                return 0;
        l.p = bpf_map_lookup_elem(&unwind_procs, &pid);
        if (!l.p) {
                *stop = BPFSTACK_STOP_NO_TABLES;
                return 0;
        }
        bpf_loop(BPFSTACK_MAX_DEPTH + 1, walk_step, &l, 0);
        *stop = wp->stop;
        *unmapped = wp->unmapped;
        return wp->n;
}
