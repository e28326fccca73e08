/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The whole-image table of compact rows, checked against the lazy lookup
 * of cfi-rows on the C library and on this program (built with -O2 and
 * without frame pointers), and on copies of this program altered to lack
 * or spoil its .eh_frame_hdr. */

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profiling/cfi-rows.h"
#include "profiling/cfi-table.h"

TestSuite(profiling_cfi_table, .timeout = 60);

static uint8_t *read_file(const char *path, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "%s", path);
        size_t cap = 1 << 20, n = 0;
        uint8_t *data = malloc(cap);
        cr_assert_not_null(data);
        for (;;) {
                n += fread(data + n, 1, cap - n, f);
                if (n < cap)
                        break;
                cap *= 2;
                data = realloc(data, cap);
                cr_assert_not_null(data);
        }
        cr_assert_eq(ferror(f), 0, "%s", path);
        fclose(f);
        *ret_size = n;
        return data;
}

/* A section's header, by name; the ELF structures read by hand, as the
 * library under test is the one that uses libelf. */
static Elf64_Shdr *section(uint8_t *data, size_t size, const char *name) {
        Elf64_Ehdr *eh = (Elf64_Ehdr *) data;
        cr_assert_geq(size, sizeof(*eh));
        cr_assert_eq(memcmp(eh->e_ident, ELFMAG, SELFMAG), 0);
        cr_assert_leq(eh->e_shoff + (uint64_t) eh->e_shnum * sizeof(Elf64_Shdr), size);
        Elf64_Shdr *sh = (Elf64_Shdr *) (data + eh->e_shoff);
        const char *names = (const char *) data + sh[eh->e_shstrndx].sh_offset;
        for (size_t k = 0; k < eh->e_shnum; k++)
                if (strcmp(names + sh[k].sh_name, name) == 0)
                        return &sh[k];
        return NULL;
}

/* The last row starting at or below pc, or NULL: what the BPF walker does. */
static const struct cfi_row *find(const struct cfi_row *v, size_t n, uint64_t pc) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v[mid].start <= pc)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo > 0 ? &v[lo - 1] : NULL;
}

/* The row that covers pc, which must exist. */
static struct cfi_row at(const struct cfi_row *v, size_t n, uint64_t pc) {
        const struct cfi_row *row = find(v, n, pc);
        cr_assert_not_null(row, "no row at %#lx", (unsigned long) pc);
        return *row;
}

static bool same_rule(const struct cfi_row *a, const struct cfi_row *b) {
        return a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off && a->ra_off == b->ra_off &&
               a->bp_off == b->bp_off && a->flags == b->flags;
}

static void check_shape(const struct cfi_row *v, size_t n) {
        cr_assert_gt(n, 1);
        for (size_t k = 0; k < n; k++) {
                cr_assert_lt(v[k].start, v[k].end, "row %zu is empty", k);
                if (k + 1 < n) {
                        cr_assert_eq(v[k].end, v[k + 1].start, "rows %zu and %zu are not contiguous", k, k + 1);
                        cr_assert(!same_rule(&v[k], &v[k + 1]), "rows %zu and %zu were not merged", k, k + 1);
                }
                if (v[k].flags & (CFI_NONE | CFI_REFUSED))
                        cr_assert(v[k].cfa_reg == 0 && v[k].cfa_off == 0 && v[k].ra_off == 0 && v[k].bp_off == 0 &&
                                          (v[k].flags == CFI_NONE || v[k].flags == CFI_REFUSED),
                                  "row %zu: a rule in a row without one", k);
        }
        cr_assert_eq(v[n - 1].flags, CFI_NONE, "the last row is not a CFI_NONE row");
        cr_assert_eq(v[n - 1].end, UINT64_MAX);
}

/* Addresses spread over .text (every one of a small .text), each looked up
 * in the table and by cfi-rows: the same answer. */
