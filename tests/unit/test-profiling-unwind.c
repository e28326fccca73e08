/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Unwinding this very process as if it were another: registers from
 * getcontext(), a copy of the stack, then DWARF and frame-pointer walks
 * through a known chain of calls. */

#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <stdio.h>
#include <ucontext.h>
#include <unistd.h>

#include "basic/macro.h"
#include "profiling/cfi-rows.h"
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

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
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

Test(profiling_unwind, rows_walk_as_libunwind_does) {
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        uint64_t a[64], b[64], by_rows, by_libunwind;
        int ea, eb;
        unwinder_use_rows(u, false);
        size_t na = unwinder_dwarf(u, p, &cap.in, a, 64, &ea);
        unwinder_counts(u, &by_rows, &by_libunwind);
        cr_assert_eq(by_rows, 0);
        cr_assert_eq(by_libunwind, 1);
        unwinder_use_rows(u, true);
        size_t nb = unwinder_dwarf(u, p, &cap.in, b, 64, &eb);
        unwinder_counts(u, &by_rows, &by_libunwind);
        cr_assert_eq(by_rows, 1, "the compact rows did not walk a stack of plain C frames");
        cr_assert_eq(nb, na, "rows: %zu frames, libunwind: %zu", nb, na);
        cr_assert_eq(memcmp(a, b, na * sizeof(*a)), 0, "the rows found other frames than libunwind");
        cr_assert_eq(eb, ea);
        check_chain(b, nb, &s, p);
        /* Every bound on frames ends both walks alike. */
        for (size_t max = 1; max <= na; max++) {
                unwinder_use_rows(u, false);
                size_t x = unwinder_dwarf(u, p, &cap.in, a, max, &ea);
                unwinder_use_rows(u, true);
                size_t y = unwinder_dwarf(u, p, &cap.in, b, max, &eb);
                cr_assert_eq(x, y, "bound %zu", max);
                cr_assert_eq(ea, eb, "bound %zu", max);
                cr_assert_eq(memcmp(a, b, x * sizeof(*a)), 0, "bound %zu", max);
        }
        teardown(&s, u);
}

/* A sample in the dynamic loader's entry code (its _start, which has no
 * call frame information), with a frame pointer of zero: libunwind ends
 * the walk there without an error, and the rows walk ends it alike,
 * without handing the stack to libunwind. With a frame pointer that is
 * not zero, libunwind follows it, and the rows walk hands over. */
static size_t entry_walk(struct unwinder *u, struct proc_info *p, uint64_t bp, bool rows, uint64_t *pcs, int *err) {
        static uint64_t words[16];
        uint64_t base = getauxval(AT_BASE);
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *) base;
        struct unwind_input in = { .stack = (const uint8_t *) words, .stack_size = sizeof(words) };
        in.regs[UREG_IP] = base + eh->e_entry + 3;
        in.regs[UREG_SP] = (uint64_t) (uintptr_t) words;
        in.regs[UREG_BP] = bp;
        unwinder_use_rows(u, rows);
        return unwinder_dwarf(u, p, &in, pcs, 64, err);
}

Test(profiling_unwind, entry_code_ends_the_walk_as_libunwind_ends_it) {
        if (getauxval(AT_BASE) == 0) {
                cr_log_info("skipped: this program was started without a dynamic loader");
                return;
        }
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        uint64_t a[64], b[64], by_rows, by_libunwind;
        int ea, eb;
        size_t na = entry_walk(u, p, 0, false, a, &ea);
        size_t nb = entry_walk(u, p, 0, true, b, &eb);
        unwinder_counts(u, &by_rows, &by_libunwind);
        cr_assert_eq(by_rows, 1, "the rows walk handed the entry code to libunwind");
        cr_assert_eq(by_libunwind, 1);
        cr_assert_eq(na, 1);
        cr_assert_eq(nb, na);
        cr_assert_eq(b[0], a[0]);
        cr_assert_eq(ea, UNWIND_ERR_NONE);
        cr_assert_eq(eb, ea);
        /* A frame pointer into the copy (the next one 0): not the rule. */
        (void) entry_walk(u, p, (uint64_t) (uintptr_t) &cap.stack[0], true, b, &eb);
        unwinder_counts(u, &by_rows, &by_libunwind);
        cr_assert_eq(by_rows, 1);
        cr_assert_eq(by_libunwind, 2);
        teardown(&s, u);
}

