/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * One linux.bpf_stack instance: probes what the kernel offers, loads the
 * skeleton with the config in .rodata, attaches the on-CPU program to a
 * cpu-clock event per CPU and the off-CPU program to sched_switch, and
 * drains the BPF ring buffer on the host's event loop. Each record's stack
 * ids are looked up in the stack map, symbolized (lib/profiling) and
 * written as a PerfSample: on-CPU samples on one packet sequence, off-CPU
 * samples on another, each with its own timebase (man 7 traced-bpf-stack).
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "basic/hash.h"
#include "basic/pbw.h"
#include "bpfstack-config.h"
#include "bpfstack-ds.h"
#include "bpfstack.skel.h"
#include "profiling/cpus.h"
#include "profiling/intern.h"
#include "profiling/ksyms.h"
#include "profiling/symbolizer.h"
#include "unwind-counters.h"
#include "unwind-tables.h"

#define CLOCK_ID_BOOTTIME 6u
#define MODE_KERNEL 1u
#define MODE_USER 2u
/* Profiling.StackUnwindError */
#define UNWIND_ERROR_UNKNOWN 0u
#define UNWIND_ERROR_NONE 1u
#define UNWIND_ERROR_MEMORY_INVALID 2u
#define UNWIND_ERROR_UNWIND_INFO 3u
#define UNWIND_ERROR_UNSUPPORTED 4u
#define UNWIND_ERROR_INVALID_MAP 5u
#define UNWIND_ERROR_MAX_FRAMES_EXCEEDED 6u
#define UNWIND_ERROR_REPEATED_FRAME 7u
#define INTERN_MEMORY_BOUND (64u << 20)
#define MAX_CPUS 1024
#define REFRESH_SLOTS 64
#define PROC_TABLE_BOUND 4096
/* Callstacks already interned, by (kind, pid, stack ids): most records
 * repeat a stack, and a hit saves two map lookups (system calls) and the
 * symbolization. Emptied whenever a stack id may change meaning (stacks
 * deleted from the map) or the interned ids do (intern state cleared). */
/* Processes whose tables are loaded per drain at most (each may compile
 * new files' tables), and those waiting for theirs. */
#define LOADS_PER_DRAIN 16u
#define PENDING_LOADS 64u
/* Walked user stacks of switched-out tasks kept at once (1 KiB each). */
#define OUT_USTACKS 4096u
/* Page index entries (4 bytes, one per 4 KiB of code with tables): one for
 * every four rows, far more than code has (libc: 28 000 rows, 430 pages). */
#define UNWIND_PAGES(c) ((c)->unwind_rows / 4u)
#define CS_CACHE_SIZE 4096u
#define CS_CACHE_PROBES 8u

/* One packet sequence: on-CPU or off-CPU. */
struct seq {
        struct traced_writer *writer;
        struct intern_writer *iw;
        struct pbw pkt;
        uint8_t defaults[128]; /* serialized TracePacketDefaults */
        size_t defaults_len;
};

struct bpfstack_session {
        struct bpfstack_session *next;
        struct bpfstack_plugin *pl;
        uint64_t instance_id;
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
        int pending[PENDING_LOADS]; /* pids whose walks asked for tables this drain */
        size_t n_pending;
        uint64_t loads_paused_until; /* CLOCK_MONOTONIC ns: the process map was full */
        uint64_t stops[BPFSTACK_STOP_MAX]; /* walked records by how the walk ended */
        /* The unwind counters' sequence: descriptors, then values each
         * second while they change. */
        struct traced_writer *counters_writer;
        struct pbw counters_pkt;
        uint64_t counters_uuid, counters_next_ns;
        int64_t counters_sent[UNWIND_COUNTER_MAX];
        bool counters_described;
        struct ring_buffer *rb;
        struct traced_source *rb_src, *timer;

        struct proc_table *procs;
        struct elf_cache *elves;
        struct ksyms *ksyms;
        struct symbolizer sym;
        struct seq on, off;

        uint64_t *stack_buf; /* max_depth frames */
        /* Stack ids seen since the last collection (a set: open addressing,
         * id + 1 stored, 0 empty); collected when it holds a quarter of the
         * map's entries. */
        uint32_t *seen_ids;
        size_t n_seen, cap_seen;
        bool collecting;
        int refreshed[REFRESH_SLOTS]; /* pids whose maps were read again this drain */
        size_t n_refreshed;

        struct cs_cache_entry {
                uint32_t pid;
                int32_t kstack_id, ustack_id;
                uint8_t kind;
                bool used;
                uint64_t uhash; /* walked user frames: their hash */
                uint64_t callstack;
        } *cs_cache;
        uint64_t cs_hits, cs_misses;

        uint64_t counters_seen[BPFSTACK_CNT_MAX];
        uint64_t lost_unreported;
        uint64_t samples_on, samples_off, blocked_ns, bad_records, stacks_missing, procs_gone, stacks_collected;
};

/* --- writing -------------------------------------------------------------- */

static void seq_write(struct bpfstack_session *s, struct seq *q) {
        if (!q->pkt.error)
                (void) s->pl->api->write_packet(q->writer, q->pkt.buf, q->pkt.len);
}

/* TracePacketDefaults {timestamp_clock_id: BOOTTIME, perf_sample_defaults
 * {timebase}} for a sequence. */
