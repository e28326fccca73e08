/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Names for code a process generated at run time (JIT compilers:
 * Node/V8, the JVM, CPython 3.12's -X perf), which lives in anonymous
 * executable memory that no ELF file describes. Runtimes publish the names
 * in two formats that perf defined:
 *
 *   - a perf map, /tmp/perf-PID.map (PID as the process sees itself, in
 *     its own pid namespace): text lines "START SIZE NAME", START and SIZE
 *     in hex (with or without 0x), appended as code is compiled;
 *   - a jitdump file, jit-PID.dump, which the runtime maps into its own
 *     address space so that its path shows in the process's maps: a header
 *     and records, of which code loads and code moves name addresses.
 *
 * Both are read through the process's root (/proc/PID/root), so a process
 * in a container is named from its own /tmp, and both are read again,
 * from where the last read stopped, as they grow. A later entry for an
 * address wins over an earlier one (code freed and the memory reused).
 *
 * Library code: errors are negative errno, nothing is logged. One thread
 * at a time, as the process table that holds the state.
 */

#include <stddef.h>
#include <stdint.h>

struct proc_info;
struct proc_table;

/* A process's JIT names; owned by its proc_info (procmaps.h), dropped with
 * it and at its exec. */
struct jit_symbols;

/* Where runtimes write their perf maps (the name is perf's). */
#define JIT_PERF_MAP_DIR "/tmp"

/* How often the files of a process are looked at again for more entries
 * when an address is not named (and for files not there yet). */
#define JIT_REFRESH_USEC 100000u
/* Names longer than this are cut. */
#define JIT_NAME_MAX 1024
/* Entries kept per process: a runtime that writes more (a long-running
 * JVM with a perf map per compilation) keeps its first ones named. */
#define JIT_MAX_ENTRIES (1u << 20)

/* The name of pc in process p's generated code, or NULL when no file of
 * the process names it. May read the process's files (at most every
 * JIT_REFRESH_USEC while pc stays unnamed); when they gave new names,
 * p->maps_version is bumped so that callers caching per-address results
 * ask again. The string stays valid until p is dropped or exec's. */
const char *jit_symbols_lookup(struct proc_table *t, struct proc_info *p, uint64_t pc);
void jit_symbols_free(struct jit_symbols *j);

/* Parsers, exposed for tests and fuzzing. Each consumes whole entries
 * from buf[0..size) and returns how many bytes it used (a partial entry at
 * the end is left for the next read), or a negative errno when the data
 * can never parse (a jitdump of another byte order or version, a record
 * shorter than its header: -EPROTO). add() is called for each entry, in
 * order; an error from it ends the parse with that error. */
struct jit_entry_in {
        uint64_t start, size;
        const char *name; /* not NUL-terminated; NULL for a move */
        size_t name_len;
        uint64_t moved_from; /* a move: the code at moved_from is now at start */
};
typedef int (*jit_entry_fn)(const struct jit_entry_in *e, void *userdata);
long jit_parse_perf_map(const char *buf, size_t size, jit_entry_fn add, void *userdata);
/* *header_done: whether the file's header was consumed already (by an
 * earlier call); set once it is. */
long jit_parse_jitdump(const uint8_t *buf, size_t size, int *header_done, jit_entry_fn add, void *userdata);

/* The jitdump format's constants (perf's tools/perf/util/jitdump.h). */
#define JITDUMP_MAGIC 0x4A695444u
#define JITDUMP_VERSION 1u
#define JITDUMP_CODE_LOAD 0u
#define JITDUMP_CODE_MOVE 1u
