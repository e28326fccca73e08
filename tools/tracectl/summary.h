/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a trace contains, computed packet by packet. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "name-history.h"
#include "stack-walks.h"
#include "summary-syscalls.h"
#include "journald-view.h"

#define SUMMARY_MAX_CPUS 512
#define SUMMARY_MAX_TYPES 32
#define SUMMARY_MAX_SEQS 4096
#define SUMMARY_SNAPSHOT_MAX_PROCS 8
#define SUMMARY_SNAPSHOT_MAX_UNITS 256
#define SUMMARY_MAX_WAKES (8u * 1024u * 1024u)

struct summary_task {
        int32_t pid;
        int32_t tgid; /* 0: not known */
        char comm[32];
        uint64_t comm_ts; /* of the process tree entry that named it */
        uint64_t runtime_ns;
        uint64_t switches_in;
};

/* A process: its threads' scheduled time (from sched_switch) and, when
 * the trace has ProcessStats, its CPU time and memory from /proc. */
struct summary_proc {
        int32_t pid;
        char name[32];
        struct name_history names; /* process tree entries: name is the one of its last sample */
        uint64_t last_sample_ts;
        uint64_t sched_ns;
        uint32_t threads;
        bool have_runtime;
        uint64_t runtime_first_ns, runtime_last_ns; /* user + kernel */
        uint64_t rss_kb;
        uint64_t perf_samples, perf_unwind_errors; /* linux.perf */
        /* android.heapprofd: dumps of its heaps, and what the last says */
        uint64_t heap_dumps, heap_samples, heap_dropped, heap_unwind_errors;
        bool heap_overran, heap_corrupted;
};

#define SUMMARY_MAX_DS_ERRORS 8

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
                bool bpf; /* linux.bpf_stack's (by its timebase's name) */
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
        uint64_t heap_dumps; /* ProcessHeapSamples (android.heapprofd) */
        struct stack_walks walks; /* how the user stacks were walked */
        struct syscall_stats syscalls; /* raw_syscalls or syscalls/ events */
        uint64_t sched_switches;
        uint64_t prints;
        bool lost_events;
        /* sched accounting */
        uint64_t cpu_last_ts[SUMMARY_MAX_CPUS];
        int32_t cpu_cur_pid[SUMMARY_MAX_CPUS];
        /* Switches that found another task than the one last switched
         * in: the kernel recorded no switch in (this happens for tasks
         * woken onto an idle CPU, seen on 6.x kernels), or events were
         * lost. Each is resolved after the last packet from the wakings
         * targeting that CPU (bundles of different CPUs are not in time
         * order, so a waking may come later in the file). */
        struct summary_gap {
                uint64_t start, end;
                uint64_t first_own; /* first event on that CPU after start, else end */
                int32_t pid; /* -1: not recorded (compact sched) */
                uint32_t cpu;
        } *gaps;
        size_t n_gaps, cap_gaps;
        struct summary_wake {
                uint64_t ts;
                int32_t pid;
                uint32_t cpu;
        } *wakes;
        size_t n_wakes, cap_wakes;
        uint64_t wakes_dropped;         /* beyond SUMMARY_MAX_WAKES */
        uint64_t gaps_from_waking;      /* resolved by a waking */
        uint64_t gaps_unattributed_ns;  /* no task known */
        uint64_t gaps_upper_ns, gaps_lower_ns; /* from the waking; from the first event on the CPU */
        uint64_t cpu_first_event[SUMMARY_MAX_CPUS];
        struct summary_task *tasks;
        size_t n_tasks, cap_tasks;
        struct summary_proc *procs;
        size_t n_procs, cap_procs;
        uint64_t process_stats_samples;
        struct journald_counts journald; /* linux.systemd_journald */
        uint64_t ps_first_ts, ps_last_ts; /* the window "/proc cpu ms" covers */
        /* The session's start (its service events): when tracing started,
         * when every data source had (0: not in the trace), and the data
         * sources the service named as slow to start. */
        uint64_t tracing_started_ts, all_started_ts;
        uint32_t slow_starting;
        /* from the last TraceStats packet */
        bool have_stats;
        /* The last TraceStats' data source errors, as tracectl prints them. */
        char ds_errors[SUMMARY_MAX_DS_ERRORS][256];
        size_t n_ds_errors, n_ds_errors_total;
        uint64_t chunks_overwritten, chunks_discarded, abi_violations, stats_invalid_packets, patches_failed;
        /* Packets their writers gave up after handing some of them over
         * (TraceStats.BufferStats.trace_writer_packet_loss). */
        uint64_t writer_packet_loss;
        uint64_t bytes_written, chunks_written; /* chunks producers committed, headers included */
        int end_reason; /* traced_end_reason: why the session ended early (0: it did not) */
        /* from SystemInfo */
        char sysname[64], release[128], machine[64];
        uint32_t processes_in_tree;
        /* linux.sys_stats (summary-sys.c): values per kind, MemFree's range */
        struct summary_sys {
                uint64_t packets, meminfo, vmstat, cpu_times, cpufreq, other;
                uint64_t mem_free_min_kb, mem_free_max_kb;
                bool have_mem_free;
                /* linux.system_info: CPUs, the first one's name */
                uint32_t cpus;
                char cpu_name[96];
        } sys;
        /* from the last FtraceStats (end of trace) */
        bool have_kernel_stats;
        uint64_t kernel_overrun;
        /* FtraceCpuStats.traced_reader per CPU: 0 not said, 1 read(), 2 mapped, 3 spliced */
        uint8_t cpu_reader[SUMMARY_MAX_CPUS];
        /* tracectl snapshot's TracedSnapshot packet, and the journal's
         * units, to name the failed unit's lines (summary-snapshot.c). */
        struct summary_snapshot {
                bool have;
                char session[128], unit[256], active_state[32], result[64], invocation_id[40], error[256];
                int64_t snapshot_ns, failed_ns;
                int32_t main_pid, exit_code, exit_status;
                bool have_main_pid, have_exit;
                struct summary_unit_lines {
                        char unit[128];
                        uint64_t lines;
                        struct {
                                uint32_t pid;
                                char comm[32];
                        } procs[SUMMARY_SNAPSHOT_MAX_PROCS];
                        size_t n_procs;
                } *units;
                size_t n_units;
        } snap;
};