static int seq_defaults(struct seq *q, const struct pbw *timebase) {
        struct pbw d = {}, psd = {};
        pbw_bytes(&psd, 1, timebase->buf, timebase->len);
        pbw_varint(&d, 58, CLOCK_ID_BOOTTIME);
        pbw_message(&d, 12, &psd);
        int r = d.error ? -ENOMEM : 0;
        if (r == 0 && d.len <= sizeof(q->defaults)) {
                memcpy(q->defaults, d.buf, d.len);
                q->defaults_len = d.len;
        } else if (r == 0)
                r = -E2BIG;
        pbw_done(&d);
        pbw_done(&psd);
        return r;
}

static void seq_begin(struct bpfstack_session *s, struct seq *q) {
        if (intern_packet_flags(q->iw) & SEQ_INCREMENTAL_STATE_CLEARED) {
                pbw_reset(&q->pkt);
                pbw_bytes(&q->pkt, 59, q->defaults, q->defaults_len);
                pbw_varint(&q->pkt, TRACE_PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
                seq_write(s, q);
        }
        pbw_reset(&q->pkt);
}

/* --- symbolizing ---------------------------------------------------------- */

static bool set_add(uint32_t *set, size_t cap, uint32_t id) {
        for (size_t k = (id * 2654435761u) & (cap - 1);; k = (k + 1) & (cap - 1)) {
                if (set[k] == id + 1)
                        return false;
                if (set[k] == 0) {
                        set[k] = id + 1;
                        return true;
                }
        }
}

static bool set_has(const uint32_t *set, size_t cap, uint32_t id) {
        for (size_t k = (id * 2654435761u) & (cap - 1);; k = (k + 1) & (cap - 1)) {
                if (set[k] == id + 1)
                        return true;
                if (set[k] == 0)
                        return false;
        }
}

static void seen_add(struct bpfstack_session *s, uint32_t id) {
        if (s->collecting)
                return; /* read now and deleted just after; seen again next time */
        if (s->n_seen < s->cap_seen / 2 && set_add(s->seen_ids, s->cap_seen, id))
                s->n_seen++;
}

static void cs_cache_flush(struct bpfstack_session *s) {
        if (s->cs_cache)
                memset(s->cs_cache, 0, CS_CACHE_SIZE * sizeof(*s->cs_cache));
}

/* Deletes the stacks seen but no longer referenced: what the ring buffer
 * held is consumed; what a switched-out task holds (out_since) stays. */
static void collect_stacks(struct bpfstack_session *s) {
        size_t cap = s->cap_seen;
        uint32_t *live = calloc(cap, sizeof(uint32_t));
        if (!live)
                return;
        size_t n_live = 0;
        uint32_t key, next;
        struct bpfstack_switched_out o;
        const struct bpf_map *m = s->skel->maps.out_since;
        for (int r = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); r == 0;
             r = bpf_map__get_next_key(m, &key, &next, sizeof(next))) {
                key = next;
                if (bpf_map__lookup_elem(m, &key, sizeof(key), &o, sizeof(o), 0) < 0)
                        continue;
                int32_t ids[2] = { o.kstack_id, o.ustack_id };
                for (size_t j = 0; j < 2; j++)
                        if (ids[j] >= 0 && n_live < cap / 2 && set_add(live, cap, (uint32_t) ids[j]))
                                n_live++;
        }
        /* A task that came back while we walked out_since sent its record
         * before or during the walk: read those now, before deleting their
         * stacks. One back after the walk was live in it. */
        s->collecting = true;
        (void) ring_buffer__consume(s->rb);
        s->collecting = false;
        for (size_t k = 0; k < cap; k++) {
                uint32_t v = s->seen_ids[k];
                if (v && !set_has(live, cap, v - 1)) {
                        uint32_t id = v - 1;
                        (void) bpf_map__delete_elem(s->skel->maps.stacks, &id, sizeof(id), 0);
                        s->stacks_collected++;
                }
        }
        free(s->seen_ids);
        s->seen_ids = live;
        s->n_seen = n_live;
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
                /* Mapped since we read its maps (dlopen, a new exec): read again, once per drain. */
                for (size_t k = 0; k < s->n_refreshed; k++)
                        if (s->refreshed[k] == (int) pid)
                                return p;
                s->refreshed[s->n_refreshed++] = (int) pid;
                (void) proc_table_exec(s->procs, (int) pid, p->comm);
                p = proc_table_get(s->procs, (int) pid);
        }
        return p;
}

/* The off-CPU program runs inside the sched_switch tracepoint, so the
 * kernel stack it takes starts with the program itself and the
 * tracepoint's dispatch, above __schedule. Those frames are the
 * collector's, not the task's: they are left out. */
static bool tracing_frame(const struct ksyms *k, uint64_t addr) {
        static const char *const prefixes[] = { "bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_" };
        const char *name = k ? ksyms_lookup(k, addr) : NULL;
        if (!name)
                return false;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
                if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
                        return true;
        return false;
}

static size_t tracing_frames_on_top(const struct ksyms *k, const uint64_t *kern, size_t n) {
        size_t skip = 0;
        while (skip < n && tracing_frame(k, kern[skip]))
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
                         uint64_t callstack) {
        if (!s->cs_cache)
                return;
        size_t i = cs_cache_slot(rec, uhash), k = 0;
        while (k < CS_CACHE_PROBES && s->cs_cache[(i + k) & (CS_CACHE_SIZE - 1)].used)
                k++;
        /* A full run of probes: the first slot makes room (it is a cache). */
        struct cs_cache_entry *e = &s->cs_cache[(i + (k < CS_CACHE_PROBES ? k : 0)) & (CS_CACHE_SIZE - 1)];
        *e = (struct cs_cache_entry) { .pid = rec->pid, .kstack_id = rec->kstack_id, .ustack_id = rec->ustack_id,
                                       .kind = (uint8_t) rec->kind, .used = true, .uhash = uhash,
                                       .callstack = callstack };
}

