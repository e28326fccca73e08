/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* What the BPF programs of linux.bpf_stack (bpfstack.bpf.c) and the plugin
 * (bpfstack-ds.c) share: the ring buffer record and the counter slots.
 * Included by both sides, so only fixed-width types, no libc. */

#define BPFSTACK_COMM_LEN 16
#define BPFSTACK_MAX_DEPTH 127 /* PERF_MAX_STACK_DEPTH */
/* How far above SP a frame pointer may be and still be taken for one. */
#define BPFSTACK_FP_SPAN (64ull << 20)
#define BPFSTACK_MAX_PIDS 16   /* pid= and tid= filters, each */
#define BPFSTACK_MAX_COMMS 4   /* comm= filters */

enum bpfstack_kind {
        BPFSTACK_ON_CPU = 1,  /* a cpu-clock sample */
        BPFSTACK_OFF_CPU = 2, /* a task back on a CPU after blocked_ns off it */
};

/* One ring buffer record. Stack ids are bpf_get_stackid()'s: an index into
 * the stacks map, or a negative errno (-EFAULT: no stack of that kind, e.g.
 * a kernel thread's user stack; -EEXIST: bucket taken by another stack). */
struct bpfstack_record {
        __u64 ts;         /* CLOCK_BOOTTIME ns: the sample, or the switch-out */
        __u64 blocked_ns; /* OFF_CPU: switch-in minus switch-out; else 0 */
        __u32 pid;        /* thread group id */
        __u32 tid;
        __u32 cpu; /* where the sample was taken (OFF_CPU: switched out) */
        __s32 kstack_id;
        __s32 ustack_id;
        __u8 kind;     /* enum bpfstack_kind */
        __u8 ustop;    /* enum bpfstack_unwind_stop: how the user walk in BPF ended */
        __u16 n_uframes; /* ustack_id BPFSTACK_USTACK_WALKED: user frames after the record */
        char comm[BPFSTACK_COMM_LEN];
        __u16 n_pyframes; /* struct bpfstack_pyframe after the user frames */
        __u8 pystop;      /* enum bpfstack_py_stop */
        /* 1 + the index of the first user frame whose pc was outside every
         * mapping with a table, left by its frame pointer (JIT code, or a
         * file mapped since the process's entry was written); 0: none. */
        __u8 unmapped;
        __u8 pad[4];
        /* With ustack_id BPFSTACK_USTACK_WALKED, n_uframes __u64 follow:
         * the interrupted instruction, then return addresses. Then
         * n_pyframes Python frames, innermost first. */
};

/* --- CPython frames ------------------------------------------------------- */

#define BPFSTACK_MAX_PYFRAMES 64 /* Python frames walked per sample */
#define BPFSTACK_PY_THREADS 64   /* thread states looked at per sample */
/* The frames a record carries after it, in __u64: user frames and two per
 * Python frame. */
#define BPFSTACK_MAX_TRAILER (BPFSTACK_MAX_DEPTH + 2 * BPFSTACK_MAX_PYFRAMES)

/* One _PyInterpreterFrame: its code object (bit 0 set when the frame is
 * the entry frame of its evaluation call: code objects are aligned) and
 * its prev_instr. */
struct bpfstack_pyframe {
        __u64 code;
        __u64 instr;
};
#define BPFSTACK_PY_ENTRY 1ull
#define BPFSTACK_PY_FRAME_READ 128

/* py_procs' value (key: thread group id): where the process's
 * _PyRuntime is and the offsets of its CPython version, set by the
 * plugin (lib/profiling/pyframes.h's layout). */
struct bpfstack_pyproc {
        __u64 runtime;
        __u16 runtime_interp_head, runtime_tstate_current;
        __u16 interp_next, interp_threads_head;
        __u16 tstate_next, tstate_native_tid, tstate_cframe;
        __u16 cframe_current_frame;
        __u16 frame_code, frame_previous, frame_prev_instr, frame_is_entry;
        __u16 frame_size; /* bytes read per frame (<= BPFSTACK_PY_FRAME_READ) */
        __u16 pad[3];
};

/* How the walk of a sample's Python frames went. */
enum bpfstack_py_stop {
        BPFSTACK_PY_NONE = 0,      /* not a Python process we know (or Python frames off) */
        BPFSTACK_PY_END = 1,       /* every frame of the thread */
        BPFSTACK_PY_DEPTH = 2,     /* BPFSTACK_MAX_PYFRAMES frames */
        BPFSTACK_PY_NO_THREAD = 3, /* the thread has no thread state (not running Python) */
        BPFSTACK_PY_FAULT = 4,     /* the interpreter's memory could not be read */
        BPFSTACK_PY_MAX,
};

/* ustack_id of a record whose user stack the BPF walker took from the
 * unwind tables: its frames follow the record. */
#define BPFSTACK_USTACK_WALKED (-1000)

