/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack's drain: each ring buffer record's stack ids are looked up
 * in the stack map (or its user frames come walked with it), symbolized and
 * interned, and written as a PerfSample on the on-CPU or the off-CPU
 * sequence. Stacks no record refers to any more are deleted from the map,
 * and the unwind tables of the processes whose walks asked are loaded. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "basic/hash.h"
#include "bpfstack-session.h"

/* Profiling.StackUnwindError */
#define INTERN_MEMORY_BOUND (64u << 20)
#define PROC_TABLE_BOUND 4096
/* How long an exited process stays known: its last records may still be
 * in the ring. */
#define REAP_DELAY_NS (5ull * 1000000000ull)
/* Processes whose tables are loaded per drain at most (each may compile
 * new files' tables), and those waiting for theirs. */
#define LOADS_PER_DRAIN 16u
#define LOAD_BUDGET_NS (10u * 1000000u)
#define CS_CACHE_PROBES 8u
/* How long a drain that loads symbolizes records before it queues the
 * tables a new process asked for. */
#define SLICE_NS (2u * 1000000u)
/* What bpfstack_on_record returns to end a slice (libbpf stops there,
 * the record consumed). */
#define SLICE_END (-EINTR)

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* --- writing -------------------------------------------------------------- */

static void cs_cache_flush(struct bpfstack_session *s);

/* Begins a packet of q's sequence, straight into its writer's shared
 * memory; false when the writer refuses it (counted, as a drop). */
static bool seq_begin_packet(struct bpfstack_session *s, struct seq *q, TracePacket *pkt);

/* Ends it. Dropped (shared memory full): whatever it interned is not in
 * the trace, and later packets would name ids no reader has. The sequence
 * starts its interning again, cleared, with the next. */
static void seq_end_packet(struct bpfstack_session *s, struct seq *q, TracePacket *pkt) {
        if (s->pl->api->end_packet(q->writer, &pkt->msg) < 0) {
                intern_clear(q->iw);
                cs_cache_flush(s);
                s->packets_dropped++;
        }
}

static bool seq_begin_packet(struct bpfstack_session *s, struct seq *q, TracePacket *pkt) {
        if (s->pl->api->begin_packet(q->writer, &pkt->msg) >= 0)
                return true;
        intern_clear(q->iw);
        cs_cache_flush(s);
        s->packets_dropped++;
        return false;
}

/* TracePacketDefaults {timestamp_clock_id: BOOTTIME, perf_sample_defaults
 * {timebase}} for a sequence, kept serialized. */
int bpfstack_seq_defaults(struct seq *q, const void *timebase, size_t timebase_len) {
        struct traced_pb_stream st;
        TracePacketDefaults d;
        PerfSampleDefaults psd;
        traced_pb_stream_init_buffer(&st, q->defaults, sizeof(q->defaults));
        TracePacketDefaults_init(&d, &st);
        TracePacketDefaults_set_timestamp_clock_id(&d, BuiltinClock_BUILTIN_CLOCK_BOOTTIME);
        TracePacketDefaults_begin_perf_sample_defaults(&d, &psd);
        PerfSampleDefaults_set_timebase_serialized(&psd, timebase, timebase_len);
        TracePacketDefaults_end_perf_sample_defaults(&d, &psd);
        int r = traced_pb_msg_finish(&d.msg);
        if (r < 0)
                return r == -ENOBUFS ? -E2BIG : r;
        q->defaults_len = (size_t) traced_pb_msg_size(&d.msg);
        return 0;
}

/* The sequence's defaults, when its state starts (again): before the
 * packets that intern anything anew. */