/* Reads and symbolizes the record's stacks and interns the callstack;
 * sets *cacheable when the result depends on nothing but the key (the
 * process's maps were read and held the innermost user frame). */
static uint64_t record_callstack(struct bpfstack_session *s, struct seq *q, const struct bpfstack_record *rec,
                                 const uint64_t *walked, bool *cacheable) {
        uint64_t kern[BPFSTACK_MAX_DEPTH], frames[2 * BPFSTACK_MAX_DEPTH];
        size_t n_kern = read_stack(s, rec->kstack_id), n = 0;
        memcpy(kern, s->stack_buf, n_kern * sizeof(uint64_t));
        size_t n_user = walked ? rec->n_uframes : read_stack(s, rec->ustack_id);
        const uint64_t *user = walked ? walked : s->stack_buf;

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
        for (size_t k = n_user; k-- > 0;) {
                /* Return addresses but the innermost: the call is the byte before. */
                uint64_t f = symbolizer_user_frame(&s->sym, q->iw, p, k > 0 ? user[k] - 1 : user[k]);
                if (f)
                        frames[n++] = f;
        }
        size_t top = rec->kind == BPFSTACK_OFF_CPU ? tracing_frames_on_top(s->ksyms, kern, n_kern) : 0;
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
static unsigned unwind_error_of(uint8_t stop) {
        switch (stop) {
        case BPFSTACK_STOP_DEPTH:
                return UNWIND_ERROR_MAX_FRAMES_EXCEEDED;
        case BPFSTACK_STOP_NO_MAPPING:
                return UNWIND_ERROR_INVALID_MAP;
        case BPFSTACK_STOP_NO_CFI:
                return UNWIND_ERROR_UNWIND_INFO;
        case BPFSTACK_STOP_UNSUPPORTED:
                return UNWIND_ERROR_UNSUPPORTED;
        case BPFSTACK_STOP_READ_FAULT:
                return UNWIND_ERROR_MEMORY_INVALID;
        case BPFSTACK_STOP_BAD_FRAME:
                return UNWIND_ERROR_REPEATED_FRAME;
        default:
                return UNWIND_ERROR_NONE;
        }
}

/* A walk that asked for the process's tables: loaded after this drain's
 * records. */
static void want_tables(struct bpfstack_session *s, uint32_t pid) {
        for (size_t k = 0; k < s->n_pending; k++)
                if (s->pending[k] == (int) pid)
                        return;
        if (s->n_pending < PENDING_LOADS)
                s->pending[s->n_pending++] = (int) pid;
}

/* A walk that left every mapping with a table: if the pc is in no mapping
 * we know of, the process mapped something since (dlopen), and its
 * tables are loaded again with its maps read anew. */
static void check_new_mapping(struct bpfstack_session *s, uint32_t pid, uint64_t pc) {
        struct proc_info *p = proc_table_peek(s->procs, (int) pid);
        if (p && !p->maps_unreadable && proc_maps_find(&p->maps, pc))
                return; /* a mapping without a table (JIT code, the vdso): nothing new */
        want_tables(s, pid);
}

/* Loads the tables of the processes that asked, a few per drain. */
static void load_pending(struct bpfstack_session *s) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
        if (now < s->loads_paused_until) {
                /* The process map is full: those asking now keep their
                 * frame-pointer stacks (counted) for a second. */
                s->n_pending = 0;
                return;
        }
        size_t done = 0;
        for (; done < s->n_pending && done < LOADS_PER_DRAIN; done++) {
                int pid = s->pending[done];
                /* New, exec'd or mapped more since: its maps are read anew. */
                struct proc_info *p = proc_table_peek(s->procs, pid);
                (void) proc_table_exec(s->procs, pid, p ? p->comm : "");
                p = proc_table_get(s->procs, pid);
                if (!p || p->maps_unreadable)
                        continue; /* gone */
                int r = unwind_tables_load(s->tables, p);
                if (r == -ENOSPC) {
                        s->loads_paused_until = now + 1000000000u;
                        s->n_pending = 0;
                        return;
                }
                if (r < 0)
                        plugin_log(s->pl, TRACED_LOG_DEBUG, "linux.bpf_stack: unwind tables of pid %d: %s", pid,
                                   strerror(-r));
        }
        memmove(s->pending, s->pending + done, (s->n_pending - done) * sizeof(s->pending[0]));
        s->n_pending -= done;
}

