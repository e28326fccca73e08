/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace's drain: every period (and at flush and stop) the raw pages
 * of each CPU's trace_pipe_raw are parsed, their records encoded into an
 * FtraceEventBundle per CPU (sched_switch and sched_waking as compact
 * columns when asked), with the pids they name told to process_stats. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/hash.h"
#include "basic/macro.h"
#include "ftrace-session.h"
#include "ftrace-wake.h"
#include "inode-map.h"
#include "page-walk.h"
#include "ring-map.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

#define BUNDLE_FLUSH_BYTES (256u * 1024u)

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

void ftrace_drain_add_format(struct ftrace_session *s, size_t n) {
        size_t i = s->formats[n].id & (ID_SLOTS - 1);
        while (s->by_id[i] >= 0)
                i = (i + 1) & (ID_SLOTS - 1);
        s->by_id[i] = (int16_t) n;
}

/* A field a compact layout reads directly: there, of that size, and read
 * by format_read_int as the layout reads it (signed when 4 bytes). */
static bool layout_field(const struct format_field *ff, uint16_t size, uint16_t *ret_offset, uint16_t *min_len) {
        if (!ff || ff->size != size || ff->is_data_loc || ff->is_dyn_tail || (size == 4 && !ff->is_signed))
                return false;
        *ret_offset = ff->offset;
        *min_len = MAX(*min_len, (uint16_t) (ff->offset + size));
        return true;
}

static struct compact_layout layout_of(const struct format_field *comm, const struct format_field *pid,
                                       const struct format_field *prio, const struct format_field *arg,
                                       uint16_t arg_size) {
        struct compact_layout l = {};
        uint16_t min_len = 0;
#ifdef FORMAT_COMM_WORDS
        if (comm && comm->is_string && layout_field(comm, 16, &l.comm, &min_len) &&
            layout_field(pid, 4, &l.pid, &min_len) && layout_field(prio, 4, &l.prio, &min_len) &&
            layout_field(arg, arg_size, &l.arg, &min_len))
                l.min_len = min_len;
#endif
        return l;
}

static void compact_reset(struct ftrace_session *s);
static void bundle_reset(struct ftrace_session *s);

void ftrace_drain_init(struct ftrace_session *s) {
        memset(s->intern_slots, 0xff, sizeof(s->intern_slots));
        memset(s->by_id, 0xff, sizeof(s->by_id));
        s->switch_id = s->waking_id = -1;
        for (size_t n = 0; n < s->n_formats; n++) {
                struct event_format *f = &s->formats[n];
                ftrace_drain_add_format(s, n);
                if (strcmp(f->group, "sched") == 0 && strcmp(f->name, "sched_switch") == 0) {
                        s->switch_fmt = f;
                        s->switch_id = f->id;
                } else if (strcmp(f->group, "sched") == 0 && strcmp(f->name, "sched_waking") == 0) {
                        s->waking_fmt = f;
                        s->waking_id = f->id;
                }
        }
        if (s->switch_fmt) {
                s->sw_next_comm = format_field(s->switch_fmt, "next_comm");
                s->sw_prev_state = format_field(s->switch_fmt, "prev_state");
                s->sw_next_pid = format_field(s->switch_fmt, "next_pid");
                s->sw_next_prio = format_field(s->switch_fmt, "next_prio");
                s->sw_layout = layout_of(s->sw_next_comm, s->sw_next_pid, s->sw_next_prio, s->sw_prev_state, 8);
        }
        if (s->waking_fmt) {
                s->wk_comm_f = format_field(s->waking_fmt, "comm");
                s->wk_pid_f = format_field(s->waking_fmt, "pid");
                s->wk_cpu_f = format_field(s->waking_fmt, "target_cpu");
                s->wk_prio_f = format_field(s->waking_fmt, "prio");
                s->wk_layout = layout_of(s->wk_comm_f, s->wk_pid_f, s->wk_prio_f, s->wk_cpu_f, 4);
        }
        s->intern_gen = 1;
        compact_reset(s);
        bundle_reset(s);
}

/* The index of comm (16 bytes, zero-padded) in the bundle's table of
 * names, added if new. Hashed as two words. */
