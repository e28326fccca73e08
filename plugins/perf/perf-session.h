/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.perf inside the plugin: one session per data source instance.
 * Per-CPU perf_event rings are drained on the plugin's loop (on a timer
 * and when a ring passes its wake-up watermark) into a bounded queue
 * (perf-queue.h); a worker thread unwinds, symbolizes, interns and writes
 * the packets. The ring reader never waits for the worker: a sample that
 * does not fit in the queue is written as a skipped sample
 * (PROFILER_SKIP_UNWIND_ENQUEUE), and one that finds the queue at its item
 * bound, with no room even for that note, is only counted, on a counter
 * track of its CPU.
 *
 * perf-ds.c opens the events and their rings, starts, flushes and stops
 * sessions; perf-drain.c is the loop thread's side: the rings into the
 * queue, and the rings across CPU hotplug; perf-worker.c is the worker
 * thread: unwinding and the packets, the counter tracks among them. */

#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "perf-config.h"
#include "perf-ds.h"
#include "common/kernel-names.h"
#include "perf-pybpf.h"
#include "perf-queue.h"
#include "basic/hashmap.h"
#include "profiling/cpus.h"
#include "profiling/perf-notes.h"
#include "profiling/perf-record.h"
#include "profiling/pyframes-walk.h"
#include "profiling/symbolizer.h"
#include "profiling/task-names.h"

#define MAX_CPUS 1024
#define SCOPE_SLOTS 16384u /* a power of two */
#define FRAME_CACHE_SLOTS (1u << 16) /* a power of two */

/* PerfSample.SampleSkipReason */
#define SKIP_NONE 0
#define SKIP_UNWIND_STAGE 2
#define SKIP_UNWIND_ENQUEUE 3
#define SKIP_NOT_IN_SCOPE 4

/* The counter tracks the worker writes, one per kind and CPU (see
 * perf-worker.c). */
enum counter_kind { COUNTER_THROTTLES, COUNTER_DROPPED, _COUNTER_KIND_MAX };

struct cpu_ring {
        struct perf_session *s;
        int cpu;
        int fd;
        uint8_t *base;
        size_t mmap_size;
        uint8_t *data;
        uint64_t data_size;
        struct traced_source *src;
        uint64_t count; /* sum of the periods sampled: the timebase counter */
        uint8_t *scratch; /* a record that wraps the ring's end, made whole */
        uint64_t throttles;
        /* Samples of this CPU that found the queue at its item bound: the
         * loop thread (the only writer) counts them and when the last one
         * was taken; the worker writes the count into the trace. */
        atomic_uint_fast64_t dropped, dropped_time;
        uint64_t dropped_written; /* worker: the count last written */
        /* The Python frames walked by BPF at the sample (perf-pybpf.h):
         * the CPU's output event (-EBADF: none) and its id, and the frames
         * its last record holds, waiting for the sample after it. */
        int py_fd;
        uint64_t py_id;
        struct perf_py_pending *py_pending;
};

/* pc -> interned frame, per process and state of its maps, valid for one
 * interning epoch: most samples hit the same few addresses. */
struct frame_slot {
        uint64_t pc;
        int32_t pid; /* -1: kernel */
        uint32_t maps_version, generation, epoch;
        int8_t is_eval; /* -1: not known yet; else whether it is in CPython's evaluation function */
        uint64_t iid;
};

struct scope_slot {
        int32_t pid; /* 0: free */
        uint8_t state; /* 0 unknown, 1 in scope, 2 out, 3 out for now: no command line read */
        uint64_t read_at; /* state 3: the time of the sample it was read for */
};

/* CPython processes whose samples get their Python frames read (the
 * worker sets them, the loop thread reads them; perf-python.c). */
#define PERF_PY_PIDS 256
struct perf_py_pid {
        int32_t pid; /* 0: free */
        uint64_t runtime;
        const struct py_layout *layout;
};

/* What follows a sample's record in its item (PERF_ITEM_EXTRA), then n
 * pairs (code object | PY_FRAME_ENTRY, last instruction). */
struct perf_py_trailer {
        uint8_t result; /* enum py_walk_result */
        bool has_copy;
        uint32_t n, entries, checked;
};

/* A BPF record's frames (perfpy.h), for the sample right after it in its
 * ring (loop thread). */
struct perf_py_pending {
        bool valid;
        uint8_t stop; /* enum bpfstack_py_stop */
        uint32_t tid, n;
        uint64_t frames[2 * PY_WALK_MAX_FRAMES];
};
/* The drains for the Python frames: every 3 ms at 500 Hz or more per
 * CPU, every 5 ms below (or with a period), where drains would otherwise
 * outnumber samples and their wake-ups cost more than the samples. */