/* The name a process tree entry shows for cmdline[0]: the last
 * component of an executable's path; a kernel thread's name (its comm
 * standing in, "kworker/u8:0") whole. */
void summary_cmdline_name(const char *argv0, bool is_comm, int32_t ppid, char *buf, size_t size);

void summary_init(struct summary *s);
void summary_done(struct summary *s);
/* Adds one serialized TracePacket. */
void summary_add_packet(struct summary *s, const uint8_t *data, size_t len);
/* Sorts tasks by runtime, descending. */
void summary_finish(struct summary *s);
void summary_print(FILE *f, const struct summary *s, size_t top_n);
/* The heap profiles' processes, samples and drops (summed over the last
 * dump of each process). */
struct summary_heap {
        uint64_t processes, samples, dropped, unwind_errors, overran, corrupted;
};
void summary_heap_totals(const struct summary *s, struct summary_heap *ret);
uint64_t summary_type_count(const struct summary *s, const char *name);

struct Perfetto__Protos__SysStats;
struct Perfetto__Protos__CpuInfo;
/* summary-sys.c: the sys_stats and cpu_info packets, and their lines. */
void summary_add_sys_stats(struct summary *s, const struct Perfetto__Protos__SysStats *st);
void summary_add_cpu_info(struct summary *s, const struct Perfetto__Protos__CpuInfo *ci);
void summary_print_sys(FILE *f, const struct summary *s);
/* summary-session.c: when the data sources started; the service's
 * statistics and the data source errors. */
void summary_print_start(FILE *f, const struct summary *s);
void summary_print_session(FILE *f, const struct summary *s);
struct Perfetto__Protos__TracedSnapshot;
/* summary-snapshot.c: tracectl snapshot's packet, the journal's units. */
void summary_add_snapshot(struct summary *s, const struct Perfetto__Protos__TracedSnapshot *p);
void summary_add_journal_unit(struct summary *s, const Perfetto__Protos__SystemdJournaldEvent *e);
void summary_print_snapshot(FILE *f, const struct summary *s);
void summary_snapshot_done(struct summary *s);
