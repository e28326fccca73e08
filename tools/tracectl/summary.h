/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a trace contains, computed packet by packet. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SUMMARY_MAX_CPUS 512
#define SUMMARY_MAX_TYPES 32
#define SUMMARY_MAX_SEQS 4096

struct summary_task {
        int32_t pid;
        int32_t tgid; /* 0: not known */
        char comm[32];
        uint64_t runtime_ns;
        uint64_t switches_in;
};

/* A process: its threads' scheduled time (from sched_switch) and, when
 * the trace has ProcessStats, its CPU time and memory from /proc. */
struct summary_proc {
        int32_t pid;
        char name[32];
        uint64_t sched_ns;
        uint32_t threads;
        bool have_runtime;
        uint64_t runtime_first_ns, runtime_last_ns; /* user + kernel */
        uint64_t rss_kb;
        uint64_t perf_samples, perf_unwind_errors; /* linux.perf */
};

struct summary {
        uint64_t packets;
        uint64_t bytes;
        uint64_t invalid_packets; /* that did not decode */
        struct {
                const char *name;
                uint64_t count;
        } types[SUMMARY_MAX_TYPES];
        size_t n_types;
        struct {
                uint32_t id;
                uint64_t count;
                bool lost;
        } seqs[SUMMARY_MAX_SEQS];
        size_t n_seqs;
        uint64_t packets_after_loss;
        uint64_t ts_min, ts_max;
        uint64_t cpu_events[SUMMARY_MAX_CPUS];
        uint32_t n_cpus;
        uint64_t ftrace_events;
        /* linux.perf: samples with a callstack, without (skipped: out of
         * scope, dropped), with an unwind error; records the kernel lost */
        uint64_t perf_samples, perf_stacks, perf_skipped, perf_unwind_errors, perf_lost;
        uint64_t sched_switches;
        uint64_t prints;
        bool lost_events;
        /* sched accounting */
        uint64_t cpu_last_ts[SUMMARY_MAX_CPUS];
        int32_t cpu_cur_pid[SUMMARY_MAX_CPUS];
        /* A task woken onto an idle CPU: some kernels record no switch
         * from idle to it, so the waking marks when it began to run. */
        int32_t cpu_wake_pid[SUMMARY_MAX_CPUS];
        uint64_t cpu_wake_ts[SUMMARY_MAX_CPUS];
        struct summary_task *tasks;
        size_t n_tasks, cap_tasks;
        struct summary_proc *procs;
        size_t n_procs, cap_procs;
        uint64_t process_stats_samples;
        /* from the last TraceStats packet */
        bool have_stats;
        uint64_t chunks_overwritten, chunks_discarded, abi_violations, stats_invalid_packets, patches_failed;
        uint64_t bytes_written;
        /* from SystemInfo */
        char sysname[64], release[128], machine[64];
        uint32_t processes_in_tree;
        /* from the last FtraceStats (end of trace) */
        bool have_kernel_stats;
        uint64_t kernel_overrun;
};

void summary_init(struct summary *s);
void summary_done(struct summary *s);
/* Adds one serialized TracePacket. */
void summary_add_packet(struct summary *s, const uint8_t *data, size_t len);
/* Sorts tasks by runtime, descending. */
void summary_finish(struct summary *s);
void summary_print(FILE *f, const struct summary *s, size_t top_n);
uint64_t summary_type_count(const struct summary *s, const char *name);
