/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the profilers share of CPython's frames beyond one process's state
 * (pyframes-proc.h): a sample's stack as interned frames with the Python
 * frames in place of the evaluation frames, and the processes running a
 * CPython executable as sampling starts.
 *
 * Library code: nothing is logged.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profiling/intern.h"
#include "profiling/pyframes-proc.h"

/* Bit 0 of a Python frame's code object address: its evaluation call's
 * first frame (code objects are aligned). linux.bpf_stack's records and
 * pyframes-walk.h use the same. */
#define PY_FRAME_ENTRY 1ull

/* The frames of a sample, root first, into out (at most cap): native[k]
 * the interned native frames, innermost first (0: none), is_eval[k]
 * whether frame k is an evaluation frame; py the thread's Python frames,
 * innermost first, as pairs (code object | PY_FRAME_ENTRY, last
 * instruction), named through pp (a PY_KNOWN process). Returns their
 * number. */
size_t py_stack_frames(struct py_proc *pp, struct intern_writer *iw, const uint64_t *native, const bool *is_eval,
                       size_t n_native, const uint64_t *py, size_t n_py, uint64_t *out, size_t cap);

/* The same merge with the Python frames already interned: py_iids[j]
 * the frame of Python frame j (innermost first, 0: none), py[2 * j] its
 * code object | PY_FRAME_ENTRY as above. */
size_t py_stack_frames_interned(const uint64_t *native, const bool *is_eval, size_t n_native, const uint64_t *py,
                                const uint64_t *py_iids, size_t n_py, uint64_t *out, size_t cap);

/* Calls seen(pid, userdata) for each process whose executable is named
 * as a CPython's (pythonX.Y): those a sampler looks at as it starts. */
void py_scan_processes(void (*seen)(int pid, void *userdata), void *userdata);
