/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The BPF programs' entry of a CPython process (struct bpfstack_pyproc,
 * py_procs' value in linux.bpf_stack's and linux.perf's programs) from
 * what lib/profiling found in it. User space only. */

#include "bpfstack.h"
#include "profiling/pyframes-proc.h"

static inline struct bpfstack_pyproc bpfstack_pyproc_of(const struct py_proc_info *in) {
        const struct py_layout *l = in->layout;
        return (struct bpfstack_pyproc){
                .runtime = in->runtime,
                .runtime_interp_head = l->runtime_interp_head,
                .runtime_tstate_current = l->runtime_tstate_current,
                .interp_next = l->interp_next,
                .interp_threads_head = l->interp_threads_head,
                .tstate_next = l->tstate_next,
                .tstate_native_tid = l->tstate_native_tid,
                .tstate_cframe = l->tstate_cframe,
                .cframe_current_frame = l->cframe_current_frame,
                .frame_code = l->frame_code,
                .frame_previous = l->frame_previous,
                .frame_prev_instr = l->frame_prev_instr,
                .frame_is_entry = l->frame_is_entry,
                .frame_size = l->frame_size,
        };
}
