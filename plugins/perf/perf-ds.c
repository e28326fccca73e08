/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf: per-CPU perf_event rings drained on the plugin's loop (on a
 * timer and when a ring passes its wake-up watermark) into a bounded queue
 * (perf-queue.h); a worker thread unwinds, symbolizes, interns and writes
 * the packets. The ring reader never waits for the worker: a sample that
 * does not fit in the queue is written as a skipped sample
 * (PROFILER_SKIP_UNWIND_ENQUEUE), and one that finds the queue at its item
 * bound, with no room even for that note, is only counted, on a counter
 * track of its CPU. */

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbw.h"
#include "perf-config.h"
#include "perf-ds.h"
#include "perf-queue.h"
#include "perf-record.h"
#include "profiling/cpus.h"
#include "profiling/intern.h"
#include "profiling/ksyms.h"
#include "profiling/procmaps.h"
#include "profiling/symbolizer.h"
#include "profiling/unwind.h"

#define MAX_CPUS 1024
#define MAX_FRAMES 256
#define SCOPE_SLOTS 16384u /* a power of two */
#define REAP_DELAY_NS (5ull * 1000000000ull)
#define INTERN_MEMORY_BOUND (128u << 20)
#define FLUSH_WAIT_MS 5000
#define FRAME_CACHE_SLOTS (1u << 16) /* a power of two */
/* At stop, what the worker has not unwound after this long is written as
 * skipped (the plugin host's loop waits for the worker meanwhile). */
#define STOP_UNWIND_MS 3000

/* PerfSample.SampleSkipReason */
#define SKIP_NONE 0
#define SKIP_UNWIND_STAGE 2
#define SKIP_UNWIND_ENQUEUE 3
#define SKIP_NOT_IN_SCOPE 4

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
};

/* pc -> interned frame, per process and state of its maps, valid for one
 * interning epoch: most samples hit the same few addresses. */
struct frame_slot {
        uint64_t pc;
        int32_t pid; /* -1: kernel */
        uint32_t maps_version, generation, epoch;
        uint64_t iid;
};

struct scope_slot {
        int32_t pid; /* 0: free */
        uint8_t state; /* 0 unknown, 1 in scope, 2 out */
};

struct perf_session {
        struct perf_session *next;
        struct perf_plugin *pl;
        uint64_t instance_id;
        struct perf_config cfg;
        struct perf_layout layout;
        struct cpu_ring *rings;
        size_t n_rings;
        struct cpu_hotplug hotplug; /* the rings' events across CPU hotplug */
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
        struct elf_cache *elves;
        struct ksyms *ksyms;
        struct symbolizer sym;
        struct unwinder *unw;
        struct intern_writer *iw;
        struct pbw pkt;
        uint64_t last_clear, last_reap, latest_time;
        struct frame_slot *frames;
        uint32_t epoch; /* bumped with every intern_clear */
        uint64_t dropped_written;           /* the total of dropped samples last written */
        atomic_uint_fast64_t stop_deadline; /* now_ms() after which samples are not unwound; 0: none */

        /* counters (any thread) */
        atomic_uint_fast64_t samples, unwound, unwind_errors, skipped_enqueue, skipped_scope, skipped_stop, lost,
                throttles, bad_records, dropped;
        /* what the writer refused (packets, flushes) and the first error */
        atomic_uint_fast64_t write_errors, flush_errors;
        atomic_int first_write_error;
};

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* ---- scope (loop thread) ---- */

static struct scope_slot *scope_slot(struct perf_session *s, int pid) {
        if (s->scope_used * 2 >= SCOPE_SLOTS) {
                memset(s->scope, 0, SCOPE_SLOTS * sizeof(*s->scope));
                s->scope_used = 0;
        }
        for (size_t i = ((uint32_t) pid * 2654435761u) & (SCOPE_SLOTS - 1);; i = (i + 1) & (SCOPE_SLOTS - 1)) {
                if (s->scope[i].pid == pid)
                        return &s->scope[i];
                if (s->scope[i].pid == 0) {
                        s->scope[i].pid = pid;
                        s->scope_used++;
                        return &s->scope[i];
                }
        }
}

static void scope_forget(struct perf_session *s, int pid) {
        if (pid > 0)
                scope_slot(s, pid)->state = 0;
}

static bool in_scope(struct perf_session *s, int pid) {
        const struct perf_config *c = &s->cfg;
        if (!c->n_target_pid && !c->n_target_cmdline && !c->additional_cmdline_count && !c->n_exclude_pid &&
            !c->n_exclude_cmdline)
                return true;
        if (pid <= 0)
                return false;
        struct scope_slot *slot = scope_slot(s, pid);
        if (slot->state)
                return slot->state == 1;
        char path[64], cmdline[512] = "";
        snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, cmdline, sizeof(cmdline) - 1);
                cmdline[n > 0 ? n : 0] = '\0';
                close(fd);
        }
        bool in = perf_config_in_scope(c, pid, cmdline, &s->additional_left);
        slot->state = in ? 1 : 2;
        return in;
}

/* ---- ring reading (loop thread) ---- */

/* A sample that finds the queue at its item bound leaves no item behind:
 * its CPU's count of dropped samples stands for it in the trace. */
