/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profiling/cfi-frame.h"
#include "profiling/cfi-rows.h"

/* DWARF register numbers of x86-64 (the psABI's table). */
#define DWREG_RBP 6
#define DWREG_RSP 7
#define DWREG_RA 16

/* A table this large is emptied and filled again: the rows of the code
 * that runs are found again in a few lookups. */
#define MAX_ROWS 65536

struct entry {
        struct cfi_row row;
        int status; /* 0, -ENOENT or -EOPNOTSUPP */
};

struct cfi_rows {
        Elf *elf;
        Dwarf *dwarf; /* for .debug_frame, when the image has one */
        Dwarf_CFI *eh, *debug;
        struct entry *v; /* sorted by row.start, ranges disjoint */
        size_t n, cap;
};

int cfi_rows_new(const uint8_t *data, size_t size, struct cfi_rows **ret) {
        struct cfi_rows *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        (void) elf_version(EV_CURRENT);
        t->elf = elf_memory((char *) data, size);
        if (!t->elf) {
                free(t);
                return -EINVAL;
        }
        t->eh = dwarf_getcfi_elf(t->elf);
        t->dwarf = dwarf_begin_elf(t->elf, DWARF_C_READ, NULL);
        if (t->dwarf)
                t->debug = dwarf_getcfi(t->dwarf);
        *ret = t;
        return 0;
}

void cfi_rows_free(struct cfi_rows *t) {
        if (!t)
                return;
        if (t->eh)
                dwarf_cfi_end(t->eh);
        if (t->dwarf)
                dwarf_end(t->dwarf);
        elf_end(t->elf);
        free(t->v);
        free(t);
}

size_t cfi_rows_count(const struct cfi_rows *t) {
        return t->n;
}

/* An offset from the CFA, as libdw describes a register saved in memory:
 * DW_OP_call_frame_cfa, then optionally the offset added. */
static bool cfa_offset(const Dwarf_Op *ops, size_t n, int32_t *ret) {
        int64_t off;
        if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa)
                off = 0;
        else if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst)
                off = (int64_t) ops[1].number;
        else if (n == 3 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_consts &&
                 ops[2].atom == DW_OP_plus)
                off = (int64_t) ops[1].number;
        else
                return false;
        if (off < INT32_MIN || off > INT32_MAX)
                return false;
        *ret = (int32_t) off;
        return true;
}

/* The return address's and rbp's rules of f into row. */
static int row_registers(Dwarf_Frame *f, struct cfi_row *row) {
        Dwarf_Op *ops, mem[3];
        size_t n;
        /* A register with no location: ops NULL means it keeps its value
         * (same value), ops set means it is undefined. */
        int r = dwarf_frame_register(f, DWREG_RA, mem, &ops, &n);
        if (r < 0)
                return -EOPNOTSUPP;
        if (n == 0) {
                if (!ops)
                        return -EOPNOTSUPP;
                row->flags |= CFI_OUTERMOST;
        } else if (r != 0 || !cfa_offset(ops, n, &row->ra_off))
                return -EOPNOTSUPP;

        r = dwarf_frame_register(f, DWREG_RBP, mem, &ops, &n);
        if (r < 0)
                return -EOPNOTSUPP;
        if (n == 0) {
                if (ops)
                        row->flags |= CFI_BP_LOST;
        } else if (r == 0 && cfa_offset(ops, n, &row->bp_off))
                row->flags |= CFI_BP_SAVED;
        else
                return -EOPNOTSUPP;
        return 0;
}

/* The frame's range into row; false when its return address is not the
 * psABI's column or it is a signal frame. */
static bool row_range(Dwarf_Frame *f, struct cfi_row *row) {
        Dwarf_Addr start, end;
        bool signal;
        int ra_col = dwarf_frame_info(f, &start, &end, &signal);
        row->start = start;
        row->end = end;
        return ra_col == DWREG_RA && !signal;
}

/* Declared in cfi-frame.h: cfi-table.c compiles its rows with it too. */
int cfi_row_from_frame(Dwarf_Frame *f, struct cfi_row *row) {
        if (!row_range(f, row))
                return -EOPNOTSUPP;
        Dwarf_Op *ops;
        size_t n;
        if (dwarf_frame_cfa(f, &ops, &n) != 0 || n != 1 || ops[0].atom != DW_OP_bregx ||
            (ops[0].number != DWREG_RSP && ops[0].number != DWREG_RBP) || (int64_t) ops[0].number2 < INT32_MIN ||
            (int64_t) ops[0].number2 > INT32_MAX)
                return -EOPNOTSUPP;
        row->cfa_reg = ops[0].number == DWREG_RSP ? CFI_CFA_SP : CFI_CFA_BP;
        row->cfa_off = (int32_t) (int64_t) ops[0].number2;
        return row_registers(f, row);
}

