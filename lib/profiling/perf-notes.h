/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The kernel's notes on processes, for a sampler whose samples come from
 * elsewhere (a BPF program): on each CPU a dummy software event that
 * samples nothing but records every executable mapping made (MMAP2), exec
 * (COMM with its exec flag), fork and exit, as perf record's side band
 * does. The notes are copied from the events' rings into a queue in time
 * order and applied to a process table up to the time of each sample
 * before it is symbolized: a process's maps are those it had when it was
 * sampled, even once it is gone, and those of a process forked or exec'd
 * a moment before are known without /proc.
 *
 * The events are per CPU: one whose CPU went offline is opened again once
 * it is back (perf_notes_check_cpus, on the caller's timer).
 *
 * Library code: negative errno, nothing logged. One thread at a time. */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "profiling/perf-record.h"
#include "profiling/procmaps.h"

struct perf_notes;

struct perf_notes_stats {
        uint64_t applied; /* notes applied to the table */
        uint64_t lost;    /* notes the kernel could not write (a ring was full) */
        uint64_t bad;     /* records that did not parse */
        uint64_t cpus;    /* events open */
};

/* Opens the events on the CPUs online now, their times on clock (the
 * sampler's: CLOCK_BOOTTIME for bpf_ktime_get_boot_ns), each with a ring of
 * ring_pages data pages (a power of two) that wakes perf_notes_fd once a
 * quarter full. -EACCES/-EPERM without CAP_PERFMON, -ENOMEM. */
int perf_notes_new(clockid_t clock, size_t ring_pages, struct perf_notes **ret);
void perf_notes_free(struct perf_notes *n);
/* One descriptor (an epoll set of the events) that polls readable when a
 * ring fills: the caller then calls perf_notes_read. */
int perf_notes_fd(const struct perf_notes *n);
/* Copies what the rings hold into the queue, and applies to t the oldest
 * notes when the queue is past its bound (PERF_NOTES_MAX_QUEUED). */
void perf_notes_read(struct perf_notes *n, struct proc_table *t);
/* Applies to t, in time order, the queued notes with a time up to until
 * (inclusive), after reading the rings when they may hold some not read
 * yet. */
void perf_notes_apply(struct perf_notes *n, struct proc_table *t, uint64_t until);
/* Events whose CPU went offline are closed (their notes read first) and
 * opened again on CPUs back online. */
void perf_notes_check_cpus(struct perf_notes *n);
void perf_notes_stats(const struct perf_notes *n, struct perf_notes_stats *ret);
/* Applies one record of the kind the notes are (MMAP2, COMM, FORK, EXIT)
 * to t; others are ignored. For a sampler whose rings carry them. */
void perf_notes_apply_record(struct proc_table *t, const struct perf_record *r);

#define PERF_NOTES_MAX_QUEUED 65536u