/* A walk of the words a walk of the whole copy read, and nothing else:
 * the same frames, by rows and by libunwind alike; without one of those
 * words, a miss, counted. */
static void sparse_walk(struct unwinder *u, struct proc_info *p, bool rows) {
        uint64_t a[64], b[64];
        int ea, eb;
        uint32_t offs[256];
        struct unwind_stack_log log = { .offs = offs, .cap = 256 };
        struct unwind_input full = cap.in;
        full.log = &log;
        unwinder_use_rows(u, rows);
        size_t na = unwinder_dwarf(u, p, &full, a, 64, &ea);
        cr_assert_gt(na, 4);
        cr_assert_not(log.overflow);
        cr_assert_gt(log.n, 2, "a walk reads words of the stack");
        cr_assert_eq(log.misses, 0);
        /* Ascending, with their values from the copy. */
        qsort(offs, log.n, sizeof(*offs), cmp_u32);
        uint64_t vals[256];
        for (size_t k = 0; k < log.n; k++)
                memcpy(&vals[k], cap.stack + offs[k], 8);
        struct unwind_sparse sp = { .offs = offs, .vals = vals, .n = log.n };
        uint32_t again_offs[256];
        struct unwind_stack_log again = { .offs = again_offs, .cap = 256 };
        struct unwind_input in = cap.in;
        in.stack = NULL;
        in.sparse = &sp;
        in.log = &again;
        size_t nb = unwinder_dwarf(u, p, &in, b, 64, &eb);
        cr_assert_eq(nb, na, "%zu frames from the words, %zu from the whole copy", nb, na);
        cr_assert_eq(memcmp(a, b, na * sizeof(*a)), 0);
        cr_assert_eq(eb, ea);
        cr_assert_eq(again.misses, 0);
        cr_assert_eq(again.n, log.n, "the same words read");
        /* Each word is needed: without it, the walk misses. */
        for (size_t drop = 0; drop < log.n; drop++) {
                uint32_t o2[256];
                uint64_t v2[256];
                size_t m = 0;
                for (size_t k = 0; k < log.n; k++)
                        if (k != drop) {
                                o2[m] = offs[k];
                                v2[m++] = vals[k];
                        }
                struct unwind_sparse less = { .offs = o2, .vals = v2, .n = m };
                struct unwind_stack_log l2 = { .offs = again_offs, .cap = 256 };
                in.sparse = &less;
                in.log = &l2;
                (void) unwinder_dwarf(u, p, &in, b, 64, &eb);
                cr_assert_gt(l2.misses, 0, "word %zu (offset %u) left out, and not missed", drop, offs[drop]);
        }
}

Test(profiling_unwind, sparse_copies_walk_as_whole_ones) {
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        sparse_walk(u, p, true);
        sparse_walk(u, p, false);
        teardown(&s, u);
}

/* A function with two epilogues, the second one's rules restored with
 * DW_CFA_restore_state (as compilers emit for early returns). */
__asm__(".text\n"
        ".globl cfi_two_exits\n"
        ".type cfi_two_exits, @function\n"
        "cfi_two_exits:\n"
        ".cfi_startproc\n"
        "push %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbx, -16\n"
        "sub $32, %rsp\n"
        ".cfi_def_cfa_offset 48\n"
        "test %rdi, %rdi\n"
        "je 1f\n"
        ".cfi_remember_state\n"
        "add $32, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        ".globl cfi_first_ret\n"
        "cfi_first_ret:\n"
        "ret\n"
        "1:\n"
        ".cfi_restore_state\n"
        ".globl cfi_after_restore\n"
        "cfi_after_restore:\n"
        "nop\nnop\nnop\nnop\n"
        "add $32, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size cfi_two_exits, .-cfi_two_exits\n");
extern char cfi_two_exits[], cfi_first_ret[], cfi_after_restore[];

static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
        *(uint64_t *) data = info->dlpi_addr;
        return 1; /* the executable comes first */
}

