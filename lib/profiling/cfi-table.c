/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profiling/cfi-frame.h"
#include "profiling/cfi-rows.h"
#include "profiling/cfi-table.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(Elf *, elf_end);
DEFINE_TRIVIAL_CLEANUP_FUNC(Dwarf_CFI *, dwarf_cfi_end);
DEFINE_TRIVIAL_CLEANUP_FUNC(Dwarf *, dwarf_end);

/* The part of .eh_frame_hdr this file reads: its binary search table, one
 * (initial location, FDE address) pair of 4-byte words per FDE. */
struct fde_table {
        const uint8_t *pairs;
        size_t count;
        uint64_t base; /* what the words are relative to: the section's address */
};

static uint32_t le32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

/* The first address of the k-th FDE. */
static uint64_t fde_start(const struct fde_table *t, size_t k) {
        return t->base + (uint64_t) (int64_t) (int32_t) le32(t->pairs + 8 * k);
}

/* The bytes of .eh_frame_hdr in the file, and its address. Found by its
 * section name, or else through the program header that maps it (a file
 * stripped of its section headers). */
static int find_eh_frame_hdr(Elf *elf, size_t file_size, const uint8_t *file, const uint8_t **ret, size_t *ret_size,
                             uint64_t *ret_vaddr) {
        uint64_t offset = 0, size = 0, vaddr = 0;
        bool found = false;
        size_t shstrndx;
        if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
                for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && !found; scn = elf_nextscn(elf, scn)) {
                        GElf_Shdr sh;
                        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
                                continue;
                        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
                        if (name && strcmp(name, ".eh_frame_hdr") == 0) {
                                offset = sh.sh_offset, size = sh.sh_size, vaddr = sh.sh_addr;
                                found = true;
                        }
                }
        }
        size_t n_phdr;
        if (!found && elf_getphdrnum(elf, &n_phdr) == 0) {
                for (size_t k = 0; k < n_phdr && !found; k++) {
                        GElf_Phdr ph;
                        if (gelf_getphdr(elf, (int) k, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
                                offset = ph.p_offset, size = ph.p_filesz, vaddr = ph.p_vaddr;
                                found = true;
                        }
                }
        }
        if (!found)
                return -ENOENT;
        if (offset > file_size || size > file_size - offset)
                return -EINVAL;
        *ret = file + offset;
        *ret_size = (size_t) size;
        *ret_vaddr = vaddr;
        return 0;
}

/* How many bytes a value of the given pointer encoding takes; -EOPNOTSUPP
 * for the variable-length ones. */
static int encoded_size(uint8_t enc) {
        if (enc == DW_EH_PE_omit)
                return 0;
        switch (enc & 0x0f) {
        case DW_EH_PE_absptr:
        case DW_EH_PE_udata8:
        case DW_EH_PE_sdata8:
                return 8;
        case DW_EH_PE_udata4:
        case DW_EH_PE_sdata4:
                return 4;
        case DW_EH_PE_udata2:
        case DW_EH_PE_sdata2:
                return 2;
        default:
                return -EOPNOTSUPP;
        }
}

/* The header: version 1, the encodings of the pointer to .eh_frame, of the
 * FDE count and of the table, then the three. Only the count and table
 * encodings the linkers emit are read. */
