/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Kernel frames named on demand, for the profilers (linux.perf and
 * linux.bpf_stack): each kernel address a stack holds is named once by a
 * BPF program (kernelnames.bpf.c, see kernelnames.h) and kept, so a
 * session never formats and parses all of /proc/kallsyms (some 120k lines,
 * about 50 ms of CPU and megabytes of names at every start) to name the
 * few thousand addresses it sees. An address the program cannot name (an
 * ftrace trampoline, a name longer than it prints) is looked up in
 * /proc/kallsyms instead, read then, once. Built with the BPF toolchain
 * (TRACED_KERNEL_NAMES_BPF); without it kernel_names_new answers
 * -EOPNOTSUPP and the caller reads /proc/kallsyms whole, as before. One
 * thread at a time. Errors are returned, not logged. */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

struct kernel_names;

struct kernel_names_stats {
        uint64_t runs;      /* times the program ran */
        uint64_t named;     /* addresses it named */
        uint64_t kallsyms;  /* addresses looked up in /proc/kallsyms instead */
        uint64_t unnamed;   /* addresses neither named */
        size_t cached;      /* addresses kept now */
};

#if defined(TRACED_KERNEL_NAMES_BPF) && TRACED_KERNEL_NAMES_BPF
/* Loads the program: -errno when the kernel refuses it (no CAP_BPF, a
 * kernel before 5.14 without BPF_PROG_TYPE_SYSCALL, ...). libbpf says
 * nothing meanwhile: the caller says what it does instead. */
int kernel_names_new(struct kernel_names **ret);
void kernel_names_free(struct kernel_names *k);
/* The name of the function holding kernel address addr (NULL: none, or
 * out of memory), owned by k: valid until the next call on k. Fits the
 * symbolizer's kernel_name (userdata: k). */
const char *kernel_names_lookup(void *userdata, uint64_t addr);
/* Names the addresses of addrs not kept yet, KERNEL_NAMES_BATCH to a run
 * (the kernel frames of a sample, before they are looked up one by one). */
void kernel_names_prefetch(struct kernel_names *k, const uint64_t *addrs, size_t n);
void kernel_names_stats(const struct kernel_names *k, struct kernel_names_stats *ret);
#else
static inline int kernel_names_new(struct kernel_names **ret) {
        *ret = NULL;
        return -EOPNOTSUPP;
}
static inline void kernel_names_free(struct kernel_names *k) {
        (void) k;
}
static inline const char *kernel_names_lookup(void *userdata, uint64_t addr) {
        (void) userdata, (void) addr;
        return NULL;
}
static inline void kernel_names_prefetch(struct kernel_names *k, const uint64_t *addrs, size_t n) {
        (void) k, (void) addrs, (void) n;
}
static inline void kernel_names_stats(const struct kernel_names *k, struct kernel_names_stats *ret) {
        (void) k;
        *ret = (struct kernel_names_stats) {};
}
#endif