static void check_against_lookup(uint8_t *data, size_t size, const struct cfi_row *v, size_t n) {
        const Elf64_Shdr *text = section(data, size, ".text");
        cr_assert_not_null(text);
        struct cfi_rows *lazy;
        cr_assert_eq(cfi_rows_new(data, size, &lazy), 0);
        uint64_t step = text->sh_size / 4000 + 1;
        size_t checked = 0, with_rule = 0;
        for (uint64_t pc = text->sh_addr; pc < text->sh_addr + text->sh_size; pc += step, checked++) {
                const struct cfi_row *row = find(v, n, pc);
                cr_assert_not_null(row, "%#lx is below the table", (unsigned long) pc);
                struct cfi_row want = {};
                int r = cfi_rows_lookup(lazy, pc, &want);
                if (r == -ENOENT)
                        cr_assert_eq(row->flags, CFI_NONE, "%#lx: cfi-rows finds no rule, the table %#x",
                                     (unsigned long) pc, row->flags);
                else if (r == -EOPNOTSUPP)
                        cr_assert_eq(row->flags, CFI_REFUSED, "%#lx: cfi-rows refuses, the table %#x",
                                     (unsigned long) pc, row->flags);
                else {
                        cr_assert_eq(r, 0);
                        cr_assert(same_rule(row, &want),
                                  "%#lx: table row %#lx-%#lx: reg %u cfa %d ra %d bp %d flags %#x; "
                                  "cfi-rows: reg %u cfa %d ra %d bp %d flags %#x",
                                  (unsigned long) pc, (unsigned long) row->start, (unsigned long) row->end,
                                  row->cfa_reg, row->cfa_off, row->ra_off, row->bp_off, row->flags, want.cfa_reg,
                                  want.cfa_off, want.ra_off, want.bp_off, want.flags);
                        with_rule++;
                }
        }
        cr_assert_gt(with_rule, checked / 2, "only %zu of %zu addresses have a rule", with_rule, checked);
        cfi_rows_free(lazy);
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *data) {
        if (info->dlpi_name && strstr(info->dlpi_name, "/libc.so")) {
                *(const char **) data = info->dlpi_name;
                return 1;
        }
        return 0;
}

Test(profiling_cfi_table, libc_matches_the_lazy_lookup) {
        const char *path = NULL;
        dl_iterate_phdr(find_libc, &path);
        cr_assert_not_null(path, "libc is not among the loaded objects");
        size_t size;
        uint8_t *data = read_file(path, &size);

        struct cfi_row *v;
        size_t n;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        cr_assert_eq(cfi_table_compile(data, size, 1 << 20, &v, &n), 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double) (b.tv_sec - a.tv_sec) * 1e3 + (double) (b.tv_nsec - a.tv_nsec) / 1e6;
        size_t refused = 0, none = 0;
        for (size_t k = 0; k < n; k++) {
                refused += !!(v[k].flags & CFI_REFUSED);
                none += !!(v[k].flags & CFI_NONE);
        }
        cr_log_info("%s: %zu rows (%zu refused, %zu without CFI) in %.1f ms", path, n, refused, none, ms);
        check_shape(v, n);
        check_against_lookup(data, size, v, n);

        /* The bound on rows: one fewer than needed refuses the image. */
        struct cfi_row *w = (struct cfi_row *) 1;
        size_t m = 7;
        cr_assert_eq(cfi_table_compile(data, size, n - 1, &w, &m), -E2BIG);
        cr_assert_eq(w, (struct cfi_row *) 1, "an array was handed out with -E2BIG");
        cr_assert_eq(m, 7);
        cr_assert_eq(cfi_table_compile(data, size, n, &w, &m), 0);
        cr_assert_eq(m, n);
        cr_assert_eq(memcmp(v, w, n * sizeof(*v)), 0, "a second compilation differs");
        free(w);
        free(v);
        free(data);
}

/* A function with two epilogues, the rules of the second restored with
 * DW_CFA_restore_state; then code without call frame information; then
 * a function whose CFA is a DWARF expression (not of the compact form). */