/* The rule the linker writes for the entries of a lazy .plt (16 bytes
 * each: a jump through the GOT, a push of the entry's index, a jump to the
 * first entry), as an expression of rsp and rip: CFA = rsp + 8, and 8 more
 * from the entry's byte K on, once the index is pushed
 *   DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litK;
 *   DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * (K is 11 for the classic entries, 10 for others). A sample in a program's
 * calls through its PLT stops there: the row for vaddr alone, up to the
 * next byte where the rule changes, for the frame whose rip is vaddr's
 * (the images are loaded at 16-byte multiples, so rip & 15 is vaddr & 15). */
static int plt_row(Dwarf_Frame *f, uint64_t vaddr, struct cfi_row *row) {
        static const uint8_t want[] = { DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0,
                                        DW_OP_ge,    DW_OP_lit3,   DW_OP_shl,   DW_OP_plus };
        Dwarf_Op *ops;
        size_t n;
        if (!row_range(f, row) || dwarf_frame_cfa(f, &ops, &n) != 0 || n != ELEMENTSOF(want))
                return -EOPNOTSUPP;
        for (size_t k = 0; k < n; k++)
                if (k != 4 && ops[k].atom != want[k])
                        return -EOPNOTSUPP;
        if (ops[0].number != 8 || ops[1].number != 0 || ops[4].atom < DW_OP_lit1 || ops[4].atom > DW_OP_lit15)
                return -EOPNOTSUPP;
        uint64_t k = (uint64_t) (ops[4].atom - DW_OP_lit0), at = vaddr & 15, entry = vaddr - at;
        int r = row_registers(f, row);
        if (r < 0)
                return r;
        row->cfa_reg = CFI_CFA_SP;
        row->cfa_off = at >= k ? 16 : 8;
        row->flags |= CFI_AT_PC;
        uint64_t end = at >= k ? entry + 16 : entry + k;
        if (end < row->end)
                row->end = end;
        return 0;
}

/* The index of the first entry starting after vaddr. */
static size_t upper_bound(const struct cfi_rows *t, uint64_t vaddr) {
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (t->v[mid].row.start <= vaddr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int insert(struct cfi_rows *t, size_t at, const struct entry *e) {
        if (t->n == MAX_ROWS) {
                t->n = 0;
                at = 0;
        }
        if (GREEDY_REALLOC_MIN(t->v, t->cap, t->n + 1, 64) < 0)
                return -ENOMEM;
        memmove(&t->v[at + 1], &t->v[at], (t->n - at) * sizeof(*t->v));
        t->v[at] = *e;
        t->n++;
        return 0;
}

int cfi_rows_lookup(struct cfi_rows *t, uint64_t vaddr, struct cfi_row *ret) {
        size_t at = upper_bound(t, vaddr);
        if (at > 0 && vaddr < t->v[at - 1].row.end) {
                *ret = t->v[at - 1].row;
                return t->v[at - 1].status;
        }

        struct entry e = { .row = { .start = vaddr, .end = vaddr + 1 }, .status = -ENOENT };
        Dwarf_Frame *f = NULL;
        if ((t->eh && dwarf_cfi_addrframe(t->eh, vaddr, &f) == 0) ||
            (t->debug && dwarf_cfi_addrframe(t->debug, vaddr, &f) == 0)) {
                e.status = cfi_row_from_frame(f, &e.row);
                if (e.status == -EOPNOTSUPP) {
                        e.row = (struct cfi_row) {};
                        e.status = plt_row(f, vaddr, &e.row);
                }
                free(f);
                /* The row is kept from vaddr to its end, not from the start
                 * libdw reports: after a DW_CFA_restore_state that start is
                 * the one of the remembered row, earlier than the rule it
                 * comes with (elfutils 0.188). An address below vaddr in
                 * the same row gets a row of its own, ending where this one
                 * begins. */
                uint64_t end = e.row.end;
                if (end <= vaddr)
                        end = vaddr + 1;
                if (at < t->n && end > t->v[at].row.start)
                        end = t->v[at].row.start;
                e.row.start = vaddr;
                e.row.end = end;
        }
        *ret = e.row;
        (void) insert(t, at, &e);
        return e.status;
}
