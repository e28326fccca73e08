/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The few kernel types bpfstack.bpf.c uses, for build machines without
 * /sys/kernel/btf/vmlinux (the build then copies this file to vmlinux.h).
 * Written here, not dumped: the UAPI parts come from the system's
 * <linux/bpf.h>, the rest are CO-RE stubs (preserve_access_index) whose
 * field offsets libbpf relocates against the running kernel's BTF at load,
 * so only the names and types of the fields read must be right. */

#include <linux/bpf.h>
#include <linux/types.h>

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
        unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags,
                sp, ss;
} __attribute__((preserve_access_index));
#elif defined(__TARGET_ARCH_arm64)
struct user_pt_regs {
        __u64 regs[31];
        __u64 sp;
        __u64 pc;
        __u64 pstate;
} __attribute__((preserve_access_index));
struct pt_regs {
        struct user_pt_regs user_regs;
} __attribute__((preserve_access_index));
#endif

#if defined(__TARGET_ARCH_arm64)
typedef struct user_pt_regs bpf_user_pt_regs_t;
#else
typedef struct pt_regs bpf_user_pt_regs_t;
#endif

struct bpf_perf_event_data {
        bpf_user_pt_regs_t regs;
        __u64 sample_period;
        __u64 addr;
};

struct mm_struct;

struct task_struct {
        struct mm_struct *mm;
        unsigned int __state;
        unsigned int flags;
        int pid;
        int tgid;
        char comm[16];
} __attribute__((preserve_access_index));

typedef _Bool bool;
enum { false = 0, true = 1 };
