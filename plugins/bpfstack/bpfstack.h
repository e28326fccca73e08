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
        __u8 kind; /* enum bpfstack_kind */
        __u8 pad[3];
        char comm[BPFSTACK_COMM_LEN];
};

/* out_since's value (key: tid): a task that left a CPU, not yet back. */
struct bpfstack_switched_out {
        __u64 ts;
        __u32 pid, cpu;
        __s32 kstack_id, ustack_id;
        char comm[BPFSTACK_COMM_LEN];
};

/* Slots of the per-CPU counters map. */
enum bpfstack_counter {
        BPFSTACK_CNT_RING_LOST,       /* no room in the ring buffer */
        BPFSTACK_CNT_STACK_COLLISION, /* bpf_get_stackid -EEXIST */
        BPFSTACK_CNT_STACK_ERROR,     /* another error but -EFAULT */
        BPFSTACK_CNT_START_FULL,      /* switch-out not remembered: map full */
        BPFSTACK_CNT_MAX,
};
