/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace: per-CPU raw pages of a tracefs instance drained
 * periodically into FtraceEventBundle packets. Like upstream's
 * traced_probes, a config without instance_name records in the top-level
 * (root) instance, one with instance_name in instances/<name>; what the
 * session changed there is put back when it ends. When the root is already
 * taken (by another session of ours, in this or another traced), the
 * session records in a private instance of its own instead. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/pbr.h"
#include "basic/pbw.h"
#include "format.h"
#include "ftrace-ds.h"
#include "kprobes.h"
#include "page.h"
#include "profiling/ksyms.h"
#include "root-journal.h"
#include "syscalls.h"
#include "tracefs.h"

#define MAX_EVENTS 256
#define ID_SLOTS 512 /* > 2 x MAX_EVENTS, a power of 2 */
#define INTERN_SLOTS 2048 /* > 2 x MAX_INTERN, a power of 2 */
#define MAX_CPUS 1024
#define DEFAULT_BUFFER_KB 2048u
#define DEFAULT_DRAIN_MS 100u
#define BUNDLE_FLUSH_BYTES (256u * 1024u)


#define MAX_STAT_EVENTS 64

struct ftrace_session {
        struct ftrace_session *next;
        bool in_root;       /* the top-level instance */
        bool named;         /* FtraceConfig.instance_name */
        bool keep_instance; /* a named instance that existed before us */
        int root_lock_fd;   /* flock()ed tracefs root while in_root */
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
        uint64_t instance_id;
        uint64_t tracing_session_id;
        /* During a drain: the session's process_stats instance, told
         * about every pid the records name. */
        struct ps_session *ps;
        const struct format_field **pid_field; /* per format: the pid a record is about */
        bool *redescribe; /* per format: that pid changed its command or name */
        struct traced_writer *writer;
        char name[64];
        char root[512];
        char kprobe_group[64]; /* set while probes of ours exist */
        struct event_format *formats;
        size_t n_formats;
        int *cpu_fds;
        int n_cpus;
        size_t max_pages_per_drain;
        uint8_t *page;
        size_t page_size;
        struct traced_source *timer;
        /* the bundle being built */
        struct pbw bundle;
        struct pbw packet; /* kept between bundles */
        int bundle_cpu;
        size_t bundle_events;
        int16_t by_id[ID_SLOTS]; /* index into formats, -1: free */
        /* compact_sched: columns of sched_switch and sched_waking */
        bool compact;
        const struct event_format *switch_fmt, *waking_fmt;
        const struct format_field *sw_next_comm, *sw_prev_state, *sw_next_pid, *sw_next_prio;
        const struct format_field *wk_comm_f, *wk_pid_f, *wk_cpu_f, *wk_prio_f;
        int16_t intern_slots[INTERN_SLOTS]; /* index into intern, -1: free */
        struct pbw sw_ts, sw_state, sw_pid, sw_prio, sw_comm;
        struct pbw wk_ts, wk_pid, wk_cpu, wk_prio, wk_comm, wk_flags;
        uint64_t sw_last_ts, wk_last_ts;
        char (*intern)[16];
        size_t n_intern;
        uint64_t events, pages, bad_pages, lost;
        bool lost_pending;
        /* symbolize_ksyms: kernel addresses of this drain, as iids */
        struct ksyms *ksyms;
        struct kaddr_table *kt;
        struct pbw interned;
};

static struct ftrace_session *find_session(struct plugin *pl, uint64_t id) {
        for (struct ftrace_session *s = pl->sessions; s; s = s->next)
                if (s->instance_id == id)
                        return s;
        return NULL;
}

/* The value to write back for a tracefs file read as text: the selected
 * clock of trace_clock, the size of buffer_size_kb, "0" for an event
 * filter that was "none". */
static char *restore_value(const char *rel, char *text) {
        text[strcspn(text, "\n")] = '\0';
        const char *base = strrchr(rel, '/');
        base = base ? base + 1 : rel;
        if (strcmp(base, "trace_clock") == 0) {
                char *a = strchr(text, '['), *b = a ? strchr(a, ']') : NULL;
                if (!a || !b)
                        return NULL;
                *b = '\0';
                return strdup(a + 1);
        }
        if (strcmp(base, "buffer_size_kb") == 0) {
                /* "7 (expanded: 1408)": not allocated yet; the size it
                 * would have grown to is the one to give back. */
                char *exp = strstr(text, "expanded: ");
                if (exp)
                        text = exp + strlen("expanded: ");
                text[strspn(text, "0123456789")] = '\0';
                return text[0] ? strdup(text) : NULL;
        }
        if (strcmp(base, "filter") == 0 && strcmp(text, "none") == 0)
                return strdup("0");
        return strdup(text);
}

/* Writes a file of the session's instance. In an instance that is not ours
 * alone (the root, or a named one that existed), the file's value before
 * the first write is kept, to be put back when the session ends. */
static int session_write(struct ftrace_session *s, const char *rel, const char *value) {
        if (s->in_root || s->keep_instance) {
                bool seen = false;
                for (size_t i = 0; i < s->n_saved && !seen; i++)
                        seen = strcmp(s->saved[i].rel, rel) == 0;
                char text[4096];
                if (!seen && tracefs_read(s->root, rel, text, sizeof(text)) >= 0) {
                        char *v = restore_value(rel, text);
                        struct saved_file *a = v ? realloc(s->saved, (s->n_saved + 1) * sizeof(*a)) : NULL;
                        char *r = a ? strdup(rel) : NULL;
                        if (a)
                                s->saved = a;
                        if (!r) {
                                free(v);
                                return -ENOMEM;
                        }
                        s->saved[s->n_saved++] = (struct saved_file) { .rel = r, .value = v };
                        /* On disk before the change, so that a successor
                         * can undo it if this process dies. */
                        int j = s->in_root ? root_journal_save(ROOT_JOURNAL_PATH, s->saved, s->n_saved) : 0;
                        if (j < 0 && !s->journal_failed) {
                                s->journal_failed = true;
                                plugin_log(s->pl, TRACED_LOG_WARNING,
                                           "cannot write %s (%s): the root ftrace instance's state is not put back "
                                           "if this process dies",
                                           ROOT_JOURNAL_PATH, strerror(-j));
                        }
                }
        }
        return tracefs_write(s->root, rel, value);
}

