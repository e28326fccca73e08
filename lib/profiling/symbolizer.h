/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* From raw addresses to interned frames: a user address of a process
 * becomes a Frame on the Mapping holding it (path, build id, load bias),
 * named from the file's symbols; a kernel address becomes a Frame on the
 * kernel's mapping named from kallsyms. Used by the perf plugin after
 * unwinding and by any collector that has addresses (bpfstack).
 *
 * Ownership: the symbolizer borrows the process table, ELF cache and
 * kernel symbols given to it (they must outlive it) and owns nothing else.
 * One thread at a time (the same one as the table and cache). */

#include <stdbool.h>
#include <stdint.h>

#include "profiling/elf-image.h"
#include "profiling/intern.h"
#include "profiling/ksyms.h"
#include "profiling/procmaps.h"

/* The path of the kernel's pseudo mapping. */
#define SYMBOLIZER_KERNEL_MAPPING "[kernel.kallsyms]"

struct symbolizer {
        struct proc_table *procs;
        struct elf_cache *elves;
        const struct ksyms *ksyms; /* may be NULL: kernel frames unnamed */
        /* When set, kernel addresses are named by it instead of ksyms
         * (NULL: unnamed); the name need last only until the next call. */
        const char *(*kernel_name)(void *userdata, uint64_t pc);
        void *kernel_name_userdata;
        /* Addresses in generated code (symbolizer_is_jit_memory) left
         * unnamed so far: their runtime may name them a moment later, so
         * a caller that caches frames or stacks does not keep one whose
         * resolution bumped this. */
        uint64_t jit_unnamed;
};

/* The ELF image of a process's mapping, opened through the process's root
 * (its mount namespace) and cached by device and inode. NULL for anonymous
 * memory, pseudo files ([vdso], [stack], ...), files we cannot open or
 * that are not ELF. */
struct elf_image *symbolizer_image(struct symbolizer *s, const struct proc_info *p, const struct pmap *m);

/* How an address of a process resolved. */
struct symbolized {
        const struct pmap *map;  /* NULL: no mapping holds it */
        struct elf_image *image; /* NULL: not backed by a readable ELF file */
        uint64_t rel_pc;         /* the address as a virtual address of the file, else pc - map start */
        const char *function;    /* NULL: no symbol; owned by the image */
};

/* Whether m is memory a runtime may generate code into (executable and
 * backed by no file, or by a memfd): its addresses are named from the
 * process's perf map and jitdump files (jit-map.h). */
bool symbolizer_is_jit_memory(const struct pmap *m);

/* An address in such memory gets its name from the JIT files (the string
 * is then owned by the process, see jit-map.h) and keeps rel_pc as its
 * offset in the mapping. */
void symbolizer_resolve(struct symbolizer *s, const struct proc_info *p, uint64_t pc, struct symbolized *ret);

/* The interned frame of user address pc of process p (0: out of memory).
 * Addresses outside any mapping get a frame on an empty mapping. */
uint64_t symbolizer_user_frame(struct symbolizer *s, struct intern_writer *w, const struct proc_info *p, uint64_t pc);
/* The interned frame of kernel address pc. */
uint64_t symbolizer_kernel_frame(struct symbolizer *s, struct intern_writer *w, uint64_t pc);