static void seq_defaults_packet(struct bpfstack_session *s, struct seq *q) {
        TracePacket pkt;
        if (!(intern_packet_flags(q->iw) & TracePacket_SEQ_INCREMENTAL_STATE_CLEARED) ||
            !seq_begin_packet(s, q, &pkt))
                return;
        TracePacket_set_trace_packet_defaults_serialized(&pkt, q->defaults, q->defaults_len);
        TracePacket_set_sequence_flags(&pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
        seq_end_packet(s, q, &pkt);
}

/* --- symbolizing ---------------------------------------------------------- */

static void seen_add(struct bpfstack_session *s, uint32_t id) {
        if (s->collecting)
                return; /* read now and deleted just after; seen again next time */
        /* Full, or out of memory: the id is not remembered and its stack
         * is not collected. */
        if (hashmap_size(&s->seen_ids) < s->seen_max)
                (void) hashmap_put(&s->seen_ids, id, 0);
}

static void cs_cache_flush(struct bpfstack_session *s) {
        if (s->cs_cache)
                memset(s->cs_cache, 0, CS_CACHE_SIZE * sizeof(*s->cs_cache));
}

/* Deletes the stacks seen but no longer referenced: what the ring buffer
 * held is consumed; what a switched-out task holds (out_since) stays. */
static void collect_stacks(struct bpfstack_session *s) {
        struct hashmap live = {};
        uint32_t key, next;
        struct bpfstack_switched_out o;
        const struct bpf_map *m = s->skel->maps.out_since;
        for (int r = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); r == 0;
             r = bpf_map__get_next_key(m, &key, &next, sizeof(next))) {
                key = next;
                if (bpf_map__lookup_elem(m, &key, sizeof(key), &o, sizeof(o), 0) < 0)
                        continue;
                int32_t ids[2] = {o.kstack_id, o.ustack_id};
                for (size_t j = 0; j < 2; j++)
                        if (ids[j] >= 0 && hashmap_size(&live) < s->seen_max &&
                            hashmap_put(&live, (uint32_t) ids[j], 0) < 0) {
                                /* A live stack missing from the set would be deleted: not now. */
                                hashmap_clear(&live);
                                return;
                        }
        }
        /* A task that came back while we walked out_since sent its record
         * before or during the walk: read those now, before deleting their
         * stacks. One back after the walk was live in it. */
        s->collecting = true;
        (void) ring_buffer__consume(s->rb);
        s->collecting = false;
        uint64_t seen;
        for (size_t it = 0; hashmap_next(&s->seen_ids, &it, &seen, NULL);)
                if (!hashmap_get(&live, seen, NULL)) {
                        uint32_t id = (uint32_t) seen;
                        (void) bpf_map__delete_elem(s->skel->maps.stacks, &id, sizeof(id), 0);
                        s->stacks_collected++;
                }
        hashmap_clear(&s->seen_ids);
        s->seen_ids = live;
        /* Deleted ids may come back holding other stacks. */
        cs_cache_flush(s);
}

/* The frames of stack id into s->stack_buf, innermost first; 0 if none. */
static size_t read_stack(struct bpfstack_session *s, int32_t id) {
        if (id < 0)
                return 0;
        size_t sz = (size_t) s->cfg.max_depth * sizeof(uint64_t);
        uint32_t key = (uint32_t) id;
        if (bpf_map__lookup_elem(s->skel->maps.stacks, &key, sizeof(key), s->stack_buf, sz, 0) < 0) {
                s->stacks_missing++;
                return 0;
        }
        seen_add(s, key);
        size_t n = 0;
        while (n < s->cfg.max_depth && s->stack_buf[n])
                n++;
        return n;
}

static struct proc_info *proc_for(struct bpfstack_session *s, uint32_t pid, uint64_t first_pc) {
        struct proc_info *p = proc_table_get(s->procs, (int) pid);
        if (!p)
                return NULL;
        if (p->maps_unreadable)
                return p;
        if (!proc_maps_find(&p->maps, first_pc) && s->n_refreshed < REFRESH_SLOTS) {
                /* Mapped since we read its maps (dlopen, a new exec, and no
                 * notes): read again, once per drain; what is known stays
                 * if the process is gone. */
                for (size_t k = 0; k < s->n_refreshed; k++)
                        if (s->refreshed[k] == (int) pid)
                                return p;
                s->refreshed[s->n_refreshed++] = (int) pid;
                proc_table_reload(s->procs, (int) pid);
        }
        return p;
}

/* The off-CPU program runs inside the sched_switch tracepoint, so the
 * kernel stack it takes starts with the program itself and the
 * tracepoint's dispatch, above __schedule. Those frames are the
 * collector's, not the task's: they are left out. */
