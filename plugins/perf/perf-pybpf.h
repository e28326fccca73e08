/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.perf's Python frames walked at the sample by a BPF program
 * (perfpy.bpf.c, see perfpy.h): the program loaded for a session, attached
 * to each CPU's sampling event with that CPU's BPF output event writing
 * into the sampling ring, and the table of CPython processes it walks.
 * Built with the BPF toolchain (PERF_PY_BPF); without it every call
 * answers -EOPNOTSUPP and the frames are read as the rings are drained
 * (perf-python.c). Errors are returned, not logged. */

#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>

#include "profiling/pyframes-proc.h"

struct perf_pybpf;
struct perf_plugin;

/* What the output events' records hold (each record starts with its
 * event's id, as the sampling event's samples then must too). */
#define PERF_PYBPF_SAMPLE_TYPE                                                                                      \
        (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |            \
         PERF_SAMPLE_PERIOD | PERF_SAMPLE_RAW)

#if defined(PERF_PY_BPF) && PERF_PY_BPF
/* Loads the program (libbpf's messages go to pl's log). */
int perf_pybpf_new(struct perf_plugin *pl, struct perf_pybpf **ret);
void perf_pybpf_free(struct perf_pybpf *b);
/* For the sampling event sampling_fd of cpu (opened with attr, not yet
 * enabled): opens the CPU's output event into its ring and attaches the
 * program; the output event's fd and id. */
int perf_pybpf_attach(struct perf_pybpf *b, const struct perf_event_attr *attr, int cpu, int sampling_fd,
                      int *ret_fd, uint64_t *ret_id);
/* Undoes it (the output event's fd is closed). */
void perf_pybpf_detach(struct perf_pybpf *b, int cpu, int fd);
/* The program walks pid's threads as CPython in (NULL: no more). Any
 * thread. */
int perf_pybpf_set(struct perf_pybpf *b, int pid, const struct py_proc_info *in);
/* The time the program ran and how often, as the kernel counts them
 * while kernel.bpf_stats_enabled is set (0 otherwise). */
int perf_pybpf_stats(struct perf_pybpf *b, uint64_t *ret_ns, uint64_t *ret_runs);
#else
static inline int perf_pybpf_stats(struct perf_pybpf *b, uint64_t *ret_ns, uint64_t *ret_runs) {
        (void) b;
        *ret_ns = *ret_runs = 0;
        return -EOPNOTSUPP;
}
static inline int perf_pybpf_new(struct perf_plugin *pl, struct perf_pybpf **ret) {
        (void) pl;
        *ret = NULL;
        return -EOPNOTSUPP;
}
static inline void perf_pybpf_free(struct perf_pybpf *b) {
        (void) b;
}
static inline int perf_pybpf_attach(struct perf_pybpf *b, const struct perf_event_attr *attr, int cpu,
                                    int sampling_fd, int *ret_fd, uint64_t *ret_id) {
        (void) b, (void) attr, (void) cpu, (void) sampling_fd, (void) ret_fd, (void) ret_id;
        return -EOPNOTSUPP;
}
static inline void perf_pybpf_detach(struct perf_pybpf *b, int cpu, int fd) {
        (void) b, (void) cpu, (void) fd;
}
static inline int perf_pybpf_set(struct perf_pybpf *b, int pid, const struct py_proc_info *in) {
        (void) b, (void) pid, (void) in;
        return -EOPNOTSUPP;
}
#endif
