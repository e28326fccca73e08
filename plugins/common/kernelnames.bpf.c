/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The profilers' kernel-name program (see kernelnames.h): run on demand by a
 * plugin (BPF_PROG_TYPE_SYSCALL, through BPF_PROG_RUN), it names kernel
 * addresses with bpf_snprintf's %ps, which looks each one up in the
 * kernel's own symbol table. Only the addresses stacks hold are named, and
 * /proc/kallsyms (every symbol, formatted as text) is not read.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "kernelnames.h"

char LICENSE[] SEC("license") = "GPL";

__u32 ksym_n;
__u64 ksym_addr[KERNEL_NAMES_BATCH];
__s32 ksym_len[KERNEL_NAMES_BATCH];
char ksym_name[KERNEL_NAMES_BATCH][KERNEL_NAMES_NAME_MAX];

SEC("syscall")
int ksym_names(void *ctx) {
        for (__u32 i = 0; i < KERNEL_NAMES_BATCH; i++) {
                if (i >= ksym_n)
                        break;
                __u64 addr = ksym_addr[i];
                ksym_len[i] = (__s32) bpf_snprintf(ksym_name[i], KERNEL_NAMES_NAME_MAX, "%ps", &addr, sizeof(addr));
        }
        return 0;
}