static void handle(struct bpfstack_session *s, const struct bpfstack_record *rec, const uint64_t *walked) {
        struct seq *q = rec->kind == BPFSTACK_ON_CPU ? &s->on : &s->off;
        seq_begin(s, q);
        if (rec->ustop != BPFSTACK_STOP_NONE) {
                s->stops[rec->ustop]++;
                if (rec->ustop == BPFSTACK_STOP_NO_TABLES)
                        want_tables(s, rec->pid);
                else if (rec->ustop == BPFSTACK_STOP_NO_MAPPING && walked && rec->n_uframes > 0)
                        check_new_mapping(s, rec->pid, walked[rec->n_uframes - 1]);
        }
        uint64_t uhash = walked ? frames_hash(walked, rec->n_uframes) : 0;
        uint64_t callstack;
        struct cs_cache_entry *e = cs_cache_find(s, rec, uhash);
        if (e) {
                callstack = e->callstack;
                s->cs_hits++;
        } else {
                bool cacheable;
                callstack = record_callstack(s, q, rec, walked, &cacheable);
                s->cs_misses++;
                if (cacheable)
                        cs_cache_add(s, rec, uhash, callstack);
        }

        struct pbw ps = {};
        pbw_varint(&ps, 1, rec->cpu);
        pbw_varint(&ps, 2, rec->pid);
        pbw_varint(&ps, 3, rec->tid);
        if (callstack)
                pbw_varint(&ps, 4, callstack);
        pbw_varint(&ps, 5, rec->kind == BPFSTACK_OFF_CPU || rec->kstack_id >= 0 ? MODE_KERNEL : MODE_USER);
        if (rec->kind == BPFSTACK_OFF_CPU)
                pbw_varint(&ps, 6, rec->blocked_ns);
        if (rec->kstack_id == -EEXIST || rec->ustack_id == -EEXIST)
                pbw_varint(&ps, 16, UNWIND_ERROR_UNKNOWN); /* a stack lost to a map collision */
        else if (walked && unwind_error_of(rec->ustop) != UNWIND_ERROR_NONE)
                pbw_varint(&ps, 16, unwind_error_of(rec->ustop));
        if (s->lost_unreported) {
                pbw_varint(&ps, 17, s->lost_unreported);
                s->lost_unreported = 0;
        }
        pbw_varint(&q->pkt, 8, rec->ts);
        intern_write_pending(q->iw, &q->pkt);
        pbw_varint(&q->pkt, TRACE_PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        pbw_message(&q->pkt, 66, &ps);
        pbw_done(&ps);
        seq_write(s, q);
        if (rec->kind == BPFSTACK_ON_CPU)
                s->samples_on++;
        else {
                s->samples_off++;
                s->blocked_ns += rec->blocked_ns;
        }
}

static int on_record(void *ctx, void *data, size_t size) {
        struct bpfstack_session *s = ctx;
        struct bpfstack_record rec;
        if (bpfstack_record_decode(data, size, &rec) < 0) {
                s->bad_records++;
                return 0;
        }
        /* The frames follow the record, 8-byte aligned in the ring. */
        handle(s, &rec, rec.ustack_id == BPFSTACK_USTACK_WALKED ? (const uint64_t *) ((const uint8_t *) data + sizeof(rec)) : NULL);
        return 0;
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

static void housekeeping(struct bpfstack_session *s) {
        if (s->n_seen >= s->cfg.stack_map_entries / 4 || s->n_seen >= s->cap_seen / 2)
                collect_stacks(s);
        s->n_refreshed = 0;
        struct seq *qs[] = { &s->on, &s->off };
        for (size_t k = 0; k < 2; k++)
                if (intern_error(qs[k]->iw) || intern_memory(qs[k]->iw) > INTERN_MEMORY_BOUND) {
                        intern_clear(qs[k]->iw);
                        cs_cache_flush(s);
                }
        if (proc_table_count(s->procs) > PROC_TABLE_BOUND) {
                /* No exit notes here: forget everyone, read maps again as needed. */
                struct proc_table *t;
                if (proc_table_new(NULL, &t) == 0) {
                        proc_table_free(s->procs);
                        s->procs = t;
                        s->sym.procs = t;
                        cs_cache_flush(s);
                }
        }
}

static void drain(struct bpfstack_session *s) {
        read_counters(s);
        (void) ring_buffer__consume(s->rb);
        if (s->tables)
                load_pending(s);
        housekeeping(s);
}

static void on_ring(int fd, uint32_t revents, void *userdata) {
        drain(userdata);
}

static void close_cpu(struct bpfstack_session *s, size_t cpu) {
        if (s->perf_links[cpu]) {
                bpf_link__destroy(s->perf_links[cpu]);
                s->perf_links[cpu] = NULL;
        }
        if (s->perf_fds[cpu] >= 0) {
                close(s->perf_fds[cpu]);
                s->perf_fds[cpu] = -EBADF;
                s->n_cpus--;
        }
}

static int open_cpu(struct bpfstack_session *s, uint32_t cpu);

static void hotplug_close(void *userdata, size_t cpu) {
        close_cpu(userdata, cpu);
}

static int hotplug_open(void *userdata, size_t cpu) {
        struct bpfstack_session *s = userdata;
        int r = open_cpu(s, (uint32_t) cpu);
        return r < 0 ? r : s->perf_fds[cpu];
}

static void hotplug_changed(void *userdata, size_t cpu, enum cpu_hotplug_change what, int error) {
        struct bpfstack_session *s = userdata;
        plugin_log_cpu_change(s->pl, "linux.bpf_stack", s->instance_id, (uint32_t) cpu, what, error);
}

static const struct cpu_hotplug_ops hotplug_ops = {
        .close = hotplug_close,
        .open = hotplug_open,
        .changed = hotplug_changed,
};

/* A CPU that goes offline leaves its clock event silent for good, even
 * when it is back: on each drain period the shared tracker closes such an
 * event and opens it again once its CPU is online. */
static void check_hotplug(struct bpfstack_session *s) {
        if (s->cfg.on_cpu && s->skel)
                (void) cpu_hotplug_check(&s->hotplug);
}

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The unwind counters, at most once a second (and at the end): each one
 * whose value changed, all of them the first time. */
static void write_counters(struct bpfstack_session *s, bool final) {
        if (!s->tables || !s->counters_writer)
                return;
        uint64_t now = boottime_ns();
        if (!final && now < s->counters_next_ns)
                return;
        s->counters_next_ns = now + 1000000000u;
        struct unwind_stats st;
        unwind_tables_stats(s->tables, &st);
        int64_t v[UNWIND_COUNTER_MAX];
        unwind_counters_values(&st, s->stops, s->counters_seen[BPFSTACK_CNT_USTACK_FULL], v);
        struct pbw *pkt = &s->counters_pkt;
        for (unsigned k = 0; k < UNWIND_COUNTER_MAX; k++) {
                if (s->counters_described && v[k] == s->counters_sent[k])
                        continue;
                /* The descriptor again with each value: a ring buffer may
                 * have overwritten the first. */
                unwind_counter_descriptor(pkt, s->counters_uuid, k);
                if (!pkt->error)
                        (void) s->pl->api->write_packet(s->counters_writer, pkt->buf, pkt->len);
                unwind_counter_value(pkt, s->counters_uuid, k, now, v[k]);
                if (!pkt->error)
                        (void) s->pl->api->write_packet(s->counters_writer, pkt->buf, pkt->len);
                s->counters_sent[k] = v[k];
        }
        s->counters_described = true;
}

static void on_timer(void *userdata) {
        check_hotplug(userdata);
        drain(userdata);
        write_counters(userdata, false);
}

/* --- setup ---------------------------------------------------------------- */

static void session_free(struct bpfstack_session *s) {
        struct bpfstack_plugin *pl = s->pl;
        if (s->timer)
                pl->api->remove_source(pl->host, s->timer);
        if (s->rb_src)
                pl->api->remove_source(pl->host, s->rb_src);
        ring_buffer__free(s->rb);
        bpf_link__destroy(s->switch_link);
        bpf_link__destroy(s->exec_link);
        bpf_link__destroy(s->exit_link);
        unwind_tables_free(s->tables);
        for (size_t k = 0; k < s->n_possible; k++)
                close_cpu(s, k);
        cpu_hotplug_done(&s->hotplug);
        bpfstack__destroy(s->skel);
        if (s->counters_writer) {
                (void) pl->api->flush_writer(s->counters_writer);
                pl->api->free_writer(s->counters_writer);
        }
        pbw_done(&s->counters_pkt);
        struct seq *qs[] = { &s->on, &s->off };
        for (size_t k = 0; k < 2; k++) {
                if (qs[k]->writer) {
                        (void) pl->api->flush_writer(qs[k]->writer);
                        pl->api->free_writer(qs[k]->writer);
                }
                intern_writer_free(qs[k]->iw);
                pbw_done(&qs[k]->pkt);
        }
        proc_table_free(s->procs);
        elf_cache_free(s->elves);
        ksyms_free(s->ksyms);
        free(s->stack_buf);
        free(s->cs_cache);
        free(s->seen_ids);
        free(s);
}

/* What the kernel must offer; a clear error naming what it lacks. */
static int probe(struct bpfstack_session *s) {
        struct bpfstack_plugin *pl = s->pl;
        const char *btf_path = s->cfg.btf_path;
        struct btf *btf = btf__parse(btf_path, NULL);
        if (!btf) {
                int r = -errno;
                plugin_log(pl, TRACED_LOG_ERR,
                           "linux.bpf_stack instance %llu refused: no kernel BTF at %s (%s): CO-RE needs a kernel "
                           "built with CONFIG_DEBUG_INFO_BTF=y",
                           (unsigned long long) s->instance_id, btf_path, strerror(-r));
                return -EOPNOTSUPP;
        }
        btf__free(btf);
        static const struct {
                enum bpf_prog_type type;
                const char *what;
                bool needed_on, needed_off;
        } progs[] = {
                { BPF_PROG_TYPE_PERF_EVENT, "BPF perf_event programs", true, false },
                { BPF_PROG_TYPE_RAW_TRACEPOINT, "BPF raw tracepoint programs", false, true },
        };
        for (size_t k = 0; k < sizeof(progs) / sizeof(progs[0]); k++) {
                if (!(progs[k].needed_on && s->cfg.on_cpu) && !(progs[k].needed_off && s->cfg.off_cpu))
                        continue;
                if (libbpf_probe_bpf_prog_type(progs[k].type, NULL) != 1) {
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu refused: the kernel does not offer %s (or we "
                                   "lack CAP_BPF/CAP_PERFMON)",
                                   (unsigned long long) s->instance_id, progs[k].what);
                        return -EOPNOTSUPP;
                }
        }
        static const struct {
                enum bpf_map_type type;
                const char *what;
        } maps[] = {
                { BPF_MAP_TYPE_RINGBUF, "BPF ring buffers (Linux 5.8)" },
                { BPF_MAP_TYPE_STACK_TRACE, "BPF stack trace maps" },
        };
        for (size_t k = 0; k < sizeof(maps) / sizeof(maps[0]); k++)
                if (libbpf_probe_bpf_map_type(maps[k].type, NULL) != 1) {
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu refused: the kernel does not offer %s (or we "
                                   "lack CAP_BPF)",
                                   (unsigned long long) s->instance_id, maps[k].what);
                        return -EOPNOTSUPP;
                }
        return 0;
}

static int open_cpu_clock(uint32_t cpu, uint32_t hz);

/* The clock event of cpu with the on-CPU program attached. -ENODEV when
 * the CPU is offline. */
static int open_cpu(struct bpfstack_session *s, uint32_t cpu) {
        int fd = open_cpu_clock(cpu, s->cfg.frequency);
        if (fd < 0)
                return fd;
        struct bpf_link *l = bpf_program__attach_perf_event(s->skel->progs.on_cpu, fd);
        if (!l) {
                int r = -errno;
                close(fd);
                return r;
        }
        s->perf_fds[cpu] = fd;
        s->perf_links[cpu] = l;
        s->n_cpus++;
        return 0;
}

static int open_cpu_clock(uint32_t cpu, uint32_t hz) {
        struct perf_event_attr a = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(a),
                .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_freq = hz,
                .freq = 1,
                .read_format = CPU_HOTPLUG_READ_FORMAT,
        };
        int fd = (int) syscall(SYS_perf_event_open, &a, -1, (int) cpu, -1, PERF_FLAG_FD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Opens the skeleton with the config in .rodata and the maps sized, and
 * loads it: the off-CPU program as a BTF tracepoint or a raw one. */
static int open_load(struct bpfstack_session *s, uint64_t cgroup_id, bool btf_tp) {
        const struct bpfstack_config *c = &s->cfg;
        int r;
        bpfstack__destroy(s->skel);
        LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = c->btf_path);
        s->skel = bpfstack__open_opts(&oo);
        if (!s->skel)
                return -errno;
        struct bpfstack__rodata *ro = s->skel->rodata;
        ro->want_on_cpu = c->on_cpu;
        ro->want_off_cpu = c->off_cpu;
        ro->want_kernel = c->kernel_frames;
        ro->want_user = c->user_frames;
        ro->min_block_ns = c->min_blocked_ns;
        ro->n_pids = (uint32_t) c->n_pids;
        ro->n_tids = (uint32_t) c->n_tids;
        ro->n_comms = (uint32_t) c->n_comms;
        memcpy((void *) ro->pids, c->pids, sizeof(c->pids));
        memcpy((void *) ro->tids, c->tids, sizeof(c->tids));
        memcpy((void *) ro->comms, c->comms, sizeof(c->comms));
        ro->cgroup_id = cgroup_id;
        ro->with_preempted = c->with_preempted;
        ro->wakeup_bytes = (uint64_t) c->ring_buffer_kb * 1024u / 4u;
        /* Off-CPU records come as fast as tasks switch: those keep the
         * check. On-CPU alone, at most frequency x CPUs records a second:
         * when four drain periods of them fit the ring, none is needed. */
        long n_cpus = sysconf(_SC_NPROCESSORS_CONF);
        uint64_t per_period = (uint64_t) c->frequency * (uint64_t) (n_cpus > 0 ? n_cpus : 1) *
                              sizeof(struct bpfstack_record) * c->drain_period_ms / 1000u;
        ro->on_cpu_wakeups = c->off_cpu || 4 * per_period >= (uint64_t) c->ring_buffer_kb * 1024u;
        bool walk = c->walk_tables && c->user_frames;
        ro->walk_user = walk;
        ro->max_depth = c->max_depth;
        if ((r = bpf_map__set_max_entries(s->skel->maps.unwind_rows, walk ? c->unwind_rows : 1)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.unwind_pages, walk ? UNWIND_PAGES(c) : 1)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.unwind_procs, walk ? c->unwind_procs : 1)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.out_ustack, walk && c->off_cpu ? OUT_USTACKS : 1)) < 0)
                return r;
        (void) bpf_program__set_autoload(s->skel->progs.on_exec, walk);
        (void) bpf_program__set_autoload(s->skel->progs.on_exit, walk);
        if ((r = bpf_map__set_value_size(s->skel->maps.stacks, c->max_depth * sizeof(uint64_t))) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.stacks, c->stack_map_entries)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.records, c->ring_buffer_kb * 1024u)) < 0)
                return r;
        (void) bpf_program__set_autoload(s->skel->progs.on_cpu, c->on_cpu);
        (void) bpf_program__set_autoload(s->skel->progs.switch_btf, c->off_cpu && btf_tp);
        (void) bpf_program__set_autoload(s->skel->progs.switch_raw, c->off_cpu && !btf_tp);
        return bpfstack__load(s->skel);
}

