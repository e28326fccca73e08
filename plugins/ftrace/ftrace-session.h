/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.ftrace inside the plugin: one session per data source instance.
 * ftrace-ds.c starts and stops sessions and owns the tracefs instance they
 * record in; ftrace-events.c enables what the config asks for;
 * ftrace-drain.c reads the per-CPU pages into FtraceEventBundle packets;
 * ftrace-stats.c writes FtraceStats. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/pbr.h"
#include "basic/pb-buf.h"
#include "traced/pbzero/perfetto/trace/ftrace/ftrace_event_bundle.pbw.h"
#include "traced/pbzero/perfetto/trace/ftrace/ftrace_stats.pbw.h"
#include "format.h"
#include "ftrace-ds.h"
#include "ring-map.h"
#include "profiling/ksyms.h"

#define MAX_EVENTS 256
#define ID_SLOTS 512 /* > 2 x MAX_EVENTS, a power of 2 */
#define MAX_INTERN 1024
#define INTERN_SLOTS 2048 /* > 2 x MAX_INTERN, a power of 2 */
#define MAX_STAT_EVENTS 64
#define PID_INTERN_SLOTS 256 /* a power of 2 */

/* Where a compact sched event's fields lie, resolved once from its format:
 * min_len 0 when the format is not the usual one (then each field is read
 * through its format_field). */
struct compact_layout {
        uint16_t min_len;
        uint16_t comm, pid, prio;
        uint16_t arg; /* sched_switch: prev_state (8 bytes); sched_waking: target_cpu (4) */
};

/* The last name interned for a pid (in the table of names as it is since
 * the generation's start): most events name a task seen just before. */
struct pid_intern {
        int32_t pid;
        uint32_t gen; /* the intern table's generation; 0: never */
        struct comm16 comm;
        uint32_t idx;
};

/* How a CPU's ring buffer is read; the values of FtraceCpuStats'
 * traced_reader. */
enum ftrace_reader {
        FTRACE_READER_READ = 1,   /* read() of whole sub-buffers */
        FTRACE_READER_MMAP = 2,   /* the kernel's mapping of the buffer */
        FTRACE_READER_SPLICE = 3, /* full sub-buffers by splice(), the writer's by read() */
};

struct ftrace_session {
        struct plugin_instance inst; /* first: the plugin's list, by instance id */
        bool in_root;                /* the top-level instance */
        bool named;                  /* FtraceConfig.instance_name */
        bool keep_instance;          /* a named instance that existed before us */
        int root_lock_fd;            /* flock()ed tracefs root while in_root */
        bool journal_failed;
        struct saved_file *saved;
        size_t n_saved;
        /* FtraceStats beyond the kernel's counters */
        char *unknown_events[MAX_STAT_EVENTS];
        size_t n_unknown;
        char *failed_events[MAX_STAT_EVENTS];
        size_t n_failed;
        const char *atrace_error;
        bool preserve_buffer;
        uint32_t parse_errors; /* bit n: FtraceParseStatus n was seen */
        struct plugin *pl;
        uint64_t tracing_session_id;
        /* During a drain: the session's process_stats instance, told
         * about every pid the records name. */
        struct ps_session *ps;
        /* During a drain: the session's inode_file_map instance, handed
         * the (device, inode) pairs of the events that carry both. */
        struct inode_map *im;
        const struct format_field **pid_field; /* per format: the pid a record is about */
        bool *redescribe;                      /* per format: that pid changed its command or name */
        struct traced_writer *writer;
        char name[64];
        char root[512];
        char kprobe_group[64]; /* set while probes of ours exist */
        struct event_format *formats;
        size_t n_formats;
        int *cpu_fds;
        struct ring_map *maps; /* per CPU, base NULL where read() is used; NULL for all */
        uint8_t *readers;      /* per CPU: enum ftrace_reader */
        int splice_pipe[2];    /* where spliced sub-buffers pass through */
        int n_cpus;
        size_t max_pages_per_drain;
        uint8_t *page;
        size_t page_size;
        struct traced_source *timer;
        /* ftrace-wake.c: per CPU, the watch of its buffer's fill (NULL
         * where none); NULL when the timer alone drains */
        struct traced_source **cpu_wake;
        uint64_t wakes_idle; /* wakes that found nothing to read */
        /* the events of the bundle being built */
        struct pb_buf bundle;
        FtraceEventBundle bundle_msg;
        int bundle_cpu;
        size_t bundle_events;
        int16_t by_id[ID_SLOTS]; /* index into formats, -1: free */
        /* compact_sched: columns of sched_switch and sched_waking */
        bool compact;
        struct event_format *switch_fmt, *waking_fmt;
        int32_t switch_id, waking_id; /* -1 when not recorded */
        struct compact_layout sw_layout, wk_layout;
        struct pid_intern pid_intern[PID_INTERN_SLOTS];
        uint32_t intern_gen;
        const struct format_field *sw_next_comm, *sw_prev_state, *sw_next_pid, *sw_next_prio;
        const struct format_field *wk_comm_f, *wk_pid_f, *wk_cpu_f, *wk_prio_f;
        int16_t intern_slots[INTERN_SLOTS]; /* index into intern, -1: free */
        struct pb_buf sw_ts, sw_state, sw_pid, sw_prio, sw_comm;
        struct pb_buf wk_ts, wk_pid, wk_cpu, wk_prio, wk_comm, wk_flags;
        uint64_t sw_last_ts, wk_last_ts;
        char (*intern)[16];
        size_t n_intern;
        uint64_t events, pages, bad_pages, lost;
        bool lost_pending;
        /* symbolize_ksyms: kernel addresses of this drain, as iids */
        struct ksyms *ksyms;
        struct kaddr_table *kt;
        /* A record whose event id has no format yet: asked for one (NULL:
         * the record is skipped). linux.frozen_ftrace loads formats so. */
        struct event_format *(*format_miss)(void *userdata, uint16_t id);
        void *format_miss_userdata;
};

