/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/cfi-rows.h"
#include "profiling/unwind.h"

#if defined(__x86_64__)
#define UNW_REMOTE_ONLY
#include <libunwind.h>

/* libunwind exports its table search under its target prefix; the public
 * header does not declare it. */
#define dwarf_search_unwind_table UNW_OBJ(dwarf_search_unwind_table)
extern int dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di, unw_proc_info_t *pi,
                                     int need_unwind_info, void *arg);
#endif

uint64_t unwind_perf_regs_mask(void) {
        /* perf's x86 register numbers: AX..IP are 0..8, R8..R15 16..23. */
        return 0x1ffull | (0xffull << 16);
}

void unwind_regs_from_perf(const uint64_t *sample_regs, uint64_t regs[UREG_COUNT]) {
        memcpy(regs, sample_regs, UREG_COUNT * sizeof(*regs));
}

static bool sparse_read(const struct unwind_sparse *sp, uint32_t off, uint64_t *ret) {
        size_t lo = 0, hi = sp->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (sp->offs[mid] == off) {
                        *ret = sp->vals[mid];
                        return true;
                }
                if (sp->offs[mid] < off)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return false;
}

static void log_read(struct unwind_stack_log *log, uint32_t off) {
        for (size_t k = 0; k < log->n; k++)
                if (log->offs[k] == off)
                        return;
        if (log->n < log->cap)
                log->offs[log->n++] = off;
        else
                log->overflow = true;
}

static bool stack_read(const struct unwind_input *in, uint64_t addr, uint64_t *ret) {
        uint64_t sp = in->regs[UREG_SP];
        if (addr < sp || addr - sp > in->stack_size || in->stack_size - (addr - sp) < 8 || addr - sp > UINT32_MAX)
                return false;
        uint32_t off = (uint32_t) (addr - sp);
        if (in->sparse) {
                if (!sparse_read(in->sparse, off, ret)) {
                        if (in->log)
                                in->log->misses++;
                        return false;
                }
        } else
                memcpy(ret, in->stack + off, 8);
        if (in->log)
                log_read(in->log, off);
        return true;
}

size_t unwind_frame_pointers(const struct unwind_input *in, uint64_t *pcs, size_t max, int *ret_error) {
        size_t n = 0;
        *ret_error = UNWIND_ERR_NONE;
        if (max == 0)
                return 0;
        pcs[n++] = in->regs[UREG_IP];
        uint64_t bp = in->regs[UREG_BP];
        while (n < max) {
                uint64_t next_bp, ret;
                if (!stack_read(in, bp, &next_bp) || !stack_read(in, bp + 8, &ret)) {
                        /* The outermost frame's bp is 0 (or outside the stack). */
                        if (bp != 0 && n < 3)
                                *ret_error = UNWIND_ERR_MEMORY_INVALID;
                        return n;
                }
                if (ret == 0)
                        return n;
                pcs[n++] = ret;
                if (next_bp <= bp)
                        return n; /* stacks grow down: a frame above ends the chain */
                bp = next_bp;
        }
        *ret_error = UNWIND_ERR_MAX_FRAMES_EXCEEDED;
        return n;
}

#if defined(__x86_64__)

struct unwinder {
        struct symbolizer *sym;
        uint32_t epoch; /* bumped by unwinder_flush */
        bool no_rows;
        uint64_t by_rows, by_libunwind;
};

/* Per process, in proc_info.userdata. */
struct proc_unwind {
        unw_addr_space_t as;
        uint32_t generation, epoch;
};

/* The state of one unwinding, the accessors' arg. */
struct walk {
        struct unwinder *u;
        struct proc_info *p;
        const struct unwind_input *in;
        /* The image and load base of the last table lookup: the tables'
         * own addresses may lie in segments no mapping note told us about. */
        struct elf_image *img;
        uint64_t base;
        /* The last mapping met, for the many reads in the same place. */
        const struct pmap *last_map;
        struct elf_image *last_img;
        uint64_t last_base;
};

static void proc_unwind_free(void *p) {
        struct proc_unwind *pu = p;
        unw_destroy_addr_space(pu->as);
        free(pu);
}

/* The image mapped at addr, and the base such that addr = base + vaddr. */
static struct elf_image *image_at(struct walk *w, uint64_t addr, const struct pmap **ret_map, uint64_t *ret_base) {
        const struct pmap *m = w->last_map;
        if (!m || addr < m->start || addr >= m->end) {
                m = proc_maps_find(&w->p->maps, addr);
                if (!m)
                        return NULL;
                struct elf_image *img = symbolizer_image(w->u->sym, w->p, m);
                uint64_t vaddr;
                w->last_map = m;
                w->last_img = img && elf_image_offset_to_vaddr(img, m->pgoff, &vaddr) ? img : NULL;
                w->last_base = w->last_img ? m->start - vaddr : 0;
        }
        if (!w->last_img)
                return NULL;
        *ret_map = m;
        *ret_base = w->last_base;
        return w->last_img;
}

