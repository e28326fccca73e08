/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.bpf_stack inside the plugin: one session per data source instance.
 * bpfstack-ds.c probes the kernel, loads and attaches the BPF programs and
 * ends sessions; bpfstack-drain.c reads the ring buffer into PerfSample
 * packets; bpfstack-hotplug.c keeps the on-CPU clock events across CPU
 * hotplug and writes the unwind counters, both on the drain timer. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/hashmap.h"
#include "bpfstack-config.h"
#include "bpfstack-ds.h"
#include "bpfstack.skel.h"
#include "common/kernel-names.h"
#include "profiling/cpus.h"
#include "profiling/intern.h"
#include "profiling/ksyms.h"
#include "profiling/perf-notes.h"
#include "profiling/symbolizer.h"
#include "profiling/task-names.h"
#include "unwind-counters.h"
#include "unwind-pending.h"
#include "unwind-tables.h"

#define MAX_CPUS 1024
/* Under $CACHE_DIRECTORY: the compiled unwind tables. */
#define UNWIND_CACHE_SUBDIR "bpfstack-unwind"
#define REFRESH_SLOTS 64
/* What an on-CPU sample weighs against an off-CPU one when tables are
 * queued (a tick of CPU time against a switch-out). */
#define BPFSTACK_ON_CPU_HEAT 64u
#define BPFSTACK_WARMUP_DRAIN_MS 10u
#define BPFSTACK_WARMUP_NS 1000000000u
/* Callstacks already interned, by (kind, pid, stack ids): most records
 * repeat a stack, and a hit saves two map lookups (system calls) and the
 * symbolization. Emptied whenever a stack id may change meaning (stacks
 * deleted from the map) or the interned ids do (intern state cleared). */
#define CS_CACHE_SIZE 4096u

/* One packet sequence: on-CPU or off-CPU. */
struct seq {
        struct traced_writer *writer;
        struct intern_writer *iw;
        uint8_t defaults[128]; /* serialized TracePacketDefaults */
        size_t defaults_len;
};

struct bpfstack_session {
        struct plugin_instance inst; /* first: the plugin's list, by instance id */
        struct bpfstack_plugin *pl;
        struct bpfstack_config cfg;

        struct bpfstack *skel;
        /* On-CPU: the clock event of each possible CPU (by CPU number;
         * -EBADF where there is none: offline, or off-CPU only). */
        int perf_fds[MAX_CPUS];
        struct bpf_link *perf_links[MAX_CPUS];
        struct cpu_hotplug hotplug; /* the clock events across CPU hotplug */
        uint32_t n_possible;
        size_t n_cpus; /* events open */
        struct bpf_link *switch_link, *exec_link, *exit_link;
        struct unwind_tables *tables;
        char cache_dir[256]; /* the tables' cache on disk; empty: none */
        struct pending_loads pending; /* processes whose walks asked for tables */
        /* A drain that loads consumes the ring in slices (slice_end:
         * CLOCK_MONOTONIC ns, 0 when not slicing): a process's first
         * records get its files queued for compiling at once, not after
         * every record waiting behind them is symbolized. */
        uint64_t slice_end;
        bool asked;                        /* a process asked for tables since the last load */
        uint64_t loads_paused_until;       /* CLOCK_MONOTONIC ns: the process map was full */
        uint64_t stops[BPFSTACK_STOP_MAX]; /* walked records by how the walk ended */
        /* The unwind counters' sequence: descriptors, then values each
         * second while they change. */
        struct traced_writer *counters_writer;
        uint64_t counters_uuid, counters_next_ns;
        int64_t counters_sent[UNWIND_COUNTER_MAX];
        bool counters_described;
        struct ring_buffer *rb;
        struct traced_source *rb_src, *timer, *tables_src;
        /* For the recording's first second, a drain every
         * BPFSTACK_WARMUP_DRAIN_MS: the processes sampled first get their
         * tables queued without waiting for the drain period. */
        struct traced_source *warmup_timer;
        uint64_t warmup_end; /* CLOCK_MONOTONIC ns */

        struct proc_table *procs;
        /* The kernel's notes on processes (exec, mmap, fork, exit), applied
         * to procs up to each record's time; NULL when refused (the maps
         * then come from /proc alone, read when a process is sampled). */
        struct perf_notes *notes;
        struct traced_source *notes_src;
        struct task_names names; /* comms written, from the records */
        struct elf_cache *elves;
        /* Kernel frames: named on demand, or (without the program that
         * names them) from /proc/kallsyms read whole. */
        struct kernel_names *knames;
        struct ksyms *ksyms;
        struct symbolizer sym;
        struct seq on, off;