static int setup(struct bpfstack_session *s) {
        struct bpfstack_plugin *pl = s->pl;
        const struct bpfstack_config *c = &s->cfg;
        unsigned long long id = (unsigned long long) s->instance_id;
        int r = probe(s);
        if (r < 0)
                return r;

        uint64_t cgroup_id = 0;
        if (c->cgroup[0]) {
                struct stat st;
                if (stat(c->cgroup, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu refused: filter: cgroup=%s: not a cgroup "
                                   "directory",
                                   id, c->cgroup);
                        return -EINVAL;
                }
                cgroup_id = st.st_ino; /* cgroup v2: the directory's inode is the cgroup id */
        }

        /* BTF tracepoint first; when the kernel refuses it, the raw one. */
        bool btf_tp = c->off_cpu;
        r = open_load(s, cgroup_id, btf_tp);
        if (r < 0 && btf_tp) {
                plugin_log(pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: tp_btf/sched_switch refused (%s), using the raw "
                           "tracepoint",
                           id, strerror(-r));
                btf_tp = false;
                r = open_load(s, cgroup_id, false);
        }
        if (r < 0) {
                plugin_log(pl, TRACED_LOG_ERR,
                           "linux.bpf_stack instance %llu: loading the BPF programs failed: %s (the verifier's "
                           "log is above)",
                           id, strerror(-r));
                return r;
        }

        s->cap_seen = 1;
        while (s->cap_seen < 2 * (size_t) c->stack_map_entries)
                s->cap_seen *= 2;
        /* Without it every record is symbolized: slower, not wrong. */
        s->cs_cache = calloc(CS_CACHE_SIZE, sizeof(*s->cs_cache));
        if (!(s->stack_buf = calloc(c->max_depth, sizeof(uint64_t))) ||
            !(s->seen_ids = calloc(s->cap_seen, sizeof(uint32_t))))
                return -ENOMEM;
        if (c->kernel_frames && (r = ksyms_load_proc(&s->ksyms)) < 0)
                plugin_log(pl, TRACED_LOG_WARNING, "linux.bpf_stack: kernel frames stay unnamed: /proc/kallsyms: %s",
                           strerror(-r));
        if ((r = proc_table_new(NULL, &s->procs)) < 0 || (r = elf_cache_new(NULL, &s->elves)) < 0 ||
            (r = intern_writer_new(&s->on.iw)) < 0 || (r = intern_writer_new(&s->off.iw)) < 0)
                return r;
        s->sym = (struct symbolizer) { .procs = s->procs, .elves = s->elves, .ksyms = s->ksyms };
        if (c->walk_tables && c->user_frames) {
                r = unwind_tables_new(bpf_map__fd(s->skel->maps.unwind_rows), c->unwind_rows,
                                      bpf_map__fd(s->skel->maps.unwind_pages), UNWIND_PAGES(c),
                                      bpf_map__fd(s->skel->maps.unwind_procs), &s->sym, &s->tables);
                if (r < 0) {
                        plugin_log(pl, TRACED_LOG_ERR, "linux.bpf_stack instance %llu: mapping the unwind tables: %s",
                                   id, strerror(-r));
                        return r;
                }
                if (!(s->exec_link = bpf_program__attach(s->skel->progs.on_exec)) ||
                    !(s->exit_link = bpf_program__attach(s->skel->progs.on_exit))) {
                        r = -errno;
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu: attaching to sched_process_exec/exit: %s", id,
                                   strerror(-r));
                        return r;
                }
        }

        /* Timebases: what each sequence's samples count. */
        struct pbw tb = {}, ev = {};
        pbw_varint(&tb, 2, c->frequency);
        pbw_varint(&tb, 4, 1); /* SW_CPU_CLOCK */
        pbw_string(&tb, 10, "linux.bpf_stack on-CPU");
        r = seq_defaults(&s->on, &tb);
        pbw_reset(&tb);
        pbw_varint(&tb, 1, 1);
        pbw_string(&ev, 1, "sched/sched_switch");
        pbw_message(&tb, 3, &ev);
        pbw_string(&tb, 10, "linux.bpf_stack off-CPU (timebase_count: ns blocked)");
        if (r == 0)
                r = seq_defaults(&s->off, &tb);
        pbw_done(&tb);
        pbw_done(&ev);
        if (r < 0)
                return r;
        if ((r = pl->api->new_writer(pl->host, s->instance_id, &s->on.writer)) < 0 ||
            (r = pl->api->new_writer(pl->host, s->instance_id, &s->off.writer)) < 0 ||
            (s->tables && (r = pl->api->new_writer(pl->host, s->instance_id, &s->counters_writer)) < 0))
                return r;
        /* Track uuids of this instance: distinct from other instances'. */
        s->counters_uuid = (s->instance_id * 0x9E3779B97F4A7C15u) & ~(uint64_t) 0xff;

        s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.records), on_record, s, NULL);
        if (!s->rb)
                return -errno;
        if ((r = pl->api->add_fd(pl->host, ring_buffer__epoll_fd(s->rb), EPOLLIN, on_ring, s, &s->rb_src)) < 0 ||
            (r = pl->api->add_timer(pl->host, c->drain_period_ms, on_timer, s, &s->timer)) < 0)
                return r;

        if (c->off_cpu) {
                struct bpf_program *prog = btf_tp ? s->skel->progs.switch_btf : s->skel->progs.switch_raw;
                s->switch_link = bpf_program__attach(prog);
                if (!s->switch_link) {
                        r = -errno;
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu: attaching to sched_switch "
                                   "failed: %s",
                                   id, strerror(-r));
                        return r;
                }
        }
        if (c->on_cpu) {
                int ncpu = libbpf_num_possible_cpus();
                if (ncpu <= 0)
                        return ncpu < 0 ? ncpu : -ENODEV;
                s->n_possible = ncpu < MAX_CPUS ? (uint32_t) ncpu : MAX_CPUS;
                if ((r = cpu_hotplug_init(&s->hotplug, s->n_possible, &hotplug_ops, s)) < 0)
                        return r;
                for (uint32_t cpu = 0; cpu < s->n_possible; cpu++) {
                        r = open_cpu(s, cpu);
                        cpu_hotplug_set(&s->hotplug, cpu, cpu, s->perf_fds[cpu]);
                        if (r == -ENODEV)
                                continue; /* opened when it comes online */
                        if (r < 0) {
                                plugin_log(pl, TRACED_LOG_ERR,
                                           "linux.bpf_stack instance %llu: sampling CPU %u (cpu-clock event with "
                                           "the on-CPU program): %s",
                                           id, cpu, strerror(-r));
                                return r;
                        }
                }
        }
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.bpf_stack instance %llu: on-CPU %s (%u Hz, %zu CPUs), off-CPU %s (%s), stacks:%s%s, "
                   "depth %u, user stacks by %s",
                   id, c->on_cpu ? "on" : "off", c->frequency, s->n_cpus, c->off_cpu ? "on" : "off",
                   btf_tp ? "tp_btf" : "raw tracepoint", c->kernel_frames ? " kernel" : "",
                   c->user_frames ? " user" : "", c->max_depth, s->tables ? "unwind tables" : "frame pointers");
        return 0;
}

