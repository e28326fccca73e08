/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf's worker thread: what the loop thread queued becomes packets.
 * Samples are unwound (the kernel's callchain, frame pointers or DWARF),
 * their frames symbolized and interned, and written as PerfSample; notes
 * and lost records as PerfSample without a callstack; throttles and
 * dropped samples on counter tracks; process records keep the process
 * table current. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf-session.h"
#include "profiling/intern.h"
#include "profiling/procmaps.h"
#include "profiling/pyframes.h"
#include "profiling/unwind.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

#define MAX_FRAMES 256
#define REAP_DELAY_NS (5ull * 1000000000ull)
#define INTERN_MEMORY_BOUND (128u << 20)
#define SCAN_MAX_PROCESSES 16384

/* What the writer refuses is counted, and the first reason kept for the
 * loop thread to log (the worker does not log). */
static void writer_refused(struct perf_session *s, atomic_uint_fast64_t *counter, int r) {
        int none = 0;
        (*counter)++;
        atomic_compare_exchange_strong(&s->first_write_error, &none, r);
}

/* Begins a packet on the session's writer, straight into its shared
 * memory: 0, or what the writer refused (counted). */
static int packet_begin(struct perf_session *s, TracePacket *pkt) {
        int r = s->pl->api->begin_packet(s->writer, &pkt->msg);
        if (r < 0)
                writer_refused(s, &s->write_errors, r);
        return r;
}

static void packet_end(struct perf_session *s, TracePacket *pkt) {
        int r = s->pl->api->end_packet(s->writer, &pkt->msg);
        if (r < 0)
                writer_refused(s, &s->write_errors, r);
}

/* TracePacketDefaults, once per sequence and again after every clear:
 * before the packets that intern anything anew. */
static void write_defaults(struct perf_session *s) {
        if (!(intern_packet_flags(s->iw) & TracePacket_SEQ_INCREMENTAL_STATE_CLEARED))
                return;
        TracePacket pkt;
        TracePacketDefaults d;
        PerfSampleDefaults psd;
        if (packet_begin(s, &pkt) < 0)
                return;
        TracePacket_begin_trace_packet_defaults(&pkt, &d);
        TracePacketDefaults_set_timestamp_clock_id(&d, s->cfg.clock_id);
        TracePacketDefaults_begin_perf_sample_defaults(&d, &psd);
        PerfSampleDefaults_set_timebase_serialized(&psd, s->cfg.timebase, s->cfg.timebase_size);
        TracePacketDefaults_end_perf_sample_defaults(&d, &psd);
        TracePacket_end_trace_packet_defaults(&pkt, &d);
        TracePacket_set_sequence_flags(&pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
        packet_end(s, &pkt);
}

struct sample_out {
        uint32_t cpu, pid, tid;
        uint16_t misc;
        uint64_t time, count, lost;
        uint64_t callstack_iid;
        bool has_unwind_error; /* unwind_error is to be written (its UNKNOWN is 0) */
        int unwind_error;
        int skip_reason;  /* 0: none */
};

static void write_sample(struct perf_session *s, const struct sample_out *o) {
        /* write_defaults already ran (interning may have happened after it). */
        TracePacket pkt;
        PerfSample ps;
        if (packet_begin(s, &pkt) < 0)
                return;
        if (o->time)
                TracePacket_set_timestamp(&pkt, o->time);
        intern_write_pending(s->iw, &pkt);
        TracePacket_set_sequence_flags(&pkt, TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
        TracePacket_begin_perf_sample(&pkt, &ps);
        PerfSample_set_cpu(&ps, o->cpu);
        PerfSample_set_pid(&ps, o->pid);
        PerfSample_set_tid(&ps, o->tid);
        if (o->callstack_iid)
                PerfSample_set_callstack_iid(&ps, o->callstack_iid);
        /* perf's cpumode values are the proto's. */
        PerfSample_set_cpu_mode(&ps, (Profiling_CpuMode) (o->misc & PERF_RECORD_MISC_CPUMODE_MASK));
        PerfSample_set_timebase_count(&ps, o->count);
        if (o->has_unwind_error)
                PerfSample_set_unwind_error(&ps, (Profiling_StackUnwindError) o->unwind_error);
        if (o->lost)
                PerfSample_set_kernel_records_lost(&ps, o->lost);
        if (o->skip_reason)
                PerfSample_set_sample_skipped_reason(&ps, (PerfSample_SampleSkipReason) o->skip_reason);
        TracePacket_end_perf_sample(&pkt, &ps);
        packet_end(s, &pkt);
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
static const struct {
        const char *name;
        uint64_t uuid_base;
} counter_tracks[_COUNTER_KIND_MAX] = {
        [COUNTER_THROTTLES] = { "linux.perf throttled", 0x7065726674687200ull },
        [COUNTER_DROPPED] = { "linux.perf samples dropped", 0x7065726664726f00ull },
};

static uint64_t counter_track_uuid(const struct perf_session *s, enum counter_kind kind, uint32_t cpu) {
        return counter_tracks[kind].uuid_base ^ (s->inst.id << 16) ^ cpu;
}

void perf_write_counter_track(struct perf_session *s, uint64_t uuid, const char *name, uint32_t *epoch, uint64_t time,
                              uint64_t value) {
        TracePacket pkt;
        if (*epoch != s->epoch) {
                TrackDescriptor td;
                CounterDescriptor counter;
                if (packet_begin(s, &pkt) < 0)
                        return;
                TracePacket_begin_track_descriptor(&pkt, &td);
                TrackDescriptor_set_uuid(&td, uuid);
                TrackDescriptor_set_name(&td, name);
                TrackDescriptor_begin_counter(&td, &counter); /* a counter track */
                TrackDescriptor_end_counter(&td, &counter);
                TracePacket_end_track_descriptor(&pkt, &td);
                packet_end(s, &pkt);
                *epoch = s->epoch;
        }
        TrackEvent te;
        if (packet_begin(s, &pkt) < 0)
                return;
        TracePacket_set_timestamp(&pkt, time);
        TracePacket_set_timestamp_clock_id(&pkt, s->cfg.clock_id);
        TracePacket_begin_track_event(&pkt, &te);
        TrackEvent_set_type(&te, TrackEvent_TYPE_COUNTER);
        TrackEvent_set_track_uuid(&te, uuid);
        TrackEvent_set_counter_value(&te, (int64_t) value);
        TracePacket_end_track_event(&pkt, &te);
        packet_end(s, &pkt);
}

static void write_counter(struct perf_session *s, enum counter_kind kind, uint32_t cpu, uint64_t time, uint64_t value) {
        if (cpu >= MAX_CPUS)
                return;
        char name[96];
        snprintf(name, sizeof(name), "%s (CPU %u)", counter_tracks[kind].name, cpu);
        perf_write_counter_track(s, counter_track_uuid(s, kind, cpu), name,
                                 &s->track_epoch[(size_t) kind * MAX_CPUS + cpu], time, value);
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

static struct frame_slot *frame_slot(struct perf_session *s, const struct proc_info *p, uint64_t pc, bool *hit) {
        int32_t pid = p ? p->pid : -1;
        uint32_t mv = p ? p->maps_version : 0, gen = p ? p->generation : 0;
        uint64_t h = (pc ^ ((uint64_t) (uint32_t) pid << 40)) * 0x9e3779b97f4a7c15ull;
        struct frame_slot *f = &s->frames[(h >> 40) & (FRAME_CACHE_SLOTS - 1)];
        *hit = f->epoch == s->epoch && f->pc == pc && f->pid == pid && f->maps_version == mv && f->generation == gen;
        return f;
}

bool perf_frame_is_eval(struct perf_session *s, const struct proc_info *p, uint64_t pc) {
        bool hit;
        struct frame_slot *f = frame_slot(s, p, pc, &hit);
        if (hit && f->is_eval >= 0)
                return f->is_eval;
        struct symbolized r;
        symbolizer_resolve(&s->sym, p, pc, &r);
        bool is_eval = r.function && strcmp(r.function, PY_EVAL_FUNCTION) == 0;
        if (hit)
                f->is_eval = is_eval;
        return is_eval;
}

static uint64_t cached_frame(struct perf_session *s, const struct proc_info *p, uint64_t pc) {
        int32_t pid = p ? p->pid : -1;
        uint32_t mv = p ? p->maps_version : 0, gen = p ? p->generation : 0;
        bool hit;
        struct frame_slot *f = frame_slot(s, p, pc, &hit);
        if (hit)
                return f->iid;
        uint64_t jit_unnamed = s->sym.jit_unnamed;
        uint64_t iid = p ? symbolizer_user_frame(&s->sym, s->iw, p, pc) : symbolizer_kernel_frame(&s->sym, s->iw, pc);
        /* Generated code its runtime has not named yet is asked again. */
        if (iid && s->sym.jit_unnamed == jit_unnamed)
                *f = (struct frame_slot) { .pc = pc, .pid = pid, .maps_version = mv, .generation = gen,
                                           .epoch = s->epoch, .is_eval = -1, .iid = iid };
        return iid;
}

static bool is_marker(uint64_t v) {
        return v >= (uint64_t) PERF_CONTEXT_MAX;
}

static void process_sample(struct perf_session *s, const struct perf_item *it, const struct perf_record *r) {
        const struct perf_sample_view *sv = &r->u.sample;
        uint64_t user[MAX_FRAMES], native[MAX_FRAMES], kern[MAX_FRAMES], frames[2 * MAX_FRAMES + PY_WALK_MAX_FRAMES];
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

        write_defaults(s);
        for (size_t k = 0; k < n_user; k++) {
                /* Return addresses but the innermost: the call is the byte before. */
                uint64_t pc = k > 0 ? user[k] - 1 : user[k];
                native[k] = p ? cached_frame(s, p, pc) : symbolizer_user_frame(&s->sym, s->iw, NULL, pc);
        }
        n = perf_py_user_frames(s, it, p, user, native, n_user, frames, MAX_FRAMES + PY_WALK_MAX_FRAMES);
        if (s->ksym) {
                /* The kernel addresses the frame cache does not hold are
                 * named in one run of the program. */
                uint64_t missed[MAX_FRAMES];
                size_t n_missed = 0;
                for (size_t k = 0; k < n_kern; k++) {
                        bool hit;
                        (void) frame_slot(s, NULL, kern[k], &hit);
                        if (!hit)
                                missed[n_missed++] = kern[k];
                }
                if (n_missed)
                        kernel_names_prefetch(s->ksym, missed, n_missed);
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
                /* Every error the log counts is in the trace, UNKNOWN (0)
                 * included. */
                o.has_unwind_error = true;
                o.unwind_error = err;
                s->unwind_errors++;
        }
        s->unwound++;
        write_sample(s, &o);
}

/* A task renamed or exec'd: its new comm goes into the trace, on this
 * sequence, so the samples after it are named by it. */
static void name_task(struct perf_session *s, const struct perf_record *r) {
        if (!task_names_changed(&s->names, (int32_t) r->u.comm.tid, r->u.comm.comm))
                return;
        TracePacket pkt;
        if (packet_begin(s, &pkt) < 0)
                return;
        task_names_packet(&pkt, (int32_t) r->u.comm.pid, (int32_t) r->u.comm.tid, r->u.comm.comm, r->time,
                          s->cfg.clock_id);
        packet_end(s, &pkt);
}

static void process_record(struct perf_session *s, const struct perf_item *it) {
        struct perf_record r;
        if (perf_record_parse(it->rec, it->len, &s->layout, &r) < 0)
                return;
        if (r.time > s->latest_time)
                s->latest_time = r.time;
        switch (r.kind) {
        case PERF_REC_SAMPLE: {
                /* The processes as they were when it was taken. */
                if (s->notes)
                        perf_notes_apply(s->notes, s->procs, r.time);
                uint64_t deadline = s->stop_deadline;
                if (deadline && now_ms() > deadline) {
                        struct sample_out o = {
                                .cpu = it->cpu, .pid = r.u.sample.pid, .tid = r.u.sample.tid, .misc = r.misc,
                                .time = r.u.sample.time, .count = it->count, .skip_reason = SKIP_UNWIND_STAGE,
                        };
                        s->skipped_stop++;
                        write_defaults(s);
                        write_sample(s, &o);
                        break;
                }
                process_sample(s, it, &r);
                break;
        }
        case PERF_REC_COMM:
                name_task(s, &r);
                /* The notes' own rings say it too, when there are some. */
                if (!s->notes)
                        perf_notes_apply_record(s->procs, &r);
                break;
        case PERF_REC_MMAP2:
        case PERF_REC_FORK:
        case PERF_REC_EXIT:
                if (!s->notes)
                        perf_notes_apply_record(s->procs, &r);
                break;
        default:
                break;
        }
}

/* After each item; what goes by the clock (periods of a second or more)
 * on each read period's tick and every HOUSEKEEPING_ITEMS items between:
 * the clock is read that often, not once a sample. */
#define HOUSEKEEPING_ITEMS 64u

static void housekeeping(struct perf_session *s, bool tick) {
        /* The service's clear: the next packet says so, and what later
         * samples refer to is interned (and emitted) again, the counter
         * tracks described again. The unwinder keeps its caches. */
        uint64_t asked = atomic_load(&s->clears_asked);
        if (asked != s->clears_done) {
                s->clears_done = asked;
                intern_clear(s->iw);
                s->epoch++;
        }
        if (!tick && ++s->items_untimed < HOUSEKEEPING_ITEMS)
                return;
        s->items_untimed = 0;
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
                perf_py_reap(s);
                s->last_reap = now;
        }
        if (now - s->last_py_counters >= 1000) {
                perf_py_write_counters(s);
                s->last_py_counters = now;
        }
}

/* Every process's maps, as sampling starts (the whole system sampled):
 * one that ends before the worker gets to its samples is known all the
 * same; the kernel's notes keep the table current from then on. */
static void scan_processes(struct perf_session *s) {
        const struct perf_config *c = &s->cfg;
        if (!c->callstacks || c->user_frames == PERF_UNWIND_SKIP || c->n_target_pid || c->n_target_cmdline ||
            c->additional_cmdline_count)
                return;
        int n = proc_table_scan(s->procs, SCAN_MAX_PROCESSES);
        s->scanned = n > 0 ? (uint64_t) n : 0;
}

void *perf_worker_main(void *userdata) {
        struct perf_session *s = userdata;
        scan_processes(s);
        perf_py_scan(s);
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
                        write_defaults(s);
                        write_sample(s, &o);
                        break;
                }
                case PERF_ITEM_LOST: {
                        /* Without rings of their own, the notes were lost
                         * with the samples. */
                        if (!s->notes)
                                proc_table_notes_lost(s->procs);
                        struct sample_out o = { .cpu = it->cpu, .time = it->time, .lost = it->count };
                        write_defaults(s);
                        write_sample(s, &o);
                        break;
                }
                case PERF_ITEM_THROTTLE:
                        write_counter(s, COUNTER_THROTTLES, it->cpu, it->time, it->count);
                        break;
                case PERF_ITEM_TICK:
                        if (s->notes) {
                                perf_notes_check_cpus(s->notes);
                                perf_notes_read(s->notes, s->procs);
                                /* Those before the last record seen are past. */
                                perf_notes_apply(s->notes, s->procs, s->latest_time);
                        }
                        break;
                case PERF_ITEM_FLUSH: {
                        perf_py_write_counters(s);
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
                        perf_py_write_counters(s);
                        free(it);
                        s->pl->api->free_writer(s->writer);
                        s->writer = NULL;
                        return NULL;
                }
                bool tick = it->kind == PERF_ITEM_TICK || it->kind == PERF_ITEM_FLUSH;
                perf_queue_done_with(&s->q, it);
                housekeeping(s, tick);
        }
}
