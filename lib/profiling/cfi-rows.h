/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Call frame information of one ELF image in the compact form that most
 * x86-64 code needs: the canonical frame address (CFA) is the stack or
 * frame pointer plus an offset; the return address and the caller's frame
 * pointer are saved at offsets from the CFA. libdw decodes the image's
 * .eh_frame (or .debug_frame) on the first lookup of each address range
 * (and the expression a lazy PLT's entries share, which depends on rip);
 * the decoded rows are kept, sorted, for the lookups after it. Rows whose
 * rules do not fit this form (DWARF expressions, other base registers,
 * signal frames) are kept as refusals, so that a caller can hand those
 * frames to a general unwinder. One thread at a time. */

#include <stddef.h>
#include <stdint.h>

enum {
        CFI_CFA_SP = 0, /* CFA = rsp + cfa_off */
        CFI_CFA_BP = 1, /* CFA = rbp + cfa_off */
};

enum {
        CFI_OUTERMOST = 1 << 0, /* no return address: the first frame of a thread */
        CFI_BP_SAVED = 1 << 1,  /* the caller's rbp is saved at CFA + bp_off (else rbp is unchanged) */
        CFI_BP_LOST = 1 << 2,   /* the caller's rbp cannot be recovered */
        /* The rule reads rip (a PLT entry's): the row holds for the frame
         * whose rip is the address looked up, the innermost one. */
        CFI_AT_PC = 1 << 5,
        /* Only in the rows of cfi-table.h, where the other fields are 0: */
        CFI_REFUSED = 1 << 3, /* the rule here is not of the compact form */
        CFI_NONE = 1 << 4,    /* no call frame information here */
};

struct cfi_row {
        uint64_t start, end; /* the image's virtual addresses the row covers */
        int32_t cfa_off, ra_off, bp_off;
        uint8_t cfa_reg, flags;
};

struct cfi_rows;

/* data/size: the whole ELF file in memory; it must outlive the table. */
int cfi_rows_new(const uint8_t *data, size_t size, struct cfi_rows **ret);
void cfi_rows_free(struct cfi_rows *t);

/* The row covering the image address vaddr. -ENOENT: the image has no
 * call frame information there; -EOPNOTSUPP: its rule there is not of the
 * compact form. */
int cfi_rows_lookup(struct cfi_rows *t, uint64_t vaddr, struct cfi_row *ret);

/* How many rows (refusals included) the table keeps. */
size_t cfi_rows_count(const struct cfi_rows *t);