/* Why the walk of a user stack by unwind tables ended. */
enum bpfstack_unwind_stop {
        BPFSTACK_STOP_NONE = 0,        /* not walked (frame pointers configured, or no user stack) */
        BPFSTACK_STOP_END = 1,         /* the outermost frame: the whole stack */
        BPFSTACK_STOP_DEPTH = 2,       /* max_depth frames */
        BPFSTACK_STOP_NO_TABLES = 3,   /* the process's tables are not loaded (yet): frame pointers used */
        BPFSTACK_STOP_NO_MAPPING = 4,  /* a pc outside every mapping with a table (JIT, vdso, new dlopen) */
        BPFSTACK_STOP_NO_CFI = 5,      /* no unwind rule covers the pc */
        BPFSTACK_STOP_UNSUPPORTED = 6, /* the rule is not of the compact form (DWARF expression, signal frame) */
        BPFSTACK_STOP_READ_FAULT = 7,  /* the caller's frame could not be read */
        BPFSTACK_STOP_BAD_FRAME = 8,   /* the stack pointer did not move up */
        BPFSTACK_STOP_MAX,
};

/* One unwind row (8 bytes; a table is a sorted run of them in the
 * unwind_rows array): from pc (the image's virtual address) to the next
 * row's pc, the canonical frame address is SP or BP plus cfa_off, the
 * return address is at CFA - 8, and the caller's BP, when saved, at
 * CFA + 8 * bp_off8. */
enum {
        BPFSTACK_ROW_CFA_SP = 0,
        BPFSTACK_ROW_CFA_BP = 1,
        BPFSTACK_ROW_NONE = 2,      /* no rule here */
        BPFSTACK_ROW_REFUSED = 3,   /* a rule the walker cannot apply */
        BPFSTACK_ROW_OUTERMOST = 4, /* the first frame of a thread */
        BPFSTACK_ROW_KIND_MASK = 7,
        BPFSTACK_ROW_BP_SAVED = 1 << 3,
        BPFSTACK_ROW_BP_LOST = 1 << 4,
};

struct bpfstack_row {
        __u32 pc;
        __s16 cfa_off;
        __s8 bp_off8;
        __u8 kind; /* BPFSTACK_ROW_* */
};

/* One executable mapping of a process with its table: pc - bias is the
 * image's virtual address; rows [first_row, first_row + n_rows), and a
 * page index [first_page, first_page + n_pages) in unwind_pages: entry p
 * holds the rows covering the p-th BPFSTACK_PAGE bytes from the first
 * row's pc rounded down, so that a search looks only at those. */
struct bpfstack_umap {
        __u64 start, end;
        __u64 bias;
        __u32 first_row, n_rows;
        __u32 first_page, n_pages;
};

#define BPFSTACK_PAGE_SHIFT 12
#define BPFSTACK_PAGE (1u << BPFSTACK_PAGE_SHIFT)

/* One page of the index: the rows (from first_row) to search for a pc in
 * it, [lo, hi). 8 bytes, the stride of a BPF array's elements. */
struct bpfstack_page {
        __u32 lo, hi;
};

#define BPFSTACK_UNWIND_MAPS 128 /* mappings with tables per process */

/* unwind_procs' value (key: thread group id): its mappings, by start. */
struct bpfstack_uproc {
        __u32 n;
        __u32 flags; /* BPFSTACK_UPROC_* */
        struct bpfstack_umap m[BPFSTACK_UNWIND_MAPS];
};

/* Some of the process's files are still being compiled and left out of
 * the entry (those its samples were seen in are in): a walk whose first
 * pc is in none of the mappings listed takes frame pointers, as without
 * an entry; one that gets there from a caller's frame stops there. */
#define BPFSTACK_UPROC_PARTIAL 1u

/* out_ustack's value (key: tid): the walked user stack of a task that
 * left a CPU. */
struct bpfstack_ustack {
        __u16 n;
        __u8 stop;
        __u8 pystop;
        __u16 n_py;
        __u8 pad[2];
        __u64 frames[BPFSTACK_MAX_TRAILER]; /* n user frames, then n_py Python frames */
};

/* out_since's value (key: tid): a task that left a CPU, not yet back. */
struct bpfstack_switched_out {
        __u64 ts;
        __u32 pid, cpu;
        __s32 kstack_id, ustack_id;
        __u8 ustop;
        __u8 has_trailer; /* out_ustack holds its frames (walked or Python) */
        __u8 unmapped;    /* as bpfstack_record's */
        __u8 pad[1];
        char comm[BPFSTACK_COMM_LEN];
};

/* Slots of the per-CPU counters map. */
enum bpfstack_counter {
        BPFSTACK_CNT_RING_LOST,       /* no room in the ring buffer */
        BPFSTACK_CNT_STACK_COLLISION, /* bpf_get_stackid -EEXIST */
        BPFSTACK_CNT_STACK_ERROR,     /* another error but -EFAULT */
        BPFSTACK_CNT_START_FULL,      /* switch-out not remembered: map full */
        BPFSTACK_CNT_USTACK_FULL,     /* a walked user stack not kept at switch-out: out_ustack full */
        BPFSTACK_CNT_PY_WALKED,       /* samples whose Python frames were walked */
        BPFSTACK_CNT_MAX,
};