static bool tracing_frame(struct bpfstack_session *s, uint64_t addr) {
        static const char *const prefixes[] = {"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"};
        const char *name = s->knames ? kernel_names_lookup(s->knames, addr)
                           : s->ksyms ? ksyms_lookup(s->ksyms, addr)
                                      : NULL;
        if (!name)
                return false;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
                if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
                        return true;
        return false;
}

static size_t tracing_frames_on_top(struct bpfstack_session *s, const uint64_t *kern, size_t n) {
        size_t skip = 0;
        while (skip < n && tracing_frame(s, kern[skip]))
                skip++;
        return skip;
}

/* A hash of n walked frames (FNV-1a over their bytes, then mixed). */
static uint64_t frames_hash(const uint64_t *f, size_t n) {
        uint64_t h = FNV1A64_OFFSET;
        for (size_t k = 0; k < n; k++) {
                h = fnv1a64_step(h, f[k]);
                h ^= h >> 29;
        }
        return h ^ n;
}

static size_t cs_cache_slot(const struct bpfstack_record *rec, uint64_t uhash) {
        uint64_t h = (uint64_t) rec->pid * 0x9E3779B97F4A7C15u ^ uhash;
        h ^= ((uint64_t) (uint32_t) rec->kstack_id << 32 | (uint32_t) rec->ustack_id) * 0xC2B2AE3D27D4EB4Fu;
        h ^= rec->kind;
        return (size_t) (h >> 40) & (CS_CACHE_SIZE - 1);
}

static struct cs_cache_entry *cs_cache_find(struct bpfstack_session *s, const struct bpfstack_record *rec,
                                            uint64_t uhash) {
        if (!s->cs_cache)
                return NULL;
        size_t i = cs_cache_slot(rec, uhash);
        for (size_t k = 0; k < CS_CACHE_PROBES; k++) {
                struct cs_cache_entry *e = &s->cs_cache[(i + k) & (CS_CACHE_SIZE - 1)];
                if (!e->used)
                        return NULL;
                if (e->pid == rec->pid && e->kstack_id == rec->kstack_id && e->ustack_id == rec->ustack_id &&
                    e->kind == rec->kind && e->uhash == uhash)
                        return e;
        }
        return NULL;
}

static void cs_cache_add(struct bpfstack_session *s, const struct bpfstack_record *rec, uint64_t uhash,
                         uint64_t callstack, uint64_t leaf) {
        if (!s->cs_cache)
                return;
        size_t i = cs_cache_slot(rec, uhash), k = 0;
        while (k < CS_CACHE_PROBES && s->cs_cache[(i + k) & (CS_CACHE_SIZE - 1)].used)
                k++;
        /* A full run of probes: the first slot makes room (it is a cache). */
        struct cs_cache_entry *e = &s->cs_cache[(i + (k < CS_CACHE_PROBES ? k : 0)) & (CS_CACHE_SIZE - 1)];
        *e = (struct cs_cache_entry){.pid = rec->pid,
                                     .kstack_id = rec->kstack_id,
                                     .ustack_id = rec->ustack_id,
                                     .kind = (uint8_t) rec->kind,
                                     .used = true,
                                     .uhash = uhash,
                                     .leaf = leaf,
                                     .callstack = callstack};
}

/* Reads and symbolizes the record's stacks and interns the callstack;
 * *leaf: the innermost user frame (0 without user frames). Sets
 * *cacheable when the result depends on nothing but the key (the
 * process's maps were read and held the innermost user frame). */