static uint32_t intern(struct ftrace_session *s, struct comm16 comm) {
        size_t i = hash_u64(comm.w[0] ^ (comm.w[1] * UINT64_C(0x9e3779b97f4a7c15))) & (INTERN_SLOTS - 1);
        for (;; i = (i + 1) & (INTERN_SLOTS - 1)) {
                int16_t k = s->intern_slots[i];
                if (k < 0)
                        break;
                if (memcmp(s->intern[k], comm.w, 16) == 0)
                        return (uint32_t) k;
        }
        if (s->n_intern == MAX_INTERN)
                return 0; /* table full: the bundle is emitted before this happens */
        memcpy(s->intern[s->n_intern], comm.w, 16);
        s->intern_slots[i] = (int16_t) s->n_intern;
        return (uint32_t) s->n_intern++;
}

/* The same, first asking the pid's last name: this runs for every event,
 * and a pid's name rarely changes. */
static inline uint32_t intern_pid(struct ftrace_session *s, int32_t pid, struct comm16 comm) {
        struct pid_intern *e = &s->pid_intern[(uint32_t) pid & (PID_INTERN_SLOTS - 1)];
        if (e->gen == s->intern_gen && e->pid == pid && e->comm.w[0] == comm.w[0] && e->comm.w[1] == comm.w[1])
                return e->idx;
        if (s->n_intern == MAX_INTERN)
                return 0; /* table full: the bundle is emitted before this happens */
        uint32_t idx = intern(s, comm);
        *e = (struct pid_intern) { .pid = pid, .gen = s->intern_gen, .comm = comm, .idx = idx };
        return idx;
}

/* A name read field by field, as two words. */
static struct comm16 comm_of_field(const struct format_field *ff, const uint8_t *rec, size_t len) {
        char buf[16];
        struct comm16 c;
        format_read_comm(ff, rec, len, buf);
        memcpy(c.w, buf, 16);
        return c;
}

#define N_COLUMNS 11

/* The columns of compact_sched, in the order compact_write writes them. */
static void compact_columns(struct ftrace_session *s, struct pb_buf *ret_cols[N_COLUMNS]) {
        struct pb_buf *cols[N_COLUMNS] = { &s->sw_ts,  &s->sw_state, &s->sw_pid,  &s->sw_prio, &s->sw_comm, &s->wk_ts,
                                           &s->wk_pid, &s->wk_cpu,   &s->wk_prio, &s->wk_comm, &s->wk_flags };
        memcpy(ret_cols, cols, sizeof(cols));
}

static void compact_reset(struct ftrace_session *s) {
        struct pb_buf *cols[N_COLUMNS];
        compact_columns(s, cols);
        for (size_t i = 0; i < N_COLUMNS; i++)
                pb_buf_reset(cols[i]);
        s->sw_last_ts = s->wk_last_ts = 0;
        s->n_intern = 0;
        memset(s->intern_slots, 0xff, sizeof(s->intern_slots));
        if (++s->intern_gen == 0) { /* wrapped: no entry may look current */
                memset(s->pid_intern, 0, sizeof(s->pid_intern));
                s->intern_gen = 1;
        }
}

/* The next FtraceEventBundle's events go into s->bundle. */
static void bundle_reset(struct ftrace_session *s) {
        pb_buf_reset(&s->bundle);
        FtraceEventBundle_init(&s->bundle_msg, pb_buf_stream(&s->bundle));
}

/* One element of a packed column (a column's grow function is set by
 * compact_reset). */
static inline void column_add(struct pb_buf *col, uint64_t v) {
        traced_pb_stream_varint(&col->s, v);
}

static inline uint64_t rd_s32(const uint8_t *p) {
        int32_t v;
        memcpy(&v, p, 4);
        return (uint64_t) (int64_t) v;
}

static inline uint64_t rd_u64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
}

/* sched_switch and sched_waking as columns: a few bytes per event. Read
 * through the layout resolved at the start where the record is long enough
 * for it, else field by field (0 for what is missing). */