#define PERF_PY_DRAIN_MS 3u
#define PERF_PY_DRAIN_SLOW_MS 5u
#define PERF_PY_DRAIN_FAST_HZ 500u
/* Items those drains batch before they hand them to the worker. */
#define PERF_PY_HOLD_ITEMS 512u
/* Items the drains a ring's watermark wakes the loop for batch before
 * they hand them over (or a quarter of the queue's byte bound; the read
 * period's drain, a flush and the stop hand over whatever there is): the
 * worker, woken by each hand-over it waits for, then wakes some 25 times a
 * second at 999 Hz on 2 CPUs rather than at every watermark (77), each
 * wake-up of a thread costing tens of microseconds on a virtual machine;
 * the samples wait at most a read period longer. */
#define PERF_RING_HOLD_ITEMS 128u
/* Bytes a sample of a Python process is allocated with past its record
 * for the frames read with it: its trailer and 30 frames (more: a copy). */
#define PERF_PY_ROOM (sizeof(struct perf_py_trailer) + 30u * 2u * sizeof(uint64_t))
#define PERF_PY_MAX_NATIVE 256 /* native frames a Python sample's merge looks at */
#define PERF_PY_NOTES 16        /* processes looked at, to be logged by the loop thread */

/* A CPython process the worker looked at, for the loop thread to log
 * (the worker does not log). */
struct perf_py_note {
        int32_t pid;
        uint8_t kind; /* enum py_kind */
        unsigned major, minor;
        uint64_t runtime;
        bool code_type;
        char path[256];
};
#define PERF_PY_COUNTERS 7
#define PERF_PY_FRAME_SLOTS 4096u /* a power of two */

/* A Python frame's interned frame (perf-python.c), valid for one epoch. */
struct perf_py_frame_slot {
        uint64_t code, instr;
        int32_t pid;
        uint32_t generation, epoch;
        uint64_t iid;
};

struct perf_session {
        struct plugin_instance inst; /* first: the plugin's list, by instance id */
        struct perf_plugin *pl;
        struct perf_config cfg;
        struct perf_layout layout;
        struct cpu_ring *rings;
        size_t n_rings;
        struct cpu_hotplug hotplug; /* the rings' events across CPU hotplug */
        /* The kernel's notes on processes (exec, mmap, fork, exit) in rings
         * of their own, where samples never crowd them out; the worker's,
         * applied to procs up to each sample's time. NULL when refused:
         * the sampling rings carry them then. */
        struct perf_notes *notes;
        /* worker: per counter track kind and CPU, the epoch the track was
         * described in (0: not yet) */
        uint32_t *track_epoch;
        struct traced_source *timer;
        struct traced_writer *writer;
        struct scope_slot *scope;
        size_t scope_used;
        uint32_t additional_left;

        struct perf_queue q;
        bool queue_ready;
        bool stopping;      /* loop thread: the last drain, which takes everything left in the rings */
        pthread_mutex_t mu; /* guards the flush counts */
        pthread_cond_t done_cv;
        uint64_t flush_asked, flush_done;
        pthread_t worker;
        bool worker_started;
        bool write_error_logged; /* loop thread */

        /* the worker's */
        struct proc_table *procs;
        struct task_names names; /* comms written (PERF_RECORD_COMM) */
        struct elf_cache *elves;
        struct ksyms *ksyms;       /* /proc/kallsyms whole, when ksym cannot be */
        struct kernel_names *ksym;    /* kernel addresses named on demand */
        struct symbolizer sym;
        struct unwinder *unw;
        struct intern_writer *iw;
        uint64_t last_clear, last_reap, last_py_counters, latest_time;
        unsigned items_untimed; /* items since the worker last read the clock */
        struct frame_slot *frames;
        uint32_t epoch; /* bumped with every intern_clear */
        uint64_t dropped_written;           /* the total of dropped samples last written */
        atomic_uint_fast64_t stop_deadline; /* now_ms() after which samples are not unwound; 0: none */
        /* ClearIncrementalState requests (the loop thread counts them) and
         * those the worker carried out */
        atomic_uint_fast64_t clears_asked;
        uint64_t clears_done;