static uint64_t record_callstack(struct bpfstack_session *s, struct seq *q, const struct bpfstack_record *rec,
                                 const uint64_t *walked, const struct bpfstack_pyframe *py, uint64_t *leaf,
                                 bool *cacheable) {
        uint64_t kern[BPFSTACK_MAX_DEPTH], frames[2 * BPFSTACK_MAX_DEPTH + BPFSTACK_MAX_PYFRAMES];
        size_t n_kern = read_stack(s, rec->kstack_id), n = 0;
        memcpy(kern, s->stack_buf, n_kern * sizeof(uint64_t));
        size_t n_user = walked ? rec->n_uframes : read_stack(s, rec->ustack_id);
        const uint64_t *user = walked ? walked : s->stack_buf;
        *leaf = n_user > 0 ? user[0] : 0;

        struct proc_info *p = NULL;
        *cacheable = (rec->kstack_id >= 0 || rec->ustack_id >= 0 || walked) && (n_kern > 0 || rec->kstack_id < 0) &&
                     (n_user > 0 || rec->ustack_id < 0);
        if (n_user > 0) {
                p = proc_for(s, rec->pid, user[0]);
                if (p && p->maps_unreadable)
                        s->procs_gone++;
                if (!p || p->maps_unreadable || !proc_maps_find(&p->maps, user[0]))
                        *cacheable = false;
        }
        uint64_t jit_unnamed = s->sym.jit_unnamed;
        if (rec->n_pyframes > 0 && !p) {
                p = proc_table_get(s->procs, (int) rec->pid);
                if (p && p->maps_unreadable)
                        p = NULL;
        }
        n = bpfstack_py_user_frames(s, q->iw, p, user, n_user, py, rec->n_pyframes, frames);
        /* Generated code its runtime has not named yet may be named at the
         * next sample. */
        if (s->sym.jit_unnamed != jit_unnamed)
                *cacheable = false;
        /* The stack's kernel addresses not named yet, in one run of the
         * naming program rather than one each. */
        if (s->knames && n_kern > 0)
                kernel_names_prefetch(s->knames, kern, n_kern);
        size_t top = rec->kind == BPFSTACK_OFF_CPU ? tracing_frames_on_top(s, kern, n_kern) : 0;
        for (size_t k = n_kern; k-- > top;) {
                uint64_t f = symbolizer_kernel_frame(&s->sym, q->iw, kern[k]);
                if (f)
                        frames[n++] = f;
        }
        uint64_t callstack = n > 0 ? intern_callstack(q->iw, frames, n) : 0;
        if (intern_error(q->iw))
                *cacheable = false;
        return callstack;
}

/* What a sample says of a walk in BPF that ended as stop. */
static Profiling_StackUnwindError unwind_error_of(uint8_t stop) {
        switch (stop) {
        case BPFSTACK_STOP_DEPTH:
                return Profiling_UNWIND_ERROR_MAX_FRAMES_EXCEEDED;
        case BPFSTACK_STOP_NO_MAPPING:
                return Profiling_UNWIND_ERROR_INVALID_MAP;
        case BPFSTACK_STOP_NO_CFI:
                return Profiling_UNWIND_ERROR_UNWIND_INFO;
        case BPFSTACK_STOP_UNSUPPORTED:
                return Profiling_UNWIND_ERROR_UNSUPPORTED;
        case BPFSTACK_STOP_READ_FAULT:
                return Profiling_UNWIND_ERROR_MEMORY_INVALID;
        case BPFSTACK_STOP_BAD_FRAME:
                return Profiling_UNWIND_ERROR_REPEATED_FRAME;
        default:
                return Profiling_UNWIND_ERROR_NONE;
        }
}

/* A walk that asked for the process's tables (its sample taken at leaf,
 * 0 if not known): loaded after this drain's records, hottest first. An
 * on-CPU sample stands for a tick of CPU time and weighs more than an
 * off-CPU one (every switch-out gives one, and a process switching all
 * the time is not the busiest). */
static void want_tables(struct bpfstack_session *s, uint32_t pid, bool on_cpu, uint64_t leaf) {
        if (pending_add(&s->pending, (int) pid, on_cpu ? BPFSTACK_ON_CPU_HEAT : 1, leaf))
                s->asked = true;
}

/* A walk that left every mapping with a table: if the pc is in no mapping
 * we know of, or (the kernel's notes keep the maps current) in a file
 * that has or may have a table, the process mapped something since its
 * entry was written (dlopen), and its tables are loaded again with its
 * maps read anew. */
static void check_new_mapping(struct bpfstack_session *s, uint32_t pid, uint64_t pc, bool on_cpu) {
        struct proc_info *p = proc_table_peek(s->procs, (int) pid);
        const struct pmap *m = p && !p->maps_unreadable ? proc_maps_find(&p->maps, pc) : NULL;
        if (m && !unwind_tables_could_cover(s->tables, m))
                return; /* anonymous (JIT code) or a file without a usable table: nothing new */
        want_tables(s, pid, on_cpu, pc);
}

