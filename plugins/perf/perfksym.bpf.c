/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * linux.perf's kernel-name program (see perfksym.h): run on demand by the
 * plugin (BPF_PROG_TYPE_SYSCALL, through BPF_PROG_RUN), it names kernel
 * addresses with bpf_snprintf's %ps, which looks each one up in the
 * kernel's own symbol table. Only the addresses samples hit are named, and
 * /proc/kallsyms (every symbol, formatted as text) is not read.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "perfksym.h"

char LICENSE[] SEC("license") = "GPL";

__u32 ksym_n;
__u64 ksym_addr[PERF_KSYM_BATCH];
__s32 ksym_len[PERF_KSYM_BATCH];
char ksym_name[PERF_KSYM_BATCH][PERF_KSYM_NAME_MAX];

SEC("syscall")
int ksym_names(void *ctx) {
        for (__u32 i = 0; i < PERF_KSYM_BATCH; i++) {
                if (i >= ksym_n)
                        break;
                __u64 addr = ksym_addr[i];
                ksym_len[i] = (__s32) bpf_snprintf(ksym_name[i], PERF_KSYM_NAME_MAX, "%ps", &addr, sizeof(addr));
        }
        return 0;
}
