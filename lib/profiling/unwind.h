/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* User stacks of other processes, unwound after the fact from what a
 * sampler captured: the registers at the sample and a copy of the stack
 * from the stack pointer up. DWARF mode runs libunwind's remote API with
 * accessors of ours (registers from the sample; memory from the stack copy,
 * else from the ELF file mapped at that address; unwind tables from the
 * file's .eh_frame_hdr), after a faster walk by the compact rows of the
 * file's call frame information where every frame fits them (see
 * unwinder_use_rows). Frame-pointer mode follows the saved frame
 * pointers in the stack copy.
 *
 * Ownership: the unwinder borrows the symbolizer's process table and ELF
 * cache (which must outlive it) and keeps per-process libunwind state in
 * proc_info.userdata; it installs the table's free_userdata. One thread at
 * a time, the table's. x86-64 only (elsewhere: UNWIND_ERROR_BAD_ARCH). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profiling/procmaps.h"
#include "profiling/symbolizer.h"

/* Profiling.StackUnwindError values (profile_packet.proto). */
enum {
        UNWIND_ERR_UNKNOWN = 0,
        UNWIND_ERR_NONE = 1,
        UNWIND_ERR_MEMORY_INVALID = 2,
        UNWIND_ERR_UNWIND_INFO = 3,
        UNWIND_ERR_UNSUPPORTED = 4,
        UNWIND_ERR_INVALID_MAP = 5,
        UNWIND_ERR_MAX_FRAMES_EXCEEDED = 6,
        UNWIND_ERR_REPEATED_FRAME = 7,
        UNWIND_ERR_INVALID_ELF = 8,
        UNWIND_ERR_BAD_ARCH = 12,
};

/* Registers, in this order (a subset of perf's user registers). */
enum {
        UREG_AX, UREG_BX, UREG_CX, UREG_DX, UREG_SI, UREG_DI, UREG_BP, UREG_SP, UREG_IP,
        UREG_R8, UREG_R9, UREG_R10, UREG_R11, UREG_R12, UREG_R13, UREG_R14, UREG_R15,
        UREG_COUNT
};

/* The perf_event_attr.sample_regs_user mask selecting exactly the
 * registers above, in the order a sample lists them (bit order). */
uint64_t unwind_perf_regs_mask(void);
/* Fills regs[UREG_*] from a sample's registers listed in mask order. */
void unwind_regs_from_perf(const uint64_t *sample_regs, uint64_t regs[UREG_COUNT]);

/* A stack copy of some words only (a heap sample's, lib/heap/heap-wire.h):
 * the 8 bytes at sp + offs[k] are vals[k], offs ascending. A walk that
 * reads any other word below sp + stack_size misses: the read fails, as
 * no read of a whole copy would, and the log counts it. */
struct unwind_sparse {
        const uint32_t *offs;
        const uint64_t *vals;
        size_t n;
};

/* The words of the stack copy a walk read: each offset from sp once, in
 * the order first read, up to cap (overflow: more were read). Reads of a
 * sparse copy that missed are counted. */
struct unwind_stack_log {
        uint32_t *offs;
        size_t n, cap;
        bool overflow;
        uint64_t misses;
};

struct unwind_input {
        uint64_t regs[UREG_COUNT];
        const uint8_t *stack; /* the bytes at regs[UREG_SP] onwards */
        size_t stack_size;    /* the copy's extent, sparse or not */
        const struct unwind_sparse *sparse; /* not NULL: the copy, instead of stack */
        struct unwind_stack_log *log;       /* not NULL: kept by the walks */
};

struct unwinder;

int unwinder_new(struct symbolizer *s, struct unwinder **ret);
void unwinder_free(struct unwinder *u);
/* Forgets cached unwind information (all processes). */
void unwinder_flush(struct unwinder *u);

/* Up to max return addresses of process p's stack, the sampled pc first.
 * Returns how many; *ret_error gets a UNWIND_ERR_* value: NONE when the
 * walk reached the outermost frame, else why it stopped (the frames found
 * until then are kept). */
size_t unwinder_dwarf(struct unwinder *u, struct proc_info *p, const struct unwind_input *in, uint64_t *pcs,
                      size_t max, int *ret_error);
/* Whether DWARF walks first try the image's call frame information in
 * compact rows (profiling/cfi-rows.h), which most frames fit, and leave
 * to libunwind only the stacks with a frame that does not (the default);
 * off: libunwind walks every stack. */
void unwinder_use_rows(struct unwinder *u, bool on);
/* How many DWARF walks the rows finished and how many libunwind made. */
void unwinder_counts(const struct unwinder *u, uint64_t *ret_rows, uint64_t *ret_libunwind);

/* The same by frame pointers, from the stack copy only. */
size_t unwind_frame_pointers(const struct unwind_input *in, uint64_t *pcs, size_t max, int *ret_error);