        uint64_t *stack_buf; /* max_depth frames */
        /* Stack ids seen since the last collection (a set of at most
         * seen_max); collected when it holds a quarter of the map's
         * entries. */
        struct hashmap seen_ids;
        size_t seen_max;
        bool collecting;
        int refreshed[REFRESH_SLOTS]; /* pids whose maps were read again this drain */
        size_t n_refreshed;

        struct cs_cache_entry {
                uint32_t pid;
                int32_t kstack_id, ustack_id;
                uint8_t kind;
                bool used;
                uint64_t uhash; /* walked user frames: their hash */
                uint64_t leaf;  /* the innermost user frame, or 0 */
                uint64_t callstack;
        } * cs_cache;
        uint64_t cs_hits, cs_misses;

        uint64_t counters_seen[BPFSTACK_CNT_MAX];
        uint64_t lost_unreported;
        uint64_t samples_on, samples_off, blocked_ns, bad_records, stacks_missing, procs_gone, stacks_collected;
        uint64_t packets_dropped; /* writes refused (shared memory full): interning started over */
        /* CPython frames (bpfstack-python.c) */
        uint64_t py_procs, py_unknown, py_map_full, py_samples, py_codes_read, py_code_unreadable;
        uint64_t py_stops[BPFSTACK_PY_MAX];
};

/* bpfstack-drain.c */
/* TracePacketDefaults {timestamp_clock_id: BOOTTIME, perf_sample_defaults
 * {timebase}} for a sequence (timebase: a serialized PerfEvents.Timebase). */
int bpfstack_seq_defaults(struct seq *q, const void *timebase, size_t timebase_len);
/* The ring buffer's callback: one record. */
int bpfstack_on_record(void *ctx, void *data, size_t size);
/* Reads the ring buffer and the counters, loads the unwind tables asked
 * for (when load: not on a flush or a stop, which answer at once), and
 * keeps the caches bounded. */
void bpfstack_drain(struct bpfstack_session *s, bool load);
void bpfstack_on_ring(int fd, uint32_t revents, void *userdata);
/* Starts the warm-up timer (sampling has begun). */
int bpfstack_warmup_start(struct bpfstack_session *s);
/* The warm-up timer: a drain, and its own removal after the first second. */
void bpfstack_on_warmup(void *userdata);
/* Tables compiled: taken in, and the processes waiting for them loaded. */
void bpfstack_on_tables(int fd, uint32_t revents, void *userdata);
/* The notes' rings filling up: read into their queue. */
void bpfstack_on_notes(int fd, uint32_t revents, void *userdata);
/* Both sequences forget what they interned: their next packets carry
 * SEQ_INCREMENTAL_STATE_CLEARED and intern (emit) anew what they use. */
void bpfstack_clear_interned(struct bpfstack_session *s);

/* bpfstack-python.c */
/* Process pid sampled: looked at once per exec, its py_procs entry
 * written when it runs a CPython we know. */
void bpfstack_py_seen(struct bpfstack_session *s, uint32_t pid);
/* The CPython processes running now (by their executable). */
void bpfstack_py_scan(struct bpfstack_session *s);
/* Frees a process's state (the process table's free_userdata). */
void bpfstack_py_proc_free(void *userdata);
/* The interned user frames of a sample into out, outermost first: the
 * native frames (user, innermost first) with the Python frames (py)
 * in place of the interpreter's evaluation frames when p runs a CPython
 * we know. out has room for n_user + n_py frames. Returns the count. */
size_t bpfstack_py_user_frames(struct bpfstack_session *s, struct intern_writer *iw, struct proc_info *p,
                               const uint64_t *user, size_t n_user, const struct bpfstack_pyframe *py, size_t n_py,
                               uint64_t *out);

/* bpfstack-prewarm.c */
/* Queues the files of the processes running now for compiling, and the
 * processes for loading (s->tables made, the maps not yet). */
void bpfstack_prewarm(struct bpfstack_session *s);

/* bpfstack-hotplug.c */
extern const struct cpu_hotplug_ops bpfstack_hotplug_ops;
/* The clock event of cpu with the on-CPU program attached. -ENODEV when
 * the CPU is offline. */
int bpfstack_open_cpu(struct bpfstack_session *s, uint32_t cpu);
void bpfstack_close_cpu(struct bpfstack_session *s, size_t cpu);
/* The unwind counters, at most once a second unless final. */
void bpfstack_write_counters(struct bpfstack_session *s, bool final);
void bpfstack_on_timer(void *userdata);
/* CLOCK_BOOTTIME in ns: the records' clock. */
uint64_t bpfstack_boottime_ns(void);