        /* CPython (perf-python.c): the table, and whether it ever held a
         * process (the loop thread's test before it takes the lock) */
        pthread_mutex_t py_mu;
        struct perf_py_pid py_pids[PERF_PY_PIDS];
        size_t py_n;
        atomic_bool py_any;
        struct perf_py_note py_notes[PERF_PY_NOTES]; /* under py_mu */
        size_t py_n_notes, py_notes_lost;
        struct traced_source *py_timer; /* loop thread: the drains every PERF_PY_DRAIN_MS */
        size_t hold_items; /* loop thread: in a drain that hands over only from this many items on (0: any) */
        bool rings_quiet;               /* loop thread: the rings' fds out of the loop while those drains run */
        struct py_walk *py_walk;        /* loop thread: the walk's pages and frames */
        /* The BPF program walking the Python frames at the sample (NULL:
         * they are read as the rings are drained), and the layout of its
         * output events' records. */
        struct perf_pybpf *py_bpf;
        struct perf_layout py_layout;
        atomic_uint_fast64_t py_bpf_records, py_bpf_set_errors;
        atomic_uint_fast64_t py_reads;  /* loop thread: reads of processes' memory */
        /* the worker's: pid -> its state; counters, as last written */
        struct hashmap py_states;
        struct perf_py_frame_slot *py_frames; /* PERF_PY_FRAME_SLOTS, allocated with the first CPython met */
        uint64_t py_procs, py_unknown, py_samples, py_moved, py_no_thread, py_unreadable, py_late;
        uint64_t py_written[PERF_PY_COUNTERS];
        uint32_t py_epoch[PERF_PY_COUNTERS];

        /* counters (any thread) */
        atomic_uint_fast64_t samples, unwound, unwind_errors, skipped_enqueue, skipped_scope, skipped_stop, lost,
                throttles, bad_records, dropped;
        atomic_uint_fast64_t scanned; /* processes whose maps the worker read as it started */
        /* what the writer refused (packets, flushes) and the first error */
        atomic_uint_fast64_t write_errors, flush_errors;
        atomic_int first_write_error;
};

static inline uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* perf-ds.c */
/* The event of ring->cpu with attr, and its ring mapped. On failure what
 * was opened stays in ring for perf_close_ring. */
int perf_open_ring(struct perf_session *s, struct perf_event_attr *attr, struct cpu_ring *ring);
/* Takes the ring off the loop, unmaps it and closes its event. */
void perf_close_ring(struct perf_session *s, struct cpu_ring *ring);

/* perf-drain.c (the loop thread) */
/* What the ring holds, into the queue: until the queue is congested, or
 * all of it when s->stopping. */
void perf_drain_ring(struct cpu_ring *ring);
void perf_drain_all(struct perf_session *s);
/* The loop's callbacks: a ring past its watermark (userdata: the ring),
 * and the read period (userdata: the session). */
void perf_on_ring(int fd, uint32_t revents, void *userdata);
void perf_on_timer(void *userdata);
extern const struct cpu_hotplug_ops perf_hotplug_ops;

/* perf-python.c */
/* Loop thread: the sample's item, with its thread's Python frames after
 * the record when its process is a known CPython's (it may move: the
 * item returned replaces it). r: the record parsed from it. */
struct perf_item *perf_py_attach(struct perf_session *s, struct cpu_ring *ring, struct perf_item *it,
                                 const struct perf_record *r);
/* Loop thread: a record of ring's BPF output event (rec, len bytes): its
 * frames wait for the sample after it. */
void perf_py_take_record(struct perf_session *s, struct cpu_ring *ring, const uint8_t *rec, size_t len);
/* Loop thread: logs the CPython processes the worker looked at since. */
void perf_py_log(struct perf_session *s);
/* Loop thread: the drain timer of the Python frames, started while the
 * table holds a process, stopped when it does not. */
void perf_py_timer_check(struct perf_session *s);
/* Worker: the processes running a CPython executable, looked at. */
void perf_py_scan(struct perf_session *s);
/* Worker: the user frames of a sample, root first, into out (at most cap):
 * native[k] the interned frame of user[k] (innermost first), with the
 * Python frames the item carries in place of the evaluation frames when
 * they match; counts what it did. */
size_t perf_py_user_frames(struct perf_session *s, const struct perf_item *it, struct proc_info *p,
                           const uint64_t *user, const uint64_t *native, size_t n_user, uint64_t *out, size_t cap);
/* Worker: forgets the processes the table dropped; frees all. */
void perf_py_reap(struct perf_session *s);
void perf_py_free(struct perf_session *s);
/* Worker: the counters that moved, into the trace. */
void perf_py_write_counters(struct perf_session *s);

/* perf-worker.c */
/* Whether user address pc of p (a return address less one but for the
 * innermost) is in CPython's evaluation function; kept with the frame. */
bool perf_frame_is_eval(struct perf_session *s, const struct proc_info *p, uint64_t pc);
/* A counter track of the session (described once per interning epoch,
 * *epoch the one it was last described in) and its value at time. */
void perf_write_counter_track(struct perf_session *s, uint64_t uuid, const char *name, uint32_t *epoch, uint64_t time,
                              uint64_t value);
/* The worker thread (userdata: the session): until it pops PERF_ITEM_STOP. */
void *perf_worker_main(void *userdata);