static bool compact_add(struct ftrace_session *s, const struct event_format *f, uint64_t ts, const uint8_t *rec,
                        size_t len) {
        struct comm16 comm;
        uint64_t pid, prio, arg;
        if (f == s->switch_fmt) {
                const struct compact_layout *l = &s->sw_layout;
#ifdef FORMAT_COMM_WORDS
                if (l->min_len && len >= l->min_len) {
                        comm = format_comm16(rec + l->comm);
                        pid = rd_s32(rec + l->pid);
                        prio = rd_s32(rec + l->prio);
                        arg = rd_u64(rec + l->arg);
                } else
#endif
                {
                        comm = comm_of_field(s->sw_next_comm, rec, len);
                        pid = (uint64_t) format_read_int(s->sw_next_pid, rec, len);
                        prio = (uint64_t) format_read_int(s->sw_next_prio, rec, len);
                        arg = (uint64_t) format_read_int(s->sw_prev_state, rec, len);
                }
                column_add(&s->sw_ts, ts - s->sw_last_ts);
                s->sw_last_ts = ts;
                column_add(&s->sw_state, arg);
                column_add(&s->sw_pid, pid);
                column_add(&s->sw_prio, prio);
                column_add(&s->sw_comm, intern_pid(s, (int32_t) pid, comm));
                return true;
        }
        if (f == s->waking_fmt) {
                const struct compact_layout *l = &s->wk_layout;
#ifdef FORMAT_COMM_WORDS
                if (l->min_len && len >= l->min_len) {
                        comm = format_comm16(rec + l->comm);
                        pid = rd_s32(rec + l->pid);
                        prio = rd_s32(rec + l->prio);
                        arg = rd_s32(rec + l->arg);
                } else
#endif
                {
                        comm = comm_of_field(s->wk_comm_f, rec, len);
                        pid = (uint64_t) format_read_int(s->wk_pid_f, rec, len);
                        prio = (uint64_t) format_read_int(s->wk_prio_f, rec, len);
                        arg = (uint64_t) format_read_int(s->wk_cpu_f, rec, len);
                }
                column_add(&s->wk_ts, ts - s->wk_last_ts);
                s->wk_last_ts = ts;
                column_add(&s->wk_pid, pid);
                column_add(&s->wk_cpu, arg);
                column_add(&s->wk_prio, prio);
                column_add(&s->wk_comm, intern_pid(s, (int32_t) pid, comm));
                column_add(&s->wk_flags, f->common_flags_offset >= 0 && (size_t) f->common_flags_offset < len
                                                     ? rec[f->common_flags_offset]
                                                     : 0);
                return true;
        }
        return false;
}

/* The columns as FtraceEventBundle.compact_sched, when there are any. */
static void compact_write(struct ftrace_session *s, FtraceEventBundle *b) {
        if (!s->compact || (pb_buf_len(&s->sw_ts) == 0 && pb_buf_len(&s->wk_ts) == 0))
                return;
        FtraceEventBundle_CompactSched cs;
        FtraceEventBundle_begin_compact_sched(b, &cs);
        for (size_t i = 0; i < s->n_intern; i++)
                FtraceEventBundle_CompactSched_add_intern_table_n(&cs, s->intern[i], strnlen(s->intern[i], 16));
#define COLUMN(field, col)                                                                                             \
        if (pb_buf_len(&s->col))                                                                                        \
                FtraceEventBundle_CompactSched_set_##field##_encoded(&cs, pb_buf_data(&s->col), pb_buf_len(&s->col))
        COLUMN(switch_timestamp, sw_ts);
        COLUMN(switch_prev_state, sw_state);
        COLUMN(switch_next_pid, sw_pid);
        COLUMN(switch_next_prio, sw_prio);
        COLUMN(switch_next_comm_index, sw_comm);
        COLUMN(waking_timestamp, wk_ts);
        COLUMN(waking_pid, wk_pid);
        COLUMN(waking_target_cpu, wk_cpu);
        COLUMN(waking_prio, wk_prio);
        COLUMN(waking_comm_index, wk_comm);
        COLUMN(waking_common_flags, wk_flags);
#undef COLUMN
        FtraceEventBundle_end_compact_sched(b, &cs);
}

/* symbolize_ksyms: the names of the iids new since the last packet go out
 * in this one, as InternedData.kernel_symbols. iids restart from 1 every
 * drain, so the drain's first packet that uses any clears the sequence's
 * state, even when none of its addresses has a name: an iid must never
 * resolve to a name of the previous drain. */
