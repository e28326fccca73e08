/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Compiling unwind tables off the event loop: worker threads take the
 * queued files hottest first (the job's heat, raised while it waits),
 * compiles each (profiling/cfi-table.h) into the walker's rows and hands
 * them back; the loop collects what is done between its iterations, so a
 * flush or a stop never waits for a compile. Freeing the compiler does
 * not wait either: a compile under way finishes on its own and the
 * thread then frees what is left. With a cache directory, a file's rows
 * are read from it when there (unwind-cache.h), and stored once compiled;
 * the files still queued when the compiler is freed are then compiled
 * into it at idle priority (SCHED_IDLE), so that the next recording finds
 * them, instead of being dropped. */

#include <stddef.h>
#include <stdint.h>

#include "bpfstack.h"

/* Two, so that one long compile (a compiler's own 100 MB binary) does not
 * hold up the small hot ones queued after it. */
#define UNWIND_COMPILER_THREADS 2u
/* The cache directory's bound. */
#define UNWIND_CACHE_BYTES (64u << 20)

struct unwind_compiler;

struct unwind_job {
        uint64_t dev, inode; /* the file's, for the caller */
        int fd;              /* the file, the worker's to close; or -EBADF and data */
        const uint8_t *data; /* an image that outlives the compiler (the vDSO) */
        size_t size, max_rows;
        uint64_t heat; /* samples waiting for it: the hottest is compiled first */
        /* Results, once taken back: */
        int error; /* 0, or a negative errno of cfi_table_compile */
        struct bpfstack_row *rows;
        size_t n;
        uint64_t compile_us; /* compiling, or reading from the cache */
        uint64_t start_seq;  /* 1 for the first job a worker took, 2 for the next, ... */
        bool from_cache;
        int cache_error; /* storing it: 0 or a negative errno */
        struct unwind_job *next;
};

/* cache_dir: NULL for none. */
int unwind_compiler_new(const char *cache_dir, struct unwind_compiler **ret);
/* Lets the threads go: jobs done are freed; jobs queued are dropped, or
 * with a cache directory compiled into it first (results freed). */
void unwind_compiler_free(struct unwind_compiler *c);
/* Queues j (the compiler's until taken back). */
void unwind_compiler_submit(struct unwind_compiler *c, struct unwind_job *j);
/* Adds heat to j while it is queued. */
void unwind_compiler_heat(struct unwind_compiler *c, struct unwind_job *j, uint64_t heat);
/* Readable (EPOLLIN) when jobs are done: for the caller's event loop;
 * unwind_compiler_take empties it. Stays the compiler's. */
int unwind_compiler_fd(const struct unwind_compiler *c);
/* The jobs done since the last call, a list the caller frees
 * (unwind_job_free). */
struct unwind_job *unwind_compiler_take(struct unwind_compiler *c);
void unwind_job_free(struct unwind_job *j);