__asm__(".text\n"
        ".globl cfit_two_exits\n"
        ".type cfit_two_exits, @function\n"
        "cfit_two_exits:\n"
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
        ".globl cfit_first_ret\n"
        "cfit_first_ret:\n"
        "ret\n"
        "1:\n"
        ".cfi_restore_state\n"
        ".globl cfit_after_restore\n"
        "cfit_after_restore:\n"
        "nop\nnop\nnop\nnop\n"
        "add $32, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size cfit_two_exits, .-cfit_two_exits\n"
        ".globl cfit_no_cfi\n"
        ".type cfit_no_cfi, @function\n"
        "cfit_no_cfi:\n"
        "nop\nnop\nnop\nnop\nret\n"
        ".size cfit_no_cfi, .-cfit_no_cfi\n"
        ".globl cfit_expression\n"
        ".type cfit_expression, @function\n"
        "cfit_expression:\n"
        ".cfi_startproc\n"
        "nop\n"
        /* DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 8, DW_OP_deref */
        ".cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06\n"
        "nop\nnop\nret\n"
        ".cfi_endproc\n"
        ".size cfit_expression, .-cfit_expression\n");
extern char cfit_two_exits[], cfit_first_ret[], cfit_after_restore[], cfit_no_cfi[], cfit_expression[];

/* Kept out of line, with a frame of its own to build. */
__attribute__((noinline, used)) long cfit_probe(long x);
__attribute__((noinline, used)) long cfit_probe(long x) {
        volatile long a[8];
        for (int k = 0; k < 8; k++)
                a[k] = x + k;
        return a[x & 7] * 3;
}

static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
        *(uint64_t *) data = info->dlpi_addr;
        return 1; /* the executable comes first */
}

static uint64_t image_vaddr(const void *p) {
        uint64_t bias = 0;
        dl_iterate_phdr(first_object, &bias);
        return (uint64_t) (uintptr_t) p - bias;
}

/* A program whose own rules are only in .debug_frame: the table has them
 * (with the C runtime's from .eh_frame), as the lazy lookup does. */
Test(profiling_cfi_table, debug_frame) {
        size_t size;
        uint8_t *data = read_file(CFI_TEST_DEBUG_FRAME_BIN, &size);
        cr_assert_not_null(section(data, size, ".debug_frame"), "the test program has no .debug_frame");
        struct cfi_row *v;
        size_t n;
        cr_assert_eq(cfi_table_compile(data, size, 1 << 20, &v, &n), 0);
        check_shape(v, n);
        check_against_lookup(data, size, v, n);
        free(v);
        free(data);
}

Test(profiling_cfi_table, this_program) {
        size_t size;
        uint8_t *data = read_file("/proc/self/exe", &size);
        struct cfi_row *v;
        size_t n;
        cr_assert_eq(cfi_table_compile(data, size, 1 << 20, &v, &n), 0);
        check_shape(v, n);
        check_against_lookup(data, size, v, n);

        /* At a function's first instruction: CFA = rsp + 8, the return
         * address at CFA - 8, rbp untouched. */
        uint64_t entry = image_vaddr((const void *) cfit_probe);
        struct cfi_row row = at(v, n, entry);
        cr_assert_eq(row.cfa_reg, CFI_CFA_SP);
        cr_assert_eq(row.cfa_off, 8);
        cr_assert_eq(row.ra_off, -8);
        cr_assert_eq(row.flags, 0);
        cr_assert_gt(row.end, entry);
        cr_assert_eq(cfit_probe(2), 12);

        /* The two epilogues, each with its own rule. */
        uint64_t two = image_vaddr(cfit_two_exits);
        cr_assert_eq(at(v, n, two).cfa_off, 8);
        cr_assert_eq(at(v, n, two + 1).cfa_off, 16);
        cr_assert_eq(at(v, n, image_vaddr(cfit_first_ret)).cfa_off, 8);
        uint64_t restored = image_vaddr(cfit_after_restore);
        for (uint64_t pc = restored; pc < restored + 4; pc++) {
                struct cfi_row r = at(v, n, pc);
                cr_assert_eq(r.cfa_off, 48, "%#lx after the restored state: CFA at rsp + %d", (unsigned long) pc,
                             r.cfa_off);
                cr_assert_eq(r.flags, 0);
        }

        /* No call frame information, then an expression. */
        uint64_t none = image_vaddr(cfit_no_cfi);
        for (uint64_t pc = none; pc < none + 5; pc++)
                cr_assert_eq(at(v, n, pc).flags, CFI_NONE, "%#lx", (unsigned long) pc);
        uint64_t expr = image_vaddr(cfit_expression);
        cr_assert_eq(at(v, n, expr).flags, 0);
        cr_assert_eq(at(v, n, expr + 1).flags, CFI_REFUSED);
        cr_assert_eq(at(v, n, expr + 3).flags, CFI_REFUSED);

        /* Below the first FDE there is no row at all. */
        cr_assert_null(find(v, n, 0));
        free(v);
        free(data);
}