static void ksyms_append(struct ftrace_session *s, TracePacket *pkt) {
        if (!s->kt || s->kt->n == s->kt->written)
                return;
        bool first = s->kt->written == 0, any = false;
        InternedData interned;
        for (uint32_t iid = s->kt->written + 1; iid <= s->kt->n; iid++) {
                const char *name = ksyms_lookup(s->ksyms, s->kt->addrs[iid - 1]);
                if (!name)
                        continue; /* not a function (the work item, a heap pointer) */
                if (!any)
                        TracePacket_begin_interned_data(pkt, &interned);
                any = true;
                InternedString str;
                InternedData_begin_kernel_symbols(&interned, &str);
                InternedString_set_iid(&str, iid);
                InternedString_set_str(&str, name, strlen(name));
                InternedData_end_kernel_symbols(&interned, &str);
        }
        if (any)
                TracePacket_end_interned_data(pkt, &interned);
        if (first)
                TracePacket_set_sequence_flags(pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
        s->kt->written = s->kt->n;
}

/* The bundle goes out as TracePacket { ftrace_events { cpu, event...,
 * compact_sched, lost_events } }, written straight into the writer's
 * shared memory; its events were encoded into s->bundle as they were
 * read. */
static void bundle_emit(struct ftrace_session *s) {
        if (s->bundle_events == 0 && !s->lost_pending)
                return;
        const struct traced_host_api *api = s->pl->api;
        TracePacket pkt;
        if (api->begin_packet(s->writer, &pkt.msg) >= 0) {
                FtraceEventBundle b;
                TracePacket_begin_ftrace_events(&pkt, &b);
                FtraceEventBundle_set_cpu(&b, (uint32_t) s->bundle_cpu);
                traced_pb_msg_append_raw(&b.msg, pb_buf_data(&s->bundle), pb_buf_len(&s->bundle));
                compact_write(s, &b);
                if (s->lost_pending)
                        FtraceEventBundle_set_lost_events(&b, true);
                TracePacket_end_ftrace_events(&pkt, &b);
                ksyms_append(s, &pkt);
                (void) api->end_packet(s->writer, &pkt.msg);
        }
        if (s->compact)
                compact_reset(s);
        bundle_reset(s);
        s->bundle_events = 0;
        s->lost_pending = false;
}

static void on_record(uint64_t ts, const uint8_t *data, size_t len, void *userdata) {
        struct ftrace_session *s = userdata;
        if (len < 2) {
                s->parse_errors |= 1u << PAGE_STATUS_SHORT_EVENT_ID;
                return;
        }
        uint16_t id;
        memcpy(&id, data, 2);
        /* The compact events first: nearly every record is one. */
        struct event_format *f = id == s->switch_id ? s->switch_fmt
                                       : id == s->waking_id ? s->waking_fmt
                                                            : format_by_id(s, id);
        if (!f && s->format_miss)
                f = s->format_miss(s->format_miss_userdata, id);
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
        if (s->im && f->ino_field >= 0 && f->dev_field >= 0)
                inode_map_note(s->im, (uint64_t) format_read_int(&f->fields[f->dev_field], data, len),
                               (uint64_t) format_read_int(&f->fields[f->ino_field], data, len));
        if (s->kt && s->kt->n + FORMAT_MAX_FIELDS > KADDR_MAX) {
                bundle_emit(s);
                kaddr_reset(s->kt);
        }
        if (!(s->compact && compact_add(s, f, ts, data, len)))
                ftrace_encode_event_ksyms(&s->bundle_msg, f, ts, data, len, s->kt);
        s->bundle_events++;
        s->events++;
        if (pb_buf_len(&s->bundle) + pb_buf_len(&s->sw_ts) * 4 >= BUNDLE_FLUSH_BYTES || s->n_intern >= MAX_INTERN - 1)
                bundle_emit(s);
}

/* What a page or sub-buffer said besides its records: refused (r < 0), or
 * events lost before it (a count, or 1 when the kernel only flagged it). */
static void note_page(struct ftrace_session *s, int r, const struct page_info *info, uint64_t lost) {
        s->pages++;
        if (r < 0) {
                s->bad_pages++;
                s->lost_pending = true;
                if (info->status < 32)
                        s->parse_errors |= 1u << info->status;
        }
        if (lost) {
                s->lost += lost;
                s->lost_pending = true;
        }
}

/* Whether a page of this many bytes of records means the reader has
 * caught up with the writer: the kernel hands out the sub-buffer the
 * writer is still filling, copying its records one at a time, and clears
 * the rest of the sub-buffer before copying all of it out. Reading on
 * after that would chase the writer a few records per read(), each read
 * costing a whole sub-buffer of copying (86 000 reads for 4.9 M events
 * at 64 KiB). A full sub-buffer holds all but the tail no record fitted
 * in; half of one allows records up to half a sub-buffer long. The
 * first page of a drain may be the rest of the one the last drain
 * stopped in, and is no sign. */
static bool caught_up(const struct ftrace_session *s, size_t data_len, size_t k) {
        return k > 0 && data_len < (s->page_size - PAGE_HEADER_SIZE) / 2;
}

/* Everything the kernel has, up to and with the sub-buffer the writer is
 * on, and no more than a buffer's worth: at a rate the reader cannot
 * follow, the loop still gets control back. */
static void drain_read(struct ftrace_session *s, int cpu) {
        for (size_t k = 0; k < s->max_pages_per_drain; k++) {
                ssize_t n = read(s->cpu_fds[cpu], s->page, s->page_size);
                if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ENODEV)
                        s->parse_errors |= 1u << PAGE_STATUS_UNEXPECTED_READ_ERROR;
                if (n <= 0)
                        break;
                if (caught_up(s, ftrace_drain_page(s, s->page, (size_t) n), k))
                        break;
        }
}