/* Puts back what session_write changed, newest first (so tracing_on,
 * changed first, is restored last). */
static void session_restore(struct ftrace_session *s) {
        while (s->n_saved > 0) {
                struct saved_file *f = &s->saved[--s->n_saved];
                (void) tracefs_write(s->root, f->rel, f->value);
                free(f->rel);
                free(f->value);
        }
        free(s->saved);
        s->saved = NULL;
        if (s->in_root)
                (void) unlink(ROOT_JOURNAL_PATH);
}

static void note_event(char **list, size_t *n, const char *spec) {
        if (*n < MAX_STAT_EVENTS && (list[*n] = strdup(spec)))
                (*n)++;
}

/* The format of a record's event id: a small open-addressing table, since
 * this runs for every record. */
static struct event_format *format_by_id(struct ftrace_session *s, uint16_t id) {
        for (size_t i = id & (ID_SLOTS - 1);; i = (i + 1) & (ID_SLOTS - 1)) {
                int16_t k = s->by_id[i];
                if (k < 0)
                        return NULL;
                if (s->formats[k].id == id)
                        return &s->formats[k];
        }
}

static void index_formats(struct ftrace_session *s) {
        memset(s->by_id, 0xff, sizeof(s->by_id));
        for (size_t n = 0; n < s->n_formats; n++) {
                size_t i = s->formats[n].id & (ID_SLOTS - 1);
                while (s->by_id[i] >= 0)
                        i = (i + 1) & (ID_SLOTS - 1);
                s->by_id[i] = (int16_t) n;
        }
}

static int add_event(struct ftrace_session *s, const char *group, const char *name) {
        char rel[256], text[8192];
        if (s->n_formats >= MAX_EVENTS)
                return -ENOSPC;
        for (size_t i = 0; i < s->n_formats; i++)
                if (strcmp(s->formats[i].group, group) == 0 && strcmp(s->formats[i].name, name) == 0)
                        return 0;
        snprintf(rel, sizeof(rel), "events/%s/%s/format", group, name);
        if (tracefs_read(s->pl->tracefs, rel, text, sizeof(text)) < 0)
                return -ENOENT;
        struct event_format *f = &s->formats[s->n_formats];
        if (format_parse(text, group, f) < 0)
                return -EINVAL;
        snprintf(rel, sizeof(rel), "events/%s/%s/enable", group, name);
        int r = session_write(s, rel, "1");
        /* ftrace's own records (print, bprint) have no switch: they are
         * always recorded. */
        if (r == -ENOENT && strcmp(group, "ftrace") == 0)
                r = 0;
        if (r < 0)
                return r;
        s->n_formats++;
        return 0;
}

/* "group/name", "group/ *" (every event of a group) or a bare "name"
 * (searched in every group). */
static int add_event_spec(struct ftrace_session *s, const char *spec) {
        char group[128] = "", name[128];
        const char *slash = strchr(spec, '/');
        if (slash) {
                snprintf(group, sizeof(group), "%.*s", (int) (slash - spec), spec);
                snprintf(name, sizeof(name), "%s", slash + 1);
        } else
                snprintf(name, sizeof(name), "%s", spec);

        char dir[512];
        int added = 0;
        if (group[0] && strcmp(name, "*") != 0)
                return add_event(s, group, name);
        snprintf(dir, sizeof(dir), "%s/events", s->pl->tracefs);
        DIR *d = opendir(dir);
        if (!d)
                return negative_errno();
        struct dirent *g;
        while ((g = readdir(d))) {
                if (g->d_name[0] == '.' || (group[0] && strcmp(g->d_name, group) != 0))
                        continue;
                if (strcmp(name, "*") != 0) {
                        if (add_event(s, g->d_name, name) == 0)
                                added++;
                        continue;
                }
                char sub[768];
                snprintf(sub, sizeof(sub), "%s/%s", dir, g->d_name);
                DIR *e = opendir(sub);
                if (!e)
                        continue;
                struct dirent *ev;
                while ((ev = readdir(e)))
                        if (ev->d_name[0] != '.' && ev->d_type == DT_DIR && add_event(s, g->d_name, ev->d_name) == 0)
                                added++;
                closedir(e);
        }
        closedir(d);
        return added > 0 ? 0 : -ENOENT;
}

static void compact_write(struct ftrace_session *s, struct pbw *out, size_t size);

#define MAX_SYSCALL_NAMES 512

/* FtraceConfig.syscall_events: raw_syscalls sys_enter/sys_exit, filtered
 * in our instance to the named calls. A name this architecture does not
 * have is reported and skipped. */