static void drop_sample(struct perf_session *s, struct cpu_ring *ring, uint64_t time) {
        /* The loop thread is the only writer of both: plain stores will do. */
        atomic_store_explicit(&ring->dropped_time, time, memory_order_relaxed);
        atomic_store_explicit(&ring->dropped, atomic_load_explicit(&ring->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        /* Released after the CPU's count: the worker reads the total first. */
        atomic_fetch_add_explicit(&s->dropped, 1, memory_order_release);
}

/* A sample written without unwinding. Returns -ENOMEM or -ENOBUFS (queue
 * at its item bound) when it could not be queued. */
static int note(struct perf_session *s, const struct perf_record *r, struct cpu_ring *ring, uint8_t reason) {
        struct perf_item *it = perf_item_new(PERF_ITEM_NOTE, 0);
        if (!it)
                return -ENOMEM;
        it->reason = reason;
        it->misc = r->misc;
        it->cpu = (uint32_t) ring->cpu;
        it->pid = r->u.sample.pid;
        it->tid = r->u.sample.tid;
        it->time = r->u.sample.time;
        it->count = ring->count;
        int ret = perf_queue_push(&s->q, it);
        if (ret < 0)
                free(it);
        return ret;
}

/* Takes it, the copy of a sample: queued to be unwound, or replaced by a
 * note, or counted as dropped when not even a note can be queued. */
static void take_sample(struct perf_session *s, struct cpu_ring *ring, struct perf_item *it,
                        const struct perf_record *r) {
        atomic_uint_fast64_t *counter = NULL;
        uint8_t reason = SKIP_NONE;
        it->kind = PERF_ITEM_SAMPLE;
        it->count = ring->count;
        if (s->cfg.callstacks) {
                if (!in_scope(s, (int) r->u.sample.pid)) {
                        counter = &s->skipped_scope;
                        reason = SKIP_NOT_IN_SCOPE;
                } else if (perf_queue_push(&s->q, it) >= 0)
                        return;
                else {
                        counter = &s->skipped_enqueue;
                        reason = SKIP_UNWIND_ENQUEUE;
                }
        }
        free(it);
        if (note(s, r, ring, reason) < 0)
                drop_sample(s, ring, r->u.sample.time);
        else if (counter)
                (*counter)++;
}

/* The kernel's bookkeeping is never refused by the queue (see
 * perf-queue.h); were it, it would be freed here, not leaked. */
static void push_bookkeeping(struct perf_session *s, struct perf_item *it) {
        if (perf_queue_push(&s->q, it) < 0)
                free(it);
}

/* Takes it (a copied record). */
static void handle_record(struct perf_session *s, struct cpu_ring *ring, struct perf_item *it) {
        struct perf_record r;
        if (perf_record_parse(it->rec, it->len, &s->layout, &r) < 0) {
                s->bad_records++;
                free(it);
                return;
        }
        it->cpu = (uint32_t) ring->cpu;
        switch (r.kind) {
        case PERF_REC_SAMPLE:
                s->samples++;
                ring->count += r.u.sample.period;
                take_sample(s, ring, it, &r);
                return;
        case PERF_REC_COMM:
                if (r.u.comm.exec)
                        scope_forget(s, (int) r.u.comm.pid);
                break;
        case PERF_REC_FORK:
        case PERF_REC_EXIT:
                if (r.u.task.pid == r.u.task.tid)
                        scope_forget(s, (int) r.u.task.pid);
                break;
        case PERF_REC_MMAP2:
                break;
        case PERF_REC_LOST:
        case PERF_REC_LOST_SAMPLES:
                s->lost += r.u.lost.lost;
                it->kind = PERF_ITEM_LOST;
                it->count = r.u.lost.lost;
                it->time = r.time;
                push_bookkeeping(s, it);
                return;
        case PERF_REC_THROTTLE:
                s->throttles++;
                it->kind = PERF_ITEM_THROTTLE;
                it->count = ++ring->throttles;
                it->time = r.time;
                push_bookkeeping(s, it);
                return;
        default:
                free(it);
                return;
        }
        /* Process notes go to the worker, in ring order with the samples. */
        push_bookkeeping(s, it);
}

/* With the queue at its item bound, a sample is only counted: read where
 * it lies in the ring, nothing allocated or copied. */
static void count_sample_dropped(struct perf_session *s, struct cpu_ring *ring, const uint8_t *rec, size_t len) {
        struct perf_record r;
        if (perf_record_parse(rec, len, &s->layout, &r) < 0 || r.kind != PERF_REC_SAMPLE) {
                s->bad_records++;
                return;
        }
        s->samples++;
        ring->count += r.u.sample.period;
        drop_sample(s, ring, r.u.sample.time);
}

static void drain_ring(struct cpu_ring *ring) {
        struct perf_session *s = ring->s;
        if (!ring->base)
                return;
        struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *) (void *) ring->base;
        uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = mp->data_tail, mask = ring->data_size - 1;
        while (head - tail >= sizeof(struct perf_event_header)) {
                /* Bookkeeping alone has filled the queue: the rest waits
                 * in the ring (but for the last drain, at the stop). */
                if (!s->stopping && perf_queue_congested(&s->q))
                        break;
                struct perf_event_header h;
                for (size_t k = 0; k < sizeof(h); k++)
                        ((uint8_t *) &h)[k] = ring->data[(tail + k) & mask];
                if (h.size < sizeof(h) || h.size > head - tail) {
                        s->bad_records++;
                        tail = head;
                        break;
                }
                /* A record is read where it lies (or, when it wraps the
                 * ring's end, from a scratch copy) and copied once into
                 * what the worker gets, without the part of the user stack
                 * copy the kernel left unfilled: most stacks use a few KiB
                 * of the 16 KiB reserved. */
                const uint8_t *src = ring->data + (tail & mask);
                if ((tail & mask) + h.size > ring->data_size) {
                        if (!ring->scratch)
                                ring->scratch = malloc(UINT16_MAX + 1);
                        if (!ring->scratch ||
                            perf_ring_copy(ring->data, ring->data_size, tail, head, ring->scratch, UINT16_MAX + 1) !=
                                    h.size) {
                                s->skipped_enqueue++;
                                tail += h.size;
                                continue;
                        }
                        src = ring->scratch;
                }
                if (h.type == PERF_RECORD_SAMPLE && !perf_queue_room(&s->q, PERF_ITEM_NOTE, 0)) {
                        count_sample_dropped(s, ring, src, h.size);
                        tail += h.size;
                        continue;
                }
                int n = perf_record_compact(src, h.size, &s->layout, NULL);
                struct perf_item *it = perf_item_new(PERF_ITEM_RECORD, n > 0 ? (size_t) n : h.size);
                if (!it) {
                        s->skipped_enqueue++;
                        tail += h.size;
                        continue;
                }
                if (n > 0)
                        (void) perf_record_compact(src, h.size, &s->layout, it->rec);
                else
                        memcpy(it->rec, src, h.size); /* counted as a bad record by handle_record */
                handle_record(s, ring, it);
                tail += h.size;
        }
        __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
        perf_queue_publish(&s->q);
}

static void drain_all(struct perf_session *s) {
        for (size_t k = 0; k < s->n_rings; k++)
                drain_ring(&s->rings[k]);
}

static void check_hotplug(struct perf_session *s);

/* Once per instance, as soon as the loop sees it: the writer refusing
 * packets means a trace with holes (the count comes when it stops). */
static void log_first_write_error(struct perf_session *s) {
        int r = atomic_load(&s->first_write_error);
        if (r == 0 || s->write_error_logged)
                return;
        s->write_error_logged = true;
        plugin_log(s->pl, TRACED_LOG_WARNING,
                   "linux.perf instance %llu: the trace writer refused a packet: %s (counted until the instance stops)",
                   (unsigned long long) s->instance_id, strerror(-r));
}

static void on_timer(void *userdata) {
        check_hotplug(userdata);
        drain_all(userdata);
        log_first_write_error(userdata);
}

static void on_ring(int fd, uint32_t revents, void *userdata) {
        drain_ring(userdata);
}

/* ---- the worker ---- */

/* What the writer refuses is counted, and the first reason kept for the
 * loop thread to log (the worker does not log). */
static void writer_refused(struct perf_session *s, atomic_uint_fast64_t *counter, int r) {
        int none = 0;
        (*counter)++;
        atomic_compare_exchange_strong(&s->first_write_error, &none, r);
}

static void write_packet(struct perf_session *s) {
        /* A packet that could not be built (no memory) is not written either. */
        int r = s->pkt.error ? s->pkt.error : s->pl->api->write_packet(s->writer, s->pkt.buf, s->pkt.len);
        if (r < 0)
                writer_refused(s, &s->write_errors, r);
}

/* TracePacketDefaults, once per sequence and again after every clear. */
static void begin_packet(struct perf_session *s) {
        if (intern_packet_flags(s->iw) & SEQ_INCREMENTAL_STATE_CLEARED) {
                struct pbw d = {}, psd = {};
                pbw_reset(&s->pkt);
                pbw_bytes(&psd, 1, s->cfg.timebase, s->cfg.timebase_size);
                pbw_varint(&d, 58, s->cfg.clock_id);
                pbw_message(&d, 12, &psd);
                pbw_message(&s->pkt, 59, &d);
                pbw_varint(&s->pkt, TRACE_PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
                write_packet(s);
                pbw_done(&d);
                pbw_done(&psd);
        }
        pbw_reset(&s->pkt);
}

struct sample_out {
        uint32_t cpu, pid, tid;
        uint16_t misc;
        uint64_t time, count, lost;
        uint64_t callstack_iid;
        int unwind_error; /* 0: none to report */
        int skip_reason;  /* 0: none */
};

static void write_sample(struct perf_session *s, const struct sample_out *o) {
        /* begin_packet already ran (interning may have happened after it). */
        struct pbw ps = {};
        pbw_varint(&ps, 1, o->cpu);
        pbw_varint(&ps, 2, o->pid);
        pbw_varint(&ps, 3, o->tid);
        if (o->callstack_iid)
                pbw_varint(&ps, 4, o->callstack_iid);
        pbw_varint(&ps, 5, o->misc & PERF_RECORD_MISC_CPUMODE_MASK);
        pbw_varint(&ps, 6, o->count);
        if (o->unwind_error)
                pbw_varint(&ps, 16, (uint64_t) o->unwind_error);
        if (o->lost)
                pbw_varint(&ps, 17, o->lost);
        if (o->skip_reason)
                pbw_varint(&ps, 18, (uint64_t) o->skip_reason);
        if (o->time)
                pbw_varint(&s->pkt, 8, o->time);
        intern_write_pending(s->iw, &s->pkt);
        pbw_varint(&s->pkt, TRACE_PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        pbw_message(&s->pkt, 66, &ps);
        pbw_done(&ps);
        write_packet(s);
}

/* What PerfSample has no place for goes on counter tracks, one per kind
 * and CPU, so that trace_processor and the UI show where samples are
 * missing and why:
 *
 *   "linux.perf throttled (CPU n)"        the kernel's throttles of the
 *                                         CPU's event (it fired more often
 *                                         than the kernel allows);
 *   "linux.perf samples dropped (CPU n)"  samples of the CPU the queue had
 *                                         no room for, not even as a note.
 *
 * Both count from the start of the session. A track is described again
 * after every clear of the sequence's state, which may follow a buffer
 * that wrapped. */
enum counter_kind { COUNTER_THROTTLES, COUNTER_DROPPED, _COUNTER_KIND_MAX };

static const struct {
        const char *name;
        uint64_t uuid_base;
} counter_tracks[_COUNTER_KIND_MAX] = {
        [COUNTER_THROTTLES] = { "linux.perf throttled", 0x7065726674687200ull },
        [COUNTER_DROPPED] = { "linux.perf samples dropped", 0x7065726664726f00ull },
};

static uint64_t counter_track_uuid(const struct perf_session *s, enum counter_kind kind, uint32_t cpu) {
        return counter_tracks[kind].uuid_base ^ (s->instance_id << 16) ^ cpu;
}

static void describe_counter_track(struct perf_session *s, enum counter_kind kind, uint32_t cpu) {
        uint32_t *epoch = &s->track_epoch[(size_t) kind * MAX_CPUS + cpu];
        if (*epoch == s->epoch)
                return;
        struct pbw td = {}, counter = {};
        char name[96];
        snprintf(name, sizeof(name), "%s (CPU %u)", counter_tracks[kind].name, cpu);
        pbw_reset(&s->pkt);
        pbw_varint(&td, 1, counter_track_uuid(s, kind, cpu));
        pbw_bytes(&td, 2, name, strlen(name));
        pbw_message(&td, 8, &counter); /* a counter track */
        pbw_message(&s->pkt, 60, &td);
        write_packet(s);
        pbw_done(&td);
        pbw_done(&counter);
        *epoch = s->epoch;
}

static void write_counter(struct perf_session *s, enum counter_kind kind, uint32_t cpu, uint64_t time, uint64_t value) {
        if (cpu >= MAX_CPUS)
                return;
        describe_counter_track(s, kind, cpu);
        struct pbw te = {};
        pbw_reset(&s->pkt);
        pbw_varint(&te, 9, 4); /* TYPE_COUNTER */
        pbw_varint(&te, 11, counter_track_uuid(s, kind, cpu));
        pbw_varint(&te, 30, value);
        pbw_varint(&s->pkt, 8, time);
        pbw_varint(&s->pkt, 58, s->cfg.clock_id);
        pbw_message(&s->pkt, 11, &te);
        write_packet(s);
        pbw_done(&te);
}

/* The counts of dropped samples that moved since last written. Cheap when
 * none did: one load. */
static void write_dropped(struct perf_session *s) {
        uint64_t total = atomic_load_explicit(&s->dropped, memory_order_acquire);
        if (total == s->dropped_written)
                return;
        for (size_t k = 0; k < s->n_rings; k++) {
                struct cpu_ring *ring = &s->rings[k];
                uint64_t n = atomic_load_explicit(&ring->dropped, memory_order_relaxed);
                if (n == ring->dropped_written)
                        continue;
                write_counter(s, COUNTER_DROPPED, (uint32_t) ring->cpu,
                              atomic_load_explicit(&ring->dropped_time, memory_order_relaxed), n);
                ring->dropped_written = n;
        }
        s->dropped_written = total;
}

static uint64_t cached_frame(struct perf_session *s, const struct proc_info *p, uint64_t pc) {
        int32_t pid = p ? p->pid : -1;
        uint32_t mv = p ? p->maps_version : 0, gen = p ? p->generation : 0;
        uint64_t h = (pc ^ ((uint64_t) (uint32_t) pid << 40)) * 0x9e3779b97f4a7c15ull;
        struct frame_slot *f = &s->frames[(h >> 40) & (FRAME_CACHE_SLOTS - 1)];
        if (f->epoch == s->epoch && f->pc == pc && f->pid == pid && f->maps_version == mv && f->generation == gen)
                return f->iid;
        uint64_t iid = p ? symbolizer_user_frame(&s->sym, s->iw, p, pc) : symbolizer_kernel_frame(&s->sym, s->iw, pc);
        if (iid)
                *f = (struct frame_slot) { .pc = pc, .pid = pid, .maps_version = mv, .generation = gen,
                                           .epoch = s->epoch, .iid = iid };
        return iid;
}

static bool is_marker(uint64_t v) {
        return v >= (uint64_t) PERF_CONTEXT_MAX;
}

static void process_sample(struct perf_session *s, const struct perf_item *it, const struct perf_record *r) {
        const struct perf_sample_view *sv = &r->u.sample;
        uint64_t user[MAX_FRAMES], kern[MAX_FRAMES], frames[2 * MAX_FRAMES];
        size_t n_user = 0, n_kern = 0, n = 0;
        int err = UNWIND_ERR_NONE;

        /* The kernel's callchain: kernel part (and user part in FP mode). */
        bool in_user = false;
        for (uint64_t k = 0; k < sv->callchain_len; k++) {
                uint64_t v;
                memcpy(&v, &sv->callchain[k], sizeof(v));
                if (is_marker(v)) {
                        in_user = v == (uint64_t) PERF_CONTEXT_USER;
                        continue;
                }
                if (in_user) {
                        if (s->cfg.user_frames == PERF_UNWIND_FP && n_user < MAX_FRAMES)
                                user[n_user++] = v;
                } else if (s->cfg.kernel_frames && n_kern < MAX_FRAMES)
                        kern[n_kern++] = v;
        }

        struct proc_info *p = NULL;
        bool user_regs = sv->regs_abi != PERF_SAMPLE_REGS_ABI_NONE;
        if (sv->pid > 0 && s->cfg.user_frames != PERF_UNWIND_SKIP)
                p = proc_table_get(s->procs, (int) sv->pid);
        if (s->cfg.user_frames == PERF_UNWIND_DWARF && p && user_regs) {
                struct unwind_input in = { .stack = sv->stack, .stack_size = sv->stack_size };
                unwind_regs_from_perf(sv->regs, in.regs);
                n_user = unwinder_dwarf(s->unw, p, &in, user, MAX_FRAMES, &err);
        } else if (s->cfg.user_frames == PERF_UNWIND_DWARF && sv->pid > 0 && !user_regs &&
                   (r->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER)
                err = UNWIND_ERR_UNKNOWN;
        if (p && p->maps.n == 0 && n_user > 0 && err == UNWIND_ERR_NONE)
                err = UNWIND_ERR_INVALID_MAP; /* gone before we saw its maps */

        begin_packet(s);
        for (size_t k = n_user; k-- > 0;) {
                uint64_t pc = k > 0 ? user[k] - 1 : user[k];
                uint64_t f = p ? cached_frame(s, p, pc) : symbolizer_user_frame(&s->sym, s->iw, NULL, pc);
                if (f)
                        frames[n++] = f;
        }
        for (size_t k = n_kern; k-- > 0;) {
                uint64_t f = cached_frame(s, NULL, kern[k]);
                if (f)
                        frames[n++] = f;
        }
        struct sample_out o = {
                .cpu = it->cpu, .pid = sv->pid, .tid = sv->tid, .misc = r->misc, .time = sv->time,
                .count = it->count,
        };
        if (n > 0)
                o.callstack_iid = intern_callstack(s->iw, frames, n);
        if (err != UNWIND_ERR_NONE) {
                o.unwind_error = err;
                s->unwind_errors++;
        }
        s->unwound++;
        write_sample(s, &o);
}

static void process_record(struct perf_session *s, const struct perf_item *it) {
        struct perf_record r;
        if (perf_record_parse(it->rec, it->len, &s->layout, &r) < 0)
                return;
        if (r.time > s->latest_time)
                s->latest_time = r.time;
        switch (r.kind) {
        case PERF_REC_SAMPLE: {
                uint64_t deadline = s->stop_deadline;
                if (deadline && now_ms() > deadline) {
                        struct sample_out o = {
                                .cpu = it->cpu, .pid = r.u.sample.pid, .tid = r.u.sample.tid, .misc = r.misc,
                                .time = r.u.sample.time, .count = it->count, .skip_reason = SKIP_UNWIND_STAGE,
                        };
                        s->skipped_stop++;
                        begin_packet(s);
                        write_sample(s, &o);
                        break;
                }
                process_sample(s, it, &r);
                break;
        }
        case PERF_REC_MMAP2: {
                if (r.u.mmap2.len == 0 || r.u.mmap2.addr + r.u.mmap2.len < r.u.mmap2.addr)
                        break;
                struct pmap e = {
                        .start = r.u.mmap2.addr, .end = r.u.mmap2.addr + r.u.mmap2.len, .pgoff = r.u.mmap2.pgoff,
                        .inode = r.u.mmap2.ino, .dev_major = r.u.mmap2.maj, .dev_minor = r.u.mmap2.min,
                        .prot = r.u.mmap2.prot, .path = (char *) r.u.mmap2.filename,
                };
                (void) proc_table_mmap(s->procs, (int) r.u.mmap2.pid, &e);
                break;
        }
        case PERF_REC_COMM:
                if (r.u.comm.pid != r.u.comm.tid)
                        break;
                if (r.u.comm.exec)
                        (void) proc_table_exec(s->procs, (int) r.u.comm.pid, r.u.comm.comm);
                else
                        (void) proc_table_comm(s->procs, (int) r.u.comm.pid, r.u.comm.comm);
                break;
        case PERF_REC_FORK:
                (void) proc_table_fork(s->procs, (int) r.u.task.pid, (int) r.u.task.ppid);
                break;
        case PERF_REC_EXIT:
                if (r.u.task.pid == r.u.task.tid)
                        proc_table_exit(s->procs, (int) r.u.task.pid, r.u.task.time);
                break;
        default:
                break;
        }
}

static void housekeeping(struct perf_session *s) {
        uint64_t now = now_ms();
        if ((s->cfg.unwind_state_clear_period_ms && now - s->last_clear >= s->cfg.unwind_state_clear_period_ms) ||
            intern_memory(s->iw) > INTERN_MEMORY_BOUND) {
                intern_clear(s->iw);
                s->epoch++;
                unwinder_flush(s->unw);
                s->last_clear = now;
        }
        if (now - s->last_reap >= 1000 && s->latest_time > REAP_DELAY_NS) {
                proc_table_reap(s->procs, s->latest_time - REAP_DELAY_NS);
                s->last_reap = now;
        }
}

static void *worker_main(void *userdata) {
        struct perf_session *s = userdata;
        s->last_clear = s->last_reap = now_ms();
        for (;;) {
                struct perf_item *it = perf_queue_pop(&s->q);
                /* Drops counted before this item was queued go out first:
                 * a flush or the stop takes them along. */
                write_dropped(s);
                switch (it->kind) {
                case PERF_ITEM_SAMPLE:
                case PERF_ITEM_RECORD:
                        process_record(s, it);
                        break;
                case PERF_ITEM_NOTE: {
                        struct sample_out o = {
                                .cpu = it->cpu, .pid = it->pid, .tid = it->tid, .misc = it->misc,
                                .time = it->time, .count = it->count, .skip_reason = it->reason,
                        };
                        begin_packet(s);
                        write_sample(s, &o);
                        break;
                }
                case PERF_ITEM_LOST: {
                        struct sample_out o = { .cpu = it->cpu, .time = it->time, .lost = it->count };
                        begin_packet(s);
                        write_sample(s, &o);
                        break;
                }
                case PERF_ITEM_THROTTLE:
                        write_counter(s, COUNTER_THROTTLES, it->cpu, it->time, it->count);
                        break;
                case PERF_ITEM_FLUSH: {
                        int r = s->pl->api->flush_writer(s->writer);
                        if (r < 0)
                                writer_refused(s, &s->flush_errors, r);
                        pthread_mutex_lock(&s->mu);
                        s->flush_done++;
                        pthread_cond_broadcast(&s->done_cv);
                        pthread_mutex_unlock(&s->mu);
                        break;
                }
                case PERF_ITEM_STOP:
                        free(it);
                        s->pl->api->free_writer(s->writer);
                        s->writer = NULL;
                        return NULL;
                }
                free(it);
                housekeeping(s);
        }
}

/* ---- setup ---- */

static int tracepoint_id(const char *name, uint64_t *ret) {
        static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
        char group[128], event[128], path[512];
        if (sscanf(name, "%127[^:]:%127s", group, event) != 2)
                return -EINVAL;
        for (size_t k = 0; k < 2; k++) {
                snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[k], group, event);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                unsigned long long id;
                int ok = fscanf(f, "%llu", &id);
                fclose(f);
                if (ok == 1) {
                        *ret = id;
                        return 0;
                }
        }
        return -ENOENT;
}

static int open_ring(struct perf_session *s, struct perf_event_attr *attr, struct cpu_ring *ring) {
        long page = sysconf(_SC_PAGESIZE);
        ring->fd = (int) syscall(SYS_perf_event_open, attr, -1, ring->cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (ring->fd < 0)
                return negative_errno();
        if (s->cfg.tracepoint_filter && ioctl(ring->fd, PERF_EVENT_IOC_SET_FILTER, s->cfg.tracepoint_filter) < 0)
                return -EINVAL;
        ring->mmap_size = (size_t) page * (1 + s->cfg.ring_buffer_pages);
        void *p = mmap(NULL, ring->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring->fd, 0);
        if (p == MAP_FAILED) {
                ring->mmap_size = 0;
                return negative_errno();
        }
        ring->base = p;
        struct perf_event_mmap_page *mp = p;
        uint64_t off = mp->data_offset ? mp->data_offset : (uint64_t) page;
        ring->data_size = mp->data_size ? mp->data_size : (uint64_t) page * s->cfg.ring_buffer_pages;
        ring->data = ring->base + off;
        return 0;
}

static void on_ring(int fd, uint32_t revents, void *userdata);

static void close_ring(struct perf_session *s, struct cpu_ring *ring) {
        if (ring->src)
                s->pl->api->remove_source(s->pl->host, ring->src);
        ring->src = NULL;
        if (ring->base)
                munmap(ring->base, ring->mmap_size);
        ring->base = ring->data = NULL;
        ring->mmap_size = 0;
        ring->fd = safe_close(ring->fd);
}

/* What a stopped event recorded is kept: its ring is read whole before it
 * is closed, even with the queue congested (as at the stop: the kernel
 * writes no more into it). */
static void hotplug_close(void *userdata, size_t k) {
        struct perf_session *s = userdata;
        bool stopping = s->stopping;
        s->stopping = true;
        drain_ring(&s->rings[k]);
        s->stopping = stopping;
        close_ring(s, &s->rings[k]);
}

static int hotplug_open(void *userdata, size_t k) {
        struct perf_session *s = userdata;
        struct cpu_ring *ring = &s->rings[k];
        int r = open_ring(s, &s->cfg.attr, ring);
        if (r >= 0)
                r = s->pl->api->add_fd(s->pl->host, ring->fd, EPOLLIN, on_ring, ring, &ring->src);
        if (r >= 0 && ioctl(ring->fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
                r = negative_errno();
        if (r < 0) {
                close_ring(s, ring);
                return r;
        }
        return ring->fd;
}

static void hotplug_changed(void *userdata, size_t k, enum cpu_hotplug_change what, int error) {
        struct perf_session *s = userdata;
        plugin_log_cpu_change(s->pl, "linux.perf", s->instance_id, (uint32_t) s->rings[k].cpu, what, error);
}

static const struct cpu_hotplug_ops hotplug_ops = {
        .close = hotplug_close,
        .open = hotplug_open,
        .changed = hotplug_changed,
};

/* A CPU that goes offline takes its per-CPU event out of the kernel's
 * scheduling for good: when the CPU is back the event stays silent. On
 * each read period the shared tracker closes such a ring (what it recorded
 * is drained first) and opens it again once its CPU is online. */
static void check_hotplug(struct perf_session *s) {
        (void) cpu_hotplug_check(&s->hotplug);
}

static void session_free(struct perf_session *s) {
        for (size_t k = 0; k < s->n_rings; k++) {
                struct cpu_ring *ring = &s->rings[k];
                if (ring->src)
                        s->pl->api->remove_source(s->pl->host, ring->src);
                if (ring->base)
                        munmap(ring->base, ring->mmap_size);
                safe_close(ring->fd);
                free(ring->scratch);
        }
        cpu_hotplug_done(&s->hotplug);
        if (s->timer)
                s->pl->api->remove_source(s->pl->host, s->timer);
        if (s->writer)
                s->pl->api->free_writer(s->writer);
        if (s->queue_ready)
                perf_queue_done(&s->q);
        free(s->rings);
        free(s->scope);
        free(s->frames);
        free(s->track_epoch);
        unwinder_free(s->unw);
        proc_table_free(s->procs);
        elf_cache_free(s->elves);
        ksyms_free(s->ksyms);
        intern_writer_free(s->iw);
        pbw_done(&s->pkt);
        perf_config_done(&s->cfg);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->done_cv);
        free(s);
}

static int setup(struct perf_session *s) {
        struct perf_plugin *pl = s->pl;
        struct perf_config *c = &s->cfg;
        struct perf_event_attr *a = &c->attr;
        int r;

        a->size = sizeof(*a);
        if (c->tracepoint[0]) {
                uint64_t id = 0;
                r = tracepoint_id(c->tracepoint, &id);
                a->config = id;
                if (r < 0) {
                        plugin_log(pl, TRACED_LOG_ERR, "linux.perf: timebase.tracepoint: %s not found in tracefs",
                                   c->tracepoint);
                        return r;
                }
        }
        a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
        if (c->callstacks) {
                if (c->kernel_frames || c->user_frames == PERF_UNWIND_FP)
                        a->sample_type |= PERF_SAMPLE_CALLCHAIN;
                a->exclude_callchain_kernel = !c->kernel_frames;
                a->exclude_callchain_user = c->user_frames != PERF_UNWIND_FP;
                if (c->user_frames == PERF_UNWIND_DWARF) {
                        a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
                        a->sample_regs_user = unwind_perf_regs_mask();
                        a->sample_stack_user = PERF_STACK_COPY_BYTES;
                }
                a->mmap2 = 1;
                a->comm = 1;
                a->comm_exec = 1;
                a->task = 1;
        }
        a->sample_id_all = 1;
        a->read_format |= CPU_HOTPLUG_READ_FORMAT;
        a->disabled = 1;
        a->watermark = 1;
        /* Woken with a quarter of the ring filled: room for three more
         * quarters while the loop gets to it. */
        a->wakeup_watermark = (uint32_t) ((size_t) sysconf(_SC_PAGESIZE) * c->ring_buffer_pages / 4);
        s->layout = (struct perf_layout) { .sample_type = a->sample_type, .sample_id_all = true,
                                           .n_user_regs = (uint32_t) __builtin_popcountll(a->sample_regs_user) };

        uint32_t cpus[MAX_CPUS];
        size_t n_cpus = 0;
        if (c->n_cpus) {
                n_cpus = MIN(c->n_cpus, (size_t) MAX_CPUS);
                memcpy(cpus, c->cpus, n_cpus * sizeof(*cpus));
        } else if ((r = cpus_online(cpus, MAX_CPUS, &n_cpus)) < 0) {
                plugin_log(pl, TRACED_LOG_ERR, "linux.perf: cannot list the online CPUs: %s", strerror(-r));
                return r;
        }
        s->rings = calloc(n_cpus, sizeof(*s->rings));
        s->scope = calloc(SCOPE_SLOTS, sizeof(*s->scope));
        s->frames = calloc(FRAME_CACHE_SLOTS, sizeof(*s->frames));
        s->track_epoch = calloc((size_t) _COUNTER_KIND_MAX * MAX_CPUS, sizeof(*s->track_epoch));
        s->epoch = 1;
        if (!s->rings || !s->scope || !s->frames || !s->track_epoch)
                return -ENOMEM;
        for (size_t k = 0; k < n_cpus; k++) {
                struct cpu_ring *ring = &s->rings[s->n_rings];
                *ring = (struct cpu_ring) { .s = s, .cpu = (int) cpus[k], .fd = -EBADF };
                s->n_rings++;
                r = open_ring(s, a, ring);
                if (r < 0) {
                        if (ring->base)
                                munmap(ring->base, ring->mmap_size);
                        safe_close(ring->fd);
                        s->n_rings--;
                        if (c->ignore_open_failure) {
                                plugin_log(pl, TRACED_LOG_WARNING, "linux.perf: CPU %u skipped: %s", cpus[k],
                                           strerror(-r));
                                continue;
                        }
                        plugin_log(pl, TRACED_LOG_ERR, "linux.perf: perf_event_open on CPU %u failed: %s%s", cpus[k],
                                   strerror(-r),
                                   r == -ENOENT || r == -EOPNOTSUPP ? " (no such event or PMU on this machine)" : "");
                        return r;
                }
        }
        if (s->n_rings == 0) {
                plugin_log(pl, TRACED_LOG_ERR, "linux.perf: no CPU to sample");
                return -ENODEV;
        }
        if ((r = cpu_hotplug_init(&s->hotplug, s->n_rings, &hotplug_ops, s)) < 0)
                return r;
        for (size_t k = 0; k < s->n_rings; k++)
                cpu_hotplug_set(&s->hotplug, k, (uint32_t) s->rings[k].cpu, s->rings[k].fd);
        if (c->kernel_frames) {
                r = ksyms_load_proc(&s->ksyms);
                if (r < 0)
                        plugin_log(pl, TRACED_LOG_WARNING, "linux.perf: kernel frames stay unnamed: /proc/kallsyms: %s",
                                   strerror(-r));
        }
        if ((r = proc_table_new(NULL, &s->procs)) < 0 || (r = elf_cache_new(NULL, &s->elves)) < 0 ||
            (r = intern_writer_new(&s->iw)) < 0)
                return r;
        s->sym = (struct symbolizer) { .procs = s->procs, .elves = s->elves, .ksyms = s->ksyms };
        if ((r = unwinder_new(&s->sym, &s->unw)) < 0)
                return r;
        s->additional_left = c->additional_cmdline_count;
        if ((r = pl->api->new_writer(pl->host, s->instance_id, &s->writer)) < 0)
                return r;
        for (size_t k = 0; k < s->n_rings; k++) {
                r = pl->api->add_fd(pl->host, s->rings[k].fd, EPOLLIN, on_ring, &s->rings[k], &s->rings[k].src);
                if (r < 0)
                        return r;
        }
        if ((r = pl->api->add_timer(pl->host, c->read_period_ms, on_timer, s, &s->timer)) < 0)
                return r;
        if ((r = -pthread_create(&s->worker, NULL, worker_main, s)) < 0)
                return r;
        s->worker_started = true;
        for (size_t k = 0; k < s->n_rings; k++)
                (void) ioctl(s->rings[k].fd, PERF_EVENT_IOC_ENABLE, 0);
        return 0;
}

int perf_session_start(struct perf_plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        char err[256];
        struct perf_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pl = pl;
        s->instance_id = instance_id;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->done_cv, NULL);
        int r = perf_config_parse(config, size, &s->cfg, err, sizeof(err));
        if (r < 0) {
                if (r == -EINVAL)
                        plugin_log(pl, TRACED_LOG_ERR, "linux.perf instance %llu refused: perf_event_config.%s",
                                   (unsigned long long) instance_id, err);
                session_free(s);
                return r;
        }
        r = perf_queue_init(&s->q, s->cfg.max_enqueued_bytes);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->queue_ready = true;
        r = setup(s);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->next = pl->sessions;
        pl->sessions = s;
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.perf instance %llu: %zu CPUs, %s %llu, stacks: %s%s, %u pages per ring, read every %u ms",
                   (unsigned long long) instance_id, s->n_rings, s->cfg.attr.freq ? "frequency" : "period",
                   (unsigned long long) s->cfg.attr.sample_freq,
                   !s->cfg.callstacks                        ? "none"
                   : s->cfg.user_frames == PERF_UNWIND_DWARF ? "user (DWARF)"
                   : s->cfg.user_frames == PERF_UNWIND_FP    ? "user (frame pointers)"
                                                             : "no user",
                   s->cfg.kernel_frames ? " + kernel" : "", s->cfg.ring_buffer_pages, s->cfg.read_period_ms);
        return 0;
}

static struct perf_session *find(struct perf_plugin *pl, uint64_t id, struct perf_session ***ret_link) {
        for (struct perf_session **pp = &pl->sessions; *pp; pp = &(*pp)->next)
                if ((*pp)->instance_id == id) {
                        if (ret_link)
                                *ret_link = pp;
                        return *pp;
                }
        return NULL;
}

void perf_session_flush(struct perf_plugin *pl, uint64_t id) {
        struct perf_session *s = find(pl, id, NULL);
        if (!s)
                return;
        drain_all(s);
        struct perf_item *it = perf_item_new(PERF_ITEM_FLUSH, 0);
        if (!it)
                return;
        pthread_mutex_lock(&s->mu);
        uint64_t want = ++s->flush_asked;
        pthread_mutex_unlock(&s->mu);
        (void) perf_queue_push(&s->q, it); /* never refused */
        perf_queue_publish(&s->q);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += FLUSH_WAIT_MS / 1000;
        pthread_mutex_lock(&s->mu);
        while (s->flush_done < want)
                if (pthread_cond_timedwait(&s->done_cv, &s->mu, &until) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&s->mu);
}

static void log_stopped(struct perf_session *s) {
        uint64_t by_rows = 0, by_libunwind = 0;
        if (s->unw)
                unwinder_counts(s->unw, &by_rows, &by_libunwind);
        int first_error = atomic_load(&s->first_write_error);
        plugin_log(s->pl, TRACED_LOG_INFO,
                   "linux.perf instance %llu stopped: %llu samples, %llu unwound (%llu with unwind errors; "
                   "%llu stacks walked by compact CFI rows, %llu by libunwind), "
                   "%llu not in scope, %llu not unwound (queue full), %llu not unwound before the stop, "
                   "%llu dropped (queue at its %zu-item bound), "
                   "%llu records lost by the kernel, %llu throttles, %llu bad records, %llu CPUs gone offline, "
                   "%llu packets and %llu flushes refused by the writer%s%s%s",
                   (unsigned long long) s->instance_id, (unsigned long long) s->samples,
                   (unsigned long long) s->unwound, (unsigned long long) s->unwind_errors,
                   (unsigned long long) by_rows, (unsigned long long) by_libunwind,
                   (unsigned long long) s->skipped_scope, (unsigned long long) s->skipped_enqueue,
                   (unsigned long long) s->skipped_stop, (unsigned long long) s->dropped, s->q.max_items,
                   (unsigned long long) s->lost, (unsigned long long) s->throttles,
                   (unsigned long long) s->bad_records, (unsigned long long) s->hotplug.stops,
                   (unsigned long long) s->write_errors, (unsigned long long) s->flush_errors,
                   first_error ? " (first: " : "", first_error ? strerror(-first_error) : "", first_error ? ")" : "");
}

static void stop_session(struct perf_session *s) {
        for (size_t k = 0; k < s->n_rings; k++)
                if (s->rings[k].fd >= 0)
                        (void) ioctl(s->rings[k].fd, PERF_EVENT_IOC_DISABLE, 0);
        /* The events are off: take all the rings hold, congested or not. */
        s->stopping = true;
        drain_all(s);
        if (s->worker_started) {
                s->stop_deadline = now_ms() + STOP_UNWIND_MS;
                struct perf_item *it = perf_item_new(PERF_ITEM_STOP, 0);
                if (it) {
                        (void) perf_queue_push(&s->q, it); /* never refused */
                        perf_queue_publish(&s->q);
                        pthread_join(s->worker, NULL);
                }
                s->worker_started = false;
        }
        log_stopped(s);
}

void perf_session_stop(struct perf_plugin *pl, uint64_t id) {
        struct perf_session **link;
        struct perf_session *s = find(pl, id, &link);
        if (!s)
                return;
        *link = s->next;
        stop_session(s);
        session_free(s);
}

void perf_sessions_free(struct perf_plugin *pl) {
        while (pl->sessions) {
                struct perf_session *s = pl->sessions;
                pl->sessions = s->next;
                stop_session(s);
                session_free(s);
        }
}
