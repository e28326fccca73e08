/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The unwind tables linux.bpf_stack's BPF walker reads (bpfstack.bpf.c):
 * each executable file a sampled process maps is compiled once, off the
 * event loop (unwind-compiler.h), and its rows are kept here and copied
 * into a run of the unwind_rows array,
 * shared by every process mapping the same file; a process's entry in
 * unwind_procs lists its mappings with the run of each. Rows are
 * allocated one after the other; when the array is full, every table and
 * process entry is dropped and processes get theirs again as they are
 * sampled (counted as a reset), from the rows kept (no compile again).
 * One file takes at most a quarter of the array. Called from one thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profiling/procmaps.h"
#include "profiling/symbolizer.h"
#include "unwind-pending.h"

struct unwind_tables;

struct unwind_stats {
        uint64_t images;         /* images with a table loaded now */
        uint64_t images_refused; /* images without usable tables (no .eh_frame_hdr, too large, ...) */
        uint64_t rows, rows_max; /* rows in use, of the array's */
        uint64_t procs_loaded;   /* process entries written (again after exec, dlopen, reset) */
        uint64_t procs_partial;  /* of those, written while files it maps but was not sampled in compiled */
        uint64_t procs_failed;   /* entries not written: the process map full */
        uint64_t maps_dropped;   /* mappings left out of an entry: more than BPFSTACK_UNWIND_MAPS */
        uint64_t resets;         /* the row array filled up and was emptied */
        uint64_t images_compiled; /* files compiled */
        uint64_t images_cached;   /* files whose rows came from the cache on disk */
        uint64_t cache_us;        /* time spent reading them */
        uint64_t cache_errors;    /* tables compiled but not stored */
        uint64_t compile_us;      /* time spent compiling tables (by the worker thread) */
        uint64_t compile_max_us;  /* the longest compile */
};

/* n_rows: the size of the unwind_rows array; cache_dir: where compiled
 * tables are kept across recordings (unwind-cache.h), or NULL. Files may
 * be queued (unwind_tables_prepare) from then on, before the BPF maps
 * exist. */
int unwind_tables_new(uint32_t n_rows, struct symbolizer *sym, const char *cache_dir, struct unwind_tables **ret);
/* The BPF maps, once loaded, before any unwind_tables_load: rows_fd the
 * unwind_rows array (BPF_F_MMAPABLE) of n_rows rows; pages_fd the
 * unwind_pages array (same) of n_pages entries; procs_fd the unwind_procs
 * hash. All stay the caller's. */
int unwind_tables_map(struct unwind_tables *t, int rows_fd, int pages_fd, uint32_t n_pages, int procs_fd);
/* Queues the compiles of p's files with heat, before its samples ask
 * (nothing is written to the maps): a process busy when sampling starts
 * finds them compiled. 0, or -ENOMEM. */
int unwind_tables_prepare(struct unwind_tables *t, const struct proc_info *p, uint64_t heat);
void unwind_tables_free(struct unwind_tables *t);
/* Whether m, a mapping of a sampled process, is a file whose table is
 * compiled, being compiled or not tried yet: a walk that stopped in it
 * wants the process's entry written again (a dlopen since). False for
 * anonymous memory (JIT code) and files without usable tables. */
bool unwind_tables_could_cover(const struct unwind_tables *t, const struct pmap *m);

/* Writes p's entry: a table for each executable file mapping. 0 also
 * when no mapping has one (the entry is then empty, and walks of p stop at
 * once instead of asking again); -EINPROGRESS while files of p are being
 * compiled (queued with l's hits as heat, the files holding l's pcs hot
 * and the others lukewarm: ask again later). The entry is written, marked
 * partial, as soon as the files holding l's pcs are in, those still
 * compiling left out. -ENOSPC when the process map is full; -ENOMEM. */
int unwind_tables_load(struct unwind_tables *t, const struct proc_info *p, const struct pending_load *l);
/* Readable when compiled tables wait to be taken in (a source for the
 * event loop: then unwind_tables_poll, and the loads waiting for them). */
int unwind_tables_fd(const struct unwind_tables *t);
/* Takes in the tables the worker compiled since the last call. */
void unwind_tables_poll(struct unwind_tables *t);

void unwind_tables_stats(const struct unwind_tables *t, struct unwind_stats *ret);