static bool image_read(struct elf_image *img, uint64_t base, uint64_t addr, uint64_t *ret) {
        uint64_t off;
        size_t size;
        const uint8_t *data = elf_image_data(img, &size);
        if (addr < base || !elf_image_vaddr_to_offset(img, addr - base, &off) || off > size || size - off < 8)
                return false;
        memcpy(ret, data + off, 8);
        return true;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp, int write, void *arg) {
        struct walk *w = arg;
        uint64_t v;
        if (write)
                return -UNW_EINVAL;
        if (stack_read(w->in, addr, &v)) {
                *valp = v;
                return 0;
        }
        const struct pmap *m;
        uint64_t base;
        struct elf_image *img = image_at(w, addr, &m, &base);
        if ((img && image_read(img, base, addr, &v)) || (w->img && image_read(w->img, w->base, addr, &v))) {
                *valp = v;
                return 0;
        }
        return -UNW_EINVAL;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *valp, int write, void *arg) {
        static const int8_t map[] = {
                [UNW_X86_64_RAX] = UREG_AX, [UNW_X86_64_RDX] = UREG_DX, [UNW_X86_64_RCX] = UREG_CX,
                [UNW_X86_64_RBX] = UREG_BX, [UNW_X86_64_RSI] = UREG_SI, [UNW_X86_64_RDI] = UREG_DI,
                [UNW_X86_64_RBP] = UREG_BP, [UNW_X86_64_RSP] = UREG_SP, [UNW_X86_64_R8] = UREG_R8,
                [UNW_X86_64_R9] = UREG_R9,  [UNW_X86_64_R10] = UREG_R10, [UNW_X86_64_R11] = UREG_R11,
                [UNW_X86_64_R12] = UREG_R12, [UNW_X86_64_R13] = UREG_R13, [UNW_X86_64_R14] = UREG_R14,
                [UNW_X86_64_R15] = UREG_R15, [UNW_X86_64_RIP] = UREG_IP,
        };
        struct walk *w = arg;
        if (write || reg < 0 || (size_t) reg >= sizeof(map))
                return -UNW_EBADREG;
        *valp = w->in->regs[map[reg]];
        return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg) {
        return -UNW_EINVAL;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg) {
        return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg) {
        return -UNW_EINVAL;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap, void *arg) {
        return -UNW_ENOINFO;
}