int bpfstack_session_start(struct bpfstack_plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        char err[256];
        struct bpfstack_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pl = pl;
        s->instance_id = instance_id;
        for (size_t k = 0; k < MAX_CPUS; k++)
                s->perf_fds[k] = -EBADF;
        int r = bpfstack_config_parse(config, size, &s->cfg, err, sizeof(err));
        if (r < 0) {
                if (r == -EINVAL)
                        plugin_log(pl, TRACED_LOG_ERR, "linux.bpf_stack instance %llu refused: bpf_stack_config.%s",
                                   (unsigned long long) instance_id, err);
                session_free(s);
                return r;
        }
        r = setup(s);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->next = pl->sessions;
        pl->sessions = s;
        return 0;
}

static struct bpfstack_session *find(struct bpfstack_plugin *pl, uint64_t id, struct bpfstack_session ***ret_link) {
        for (struct bpfstack_session **pp = &pl->sessions; *pp; pp = &(*pp)->next)
                if ((*pp)->instance_id == id) {
                        if (ret_link)
                                *ret_link = pp;
                        return *pp;
                }
        return NULL;
}

void bpfstack_session_flush(struct bpfstack_plugin *pl, uint64_t id) {
        struct bpfstack_session *s = find(pl, id, NULL);
        if (s)
                drain(s);
}