static int add_syscalls(struct ftrace_session *s, const struct pbr_field *fc) {
        const char *names[MAX_SYSCALL_NAMES];
        char store[MAX_SYSCALL_NAMES][64];
        size_t n = 0, pos = 0, unknown = 0;
        struct pbr_field f;
        bool unfiltered = false;

        while (pbr_next(fc->data, fc->len, &pos, &f) > 0) {
                if (f.number == 1 && f.wire_type == 2 && f.len >= 12 && memcmp(f.data, "raw_syscalls", 12) == 0)
                        unfiltered = true; /* asked for all of them as plain events */
                if (f.number != 18 || f.wire_type != 2 || f.len == 0 || f.len >= 64 || n == MAX_SYSCALL_NAMES)
                        continue;
                snprintf(store[n], sizeof(store[n]), "%.*s", (int) f.len, (const char *) f.data);
                names[n] = store[n];
                n++;
        }
        if (n == 0)
                return 0;
        char filter[8192], first[64] = "";
        int used = syscall_filter(names, n, filter, sizeof(filter), &unknown, first, sizeof(first));
        if (used < 0) {
                plugin_log(s->pl, TRACED_LOG_ERR, "syscall_events: too many system calls for one filter");
                return used;
        }
        if (unknown)
                plugin_log(s->pl, TRACED_LOG_WARNING,
                           "syscall_events: %zu name(s) unknown on this architecture, skipped (first: \"%s\")",
                           unknown, first);
        if (used == 0)
                return 0;
        static const char *const events[] = { "sys_enter", "sys_exit" };
        for (size_t i = 0; i < 2; i++) {
                int r = add_event(s, "raw_syscalls", events[i]);
                if (r < 0) {
                        plugin_log(s->pl, TRACED_LOG_ERR, "syscall_events: raw_syscalls/%s unavailable: %s",
                                   events[i], strerror(-r));
                        return r;
                }
                if (unfiltered)
                        continue;
                char rel[128];
                snprintf(rel, sizeof(rel), "events/raw_syscalls/%s/filter", events[i]);
                r = session_write(s, rel, filter);
                if (r < 0) {
                        plugin_log(s->pl, TRACED_LOG_ERR, "syscall_events: cannot set the filter \"%s\": %s", filter,
                                   strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* FtraceConfig.kprobe_events: { probe: "function" type: KPROBE | KRETPROBE
 * | BOTH }. A probe the kernel refuses (no such function) is reported and
 * skipped. */
static int add_kprobes(struct ftrace_session *s, const struct pbr_field *fc) {
        size_t pos = 0;
        struct pbr_field f;

        while (pbr_next(fc->data, fc->len, &pos, &f) > 0) {
                if (f.number != 30 || f.wire_type != 2)
                        continue;
                struct pbr_field probe, type;
                if (!pbr_get(f.data, f.len, 1, false, &probe) || probe.wire_type != 2 || probe.len == 0 ||
                    probe.len >= 100) {
                        plugin_log(s->pl, TRACED_LOG_WARNING, "kprobe_events: an entry without a probe, skipped");
                        continue;
                }
                char func[100];
                snprintf(func, sizeof(func), "%.*s", (int) probe.len, (const char *) probe.data);
                enum kprobe_kind kind = KPROBE_ENTRY;
                if (pbr_get(f.data, f.len, 2, false, &type) && type.varint >= 1 && type.varint <= 3)
                        kind = (enum kprobe_kind) type.varint;
                if (!s->kprobe_group[0])
                        snprintf(s->kprobe_group, sizeof(s->kprobe_group), KPROBE_GROUP_PREFIX "%d_%llu",
                                 (int) getpid(), (unsigned long long) s->instance_id);
                char names[2][256];
                int n = kprobe_add(s->pl->tracefs, s->kprobe_group, func, kind, names);
                if (n < 0) {
                        plugin_log(s->pl, TRACED_LOG_WARNING, "kprobe_events: cannot probe \"%s\": %s", func,
                                   strerror(-n));
                        continue;
                }
                for (int i = 0; i < n; i++) {
                        char *slash = strchr(names[i], '/');
                        *slash = '\0';
                        int r = add_event(s, names[i], slash + 1);
                        if (r < 0)
                                plugin_log(s->pl, TRACED_LOG_WARNING, "kprobe_events: %s/%s cannot be enabled: %s",
                                           names[i], slash + 1, strerror(-r));
                }
        }
        return 0;
}

static size_t compact_size(const struct ftrace_session *s);

/* symbolize_ksyms: the names of the iids new since the last packet go out
 * in this one, as InternedData.kernel_symbols. iids restart from 1 every
 * drain, so the drain's first packet that uses any clears the sequence's
 * state, even when none of its addresses has a name: an iid must never
 * resolve to a name of the previous drain. */
static void ksyms_append(struct ftrace_session *s, struct pbw *pkt) {
        if (!s->kt || s->kt->n == s->kt->written)
                return;
        bool first = s->kt->written == 0;
        pbw_reset(&s->interned);
        for (uint32_t iid = s->kt->written + 1; iid <= s->kt->n; iid++) {
                const char *name = ksyms_lookup(s->ksyms, s->kt->addrs[iid - 1]);
                if (!name)
                        continue; /* not a function (the work item, a heap pointer) */
                size_t l = strlen(name);
                pbw_tag(&s->interned, 26, 2); /* kernel_symbols { iid, str } */
                pbw_raw_varint(&s->interned, 1 + pbw_varint_size(iid) + 1 + pbw_varint_size(l) + l);
                pbw_varint(&s->interned, 1, iid);
                pbw_bytes(&s->interned, 2, name, l);
        }
        if (s->interned.len)
                pbw_message(pkt, 12, &s->interned); /* TracePacket.interned_data */
        if (first)
                pbw_varint(pkt, 13, 1); /* sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED */
        s->kt->written = s->kt->n;
}

/* The bundle goes out as TracePacket { ftrace_events { cpu, event...,
 * compact_sched, lost_events } }, assembled in one pass into a buffer kept
 * from one bundle to the next. */
static void bundle_emit(struct ftrace_session *s) {
        if (s->bundle_events == 0 && !s->lost_pending)
                return;
        size_t compact = compact_size(s);
        size_t inner = 1 + pbw_varint_size((uint64_t) s->bundle_cpu) + s->bundle.len +
                       (compact ? 1 + pbw_varint_size(compact) + compact : 0) + (s->lost_pending ? 2 : 0);
        struct pbw *pkt = &s->packet;
        pbw_reset(pkt);
        pbw_tag(pkt, 1, 2); /* TracePacket.ftrace_events */
        pbw_raw_varint(pkt, inner);
        pbw_varint(pkt, 1, (uint64_t) s->bundle_cpu);
        pbw_raw(pkt, s->bundle.buf, s->bundle.len);
        compact_write(s, pkt, compact);
        if (s->lost_pending)
                pbw_varint(pkt, 3, 1);
        ksyms_append(s, pkt);
        if (!pkt->error)
                (void) s->pl->api->write_packet(s->writer, pkt->buf, pkt->len);
        pbw_reset(&s->bundle);
        s->bundle_events = 0;
        s->lost_pending = false;
}

#define MAX_INTERN 1024

/* The index of comm (16 bytes, zero-padded) in the bundle's table of
 * names, added if new. */
static uint32_t intern(struct ftrace_session *s, const char *comm) {
        size_t i = fnv1a32(comm, strnlen(comm, 16)) & (INTERN_SLOTS - 1);
        for (;; i = (i + 1) & (INTERN_SLOTS - 1)) {
                int16_t k = s->intern_slots[i];
                if (k < 0)
                        break;
                if (memcmp(s->intern[k], comm, 16) == 0)
                        return (uint32_t) k;
        }
        if (s->n_intern == MAX_INTERN)
                return 0; /* table full: the bundle is emitted before this happens */
        memcpy(s->intern[s->n_intern], comm, 16);
        s->intern_slots[i] = (int16_t) s->n_intern;
        return (uint32_t) s->n_intern++;
}

static void compact_reset(struct ftrace_session *s) {
        struct pbw *cols[] = { &s->sw_ts, &s->sw_state, &s->sw_pid, &s->sw_prio, &s->sw_comm,
                               &s->wk_ts, &s->wk_pid, &s->wk_cpu, &s->wk_prio, &s->wk_comm, &s->wk_flags };
        for (size_t i = 0; i < ELEMENTSOF(cols); i++)
                pbw_reset(cols[i]);
        s->sw_last_ts = s->wk_last_ts = 0;
        s->n_intern = 0;
        memset(s->intern_slots, 0xff, sizeof(s->intern_slots));
}

/* sched_switch and sched_waking as columns: a few bytes per event. */
static bool compact_add(struct ftrace_session *s, const struct event_format *f, uint64_t ts, const uint8_t *rec,
                        size_t len) {
        char comm[16] = {};
        if (f == s->switch_fmt) {
                format_read_str(s->sw_next_comm, rec, len, comm, sizeof(comm));
                pbw_raw_varint(&s->sw_ts, ts - s->sw_last_ts);
                s->sw_last_ts = ts;
                pbw_raw_varint(&s->sw_state, (uint64_t) format_read_int(s->sw_prev_state, rec, len));
                int64_t next_pid = format_read_int(s->sw_next_pid, rec, len);
                pbw_raw_varint(&s->sw_pid, (uint64_t) next_pid);
                pbw_raw_varint(&s->sw_prio, (uint64_t) format_read_int(s->sw_next_prio, rec, len));
                pbw_raw_varint(&s->sw_comm, intern(s, comm));
                return true;
        }
        if (f == s->waking_fmt) {
                format_read_str(s->wk_comm_f, rec, len, comm, sizeof(comm));
                pbw_raw_varint(&s->wk_ts, ts - s->wk_last_ts);
                s->wk_last_ts = ts;
                int64_t pid = format_read_int(s->wk_pid_f, rec, len);
                pbw_raw_varint(&s->wk_pid, (uint64_t) pid);
                pbw_raw_varint(&s->wk_cpu, (uint64_t) format_read_int(s->wk_cpu_f, rec, len));
                pbw_raw_varint(&s->wk_prio, (uint64_t) format_read_int(s->wk_prio_f, rec, len));
                pbw_raw_varint(&s->wk_comm, intern(s, comm));
                pbw_raw_varint(&s->wk_flags, f->common_flags_offset >= 0 && (size_t) f->common_flags_offset < len
                                                     ? rec[f->common_flags_offset]
                                                     : 0);
                return true;
        }
        return false;
}

#define N_COLUMNS 11

static void compact_columns(struct ftrace_session *s, uint32_t ret_fields[N_COLUMNS], struct pbw *ret_cols[N_COLUMNS]) {
        static const uint32_t fields[N_COLUMNS] = { 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12 };
        struct pbw *cols[N_COLUMNS] = { &s->sw_ts,  &s->sw_state, &s->sw_pid,  &s->sw_prio, &s->sw_comm, &s->wk_ts,
                                        &s->wk_pid, &s->wk_cpu,   &s->wk_prio, &s->wk_comm, &s->wk_flags };
        memcpy(ret_fields, fields, sizeof(fields));
        memcpy(ret_cols, cols, sizeof(cols));
}

/* Bytes of the FtraceEventBundle.CompactSched message, 0 if none. */
static size_t compact_size(const struct ftrace_session *s) {
        if (!s->compact || (s->sw_ts.len == 0 && s->wk_ts.len == 0))
                return 0;
        uint32_t fields[N_COLUMNS];
        struct pbw *cols[N_COLUMNS];
        compact_columns((struct ftrace_session *) s, fields, cols);
        size_t n = 0;
        for (size_t i = 0; i < s->n_intern; i++) {
                size_t l = strnlen(s->intern[i], 16);
                n += 1 + pbw_varint_size(l) + l;
        }
        for (size_t i = 0; i < N_COLUMNS; i++)
                if (cols[i]->len)
                        n += 1 + pbw_varint_size(cols[i]->len) + cols[i]->len;
        return n;
}

static void compact_write(struct ftrace_session *s, struct pbw *out, size_t size) {
        if (size == 0)
                return;
        uint32_t fields[N_COLUMNS];
        struct pbw *cols[N_COLUMNS];
        compact_columns(s, fields, cols);
        pbw_tag(out, 4, 2); /* FtraceEventBundle.compact_sched */
        pbw_raw_varint(out, size);
        for (size_t i = 0; i < s->n_intern; i++) {
                size_t l = strnlen(s->intern[i], 16);
                pbw_tag(out, 5, 2);
                pbw_raw_varint(out, l);
                pbw_raw(out, s->intern[i], l);
        }
        for (size_t i = 0; i < N_COLUMNS; i++)
                if (cols[i]->len)
                        pbw_bytes(out, fields[i], cols[i]->buf, cols[i]->len);
        compact_reset(s);
}

static void on_record(uint64_t ts, const uint8_t *data, size_t len, void *userdata) {
        struct ftrace_session *s = userdata;
        if (len < 2) {
                s->parse_errors |= 1u << PAGE_STATUS_SHORT_EVENT_ID;
                return;
        }
        uint16_t id;
        memcpy(&id, data, 2);
        struct event_format *f = format_by_id(s, id);
        if (!f)
                return;
        if (s->ps) {
                const struct format_field *pf = s->pid_field[f - s->formats];
                if (pf && s->redescribe[f - s->formats])
                        process_stats_redescribe(s->ps, (int32_t) format_read_int(pf, data, len));
                else if (pf)
                        process_stats_note_pid(s->ps, (int32_t) format_read_int(pf, data, len));
                if (f->common_pid_offset >= 0 && (size_t) f->common_pid_offset + 4 <= len) {
                        int32_t pid;
                        memcpy(&pid, data + f->common_pid_offset, 4);
                        process_stats_note_pid(s->ps, pid);
                }
        }
        if (s->kt && s->kt->n + FORMAT_MAX_FIELDS > KADDR_MAX) {
                bundle_emit(s);
                kaddr_reset(s->kt);
        }
        if (!(s->compact && compact_add(s, f, ts, data, len)))
                ftrace_encode_event_ksyms(&s->bundle, f, ts, data, len, s->kt);
        s->bundle_events++;
        s->events++;
        if (s->bundle.len + s->sw_ts.len * 4 >= BUNDLE_FLUSH_BYTES || s->n_intern >= MAX_INTERN - 1)
                bundle_emit(s);
}

static void drain(struct ftrace_session *s) {
        s->ps = process_stats_for_session(s->pl, s->tracing_session_id);
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                if (s->cpu_fds[cpu] < 0)
                        continue;
                s->bundle_cpu = cpu;
                /* Everything the kernel has, but no more than a buffer's worth:
                 * at a rate the reader cannot follow, the loop still gets
                 * control back. */
                for (size_t k = 0; k < s->max_pages_per_drain; k++) {
                        ssize_t n = read(s->cpu_fds[cpu], s->page, s->page_size);
                        if (n < 0 && errno != EAGAIN && errno != EINTR)
                                s->parse_errors |= 1u << PAGE_STATUS_UNEXPECTED_READ_ERROR;
                        if (n <= 0)
                                break;
                        struct page_info info;
                        s->pages++;
                        if (page_parse(s->page, (size_t) n, on_record, s, &info) < 0) {
                                s->bad_pages++;
                                s->lost_pending = true;
                                if (info.status < 32)
                                        s->parse_errors |= 1u << info.status;
                                continue;
                        }
                        if (info.missed || info.lost_events) {
                                s->lost += info.lost_events ? info.lost_events : 1;
                                s->lost_pending = true;
                        }
                }
                bundle_emit(s);
        }
        process_stats_resolve_pending(s->ps);
        s->ps = NULL;
        if (s->kt)
                kaddr_reset(s->kt);
}

/* An FtraceStats packet (TracePacket.ftrace_stats): the kernel's per-CPU
 * counters of our instance, at the start and at the end of the trace, so
 * overruns and drops are visible in the trace itself. */
static void emit_stats(struct ftrace_session *s, unsigned phase) {
        struct pbw st = {}, pkt = {};
        pbw_varint(&st, 1, phase);
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                char rel[64], text[1024];
                snprintf(rel, sizeof(rel), "per_cpu/cpu%d/stats", cpu);
                if (tracefs_read(s->root, rel, text, sizeof(text)) < 0)
                        continue;
                static const struct {
                        const char *key;
                        uint32_t field;
                        bool is_double;
                } keys[] = {
                        { "entries:", 2, false },        { "overrun:", 3, false },
                        { "commit overrun:", 4, false }, { "bytes:", 5, false },
                        { "oldest event ts:", 6, true }, { "now ts:", 7, true },
                        { "dropped events:", 8, false }, { "read events:", 9, false },
                };
                struct pbw c = {};
                pbw_varint(&c, 1, (uint64_t) cpu);
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                        const char *at = strstr(text, keys[k].key);
                        if (!at)
                                continue;
                        at += strlen(keys[k].key);
                        if (keys[k].is_double) {
                                double d = strtod(at, NULL);
                                uint64_t bits;
                                memcpy(&bits, &d, 8);
                                pbw_fixed64(&c, keys[k].field, bits);
                        } else
                                pbw_varint(&c, keys[k].field, strtoull(at, NULL, 10));
                }
                pbw_message(&st, 2, &c);
                pbw_done(&c);
        }
        if (s->ksyms) {
                pbw_varint(&st, 3, ksyms_count(s->ksyms)); /* kernel_symbols_parsed */
                pbw_varint(&st, 4, (ksyms_memory_bytes(s->ksyms) + 1023) / 1024); /* kernel_symbols_mem_kb */
        }
        if (s->atrace_error)
                pbw_string(&st, 5, s->atrace_error);
        for (size_t i = 0; i < s->n_unknown; i++)
                pbw_string(&st, 6, s->unknown_events[i]);
        for (size_t i = 0; i < s->n_failed; i++)
                pbw_string(&st, 7, s->failed_events[i]);
        if (s->preserve_buffer)
                pbw_varint(&st, 8, 1);
        for (unsigned e = 0; e < 32; e++)
                if (s->parse_errors & (1u << e))
                        pbw_varint(&st, 9, e); /* ftrace_parse_errors */
        pbw_message(&pkt, 34, &st);
        if (!pkt.error)
                (void) s->pl->api->write_packet(s->writer, pkt.buf, pkt.len);
        pbw_done(&st);
        pbw_done(&pkt);
}

static void on_timer(void *userdata) {
        drain(userdata);
}

static void session_free(struct ftrace_session *s) {
        struct plugin *pl = s->pl;
        if (s->timer)
                pl->api->remove_source(pl->host, s->timer);
        for (int i = 0; s->cpu_fds && i < s->n_cpus; i++)
                safe_close(s->cpu_fds[i]);
        if (s->in_root || s->keep_instance)
                session_restore(s);
        else if (s->name[0])
                (void) tracefs_instance_remove(pl->tracefs, s->name);
        safe_close(s->root_lock_fd);
        for (size_t i = 0; i < s->n_unknown; i++)
                free(s->unknown_events[i]);
        for (size_t i = 0; i < s->n_failed; i++)
                free(s->failed_events[i]);
        /* Only once no instance records them may the probes go. */
        if (s->kprobe_group[0])
                (void) kprobe_remove_group(pl->tracefs, s->kprobe_group);
        if (s->writer) {
                (void) pl->api->flush_writer(s->writer);
                pl->api->free_writer(s->writer);
        }
        pbw_done(&s->bundle);
        pbw_done(&s->packet);
        struct pbw *cols[] = { &s->sw_ts, &s->sw_state, &s->sw_pid, &s->sw_prio, &s->sw_comm,
                               &s->wk_ts, &s->wk_pid, &s->wk_cpu, &s->wk_prio, &s->wk_comm, &s->wk_flags };
        for (size_t i = 0; i < ELEMENTSOF(cols); i++)
                pbw_done(cols[i]);
        free(s->intern);
        free(s->pid_field);
        free(s->redescribe);
        pbw_done(&s->interned);
        free(s->kt);
        ksyms_free(s->ksyms);
        free(s->cpu_fds);
        free(s->formats);
        free(s->page);
        free(s);
}

/* symbolize_ksyms: without the symbols (kernel pointers hidden from us),
 * the session goes on with the addresses as they are. */
static void load_ksyms(struct ftrace_session *s) {
        FILE *f = fopen("/proc/kallsyms", "re");
        int r = f ? ksyms_load(f, &s->ksyms) : negative_errno();
        if (f)
                fclose(f);
        if (r >= 0) {
                s->kt = malloc(sizeof(*s->kt));
                if (!s->kt)
                        r = -ENOMEM;
                else
                        kaddr_reset(s->kt);
        }
        if (r < 0)
                plugin_log(s->pl, TRACED_LOG_WARNING,
                           "symbolize_ksyms: kernel symbols unavailable (%s%s); addresses left as they are",
                           strerror(-r), r == -EPERM ? ": kptr_restrict or no CAP_SYSLOG" : "");
        else
                plugin_log(s->pl, TRACED_LOG_INFO, "symbolize_ksyms: %zu kernel text symbols",
                           ksyms_count(s->ksyms));
}

static bool instance_name_valid(const char *n) {
        return n[0] && strcmp(n, ".") != 0 && strcmp(n, "..") != 0 && !strchr(n, '/');
}

/* With the root's flock held: puts back what a session whose process died
 * left changed in the root instance. */
static void root_recover_locked(struct plugin *pl) {
        int r = root_journal_replay(ROOT_JOURNAL_PATH, pl->tracefs);
        if (r > 0)
                plugin_log(pl, TRACED_LOG_INFO,
                           "put back %d root ftrace settings a session that ended abnormally had changed", r);
        else if (r < 0)
                plugin_log(pl, TRACED_LOG_WARNING, "cannot put back the root ftrace settings from %s: %s",
                           ROOT_JOURNAL_PATH, strerror(-r));
}

void ftrace_root_recover(struct plugin *pl) {
        if (!pl->tracefs[0])
                return;
        int fd = open(pl->tracefs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                root_recover_locked(pl); /* else a live session holds it and keeps the journal */
        safe_close(fd);
}

/* FtraceConfig.instance_name (25): that instance, created if missing. No
 * name: the root instance, if no other session of ours holds it (an
 * exclusive flock on the tracefs directory, shared by every traced on the
 * machine); else a private instance. */
static int choose_instance(struct ftrace_session *s, const struct pbr_field *fc) {
        struct plugin *pl = s->pl;
        struct pbr_field f;
        int r;

        if (fc && pbr_get(fc->data, fc->len, 25, false, &f) && f.wire_type == 2 && f.len > 0) {
                char name[64];
                if (f.len >= sizeof(name)) {
                        plugin_log(pl, TRACED_LOG_ERR, "instance_name is longer than %zu bytes", sizeof(name) - 1);
                        return -EINVAL;
                }
                snprintf(name, sizeof(name), "%.*s", (int) f.len, (const char *) f.data);
                if (!instance_name_valid(name)) {
                        plugin_log(pl, TRACED_LOG_ERR, "instance_name \"%s\" is not a tracefs instance name", name);
                        return -EINVAL;
                }
                snprintf(s->root, sizeof(s->root), "%s/instances/%s", pl->tracefs, name);
                s->named = true;
                if (mkdir(s->root, 0700) < 0) {
                        if (errno != EEXIST) {
                                r = negative_errno();
                                plugin_log(pl, TRACED_LOG_ERR, "cannot create ftrace instance %s: %s", name,
                                           strerror(-r));
                                return r;
                        }
                        s->keep_instance = true; /* someone else's: restored, not removed */
                } else
                        snprintf(s->name, sizeof(s->name), "%s", name);
                return 0;
        }

        s->root_lock_fd = open(pl->tracefs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->root_lock_fd >= 0 && flock(s->root_lock_fd, LOCK_EX | LOCK_NB) == 0) {
                root_recover_locked(pl);
                s->in_root = true;
                snprintf(s->root, sizeof(s->root), "%s", pl->tracefs);
                return 0;
        }
        s->root_lock_fd = safe_close(s->root_lock_fd);
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.ftrace instance %llu: the root ftrace instance is in use by another session; "
                   "recording in a private instance",
                   (unsigned long long) s->instance_id);
        snprintf(s->name, sizeof(s->name), TRACEFS_INSTANCE_PREFIX "%d_%llu", (int) getpid(),
                 (unsigned long long) s->instance_id);
        r = tracefs_instance_create(pl->tracefs, s->name, s->root, sizeof(s->root));
        if (r < 0) {
                plugin_log(pl, TRACED_LOG_ERR, "cannot create ftrace instance %s: %s", s->name, strerror(-r));
                s->name[0] = '\0';
        }
        return r;
}

int ftrace_session_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        struct pbr_field fc, f;
        uint32_t buffer_kb = DEFAULT_BUFFER_KB, drain_ms = DEFAULT_DRAIN_MS;
        char val[64];
        int r;

        if (!pl->tracefs[0]) {
                plugin_log(pl, TRACED_LOG_ERR, "tracefs is not available; linux.ftrace cannot start");
                return -ENOENT;
        }
        struct ftrace_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pl = pl;
        s->instance_id = instance_id;
        s->root_lock_fd = -EBADF;
        s->formats = calloc(MAX_EVENTS, sizeof(*s->formats));
        s->page_size = (size_t) sysconf(_SC_PAGESIZE);
        s->page = malloc(s->page_size);
        if (!s->formats || !s->page) {
                session_free(s);
                return -ENOMEM;
        }
        if (pbr_get(config, size, 4, false, &f) && f.wire_type == 0)
                s->tracing_session_id = f.varint;
        bool have_cfg = pbr_get(config, size, 100, false, &fc) && fc.wire_type == 2;
        if (have_cfg) {
                if (pbr_get(fc.data, fc.len, 10, false, &f) && f.varint > 0 && f.varint < 1024 * 1024)
                        buffer_kb = (uint32_t) f.varint;
                if (pbr_get(fc.data, fc.len, 11, false, &f) && f.varint >= 1 && f.varint <= 60000)
                        drain_ms = (uint32_t) f.varint;
        }

        r = choose_instance(s, have_cfg ? &fc : NULL);
        if (r < 0) {
                session_free(s);
                return r;
        }
        if (have_cfg && pbr_get(fc.data, fc.len, 23, false, &f) && f.wire_type == 0 && f.varint)
                s->preserve_buffer = true;
        /* A private instance stays off while it is set up. The root is
         * shared: when it already records, others' trace_marker writes would
         * fail with EBADF while it is off, and nothing below needs it off
         * (the kernel resizes and clears a running buffer), so it is left on. */
        if (!s->in_root)
                (void) session_write(s, "tracing_on", "0");
        if (session_write(s, "trace_clock", "boot") < 0)
                plugin_log(pl, TRACED_LOG_WARNING, "trace_clock boot unavailable; timestamps may not line up");
        s->max_pages_per_drain = (size_t) buffer_kb * 1024u / s->page_size + 16;
        snprintf(val, sizeof(val), "%u", buffer_kb);
        (void) session_write(s, "buffer_size_kb", val);
        if (have_cfg && (pbr_count(fc.data, fc.len, 2) > 0 || pbr_count(fc.data, fc.len, 3) > 0))
                s->atrace_error = "atrace_categories/atrace_apps: atrace is Android's; traced records ftrace events only";

        bool want_print = false;
        size_t pos = 0;
        while (have_cfg && pbr_next(fc.data, fc.len, &pos, &f) > 0) {
                if (f.number != 1 || f.wire_type != 2 || f.len == 0 || f.len >= 128)
                        continue;
                char spec[128];
                snprintf(spec, sizeof(spec), "%.*s", (int) f.len, (const char *) f.data);
                if (strcmp(spec, "ftrace/print") == 0 || strcmp(spec, "print") == 0)
                        want_print = true;
                r = add_event_spec(s, spec);
                if (r < 0) {
                        plugin_log(pl, TRACED_LOG_WARNING, "ftrace event \"%s\" unavailable: %s", spec, strerror(-r));
                        if (r == -ENOENT)
                                note_event(s->unknown_events, &s->n_unknown, spec);
                        else
                                note_event(s->failed_events, &s->n_failed, spec);
                }
        }
        if (have_cfg) {
                r = add_syscalls(s, &fc);
                if (r >= 0)
                        r = add_kprobes(s, &fc);
                if (r < 0) {
                        session_free(s);
                        return r;
                }
        }
        if (have_cfg && pbr_get(fc.data, fc.len, 13, false, &f) && f.wire_type == 0 && f.varint)
                load_ksyms(s);
        if (have_cfg && pbr_get(fc.data, fc.len, 12, false, &f) && f.wire_type == 2) {
                struct pbr_field en;
                s->compact = pbr_get(f.data, f.len, 1, false, &en) && en.varint;
        }
        for (size_t i = 0; i < s->n_formats; i++) {
                if (strcmp(s->formats[i].group, "sched") != 0)
                        continue;
                if (strcmp(s->formats[i].name, "sched_switch") == 0)
                        s->switch_fmt = &s->formats[i];
                else if (strcmp(s->formats[i].name, "sched_waking") == 0)
                        s->waking_fmt = &s->formats[i];
        }
        index_formats(s);
        memset(s->intern_slots, 0xff, sizeof(s->intern_slots));
        s->pid_field = calloc(MAX_EVENTS, sizeof(*s->pid_field));
        if (!s->pid_field) {
                session_free(s);
                return -ENOMEM;
        }
        static const struct {
                const char *group, *name, *field;
        } pid_fields[] = {
                { "sched", "sched_switch", "next_pid" },        { "sched", "sched_waking", "pid" },
                { "sched", "sched_wakeup", "pid" },             { "sched", "sched_wakeup_new", "pid" },
                { "sched", "sched_process_fork", "child_pid" }, { "task", "task_newtask", "pid" },
                { "task", "task_rename", "pid" },               { "sched", "sched_process_exec", "pid" },
        };
        s->redescribe = calloc(MAX_EVENTS, sizeof(*s->redescribe));
        if (!s->redescribe) {
                session_free(s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s->n_formats; i++)
                for (size_t k = 0; k < ELEMENTSOF(pid_fields); k++)
                        if (strcmp(s->formats[i].group, pid_fields[k].group) == 0 &&
                            strcmp(s->formats[i].name, pid_fields[k].name) == 0) {
                                s->pid_field[i] = format_field(&s->formats[i], pid_fields[k].field);
                                s->redescribe[i] = strcmp(pid_fields[k].name, "task_rename") == 0 ||
                                                   strcmp(pid_fields[k].name, "sched_process_exec") == 0;
                        }
        if (s->switch_fmt) {
                s->sw_next_comm = format_field(s->switch_fmt, "next_comm");
                s->sw_prev_state = format_field(s->switch_fmt, "prev_state");
                s->sw_next_pid = format_field(s->switch_fmt, "next_pid");
                s->sw_next_prio = format_field(s->switch_fmt, "next_prio");
        }
        if (s->waking_fmt) {
                s->wk_comm_f = format_field(s->waking_fmt, "comm");
                s->wk_pid_f = format_field(s->waking_fmt, "pid");
                s->wk_cpu_f = format_field(s->waking_fmt, "target_cpu");
                s->wk_prio_f = format_field(s->waking_fmt, "prio");
        }
        if (s->compact && !(s->intern = calloc(MAX_INTERN, sizeof(*s->intern)))) {
                session_free(s);
                return -ENOMEM;
        }
        /* A private instance gets the top-level trace_marker's writes
         * copied; the root has them, a named instance has its own. */
        if (want_print && !s->in_root && !s->keep_instance && !s->named &&
            tracefs_write(s->root, "options/copy_trace_marker", "1") < 0)
                plugin_log(pl, TRACED_LOG_WARNING,
                           "this kernel cannot copy trace_marker writes into instances; print events come only "
                           "from this instance's own trace_marker");

        long ncpus = sysconf(_SC_NPROCESSORS_CONF);
        s->n_cpus = (int) MIN(MAX(ncpus, 1), MAX_CPUS);
        s->cpu_fds = calloc((size_t) s->n_cpus, sizeof(int));
        if (!s->cpu_fds) {
                session_free(s);
                return -ENOMEM;
        }
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                char rel[640];
                snprintf(rel, sizeof(rel), "%s/per_cpu/cpu%d/trace_pipe_raw", s->root, cpu);
                s->cpu_fds[cpu] = open(rel, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        }
        r = pl->api->new_writer(pl->host, instance_id, &s->writer);
        if (r < 0) {
                session_free(s);
                return r;
        }
        /* What others left in a shared buffer is not this trace's, unless
         * asked to keep it (preserve_ftrace_buffer); cleared once every
         * event and filter is set, since a root left on records meanwhile
         * (an event enabled before its filter). */
        if ((s->in_root || s->keep_instance) && !s->preserve_buffer)
                (void) tracefs_write(s->root, "trace", "");
        emit_stats(s, 1); /* START_OF_TRACE */
        r = session_write(s, "tracing_on", "1");
        if (r < 0) {
                session_free(s);
                return r;
        }
        r = pl->api->add_timer(pl->host, drain_ms, on_timer, s, &s->timer);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->next = pl->sessions;
        pl->sessions = s;
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.ftrace instance %llu: %zu events, %u KiB per CPU, drain every %u ms%s, in %s",
                   (unsigned long long) instance_id, s->n_formats, buffer_kb, drain_ms,
                   s->compact ? ", compact sched" : "", s->in_root ? "the root instance" : s->root);
        return 0;
}