/* Sub-buffers moved per splice(): what an empty pipe of the default size
 * holds, one sub-buffer per slot whatever its size. */
#define SPLICE_BATCH 16u

/* The full sub-buffers only: splice() hands them over whole, swapped out
 * of the ring, where read() of the one the writer is on copies its records
 * one at a time (and clears and copies out the whole sub-buffer). The
 * kernel refuses that one to splice. Each lands in the session's pipe and
 * is read out of it into s->page. Returns how many, or a negative errno
 * when this CPU's file cannot splice (the caller falls back to read()). */
static int drain_spliced(struct ftrace_session *s, int cpu) {
        int got = 0;
        while ((size_t) got < s->max_pages_per_drain) {
                ssize_t n = splice(s->cpu_fds[cpu], NULL, s->splice_pipe[1], NULL, SPLICE_BATCH * s->page_size,
                                   SPLICE_F_NONBLOCK);
                if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENODEV))
                        break;
                if (n < 0)
                        return got > 0 ? got : -errno;
                if (n == 0)
                        break;
                for (size_t left = (size_t) n; left > 0;) {
                        ssize_t m = read(s->splice_pipe[0], s->page, MIN(left, s->page_size));
                        if (m <= 0) {
                                /* Not what the pipe was said to hold: start
                                 * again from an empty pipe, and say so. */
                                s->parse_errors |= 1u << PAGE_STATUS_UNEXPECTED_READ_ERROR;
                                s->lost_pending = true;
                                return -EIO;
                        }
                        (void) ftrace_drain_page(s, s->page, (size_t) m);
                        left -= (size_t) m;
                        got++;
                }
        }
        return got;
}

size_t ftrace_drain_page(struct ftrace_session *s, const uint8_t *page, size_t n) {
        struct page_info info;
        int r = page_walk(page, n, 0, SIZE_MAX, on_record, s, &info);
        uint64_t lost = 0;
        if (r >= 0 && (info.missed || info.lost_events))
                lost = info.lost_events ? info.lost_events : 1;
        note_page(s, r, &info, lost);
        return r < 0 ? 0 : info.data_len;
}

void ftrace_drain_emit(struct ftrace_session *s) {
        bundle_emit(s);
}

/* The same through the mapping: each round hands the reader sub-buffer
 * back to the kernel and parses what is new in the one it gives (the same
 * one when the writer was still filling it). */
static void drain_mapped(struct ftrace_session *s, int cpu) {
        struct ring_map *m = &s->maps[cpu];
        for (size_t k = 0; k < s->max_pages_per_drain; k++) {
                int r = ring_map_get_reader(m);
                if (r < 0) {
                        if (r != -EAGAIN && r != -EINTR)
                                s->parse_errors |= 1u << PAGE_STATUS_UNEXPECTED_READ_ERROR;
                        break;
                }
                struct ring_map_read rd;
                r = ring_map_parse(m, on_record, s, &rd);
                if (r == 0)
                        break;
                if (rd.new_subbuf || r < 0)
                        note_page(s, r, &rd.info, r < 0 ? 0 : rd.lost);
                /* The writer's sub-buffer (handed back again, or fresh
                 * and not half full): the rest of it next time. */
                if (r > 0 && (caught_up(s, rd.info.data_len, k) || (k > 0 && !rd.new_subbuf)))
                        break;
        }
}

