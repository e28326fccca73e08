/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.perf's kernel frames named on demand: each kernel address a sample
 * hits is named once by a BPF program (perfksym.bpf.c, see perfksym.h)
 * and kept, so a session never formats and parses all of /proc/kallsyms
 * (some 120k lines, about 50 ms of CPU on every start) to name the few
 * thousand addresses it sees. An address the program cannot name (an
 * ftrace trampoline, a name longer than it prints) is looked up in
 * /proc/kallsyms instead, read then, once. Built with the BPF toolchain
 * (PERF_PY_BPF); without it perf_ksym_new answers -EOPNOTSUPP and the
 * caller reads /proc/kallsyms whole, as before. One thread at a time.
 * Errors are returned, not logged. */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

struct perf_ksym;

struct perf_ksym_stats {
        uint64_t runs;      /* times the program ran */
        uint64_t named;     /* addresses it named */
        uint64_t kallsyms;  /* addresses looked up in /proc/kallsyms instead */
        uint64_t unnamed;   /* addresses neither named */
        size_t cached;      /* addresses kept now */
};

#if defined(PERF_PY_BPF) && PERF_PY_BPF
/* Loads the program: -errno when the kernel refuses it (no CAP_BPF, a
 * kernel before 5.14 without BPF_PROG_TYPE_SYSCALL, ...). libbpf says
 * nothing meanwhile: the caller says what it does instead. */
int perf_ksym_new(struct perf_ksym **ret);
void perf_ksym_free(struct perf_ksym *k);
/* The name of the function holding kernel address addr (NULL: none, or
 * out of memory), owned by k: valid until the next call on k. Fits the
 * symbolizer's kernel_name (userdata: k). */
const char *perf_ksym_lookup(void *userdata, uint64_t addr);
/* Names the addresses of addrs not kept yet, PERF_KSYM_BATCH to a run
 * (the kernel frames of a sample, before they are looked up one by one). */
void perf_ksym_prefetch(struct perf_ksym *k, const uint64_t *addrs, size_t n);
void perf_ksym_stats(const struct perf_ksym *k, struct perf_ksym_stats *ret);
#else
static inline int perf_ksym_new(struct perf_ksym **ret) {
        *ret = NULL;
        return -EOPNOTSUPP;
}
static inline void perf_ksym_free(struct perf_ksym *k) {
        (void) k;
}
static inline const char *perf_ksym_lookup(void *userdata, uint64_t addr) {
        (void) userdata, (void) addr;
        return NULL;
}
static inline void perf_ksym_prefetch(struct perf_ksym *k, const uint64_t *addrs, size_t n) {
        (void) k, (void) addrs, (void) n;
}
static inline void perf_ksym_stats(const struct perf_ksym *k, struct perf_ksym_stats *ret) {
        (void) k;
        *ret = (struct perf_ksym_stats) {};
}
#endif