void ftrace_session_flush(struct plugin *pl, uint64_t instance_id) {
        struct ftrace_session *s = find_session(pl, instance_id);
        if (!s)
                return;
        drain(s);
        (void) pl->api->flush_writer(s->writer);
}

void ftrace_session_stop(struct plugin *pl, uint64_t instance_id) {
        for (struct ftrace_session **pp = &pl->sessions; *pp; pp = &(*pp)->next)
                if ((*pp)->instance_id == instance_id) {
                        struct ftrace_session *s = *pp;
                        *pp = s->next;
                        (void) session_write(s, "tracing_on", "0");
                        drain(s);
                        emit_stats(s, 2); /* END_OF_TRACE */
                        plugin_log(pl, TRACED_LOG_INFO,
                                   "linux.ftrace instance %llu stopped: %llu events, %llu pages, %llu lost",
                                   (unsigned long long) instance_id, (unsigned long long) s->events,
                                   (unsigned long long) s->pages, (unsigned long long) s->lost);
                        session_free(s);
                        /* Registered with will_notify_on_stop: the service
                         * waits for this, so the last pages make it in. */
                        (void) pl->api->notify_stopped(pl->host, instance_id);
                        return;
                }
}

void ftrace_sessions_free(struct plugin *pl) {
        while (pl->sessions) {
                struct ftrace_session *s = pl->sessions;
                pl->sessions = s->next;
                session_free(s);
        }
}