Test(profiling_unwind, cfi_rows_of_this_program) {
        int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *data = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        cr_assert_neq(data, MAP_FAILED);
        close(fd);
        uint64_t bias = 0;
        dl_iterate_phdr(first_object, &bias);
        struct cfi_rows *t;
        cr_assert_eq(cfi_rows_new(data, (size_t) st.st_size, &t), 0);

        /* At a function's first instruction the return address is what
         * the call pushed: CFA = rsp + 8, return address at CFA - 8. */
        uint64_t entry = (uint64_t) (uintptr_t) &unwind_outer - bias;
        struct cfi_row row;
        cr_assert_eq(cfi_rows_lookup(t, entry, &row), 0);
        cr_assert_eq(row.start, entry, "the first row of unwind_outer starts at %#lx, not %#lx",
                     (unsigned long) row.start, (unsigned long) entry);
        cr_assert_gt(row.end, entry);
        cr_assert_eq(row.cfa_reg, CFI_CFA_SP);
        cr_assert_eq(row.cfa_off, 8);
        cr_assert_eq(row.ra_off, -8);
        cr_assert_eq(row.flags & (CFI_OUTERMOST | CFI_BP_SAVED), 0);
        /* Found again from the kept rows. */
        size_t kept = cfi_rows_count(t);
        cr_assert_eq(cfi_rows_lookup(t, entry, &row), 0);
        cr_assert_eq(cfi_rows_count(t), kept);

        /* _start: its return address is undefined, the outermost frame. */
        extern char _start[];
        cr_assert_eq(cfi_rows_lookup(t, (uint64_t) (uintptr_t) _start - bias, &row), 0);
        cr_assert(row.flags & CFI_OUTERMOST);

        /* After DW_CFA_restore_state: the restored rule, and no other
         * address of the function takes it from the kept row. */
        uint64_t restored = (uint64_t) (uintptr_t) cfi_after_restore - bias;
        cr_assert_eq(cfi_rows_lookup(t, restored + 2, &row), 0);
        cr_assert_eq(row.cfa_off, 48);
        cr_assert_eq(row.flags & CFI_BP_SAVED, 0);
        cr_assert_eq(cfi_rows_lookup(t, (uint64_t) (uintptr_t) cfi_first_ret - bias, &row), 0);
        cr_assert_eq(row.cfa_off, 8, "the first return's rule is %d: another row's", row.cfa_off);
        cr_assert_eq(cfi_rows_lookup(t, restored, &row), 0);
        cr_assert_eq(row.cfa_off, 48);
        cr_assert_eq(cfi_rows_lookup(t, (uint64_t) (uintptr_t) cfi_two_exits - bias, &row), 0);
        cr_assert_eq(row.cfa_off, 8);
        cr_assert_eq(cfi_rows_lookup(t, (uint64_t) (uintptr_t) cfi_two_exits + 1 - bias, &row), 0);
        cr_assert_eq(row.cfa_off, 16);

        /* No call frame information at address 0: refused, and kept. */
        cr_assert_eq(cfi_rows_lookup(t, 0, &row), -ENOENT);
        kept = cfi_rows_count(t);
        cr_assert_eq(cfi_rows_lookup(t, 0, &row), -ENOENT);
        cr_assert_eq(cfi_rows_count(t), kept);
        cfi_rows_free(t);
        munmap(data, (size_t) st.st_size);
}

/* An epilogue whose rules still say rbp is saved after the pop (no
 * DW_CFA_restore: the slot is below rsp now), and its caller, whose frame
 * is rsp + 8 without a saved rbp. */
__asm__(".text\n"
        ".globl cfi_popped_bp\n"
        ".type cfi_popped_bp, @function\n"
        "cfi_popped_bp:\n"
        ".cfi_startproc\n"
        "push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "pop %rbp\n"
        ".cfi_def_cfa_offset 8\n"
        ".globl cfi_popped_bp_ret\n"
        "cfi_popped_bp_ret:\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size cfi_popped_bp, .-cfi_popped_bp\n"
        ".globl cfi_caller\n"
        ".type cfi_caller, @function\n"
        "cfi_caller:\n"
        ".cfi_startproc\n"
        "call cfi_popped_bp\n"
        ".globl cfi_caller_ret\n"
        "cfi_caller_ret:\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size cfi_caller, .-cfi_caller\n");
extern char cfi_popped_bp_ret[], cfi_caller_ret[];

