/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * CPython in one profiled process, for any sampler that has the Python
 * frames of its samples (code object and last instruction per frame, as
 * linux.bpf_stack's BPF program reads them): whether the process runs a
 * CPython, whose layout, where its _PyRuntime is; then each frame named
 * and interned. Each code object is read once per process (through
 * process_vm_readv: ptrace read access) and kept; a frame is interned as
 * the function "QUALNAME (FILE:LINE)" on a mapping "[cpythonX.Y]" with
 * rel_pc the line, so that any reader of the trace shows it as another
 * frame.
 *
 * Ownership: a struct py_proc belongs to its caller (typically as the
 * proc_info's userdata) and borrows nothing after py_proc_new. One thread
 * at a time. Library code: errors are negative errno, nothing is logged.
 */

#include <stdbool.h>
#include <stdint.h>

#include "profiling/intern.h"
#include "profiling/procmaps.h"
#include "profiling/pyframes.h"
#include "profiling/symbolizer.h"

enum py_kind {
        PY_NOT = 0,        /* maps no CPython file */
        PY_UNKNOWN = 1,    /* a CPython whose layout is not known */
        PY_NO_RUNTIME = 2, /* a known CPython, but no file of it exports _PyRuntime */
        PY_KNOWN = 3,      /* its frames can be walked and named */
};

struct py_proc;

/* What the process runs. */
struct py_proc_info {
        enum py_kind kind;
        unsigned major, minor;          /* PY_NOT: 0 */
        const char *path;               /* the CPython file named (owned by the py_proc) */
        const struct py_layout *layout; /* PY_KNOWN */
        uint64_t runtime;               /* PY_KNOWN: the address of _PyRuntime in the process */
        uint64_t code_type;             /* PY_KNOWN: the address of PyCode_Type, 0 if not found */
};

/* Looks at process p (its maps, and the ELF files of its CPython files
 * through sym); -ENOMEM. */
int py_proc_new(struct symbolizer *sym, const struct proc_info *p, struct py_proc **ret);
void py_proc_free(struct py_proc *pp);
const struct py_proc_info *py_proc_info(const struct py_proc *pp);

/* The interned frame of a Python frame of a PY_KNOWN process: code
 * object code (read now if not yet), last instruction instr. 0 when out
 * of memory. A code object that cannot be read is named
 * "[python code 0xADDR]". */
uint64_t py_proc_frame(struct py_proc *pp, struct intern_writer *iw, uint64_t code, uint64_t instr);

/* A py_read_fn reading process *(const int *) userdata's memory
 * (process_vm_readv: ptrace read access). */
int py_read_process(void *userdata, uint64_t addr, void *buf, size_t len);
/* A py_readv_fn of the same process (userdata: a pointer to its pid). */
int py_readv_process(void *userdata, const uint64_t *addrs, void *const *bufs, size_t len, size_t n);

/* Code objects read and found unreadable, since the process was met. */
void py_proc_counts(const struct py_proc *pp, uint64_t *ret_read, uint64_t *ret_unreadable);
