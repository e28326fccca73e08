/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Unwinding this very process as if it were another: registers from
 * getcontext(), a copy of the stack, then DWARF and frame-pointer walks
 * through a known chain of calls. */

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "basic/macro.h"
#include "profiling/unwind.h"

struct capture {
        struct unwind_input in;
        uint8_t stack[32768];
};

static struct capture cap;

/* The stack as it is, redzones of AddressSanitizer included: a profiler's
 * copy, not an access of the program's objects. */
__attribute__((no_sanitize_address, noinline)) static void copy_stack(uint8_t *to, uintptr_t from, size_t n) {
        for (size_t k = 0; k < n; k++)
                to[k] = ((const volatile uint8_t *) from)[k];
}

static void take(void) {
        ucontext_t uc;
        getcontext(&uc);
        uint64_t *r = cap.in.regs;
        const greg_t *g = uc.uc_mcontext.gregs;
        r[UREG_AX] = (uint64_t) g[REG_RAX], r[UREG_BX] = (uint64_t) g[REG_RBX], r[UREG_CX] = (uint64_t) g[REG_RCX];
        r[UREG_DX] = (uint64_t) g[REG_RDX], r[UREG_SI] = (uint64_t) g[REG_RSI], r[UREG_DI] = (uint64_t) g[REG_RDI];
        r[UREG_BP] = (uint64_t) g[REG_RBP], r[UREG_SP] = (uint64_t) g[REG_RSP], r[UREG_IP] = (uint64_t) g[REG_RIP];
        r[UREG_R8] = (uint64_t) g[REG_R8], r[UREG_R9] = (uint64_t) g[REG_R9], r[UREG_R10] = (uint64_t) g[REG_R10];
        r[UREG_R11] = (uint64_t) g[REG_R11], r[UREG_R12] = (uint64_t) g[REG_R12], r[UREG_R13] = (uint64_t) g[REG_R13];
        r[UREG_R14] = (uint64_t) g[REG_R14], r[UREG_R15] = (uint64_t) g[REG_R15];
        /* As much of the stack as there is, up to the copy's size. */
        FILE *f = fopen("/proc/self/maps", "re");
        char line[512];
        uint64_t top = 0, sp = r[UREG_SP];
        while (fgets(line, sizeof(line), f)) {
                unsigned long long s, e;
                if (sscanf(line, "%llx-%llx", &s, &e) == 2 && sp >= s && sp < e)
                        top = e;
        }
        fclose(f);
        size_t n = MIN(sizeof(cap.stack), top - sp);
        copy_stack(cap.stack, (uintptr_t) sp, n);
        cap.in.stack = cap.stack;
        cap.in.stack_size = n;
}

__attribute__((noinline)) void unwind_leaf(volatile int *x);
__attribute__((noinline)) void unwind_middle(volatile int *x);
__attribute__((noinline)) void unwind_outer(volatile int *x);
__attribute__((noinline)) void unwind_leaf(volatile int *x) {
        take();
        (*x)++;
}
__attribute__((noinline)) void unwind_middle(volatile int *x) {
        unwind_leaf(x);
        (*x)++;
}
__attribute__((noinline)) void unwind_outer(volatile int *x) {
        unwind_middle(x);
        (*x)++;
}

static void check_chain(const uint64_t *pcs, size_t n, struct symbolizer *s, struct proc_info *p) {
        static const char *const want[] = { "unwind_leaf", "unwind_middle", "unwind_outer" };
        size_t w = 0;
        for (size_t k = 0; k < n && w < 3; k++) {
                struct symbolized r;
                symbolizer_resolve(s, p, pcs[k] - (k > 0), &r);
                if (r.function && strcmp(r.function, want[w]) == 0)
                        w++;
                else if (w > 0)
                        cr_assert_fail("frame %zu is %s, expected %s", k, strna(r.function), want[w]);
        }
        cr_assert_eq(w, 3, "leaf, middle and outer in that order (%zu frames)", n);
}

static void setup(struct symbolizer *s, struct unwinder **u, struct proc_info **p) {
        volatile int x = 0;
        unwind_outer(&x);
        cr_assert_eq(x, 3);
        cr_assert_eq(proc_table_new(NULL, &s->procs), 0);
        cr_assert_eq(elf_cache_new(NULL, &s->elves), 0);
        cr_assert_eq(unwinder_new(s, u), 0);
        *p = proc_table_get(s->procs, getpid());
}

static void teardown(struct symbolizer *s, struct unwinder *u) {
        unwinder_free(u);
        proc_table_free(s->procs);
        elf_cache_free(s->elves);
}

Test(profiling_unwind, dwarf_walks_the_copied_stack) {
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        uint64_t pcs[64];
        int err;
        size_t n = unwinder_dwarf(u, p, &cap.in, pcs, 64, &err);
        cr_assert_gt(n, 4);
        check_chain(pcs, n, &s, p);
        /* Again, with libunwind's caches warm, and after a flush. */
        uint64_t again[64];
        cr_assert_eq(unwinder_dwarf(u, p, &cap.in, again, 64, &err), n);
        cr_assert_eq(memcmp(pcs, again, n * sizeof(*pcs)), 0);
        unwinder_flush(u);
        cr_assert_eq(unwinder_dwarf(u, p, &cap.in, again, 64, &err), n);
        /* A bound on frames is reported as such. */
        cr_assert_eq(unwinder_dwarf(u, p, &cap.in, again, 2, &err), 2);
        cr_assert_eq(err, UNWIND_ERR_MAX_FRAMES_EXCEEDED);
        /* No stack at all: the pc, then an error. */
        struct unwind_input none = cap.in;
        none.stack_size = 0;
        n = unwinder_dwarf(u, p, &none, again, 64, &err);
        cr_assert_geq(n, 1);
        cr_assert_eq(again[0], cap.in.regs[UREG_IP]);
        cr_assert_neq(err, UNWIND_ERR_NONE);
        teardown(&s, u);
}

Test(profiling_unwind, frame_pointers) {
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        uint64_t pcs[64];
        int err;
        size_t n = unwind_frame_pointers(&cap.in, pcs, 64, &err);
        cr_assert_gt(n, 3);
        check_chain(pcs, n, &s, p);
        teardown(&s, u);
}

Test(profiling_unwind, perf_register_order) {
        uint64_t mask = unwind_perf_regs_mask();
        cr_assert_eq(__builtin_popcountll(mask), UREG_COUNT);
        uint64_t in[UREG_COUNT], out[UREG_COUNT];
        for (int k = 0; k < UREG_COUNT; k++)
                in[k] = (uint64_t) k * 7;
        unwind_regs_from_perf(in, out);
        cr_assert_eq(out[UREG_IP], 8 * 7, "perf's IP is register 8");
        cr_assert_eq(out[UREG_R8], 9 * 7, "R8 follows IP in a sample");
}