/* A walk from ip over the stack words (cfi_caller's return address, then
 * the 0 that ends the walk, after extra words when pushed is set), by the
 * rows and by libunwind: both must find ip and cfi_caller, without an
 * error, and the rows walk must not hand the stack over. */
static void two_frames(struct unwinder *u, struct proc_info *p, uint64_t ip, bool pushed, const char *what) {
        uint64_t words[4] = { 0x1234, 0, 0, 0 }, *w = words + pushed;
        w[0] = (uint64_t) (uintptr_t) cfi_caller_ret;
        struct unwind_input in = { .stack = (const uint8_t *) words, .stack_size = sizeof(words) };
        in.regs[UREG_IP] = ip;
        in.regs[UREG_SP] = (uint64_t) (uintptr_t) words;
        in.regs[UREG_BP] = 0x5555; /* not a stack address: no walk may use it */
        uint64_t a[8], b[8], rows0, rows1, lu;
        int ea, eb;
        unwinder_use_rows(u, false);
        size_t na = unwinder_dwarf(u, p, &in, a, 8, &ea);
        unwinder_counts(u, &rows0, &lu);
        unwinder_use_rows(u, true);
        size_t nb = unwinder_dwarf(u, p, &in, b, 8, &eb);
        unwinder_counts(u, &rows1, &lu);
        cr_assert_eq(na, 2, "%s: libunwind found %zu frames (error %d)", what, na, ea);
        cr_assert_eq(a[0], ip, "%s", what);
        cr_assert_eq(a[1], w[0], "%s", what);
        cr_assert_eq(ea, UNWIND_ERR_NONE, "%s", what);
        cr_assert_eq(rows1, rows0 + 1, "%s: the rows walk handed the stack to libunwind", what);
        cr_assert_eq(nb, na, "%s", what);
        cr_assert_eq(memcmp(a, b, na * sizeof(*a)), 0, "%s", what);
        cr_assert_eq(eb, ea, "%s", what);
}

/* rbp's slot below the stack pointer is not in the copy: libunwind never
 * reads it (no later rule needs rbp), and the rows walk goes on as well. */
Test(profiling_unwind, a_popped_frame_pointer_does_not_stop_the_rows) {
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        two_frames(u, p, (uint64_t) (uintptr_t) cfi_popped_bp_ret, false, "after pop %rbp");
        teardown(&s, u);
}

/* This program's .plt, from its section headers: the image address. */
static uint64_t plt_of_this_program(size_t *ret_size) {
        int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        const uint8_t *data = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        cr_assert_neq(data, MAP_FAILED);
        close(fd);
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *) data;
        const Elf64_Shdr *sh = (const Elf64_Shdr *) (data + eh->e_shoff);
        const char *names = (const char *) data + sh[eh->e_shstrndx].sh_offset;
        uint64_t plt = 0;
        for (size_t k = 0; k < eh->e_shnum; k++)
                if (strcmp(names + sh[k].sh_name, ".plt") == 0) {
                        plt = sh[k].sh_addr;
                        *ret_size = sh[k].sh_size;
                }
        munmap((void *) data, (size_t) st.st_size);
        return plt;
}

/* A sample in a PLT entry: the rule there is an expression of rip (8 bytes
 * more on the stack once the entry pushed its index), which the rows walk
 * reads for each byte of an entry, as libunwind evaluates it. */
Test(profiling_unwind, plt_entries_walk_by_rows) {
        size_t size = 0;
        uint64_t plt = plt_of_this_program(&size);
        /* This program calls its libraries through a lazy PLT (Debian's
         * toolchain links so by default); the first entry is the resolver's. */
        cr_assert_neq(plt, 0, "this program has no .plt");
        cr_assert_geq(size, 32);
        uint64_t bias = 0;
        dl_iterate_phdr(first_object, &bias);
        struct symbolizer s = {};
        struct unwinder *u;
        struct proc_info *p;
        setup(&s, &u, &p);
        for (unsigned off = 0; off < 16; off++) {
                char what[64];
                snprintf(what, sizeof(what), "byte %u of a PLT entry", off);
                /* The entry pushes its index with the bytes 6 to 10. */
                two_frames(u, p, bias + plt + 16 + off, off >= 11, what);
        }
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
