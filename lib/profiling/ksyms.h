/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Kernel symbols, shared by every plugin: the text symbols of
 * /proc/kallsyms looked up by address (perf and bpfstack kernel frames,
 * ftrace's symbolize_ksyms), and a small per-sequence numbering of kernel
 * addresses (ftrace's InternedData.kernel_symbols iids).
 *
 * A struct ksyms is immutable once loaded: lookups may run on any number of
 * threads at once. Names returned point into it and live until ksyms_free. */

#include <stdint.h>
#include <stdio.h>

struct ksyms;

/* Reads kallsyms text from f. -EPERM when every address reads as zero
 * (kptr_restrict, or no CAP_SYSLOG), -ENODATA when there is no text
 * symbol at all, -ENOMEM. */
int ksyms_load(FILE *f, struct ksyms **ret);
/* Reads /proc/kallsyms (needs CAP_SYSLOG, or kptr_restrict 0, for real
 * addresses); errors as ksyms_load, or -errno of the open. */
int ksyms_load_proc(struct ksyms **ret);
void ksyms_free(struct ksyms *k);
size_t ksyms_count(const struct ksyms *k);
/* What the table takes in memory (FtraceStats.kernel_symbols_mem_kb). */
size_t ksyms_memory_bytes(const struct ksyms *k);
/* The function containing addr (the nearest text symbol at or below it,
 * not past the next one), or NULL. */
const char *ksyms_lookup(const struct ksyms *k, uint64_t addr);

#define KADDR_MAX 4096u

/* Addresses numbered in order of first use, from 1 (0: none). */
struct kaddr_table {
        uint64_t addrs[KADDR_MAX]; /* addrs[iid - 1] */
        uint32_t slots[2 * KADDR_MAX]; /* open addressing: iid, 0 free */
        uint32_t n;
        uint32_t written; /* iids up to this one went out with their names */
};

void kaddr_reset(struct kaddr_table *t);
/* The iid of addr, added if new; 0 when the table is full. */
uint32_t kaddr_intern(struct kaddr_table *t, uint64_t addr);