static void stop_session(struct bpfstack_session *s) {
        bpf_link__destroy(s->switch_link);
        s->switch_link = NULL;
        bpf_link__destroy(s->exec_link);
        s->exec_link = NULL;
        bpf_link__destroy(s->exit_link);
        s->exit_link = NULL;
        for (size_t k = 0; k < s->n_possible; k++) {
                bpf_link__destroy(s->perf_links[k]);
                s->perf_links[k] = NULL;
        }
        drain(s);
        write_counters(s, true);
        plugin_log(s->pl, TRACED_LOG_INFO,
                   "linux.bpf_stack instance %llu stopped: %llu on-CPU samples, %llu off-CPU samples "
                   "(%llu ms blocked), %llu records lost in the ring buffer, %llu stacks lost to map collisions, "
                   "%llu stack errors, %llu switch-outs not remembered, %llu stacks gone before lookup, %llu "
                   "samples of processes gone before symbolization, %llu bad records; %llu of %llu callstacks "
                   "from the cache",
                   (unsigned long long) s->instance_id, (unsigned long long) s->samples_on,
                   (unsigned long long) s->samples_off, (unsigned long long) (s->blocked_ns / 1000000),
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_RING_LOST],
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_STACK_COLLISION],
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_STACK_ERROR],
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_START_FULL],
                   (unsigned long long) s->stacks_missing, (unsigned long long) s->procs_gone,
                   (unsigned long long) s->bad_records, (unsigned long long) s->cs_hits,
                   (unsigned long long) (s->cs_hits + s->cs_misses));
        if (s->tables) {
                struct unwind_stats u;
                unwind_tables_stats(s->tables, &u);
                const uint64_t *w = s->stops;
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: user stacks walked by unwind tables: %llu whole, %llu "
                           "at max_depth, %llu by frame pointers (tables not loaded yet), stopped at %llu pcs "
                           "outside mapped files with tables, %llu without unwind info, %llu unsupported rules, "
                           "%llu unreadable frames, %llu bad frames; %llu walked stacks not kept at switch-out; "
                           "tables: %llu images (%llu refused), %llu of %llu rows (%llu KiB), %llu process "
                           "entries written (%llu refused, %llu mappings left out), %llu resets, %llu ms compiling",
                           (unsigned long long) s->instance_id, (unsigned long long) w[BPFSTACK_STOP_END],
                           (unsigned long long) w[BPFSTACK_STOP_DEPTH], (unsigned long long) w[BPFSTACK_STOP_NO_TABLES],
                           (unsigned long long) w[BPFSTACK_STOP_NO_MAPPING],
                           (unsigned long long) w[BPFSTACK_STOP_NO_CFI],
                           (unsigned long long) w[BPFSTACK_STOP_UNSUPPORTED],
                           (unsigned long long) w[BPFSTACK_STOP_READ_FAULT],
                           (unsigned long long) w[BPFSTACK_STOP_BAD_FRAME],
                           (unsigned long long) s->counters_seen[BPFSTACK_CNT_USTACK_FULL],
                           (unsigned long long) u.images, (unsigned long long) u.images_refused,
                           (unsigned long long) u.rows, (unsigned long long) u.rows_max,
                           (unsigned long long) (u.rows * sizeof(struct bpfstack_row) / 1024),
                           (unsigned long long) u.procs_loaded, (unsigned long long) u.procs_failed,
                           (unsigned long long) u.maps_dropped, (unsigned long long) u.resets,
                           (unsigned long long) (u.compile_us / 1000));
        }
}

void bpfstack_session_stop(struct bpfstack_plugin *pl, uint64_t id) {
        struct bpfstack_session **link;
        struct bpfstack_session *s = find(pl, id, &link);
        if (!s)
                return;
        *link = s->next;
        stop_session(s);
        session_free(s);
}

void bpfstack_sessions_free(struct bpfstack_plugin *pl) {
        while (pl->sessions) {
                struct bpfstack_session *s = pl->sessions;
                pl->sessions = s->next;
                stop_session(s);
                session_free(s);
        }
}
