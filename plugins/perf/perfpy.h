/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What linux.perf's BPF program (perfpy.bpf.c) sends with a sample of a
 * CPython process: the sampled thread's Python frames, walked as the
 * sample is taken. It runs on each sampling event (PERF_EVENT_IOC_SET_BPF)
 * and writes through a BPF output event of the same CPU whose records go
 * into the sampling event's ring (PERF_EVENT_IOC_SET_OUTPUT), so the
 * record lies in the ring right before the sample it belongs to. Shared
 * by the BPF program and the plugin. */

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define PERF_PYREC_MAGIC 0x31797070u /* "ppy1" */

struct perf_pyrec {
        __u32 magic;
        __u32 tid; /* the sampled thread */
        __u8 stop; /* how the walk ended: enum bpfstack_py_stop */
        __u8 pad;
        __u16 n;   /* Python frames that follow, innermost first */
        __u32 pad2;
        /* then n pairs (code object | BPFSTACK_PY_ENTRY, prev_instr) */
};