/* A CPU whose file refused to splice reads from then on. */
static void drain_unsplice(struct ftrace_session *s, int cpu, int error) {
        s->readers[cpu] = FTRACE_READER_READ;
        plugin_log(s->pl, TRACED_LOG_WARNING, "cpu%d: splice() from trace_pipe_raw failed (%s); read() from now on", cpu,
                   strerror(-error));
}

void ftrace_drain(struct ftrace_session *s, bool all) {
        s->ps = process_stats_for_session(s->pl, s->tracing_session_id);
        s->im = inode_map_for_session(s->pl, s->tracing_session_id);
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                if (s->cpu_fds[cpu] < 0)
                        continue;
                s->bundle_cpu = cpu;
                switch (s->readers[cpu]) {
                case FTRACE_READER_MMAP:
                        drain_mapped(s, cpu);
                        break;
                case FTRACE_READER_SPLICE: {
                        int n = drain_spliced(s, cpu);
                        if (n < 0 && n != -EIO)
                                drain_unsplice(s, cpu, n);
                        /* The writer's sub-buffer, when nothing filled one
                         * since the last drain (a low rate) or everything
                         * is wanted now. */
                        if (n <= 0 || all)
                                drain_read(s, cpu);
                        break;
                }
                default:
                        drain_read(s, cpu);
                }
                bundle_emit(s);
        }
        process_stats_resolve_pending(s->ps);
        s->ps = NULL;
        inode_map_drained(s->im);
        s->im = NULL;
        if (s->kt)
                kaddr_reset(s->kt);
}

int ftrace_drain_choose(struct ftrace_session *s, enum ftrace_reader want) {
        if (!(s->readers = calloc((size_t) s->n_cpus, sizeof(*s->readers))))
                return -ENOMEM;
        if (want == FTRACE_READER_MMAP && !(s->maps = calloc((size_t) s->n_cpus, sizeof(*s->maps))))
                return -ENOMEM;
        if (want == FTRACE_READER_SPLICE && pipe2(s->splice_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
                want = FTRACE_READER_READ;
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                s->readers[cpu] = want == FTRACE_READER_MMAP ? FTRACE_READER_READ : want;
                if (want != FTRACE_READER_MMAP)
                        continue;
                s->maps[cpu] = (struct ring_map) { .fd = -EBADF };
                if (s->cpu_fds[cpu] >= 0 && ring_map_open(&s->maps[cpu], s->cpu_fds[cpu]) >= 0)
                        s->readers[cpu] = FTRACE_READER_MMAP; /* else read() */
        }
        return 0;
}

void ftrace_drain_unmap(struct ftrace_session *s) {
        for (int cpu = 0; s->maps && cpu < s->n_cpus; cpu++)
                ring_map_close(&s->maps[cpu]);
        free(s->maps);
        s->maps = NULL;
        for (int cpu = 0; s->readers && cpu < s->n_cpus; cpu++)
                if (s->readers[cpu] == FTRACE_READER_MMAP)
                        s->readers[cpu] = FTRACE_READER_READ;
}

enum ftrace_reader ftrace_drain_reader(const struct ftrace_session *s, int cpu) {
        return s->readers ? (enum ftrace_reader) s->readers[cpu] : FTRACE_READER_READ;
}

/* The drain period: CPUs whose watch a fruitless wake dropped are watched
 * again, and whatever every CPU holds is read. */
void ftrace_on_timer(void *userdata) {
        ftrace_wake_rearm(userdata);
        ftrace_drain(userdata, false);
}

void ftrace_drain_free(struct ftrace_session *s) {
        s->splice_pipe[0] = safe_close(s->splice_pipe[0]);
        s->splice_pipe[1] = safe_close(s->splice_pipe[1]);
        free(s->readers);
        s->readers = NULL;
        struct pb_buf *cols[N_COLUMNS];
        compact_columns(s, cols);
        for (size_t i = 0; i < N_COLUMNS; i++)
                pb_buf_done(cols[i]);
        pb_buf_done(&s->bundle);
        free(s->intern);
        free(s->kt);
}