/* Loads the tables of the processes that asked, hottest first, a few per
 * drain and for LOAD_BUDGET_NS at most: the files are compiled by the
 * worker threads; a process whose files are not all in yet keeps its
 * place (and its samples add heat to their compiles, most to the files
 * they were taken in), its entry written as soon as those files are in. */
/* Only the processes already waiting for their files' compiles stay
 * pending: most have a partial entry in the map already, which their
 * files complete in place. Dropping them too (as was done) left those
 * entries partial for good when the map filled up while they waited. */
static void pending_keep_waiting(struct pending_loads *pl) {
        size_t kept = 0;
        for (size_t k = 0; k < pl->n; k++)
                if (pl->v[k].waiting)
                        pl->v[kept++] = pl->v[k];
        pl->n = kept;
}

static void load_pending(struct bpfstack_session *s) {
        uint64_t now = now_ns();
        s->asked = false;
        unwind_tables_poll(s->tables);
        struct pending_loads *pl = &s->pending;
        if (now < s->loads_paused_until)
                /* The process map is full: those asking now keep their
                 * frame-pointer stacks (counted) for a second. */
                pending_keep_waiting(pl);
        pending_sort(pl);
        size_t kept = 0, k = 0;
        for (; k < pl->n && k < LOADS_PER_DRAIN && now_ns() - now < LOAD_BUDGET_NS; k++) {
                struct pending_load l = pl->v[k];
                /* New, exec'd or mapped more since: its maps are read anew
                 * (not while it waits for its files' compiles). */
                if (!l.waiting)
                        proc_table_reload(s->procs, l.pid);
                struct proc_info *p = proc_table_get(s->procs, l.pid);
                if (!p || p->maps_unreadable)
                        continue; /* gone */
                int r = unwind_tables_load(s->tables, p, &l);
                if (r == -EINPROGRESS) {
                        /* Its samples from now on heat the compiles again. */
                        l.hits = 0;
                        l.waiting = true;
                        pl->v[kept++] = l;
                        continue;
                }
                if (r == -ENOSPC) {
                        s->loads_paused_until = now + 1000000000u;
                        if (l.waiting)
                                pl->v[kept++] = l;
                        for (k++; k < pl->n; k++)
                                pl->v[kept++] = pl->v[k];
                        pl->n = kept;
                        pending_keep_waiting(pl);
                        return;
                }
                if (r < 0)
                        plugin_log(s->pl, TRACED_LOG_DEBUG, "linux.bpf_stack: unwind tables of pid %d: %s", l.pid,
                                   strerror(-r));
        }
        for (; k < pl->n; k++)
                pl->v[kept++] = pl->v[k];
        pl->n = kept;
}

/* A task first seen, or renamed since: its comm goes into the trace on
 * the sample's sequence, before the sample. */
static void name_task(struct bpfstack_session *s, struct seq *q, const struct bpfstack_record *rec) {
        char comm[BPFSTACK_COMM_LEN + 1];
        memcpy(comm, rec->comm, BPFSTACK_COMM_LEN);
        comm[BPFSTACK_COMM_LEN] = 0;
        if (!task_names_changed(&s->names, (int32_t) rec->tid, comm))
                return;
        TracePacket pkt;
        if (!seq_begin_packet(s, q, &pkt))
                return;
        task_names_packet(&pkt, (int32_t) rec->pid, (int32_t) rec->tid, comm, rec->ts,
                          BuiltinClock_BUILTIN_CLOCK_BOOTTIME);
        seq_end_packet(s, q, &pkt);
}