/* The encodings of .eh_frame_hdr we read: 4-byte values. */
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info, void *arg) {
        struct walk *w = arg;
        const struct pmap *m;
        uint64_t base, hdr_vaddr, hdr_off, hdr_size;
        struct elf_image *img = image_at(w, ip, &m, &base);
        if (!img)
                return -UNW_ENOINFO;
        if (!elf_image_eh_frame_hdr(img, &hdr_vaddr, &hdr_off, &hdr_size) || hdr_size < 12)
                return -UNW_ENOINFO;
        size_t size;
        const uint8_t *data = elf_image_data(img, &size);
        if (hdr_off > size || size - hdr_off < 12)
                return -UNW_ENOINFO;
        const uint8_t *h = data + hdr_off;
        /* version, eh_frame_ptr encoding, fde_count encoding, table encoding */
        if (h[0] != 1 || (h[1] & 0x0f) != DW_EH_PE_sdata4 || h[2] != DW_EH_PE_udata4 ||
            h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
                return -UNW_ENOINFO;
        uint32_t fde_count;
        memcpy(&fde_count, h + 8, 4);
        if (fde_count == 0 || (uint64_t) fde_count * 8 > hdr_size - 12)
                return -UNW_ENOINFO;
        w->img = img;
        w->base = base;
        unw_dyn_info_t di = {
                .format = UNW_INFO_FORMAT_REMOTE_TABLE,
                .start_ip = m->start,
                .end_ip = m->end,
                .u.rti = {
                        .segbase = base + hdr_vaddr,
                        .table_data = base + hdr_vaddr + 12,
                        .table_len = (uint64_t) fde_count * 8 / sizeof(unw_word_t),
                },
        };
        return dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

static unw_accessors_t accessors = {
        .find_proc_info = find_proc_info,
        .put_unwind_info = put_unwind_info,
        .get_dyn_info_list_addr = get_dyn_info_list_addr,
        .access_mem = access_mem,
        .access_reg = access_reg,
        .access_fpreg = access_fpreg,
        .resume = resume,
        .get_proc_name = get_proc_name,
};

int unwinder_new(struct symbolizer *s, struct unwinder **ret) {
        struct unwinder *u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        u->sym = s;
        proc_table_set_free_userdata(s->procs, proc_unwind_free);
        *ret = u;
        return 0;
}

void unwinder_free(struct unwinder *u) {
        free(u);
}

void unwinder_flush(struct unwinder *u) {
        u->epoch++;
}

static unw_addr_space_t addr_space(struct unwinder *u, struct proc_info *p) {
        struct proc_unwind *pu = p->userdata;
        if (!pu) {
                pu = calloc(1, sizeof(*pu));
                if (!pu)
                        return NULL;
                pu->as = unw_create_addr_space(&accessors, 0);
                if (!pu->as) {
                        free(pu);
                        return NULL;
                }
                /* One thread unwinds: per-thread caching needs no locks
                 * (the global one blocks signals around each use). */
                unw_set_caching_policy(pu->as, UNW_CACHE_PER_THREAD);
                pu->generation = p->generation;
                pu->epoch = u->epoch;
                p->userdata = pu;
        }
        if (pu->generation != p->generation || pu->epoch != u->epoch) {
                unw_flush_cache(pu->as, 0, 0);
                pu->generation = p->generation;
                pu->epoch = u->epoch;
        }
        return pu->as;
}

static int error_of(int r) {
        switch (-r) {
        case UNW_ENOINFO:
                return UNWIND_ERR_UNWIND_INFO;
        case UNW_EINVALIDIP:
                return UNWIND_ERR_INVALID_MAP;
        case UNW_EBADFRAME:
        case UNW_EINVAL:
                return UNWIND_ERR_MEMORY_INVALID;
        case UNW_EBADVERSION:
                return UNWIND_ERR_INVALID_ELF;
        default:
                return UNWIND_ERR_UNKNOWN;
        }
}

void unwinder_use_rows(struct unwinder *u, bool on) {
        u->no_rows = !on;
}

void unwinder_counts(const struct unwinder *u, uint64_t *ret_rows, uint64_t *ret_libunwind) {
        *ret_rows = u->by_rows;
        *ret_libunwind = u->by_libunwind;
}

/* Appends the frame at ip (stack pointer sp) as both walks do. False when
 * the walk ends there: the frame repeats the last one (a loop), or it
 * filled the bound; *ret_error says which. */
static bool push_frame(uint64_t *pcs, size_t *n, size_t max, uint64_t ip, uint64_t sp, uint64_t *last_sp,
                       int *ret_error) {
        if (*n > 0 && ip == pcs[*n - 1] && sp == *last_sp) {
                *ret_error = UNWIND_ERR_REPEATED_FRAME;
                return false;
        }
        *last_sp = sp;
        pcs[(*n)++] = ip;
        if (*n == max) {
                *ret_error = UNWIND_ERR_MAX_FRAMES_EXCEEDED;
                return false;
        }
        return true;
}

/* The code at a file's entry point, where its first thread starts (the
 * dynamic loader's _start and what follows it, before the program's own
 * entry): often without call frame information. Every sample of a process
 * still being loaded ends there (a build beside starts thousands of
 * them). With a frame pointer of zero, libunwind ends the walk there
 * (rbp 0 marks the outermost frame in the x86-64 ABI), without an error;
 * so does the rows walk, for a fraction of the cost. The bound keeps the
 * rule to the entry code. */
#define ENTRY_CODE_BYTES 256u

static bool at_entry(const struct elf_image *img, uint64_t vaddr) {
        uint64_t entry = img ? elf_image_entry(img) : 0;
        return entry && vaddr >= entry && vaddr - entry < ENTRY_CODE_BYTES;
}

/* The walk by compact rows. Debian's libunwind takes a lock around its
 * cache of decoded frames on every step, and blocks all signals for it:
 * two system calls per frame, a third of the plugin's time per sample.
 * Frames whose rules are of the compact form (nearly all) are walked
 * here instead, from rows decoded by libdw and kept per image. True when
 * the walk ended as libunwind would end it (the outermost frame, a zero
 * return address, the bound, a repeated frame, entry code without call
 * frame information and a zero frame pointer); false when a frame needs
 * more than the rows say (no rows, another rule, memory outside the
 * stack copy): the caller then walks the whole stack with libunwind. */
static bool walk_rows(struct walk *w, uint64_t *pcs, size_t max, size_t *ret_n, int *ret_error) {
        const struct unwind_input *in = w->in;
        uint64_t ip = in->regs[UREG_IP], sp = in->regs[UREG_SP], bp = in->regs[UREG_BP], last_sp = 0;
        bool bp_known = true;
        size_t n = 0;
        for (;;) {
                if (!push_frame(pcs, &n, max, ip, sp, &last_sp, ret_error))
                        break;
                const struct pmap *m;
                uint64_t base;
                struct elf_image *img = image_at(w, ip, &m, &base);
                struct cfi_rows *rows = img ? elf_image_cfi_rows(img) : NULL;
                struct cfi_row row;
                /* A return address is the instruction after the call: the
                 * caller's rule is the one of the call itself. */
                uint64_t vaddr = ip - base - (n > 1);
                int r = rows ? cfi_rows_lookup(rows, vaddr, &row) : -ENOENT;
                if (r == -ENOENT && bp_known && bp == 0 && at_entry(img, vaddr))
                        break;
                if (r < 0)
                        return false;
                if (row.flags & CFI_OUTERMOST)
                        break;
                /* A rule of rip's (a PLT entry's) is for the sampled
                 * instruction: a return address there is not ours. */
                if ((row.flags & CFI_AT_PC) && n > 1)
                        return false;
                if (row.cfa_reg == CFI_CFA_BP && !bp_known)
                        return false;
                uint64_t cfa = (row.cfa_reg == CFI_CFA_SP ? sp : bp) + (uint64_t) (int64_t) row.cfa_off, ra;
                if (!stack_read(in, cfa + (uint64_t) (int64_t) row.ra_off, &ra))
                        return false;
                /* A saved rbp the copy does not hold (the slot below the
                 * stack pointer: an epilogue popped it) is unknown from
                 * here, and the walk goes on: libunwind reads a saved
                 * register only when a later rule needs it, and a later
                 * rule based on rbp hands the stack over below. */
                if (row.flags & CFI_BP_SAVED)
                        bp_known = stack_read(in, cfa + (uint64_t) (int64_t) row.bp_off, &bp);
                else if (row.flags & CFI_BP_LOST)
                        bp_known = false;
                sp = cfa;
                if (ra == 0)
                        break;
                ip = ra;
        }
        *ret_n = n;
        return true;
}

size_t unwinder_dwarf(struct unwinder *u, struct proc_info *p, const struct unwind_input *in, uint64_t *pcs,
                      size_t max, int *ret_error) {
        struct walk w = { .u = u, .p = p, .in = in };
        unw_cursor_t c;
        size_t n = 0;
        *ret_error = UNWIND_ERR_NONE;
        if (max == 0)
                return 0;
        if (!u->no_rows && walk_rows(&w, pcs, max, &n, ret_error)) {
                u->by_rows++;
                return n;
        }
        u->by_libunwind++;
        n = 0;
        *ret_error = UNWIND_ERR_NONE;
        w = (struct walk) { .u = u, .p = p, .in = in };
        unw_addr_space_t as = addr_space(u, p);
        if (!as) {
                *ret_error = UNWIND_ERR_UNKNOWN;
                return 0;
        }
        int r = unw_init_remote(&c, as, &w);
        if (r < 0) {
                pcs[0] = in->regs[UREG_IP];
                *ret_error = error_of(r);
                return 1;
        }
        uint64_t last_sp = 0;
        for (;;) {
                unw_word_t ip, sp = 0;
                if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
                        break;
                (void) unw_get_reg(&c, UNW_REG_SP, &sp);
                if (!push_frame(pcs, &n, max, ip, sp, &last_sp, ret_error))
                        break;
                r = unw_step(&c);
                if (r == 0)
                        break;
                if (r < 0) {
                        *ret_error = error_of(r);
                        break;
                }
        }
        if (n == 0) {
                pcs[n++] = in->regs[UREG_IP];
                if (*ret_error == UNWIND_ERR_NONE)
                        *ret_error = UNWIND_ERR_UNKNOWN;
        }
        return n;
}

#else

struct unwinder {
        int unused;
};

int unwinder_new(struct symbolizer *s, struct unwinder **ret) {
        *ret = calloc(1, sizeof(**ret));
        return *ret ? 0 : -ENOMEM;
}

void unwinder_free(struct unwinder *u) {
        free(u);
}

void unwinder_flush(struct unwinder *u) {
}

void unwinder_use_rows(struct unwinder *u, bool on) {
}

void unwinder_counts(const struct unwinder *u, uint64_t *ret_rows, uint64_t *ret_libunwind) {
        *ret_rows = *ret_libunwind = 0;
}

size_t unwinder_dwarf(struct unwinder *u, struct proc_info *p, const struct unwind_input *in, uint64_t *pcs,
                      size_t max, int *ret_error) {
        *ret_error = UNWIND_ERR_BAD_ARCH;
        if (max == 0)
                return 0;
        pcs[0] = in->regs[UREG_IP];
        return 1;
}

#endif