static int parse_eh_frame_hdr(const uint8_t *p, size_t size, uint64_t vaddr, struct fde_table *ret) {
        if (size < 4)
                return -EINVAL;
        if (p[0] != 1)
                return -EINVAL;
        int ptr_size = encoded_size(p[1]);
        if (ptr_size < 0)
                return ptr_size;
        if (p[2] != DW_EH_PE_udata4 || p[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
                return -EOPNOTSUPP;
        size_t at = 4 + (size_t) ptr_size;
        if (size - 4 < (size_t) ptr_size + 4)
                return -EINVAL;
        size_t count = le32(p + at);
        at += 4;
        if (count > (size - at) / 8)
                return -EINVAL;
        *ret = (struct fde_table) { .pairs = p + at, .count = count, .base = vaddr };
        /* A table for binary search is sorted; the walk below relies on it. */
        for (size_t k = 1; k < count; k++)
                if (fde_start(ret, k) < fde_start(ret, k - 1))
                        return -EINVAL;
        return 0;
}

struct builder {
        struct cfi_row *v;
        size_t n, cap, max;
};

static void builder_done(struct builder *b) {
        free(b->v);
}

static bool same_rule(const struct cfi_row *a, const struct cfi_row *b) {
        return a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off && a->ra_off == b->ra_off &&
               a->bp_off == b->bp_off && a->flags == b->flags;
}

/* Appends a row that starts where the last one ends, or merges it into the
 * last one when their rules are the same. */
static int append(struct builder *b, const struct cfi_row *row) {
        if (b->n > 0 && same_rule(&b->v[b->n - 1], row)) {
                b->v[b->n - 1].end = row->end;
                return 0;
        }
        if (b->n == b->max)
                return -E2BIG;
        if (b->n == b->cap) {
                size_t cap = MIN(MAX(b->cap * 2, (size_t) 1024), b->max);
                struct cfi_row *v = realloc(b->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                b->v = v;
                b->cap = cap;
        }
        b->v[b->n++] = *row;
        return 0;
}

/* The rows of the FDE that starts at start, up to limit (where the next one
 * starts), then a row without call frame information from where its rows
 * stop up to limit. */
static int compile_fde(Dwarf_CFI *cfi, struct builder *b, uint64_t start, uint64_t limit) {
        uint64_t pc = start;
        int r;
        while (pc < limit) {
                Dwarf_Frame *f;
                if (dwarf_cfi_addrframe(cfi, pc, &f) != 0)
                        break; /* past the FDE's end */
                struct cfi_row row = {};
                int status = cfi_row_from_frame(f, &row);
                free(f);
                /* The rule holds from pc on, whatever start libdw reports
                 * (an earlier one after DW_CFA_restore_state, elfutils
                 * 0.188); an end not above pc leaves no way forward. */
                uint64_t end = row.end;
                if (end <= pc)
                        break;
                if (status < 0)
                        row = (struct cfi_row) { .flags = CFI_REFUSED };
                row.start = pc;
                row.end = MIN(end, limit);
                r = append(b, &row);
                if (r < 0)
                        return r;
                pc = row.end;
        }
        if (pc < limit) {
                r = append(b, &(struct cfi_row) { .start = pc, .end = limit, .flags = CFI_NONE });
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Where an FDE starts, and the call frame information it belongs to. */
struct fde_ref {
        uint64_t start;
        Dwarf_CFI *cfi;
        unsigned order; /* .eh_frame first where both describe a start */
};

struct fde_list {
        struct fde_ref *v;
        size_t n, cap;
};

static void fde_list_done(struct fde_list *l) {
        free(l->v);
}

static int fde_add(struct fde_list *l, uint64_t start, Dwarf_CFI *cfi, unsigned order) {
        if (GREEDY_REALLOC_MIN(l->v, l->cap, l->n + 1, 256) < 0)
                return -ENOMEM;
        l->v[l->n++] = (struct fde_ref) { .start = start, .cfi = cfi, .order = order };
        return 0;
}

static int fde_compare(const void *a, const void *b) {
        const struct fde_ref *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return (x->order > y->order) - (x->order < y->order);
}

/* The FDEs of .debug_frame: there the initial location is an absolute
 * address of the target's size (8 bytes here), right after the CIE
 * pointer where libdw's entry starts. -ENOENT without the section. */
static int debug_frame_fdes(Elf *elf, const unsigned char *e_ident, Dwarf_CFI *cfi, struct fde_list *l) {
        size_t shstrndx;
        if (elf_getshdrstrndx(elf, &shstrndx) != 0)
                return -ENOENT;
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
                        continue;
                const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
                if (!name || strcmp(name, ".debug_frame") != 0)
                        continue;
                if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
                        return -EINVAL;
                Elf_Data *d = elf_getdata(scn, NULL);
                if (!d)
                        return -EINVAL;
                Dwarf_Off off = 0, next;
                Dwarf_CFI_Entry e;
                int r;
                while ((r = dwarf_next_cfi(e_ident, d, false, off, &next, &e)) == 0) {
                        if (!dwarf_cfi_cie_p(&e) && e.fde.end - e.fde.start >= 16) {
                                uint64_t start = 0;
                                memcpy(&start, e.fde.start, 8); /* little-endian, as x86-64 */
                                if ((r = fde_add(l, start, cfi, 1)) < 0)
                                        return r;
                        }
                        off = next;
                }
                return r < 0 ? -EINVAL : 0;
        }
        return -ENOENT;
}

int cfi_table_compile(const uint8_t *data, size_t size, size_t max_rows, struct cfi_row **ret_rows, size_t *ret_n) {
        if (!data || !ret_rows || !ret_n)
                return -EINVAL;
        (void) elf_version(EV_CURRENT);
        _cleanup_(elf_endp) Elf *elf = elf_memory((char *) data, size);
        if (!elf || elf_kind(elf) != ELF_K_ELF)
                return -EINVAL;
        GElf_Ehdr eh;
        if (!gelf_getehdr(elf, &eh))
                return -EINVAL;
        if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
                return -EOPNOTSUPP;

        _cleanup_(fde_list_done) struct fde_list fdes = {};
        /* .eh_frame, through the search table of .eh_frame_hdr. */
        const uint8_t *hdr;
        size_t hdr_size;
        uint64_t hdr_vaddr;
        _cleanup_(dwarf_cfi_endp) Dwarf_CFI *eh_cfi = NULL;
        int r = find_eh_frame_hdr(elf, size, data, &hdr, &hdr_size, &hdr_vaddr);
        if (r < 0 && r != -ENOENT)
                return r;
        bool have_hdr = r == 0;
        if (have_hdr) {
                struct fde_table t;
                r = parse_eh_frame_hdr(hdr, hdr_size, hdr_vaddr, &t);
                if (r < 0)
                        return r;
                if (t.count > 0 && !(eh_cfi = dwarf_getcfi_elf(elf)))
                        return -EINVAL;
                for (size_t k = 0; k < t.count; k++)
                        if ((r = fde_add(&fdes, fde_start(&t, k), eh_cfi, 0)) < 0)
                                return r;
        }
        /* .debug_frame, when the file has one: code built without unwind
         * tables (-fno-asynchronous-unwind-tables -g) has its rules only
         * there, next to .eh_frame entries of the C runtime's files. libdw
         * owns the CFI of the Dwarf handle. */
        _cleanup_(dwarf_endp) Dwarf *dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
        Dwarf_CFI *debug_cfi = dw ? dwarf_getcfi(dw) : NULL;
        if (debug_cfi) {
                r = debug_frame_fdes(elf, eh.e_ident, debug_cfi, &fdes);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        if (fdes.n == 0)
                return have_hdr ? -EOPNOTSUPP : -ENOENT;
        qsort(fdes.v, fdes.n, sizeof(*fdes.v), fde_compare);

        _cleanup_(builder_done) struct builder b = { .max = max_rows };
        for (size_t k = 0; k < fdes.n;) {
                uint64_t start = fdes.v[k].start;
                /* FDEs sharing a start count once: .eh_frame's. */
                size_t next = k + 1;
                while (next < fdes.n && fdes.v[next].start == start)
                        next++;
                uint64_t limit = next < fdes.n ? fdes.v[next].start : UINT64_MAX;
                r = compile_fde(fdes.v[k].cfi, &b, start, limit);
                if (r < 0)
                        return r;
                k = next;
        }
        /* Only an FDE reaching the top of the address space leaves the table
         * without its closing row. */
        if (b.n == 0 || !(b.v[b.n - 1].flags & CFI_NONE))
                return -EINVAL;

        /* No slack to hand over. */
        struct cfi_row *shrunk = realloc(b.v, b.n * sizeof(*b.v));
        if (shrunk)
                b.v = shrunk;
        *ret_rows = TAKE_PTR(b.v);
        *ret_n = b.n;
        return 0;
}