static void handle(struct bpfstack_session *s, const struct bpfstack_record *rec, const uint64_t *walked,
                   const struct bpfstack_pyframe *py) {
        struct seq *q = rec->kind == BPFSTACK_ON_CPU ? &s->on : &s->off;
        name_task(s, q, rec);
        seq_defaults_packet(s, q);
        if (rec->ustop != BPFSTACK_STOP_NONE)
                s->stops[rec->ustop]++;
        /* Before the symbolization, which reads the maps again when the
         * pc is in none of them. */
        if (walked && rec->unmapped > 0 && rec->unmapped <= rec->n_uframes)
                check_new_mapping(s, rec->pid, walked[rec->unmapped - 1], rec->kind == BPFSTACK_ON_CPU);
        else if (rec->ustop == BPFSTACK_STOP_NO_MAPPING && walked && rec->n_uframes > 0)
                check_new_mapping(s, rec->pid, walked[rec->n_uframes - 1], rec->kind == BPFSTACK_ON_CPU);
        if (rec->pystop == BPFSTACK_PY_NONE && s->cfg.python_frames)
                bpfstack_py_seen(s, rec->pid);
        else
                s->py_stops[rec->pystop]++;
        uint64_t uhash = walked ? frames_hash(walked, rec->n_uframes) : 0;
        if (rec->n_pyframes > 0)
                uhash ^= frames_hash((const uint64_t *) py, 2 * (size_t) rec->n_pyframes) * 0x9E3779B97F4A7C15u;
        uint64_t callstack, leaf;
        struct cs_cache_entry *e = cs_cache_find(s, rec, uhash);
        if (e) {
                callstack = e->callstack;
                leaf = e->leaf;
                s->cs_hits++;
        } else {
                bool cacheable;
                callstack = record_callstack(s, q, rec, walked, py, &leaf, &cacheable);
                s->cs_misses++;
                if (cacheable)
                        cs_cache_add(s, rec, uhash, callstack, leaf);
        }
        /* The frame-pointer stack's innermost frame is where the sample
         * was taken: its file needs its table first. */
        if (rec->ustop == BPFSTACK_STOP_NO_TABLES)
                want_tables(s, rec->pid, rec->kind == BPFSTACK_ON_CPU, leaf);

        TracePacket pkt;
        PerfSample ps;
        if (!seq_begin_packet(s, q, &pkt))
                return;
        TracePacket_set_timestamp(&pkt, rec->ts);
        intern_write_pending(q->iw, &pkt);
        TracePacket_set_sequence_flags(&pkt, TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
        TracePacket_begin_perf_sample(&pkt, &ps);
        PerfSample_set_cpu(&ps, rec->cpu);
        PerfSample_set_pid(&ps, rec->pid);
        PerfSample_set_tid(&ps, rec->tid);
        if (callstack)
                PerfSample_set_callstack_iid(&ps, callstack);
        PerfSample_set_cpu_mode(&ps, rec->kind == BPFSTACK_OFF_CPU || rec->kstack_id >= 0 ? Profiling_MODE_KERNEL
                                                                                          : Profiling_MODE_USER);
        if (rec->kind == BPFSTACK_OFF_CPU)
                PerfSample_set_timebase_count(&ps, rec->blocked_ns);
        if (rec->kstack_id == -EEXIST || rec->ustack_id == -EEXIST)
                PerfSample_set_unwind_error(&ps, Profiling_UNWIND_ERROR_UNKNOWN); /* a stack lost to a map collision */
        else if (walked && unwind_error_of(rec->ustop) != Profiling_UNWIND_ERROR_NONE)
                PerfSample_set_unwind_error(&ps, unwind_error_of(rec->ustop));
        if (s->lost_unreported) {
                PerfSample_set_kernel_records_lost(&ps, s->lost_unreported);
                s->lost_unreported = 0;
        }
        TracePacket_end_perf_sample(&pkt, &ps);
        seq_end_packet(s, q, &pkt);
        if (rec->kind == BPFSTACK_ON_CPU)
                s->samples_on++;
        else {
                s->samples_off++;
                s->blocked_ns += rec->blocked_ns;
        }
}

int bpfstack_on_record(void *ctx, void *data, size_t size) {
        struct bpfstack_session *s = ctx;
        struct bpfstack_record rec;
        if (bpfstack_record_decode(data, size, &rec) < 0) {
                s->bad_records++;
                return 0;
        }
        /* The processes as they were when the sample was taken. */
        if (s->notes)
                perf_notes_apply(s->notes, s->procs, rec.ts);
        /* The frames follow the record, 8-byte aligned in the ring: the
         * walked user frames, then the Python frames. */
        const uint64_t *trailer = (const uint64_t *) ((const uint8_t *) data + sizeof(rec));
        handle(s, &rec, rec.ustack_id == BPFSTACK_USTACK_WALKED ? trailer : NULL,
               (const struct bpfstack_pyframe *) (trailer + rec.n_uframes));
        return s->asked && s->slice_end && now_ns() >= s->slice_end ? SLICE_END : 0;
}

static void read_counters(struct bpfstack_session *s) {
        int ncpu = libbpf_num_possible_cpus();
        if (ncpu <= 0 || ncpu > MAX_CPUS)
                return;
        uint64_t vals[MAX_CPUS];
        for (uint32_t slot = 0; slot < BPFSTACK_CNT_MAX; slot++) {
                if (bpf_map__lookup_elem(s->skel->maps.counters, &slot, sizeof(slot), vals,
                                         (size_t) ncpu * sizeof(uint64_t), 0) < 0)
                        continue;
                uint64_t sum = 0;
                for (int c = 0; c < ncpu; c++)
                        sum += vals[c];
                if (slot == BPFSTACK_CNT_RING_LOST && sum > s->counters_seen[slot])
                        s->lost_unreported += sum - s->counters_seen[slot];
                s->counters_seen[slot] = sum;
        }
}

static void housekeeping(struct bpfstack_session *s, uint64_t now_boot) {
        size_t n_seen = hashmap_size(&s->seen_ids);
        if (n_seen >= s->cfg.stack_map_entries / 4 || n_seen >= s->seen_max)
                collect_stacks(s);
        s->n_refreshed = 0;
        struct seq *qs[] = {&s->on, &s->off};
        for (size_t k = 0; k < 2; k++)
                if (intern_error(qs[k]->iw) || intern_memory(qs[k]->iw) > INTERN_MEMORY_BOUND) {
                        intern_clear(qs[k]->iw);
                        cs_cache_flush(s);
                }
        /* The exited, once their last records are surely read. */
        if (s->notes && now_boot > REAP_DELAY_NS)
                proc_table_reap(s->procs, now_boot - REAP_DELAY_NS);
        if (proc_table_count(s->procs) > PROC_TABLE_BOUND) {
                /* Without exit notes, or too many live: forget everyone,
                 * read maps again as needed. */
                struct proc_table *t;
                if (proc_table_new(NULL, &t) == 0) {
                        proc_table_set_free_userdata(t, bpfstack_py_proc_free);
                        proc_table_free(s->procs);
                        s->procs = t;
                        s->sym.procs = t;
                        cs_cache_flush(s);
                }
        }
}

void bpfstack_clear_interned(struct bpfstack_session *s) {
        intern_clear(s->on.iw);
        intern_clear(s->off.iw);
        cs_cache_flush(s);
}

void bpfstack_drain(struct bpfstack_session *s, bool load) {
        uint64_t start = bpfstack_boottime_ns();
        read_counters(s);
        bool slicing = s->tables && load;
        for (;;) {
                s->slice_end = slicing ? now_ns() + SLICE_NS : 0;
                int r = ring_buffer__consume(s->rb);
                s->slice_end = 0;
                if (r != SLICE_END)
                        break;
                load_pending(s);
        }
        if (slicing)
                load_pending(s);
        /* Every record taken before the drain began is read: the notes
         * until then apply. */
        if (s->notes)
                perf_notes_apply(s->notes, s->procs, start);
        housekeeping(s, start);
}

void bpfstack_on_notes(int fd, uint32_t revents, void *userdata) {
        struct bpfstack_session *s = userdata;
        if (s->notes)
                perf_notes_read(s->notes, s->procs);
}

void bpfstack_on_tables(int fd, uint32_t revents, void *userdata) {
        struct bpfstack_session *s = userdata;
        if (s->tables)
                load_pending(s);
}

void bpfstack_on_ring(int fd, uint32_t revents, void *userdata) {
        bpfstack_drain(userdata, true);
}

int bpfstack_warmup_start(struct bpfstack_session *s) {
        s->warmup_end = now_ns() + BPFSTACK_WARMUP_NS;
        return s->pl->api->add_timer(s->pl->host, BPFSTACK_WARMUP_DRAIN_MS, bpfstack_on_warmup, s, &s->warmup_timer);
}

void bpfstack_on_warmup(void *userdata) {
        struct bpfstack_session *s = userdata;
        if (now_ns() >= s->warmup_end) {
                s->pl->api->remove_source(s->pl->host, s->warmup_timer);
                s->warmup_timer = NULL;
                return;
        }
        bpfstack_drain(s, true);
}