/* ftrace-ds.c: a session with no instance yet (its formats and page
 * allocated), and its end (what it changed put back, what it made removed). */
struct ftrace_session *ftrace_session_new(struct plugin *pl, uint64_t instance_id);
void ftrace_session_free(struct ftrace_session *s);
/* Opens each CPU's trace_pipe_raw of s->root (-1 where it cannot): how
 * many opened, or -ENOMEM. */
int ftrace_session_open_cpus(struct ftrace_session *s);
/* Makes the read() buffer (s->page) as large as the instance's sub-buffers
 * (buffer_subbuf_size_kb, Linux 6.8 and later), so that each read takes a
 * whole one: 0, or -ENOMEM. */
int ftrace_session_use_subbuf_size(struct ftrace_session *s);

/* ftrace-ds.c: writes a file of the session's instance, keeping the value
 * it replaces where the instance is not the session's alone. */
int ftrace_session_write(struct ftrace_session *s, const char *rel, const char *value);

/* ftrace-events.c: FtraceConfig's ftrace_events (one spec), syscall_events
 * and kprobe_events, and the kernel symbols of symbolize_ksyms. */
int ftrace_add_event_spec(struct ftrace_session *s, const char *spec);
int ftrace_add_syscalls(struct ftrace_session *s, const struct pbr_field *fc);
int ftrace_add_kprobes(struct ftrace_session *s, const struct pbr_field *fc);
void ftrace_load_ksyms(struct ftrace_session *s);

/* ftrace-drain.c */
/* Indexes the formats by event id, resolves the compact sched events'
 * fields and empties their columns: once the events are all enabled. */
void ftrace_drain_init(struct ftrace_session *s);
/* Reads what every CPU has and writes it out: every full sub-buffer, and
 * the one the writer is on when no other came or when `all` (a flush, a
 * stop) asks for everything. */
void ftrace_drain(struct ftrace_session *s, bool all);
/* Chooses how each CPU's buffer is read, once the buffer is sized:
 * FTRACE_READER_SPLICE or _READ for every CPU, or _MMAP where the kernel
 * maps the buffer (read() for the others). */
int ftrace_drain_choose(struct ftrace_session *s, enum ftrace_reader want);
/* Before the buffer is sized back: mapped CPUs read() from then on. */
void ftrace_drain_unmap(struct ftrace_session *s);
enum ftrace_reader ftrace_drain_reader(const struct ftrace_session *s, int cpu);
void ftrace_on_timer(void *userdata);
/* Parses one page (n bytes) read from s->bundle_cpu's buffer into the
 * bundle being built; ftrace_drain_emit writes that bundle out. Returns
 * the bytes of records the page held (0 for a page that did not parse). */
size_t ftrace_drain_page(struct ftrace_session *s, const uint8_t *page, size_t n);
void ftrace_drain_emit(struct ftrace_session *s);
/* Indexes s->formats[i] by its event id (added after ftrace_drain_init). */
void ftrace_drain_add_format(struct ftrace_session *s, size_t i);
void ftrace_drain_free(struct ftrace_session *s);

/* ftrace-stats.c */
/* An event the config named that is unknown (-ENOENT) or failed to enable. */
void ftrace_stats_note_event(struct ftrace_session *s, const char *spec, int error);
/* The FtraceStats packet of the start (or end) of the trace. */
void ftrace_stats_emit(struct ftrace_session *s, FtraceStats_Phase phase);
void ftrace_stats_free(struct ftrace_session *s);