static void expect_error(uint8_t *data, size_t size, int want, const char *what) {
        struct cfi_row *v = NULL;
        size_t n = 0;
        int r = cfi_table_compile(data, size, 1 << 20, &v, &n);
        cr_assert_eq(r, want, "%s: %d (%s), expected %d", what, r, strerror(-r), want);
        cr_assert_null(v);
}

Test(profiling_cfi_table, refuses_what_it_cannot_read) {
        uint8_t junk[4096];
        for (size_t k = 0; k < sizeof(junk); k++)
                junk[k] = (uint8_t) (k * 37 + 11);
        expect_error(junk, sizeof(junk), -EINVAL, "not an ELF file");
        expect_error(junk, 0, -EINVAL, "nothing");

        size_t size;
        uint8_t *orig = read_file("/proc/self/exe", &size);
        uint8_t *data = malloc(size);
        cr_assert_not_null(data);
        Elf64_Shdr *hdr = section(orig, size, ".eh_frame_hdr");
        cr_assert_not_null(hdr);
        uint8_t *h = orig + hdr->sh_offset;
        cr_assert_eq(h[0], 1, "version");
        cr_assert_eq(h[1], 0x1b, "eh_frame_ptr_enc: pcrel sdata4");
        cr_assert_eq(h[2], 0x03, "fde_count_enc: udata4");
        cr_assert_eq(h[3], 0x3b, "table_enc: datarel sdata4");

        /* Another version of the header. */
        memcpy(data, orig, size);
        data[hdr->sh_offset] = 2;
        expect_error(data, size, -EINVAL, "version 2");
        /* A table in another encoding (udata8), or none at all. */
        memcpy(data, orig, size);
        data[hdr->sh_offset + 3] = 0x04;
        expect_error(data, size, -EOPNOTSUPP, "absolute udata8 table");
        data[hdr->sh_offset + 3] = 0xff;
        expect_error(data, size, -EOPNOTSUPP, "no table");
        /* A count beyond the section. */
        memcpy(data, orig, size);
        memset(data + hdr->sh_offset + 8, 0xff, 4);
        expect_error(data, size, -EINVAL, "count out of bounds");

        /* No .eh_frame_hdr: its section renamed, its program header
         * turned into a PT_NULL one. */
        memcpy(data, orig, size);
        Elf64_Shdr *sh = section(data, size, ".eh_frame_hdr");
        Elf64_Ehdr *eh = (Elf64_Ehdr *) data;
        char *name = (char *) data + ((Elf64_Shdr *) (data + eh->e_shoff))[eh->e_shstrndx].sh_offset + sh->sh_name;
        name[1] = 'E';
        Elf64_Phdr *ph = (Elf64_Phdr *) (data + eh->e_phoff);
        bool had_phdr = false;
        for (size_t k = 0; k < eh->e_phnum; k++)
                if (ph[k].p_type == PT_GNU_EH_FRAME) {
                        ph[k].p_type = PT_NULL;
                        had_phdr = true;
                }
        cr_assert(had_phdr);
        expect_error(data, size, -ENOENT, "no .eh_frame_hdr");

        /* Found through its program header alone. */
        memcpy(data, orig, size);
        name = (char *) data + ((Elf64_Shdr *) (data + eh->e_shoff))[eh->e_shstrndx].sh_offset + sh->sh_name;
        name[1] = 'E';
        struct cfi_row *a, *b;
        size_t na, nb;
        cr_assert_eq(cfi_table_compile(orig, size, 1 << 20, &a, &na), 0);
        cr_assert_eq(cfi_table_compile(data, size, 1 << 20, &b, &nb), 0);
        cr_assert_eq(na, nb);
        cr_assert_eq(memcmp(a, b, na * sizeof(*a)), 0);
        free(a);
        free(b);

        /* Another machine. */
        memcpy(data, orig, size);
        eh->e_machine = EM_AARCH64;
        expect_error(data, size, -EOPNOTSUPP, "aarch64");
        free(data);
        free(orig);
}
