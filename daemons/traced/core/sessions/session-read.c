/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "basic/pbw.h"
#include "basic/varint.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-read.h"
#include "core/sessions/session-stats.h"
#include "core/buffers/trace-buffer.h"

/* TracePacket field numbers (Perfetto ABI). */
enum {
        TP_TIMESTAMP = 8,
        TP_TIMESTAMP_CLOCK_ID = 58,
        TP_TRUSTED_UID = 3,
        TP_TRUSTED_SEQUENCE_ID = 10,
        TP_TRUSTED_PID = 79,
        TP_PREVIOUS_PACKET_DROPPED = 42,
        TP_FIRST_PACKET_ON_SEQUENCE = 87,
        TP_MACHINE_ID = 98,
        TP_REMOTE_CLOCK_SYNC = 107,
        TP_CLOCK_SNAPSHOT = 6,
        TP_TRACE_CONFIG = 33,
        TP_TRACE_STATS = 35,
        TP_SYNC_MARKER = 36,
        TP_SYSTEM_INFO = 45,
        TP_SERVICE_EVENT = 69,
        TP_TRACE_UUID = 89,
        TP_TRIGGER = 46,
        TP_CLONE_SNAPSHOT_TRIGGER = 113,
        TP_SEQUENCE_FLAGS = 13,
};

enum {
        BUILTIN_CLOCK_REALTIME = 1,
        BUILTIN_CLOCK_REALTIME_COARSE = 2,
        BUILTIN_CLOCK_MONOTONIC = 3,
        BUILTIN_CLOCK_MONOTONIC_COARSE = 4,
        BUILTIN_CLOCK_MONOTONIC_RAW = 5,
        BUILTIN_CLOCK_BOOTTIME = 6,
};

/* The 16-byte marker readers use to find packet boundaries in a damaged
 * trace; its value is fixed by the trace format. */
static const uint8_t sync_marker[16] = { 0x82, 0x47, 0x7a, 0x76, 0xb2, 0x8d, 0x42, 0xba,
                                         0x81, 0xdc, 0x33, 0x32, 0x6d, 0x57, 0xa0, 0x79 };

static uint64_t clock_ns(clockid_t clk) {
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* ---- validation of producer packets ----------------------------------- */

struct iov_reader {
        const struct iovec *iov;
        size_t n_iov, i, off, left;
};

static int rd_byte(struct iov_reader *r, uint8_t *ret) {
        while (r->i < r->n_iov && r->off >= r->iov[r->i].iov_len) {
                r->i++;
                r->off = 0;
        }
        if (r->left == 0 || r->i >= r->n_iov)
                return -EBADMSG;
        *ret = ((const uint8_t *) r->iov[r->i].iov_base)[r->off++];
        r->left--;
        return 0;
}

static int rd_varint(struct iov_reader *r, uint64_t *ret) {
        uint64_t v = 0;
        for (unsigned i = 0;; i++) {
                uint8_t b;
                if (rd_byte(r, &b) < 0)
                        return -EBADMSG;
                int k = varint_push_byte(&v, i, b, /* strict= */ true);
                if (k < 0)
                        return -EBADMSG;
                if (k > 0) {
                        *ret = v;
                        return 0;
                }
        }
}

static int rd_skip(struct iov_reader *r, uint64_t n) {
        if (n > r->left)
                return -EBADMSG;
        r->left -= n;
        while (n > 0 && r->i < r->n_iov) {
                size_t avail = r->iov[r->i].iov_len - r->off;
                size_t k = MIN(avail, n);
                r->off += k;
                n -= k;
                if (r->off == r->iov[r->i].iov_len) {
                        r->i++;
                        r->off = 0;
                }
        }
        return n == 0 ? 0 : -EBADMSG;
}

/* A field key a producer may write: a valid field number, not one of the
 * fields only the service sets, a wire type that is not a group. */
static bool key_ok(uint64_t key) {
        uint64_t field = key >> 3;
        if (field == 0 || field > 536870911u)
                return false;
        if (field == TP_TRUSTED_UID || field == TP_TRUSTED_SEQUENCE_ID || field == TP_TRUSTED_PID ||
            field == TP_MACHINE_ID)
                return false;
        unsigned wt = key & 7;
        return wt == 0 || wt == 1 || wt == 2 || wt == 5;
}

static _always_inline_ bool flat_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        size_t k = varint_read_strict(*p, (size_t) (end - *p), ret);
        *p += k;
        return k > 0;
}

/* The same checks over one contiguous range, the common case (a packet is
 * one slice of the trace buffer). */
static bool packet_is_valid_flat(const uint8_t *p, size_t n) {
        const uint8_t *end = p + n;
        while (p < end) {
                uint64_t key, v;
                if (!flat_varint(&p, end, &key) || !key_ok(key))
                        return false;
                switch (key & 7) {
                case 0:
                        if (!flat_varint(&p, end, &v))
                                return false;
                        break;
                case 1:
                        if (end - p < 8)
                                return false;
                        p += 8;
                        break;
                case 2:
                        if (!flat_varint(&p, end, &v) || v > (uint64_t) (end - p))
                                return false;
                        p += v;
                        break;
                default: /* 5, as key_ok allows no other */
                        if (end - p < 4)
                                return false;
                        p += 4;
                        break;
                }
        }
        return true;
}

bool packet_is_valid(const struct iovec *iov, size_t n_iov, size_t total) {
        if (n_iov == 1 && iov[0].iov_len == total)
                return packet_is_valid_flat(iov[0].iov_base, total);

        struct iov_reader r = { .iov = iov, .n_iov = n_iov, .left = total };
        while (r.left > 0) {
                uint64_t key, v;
                if (rd_varint(&r, &key) < 0 || !key_ok(key))
                        return false;
                switch (key & 7) {
                case 0:
                        if (rd_varint(&r, &v) < 0)
                                return false;
                        break;
                case 1:
                        if (rd_skip(&r, 8) < 0)
                                return false;
                        break;
                case 2:
                        if (rd_varint(&r, &v) < 0 || rd_skip(&r, v) < 0)
                                return false;
                        break;
                default:
                        if (rd_skip(&r, 4) < 0)
                                return false;
                        break;
                }
        }
        return true;
}

uint64_t packet_sequence_flags(const struct iovec *iov, size_t n_iov, size_t total) {
        struct iov_reader r = { .iov = iov, .n_iov = n_iov, .left = total };
        uint64_t flags = 0;
        while (r.left > 0) {
                uint64_t key, v;
                if (rd_varint(&r, &key) < 0)
                        return flags;
                switch (key & 7) {
                case 0:
                        if (rd_varint(&r, &v) < 0)
                                return flags;
                        if ((key >> 3) == TP_SEQUENCE_FLAGS)
                                flags |= v;
                        break;
                case 1:
                        if (rd_skip(&r, 8) < 0)
                                return flags;
                        break;
                case 2:
                        if (rd_varint(&r, &v) < 0 || rd_skip(&r, v) < 0)
                                return flags;
                        break;
                case 5:
                        if (rd_skip(&r, 4) < 0)
                                return flags;
                        break;
                default:
                        return flags;
                }
        }
        return flags;
}

/* ---- service packets ---------------------------------------------------- */

static int emit_service_packet(struct session *s, struct pbw *w, bool with_clock_id, packet_sink_fn sink,
                               void *userdata) {
        if (with_clock_id)
                pbw_varint(w, TP_TIMESTAMP_CLOCK_ID, BUILTIN_CLOCK_BOOTTIME);
        pbw_varint(w, TP_TRUSTED_UID, (uint64_t) (int64_t) (int32_t) getuid());
        pbw_varint(w, TP_TRUSTED_SEQUENCE_ID, SERVICE_SEQUENCE_ID);
        if (w->error)
                return w->error;
        struct iovec iov = { .iov_base = w->buf, .iov_len = w->len };
        return sink(&iov, 1, w->len, userdata);
}

static int emit_clock_snapshot(struct session *s, packet_sink_fn sink, void *userdata) {
        static const struct {
                uint32_t id;
                clockid_t clk;
        } clocks[] = {
                { BUILTIN_CLOCK_BOOTTIME, CLOCK_BOOTTIME },
                { BUILTIN_CLOCK_REALTIME_COARSE, CLOCK_REALTIME_COARSE },
                { BUILTIN_CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_COARSE },
                { BUILTIN_CLOCK_REALTIME, CLOCK_REALTIME },
                { BUILTIN_CLOCK_MONOTONIC, CLOCK_MONOTONIC },
                { BUILTIN_CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_RAW },
        };
        _cleanup_(pbw_done) struct pbw w = {}, snap = {};

        for (size_t i = 0; i < ELEMENTSOF(clocks); i++) {
                _cleanup_(pbw_done) struct pbw c = {};
                pbw_varint(&c, 1, clocks[i].id);
                pbw_varint(&c, 2, clock_ns(clocks[i].clk));
                pbw_message(&snap, 1, &c);
        }
        pbw_varint(&snap, 2, BUILTIN_CLOCK_BOOTTIME);
        pbw_message(&w, TP_CLOCK_SNAPSHOT, &snap);
        return emit_service_packet(s, &w, true, sink, userdata);
}

static int emit_sync_marker(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(pbw_done) struct pbw w = {};
        pbw_bytes(&w, TP_SYNC_MARKER, sync_marker, sizeof(sync_marker));
        return emit_service_packet(s, &w, false, sink, userdata);
}

static int emit_trace_config(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(pbw_done) struct pbw w = {};
        pbw_bytes(&w, TP_TRACE_CONFIG, s->config_bytes, s->config_size);
        return emit_service_packet(s, &w, true, sink, userdata);
}

static int emit_trace_uuid(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(pbw_done) struct pbw w = {}, u = {};
        pbw_varint(&u, 1, s->uuid_msb);
        pbw_varint(&u, 2, s->uuid_lsb);
        pbw_message(&w, TP_TRACE_UUID, &u);
        return emit_service_packet(s, &w, true, sink, userdata);
}

static int emit_system_info(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(pbw_done) struct pbw w = {}, si = {}, uts = {};
        struct utsname u;
        struct sysinfo info;

        if (uname(&u) == 0) {
                pbw_string(&uts, 1, u.sysname);
                pbw_string(&uts, 2, u.version);
                pbw_string(&uts, 3, u.release);
                pbw_string(&uts, 4, u.machine);
                pbw_message(&si, 1, &uts);
        }
        pbw_string(&si, 4, "traced " PACKAGE_VERSION);
        long page = sysconf(_SC_PAGESIZE);
        if (page > 0)
                pbw_varint(&si, 6, (uint64_t) page);
        long cpus = sysconf(_SC_NPROCESSORS_CONF);
        if (cpus > 0)
                pbw_varint(&si, 8, (uint64_t) cpus);
        long hz = sysconf(_SC_CLK_TCK);
        if (hz > 0)
                pbw_varint(&si, 3, (uint64_t) hz);
        if (sysinfo(&info) == 0)
                pbw_varint(&si, 16, (uint64_t) info.totalram * info.mem_unit);
        pbw_message(&w, TP_SYSTEM_INFO, &si);
        return emit_service_packet(s, &w, true, sink, userdata);
}

static void put_clocks(struct pbw *w, unsigned field, const struct relay_clock *c, size_t n) {
        _cleanup_(pbw_done) struct pbw snap = {};
        for (size_t i = 0; i < n; i++) {
                _cleanup_(pbw_done) struct pbw one = {};
                pbw_varint(&one, 1, c[i].id);
                pbw_varint(&one, 2, c[i].ts);
                pbw_message(&snap, 1, &one);
        }
        pbw_message(w, field, &snap);
}

/* Once per session and relayed machine, when the relay has described it:
 * its SystemInfo and the clock exchanges kept, both marked with its
 * machine id. */
static int emit_relayed_machines(struct session *s, packet_sink_fn sink, void *userdata) {
        struct relay_machines *rm = &s->svc->machines;
        int r, count = 0;

        for (size_t i = 0; i < rm->n; i++) {
                struct relay_machine *m = &rm->m[i];
                bool done = false;
                for (size_t j = 0; j < s->n_machines_emitted; j++)
                        done = done || s->machines_emitted[j] == m->machine_id;
                if (done || !m->system_info || m->n_syncs == 0 ||
                    s->n_machines_emitted >= ELEMENTSOF(s->machines_emitted))
                        continue;
                s->machines_emitted[s->n_machines_emitted++] = m->machine_id;

                _cleanup_(pbw_done) struct pbw w = {}, sync = {};
                pbw_bytes(&w, TP_SYSTEM_INFO, m->system_info, m->system_info_size);
                pbw_varint(&w, TP_MACHINE_ID, m->machine_id);
                r = emit_service_packet(s, &w, false, sink, userdata);
                if (r < 0)
                        return r;
                for (size_t k = 0; k < m->n_syncs; k++) {
                        const struct relay_sync *y = &m->syncs[(m->syncs_start + k) % RELAY_KEPT_SYNCS];
                        _cleanup_(pbw_done) struct pbw pair = {};
                        put_clocks(&pair, 2, y->client, y->n_client);
                        put_clocks(&pair, 3, y->host, y->n_host);
                        pbw_message(&sync, 1, &pair);
                }
                _cleanup_(pbw_done) struct pbw w2 = {};
                pbw_message(&w2, TP_REMOTE_CLOCK_SYNC, &sync);
                pbw_varint(&w2, TP_MACHINE_ID, m->machine_id);
                pbw_varint(&w2, TP_TRUSTED_UID, (uint64_t) (int64_t) (int32_t) getuid());
                if (w2.error)
                        return w2.error;
                struct iovec iov = { .iov_base = w2.buf, .iov_len = w2.len };
                r = sink(&iov, 1, w2.len, userdata);
                if (r < 0)
                        return r;
                count += 2;
        }
        return count;
}

static int emit_service_events(struct session *s, packet_sink_fn sink, void *userdata) {
        int r;
        for (size_t i = 0; i < s->n_events; i++) {
                _cleanup_(pbw_done) struct pbw w = {}, ev = {};
                pbw_varint(&w, TP_TIMESTAMP, s->events[i].ts);
                if (s->events[i].msg)
                        pbw_bytes(&ev, s->events[i].field, s->events[i].msg, s->events[i].msg_len);
                else
                        pbw_varint(&ev, s->events[i].field, 1);
                pbw_message(&w, TP_SERVICE_EVENT, &ev);
                r = emit_service_packet(s, &w, true, sink, userdata);
                if (r < 0)
                        return r;
        }
        session_clear_service_events(s);
        return 0;
}

static int emit_trace_stats(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(pbw_done) struct pbw w = {};
        Perfetto__Protos__TraceStats *st = session_build_trace_stats(s);
        if (!st)
                return -ENOMEM;
        size_t n = perfetto__protos__trace_stats__get_packed_size(st);
        _cleanup_free_ uint8_t *buf = malloc(n ? n : 1);
        if (!buf) {
                session_free_trace_stats(st);
                return -ENOMEM;
        }
        perfetto__protos__trace_stats__pack(st, buf);
        session_free_trace_stats(st);
        pbw_varint(&w, TP_TIMESTAMP, clock_ns(CLOCK_BOOTTIME));
        pbw_bytes(&w, TP_TRACE_STATS, buf, n);
        return emit_service_packet(s, &w, true, sink, userdata);
}

void session_clear_service_events(struct session *s) {
        for (size_t i = 0; i < s->n_events; i++)
                free(s->events[i].msg);
        s->n_events = 0;
}

void session_add_service_event_msg(struct session *s, unsigned field, const uint8_t *msg, size_t len) {
        if (s->n_events >= ELEMENTSOF(s->events))
                return;
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy)
                return;
        memcpy(copy, msg, len);
        s->events[s->n_events++] = (struct service_event) {
                .field = field,
                .ts = clock_ns(CLOCK_BOOTTIME),
                .msg = copy,
                .msg_len = len,
        };
}

static int emit_trigger(struct session *s, unsigned field, const struct received_trigger *t, packet_sink_fn sink,
                        void *userdata) {
        _cleanup_(pbw_done) struct pbw w = {}, tr = {};
        pbw_string(&tr, 1, t->trigger_name ? t->trigger_name : "");
        pbw_string(&tr, 2, t->producer_name ? t->producer_name : "");
        pbw_varint(&tr, 3, (uint64_t) (int64_t) (int32_t) t->producer_uid);
        pbw_varint(&tr, 4, t->stop_delay_ms);
        pbw_varint(&w, TP_TIMESTAMP, t->boot_time_ns);
        pbw_message(&w, field, &tr);
        return emit_service_packet(s, &w, true, sink, userdata);
}

/* Each trigger the session received, once. */
static int emit_received_triggers(struct session *s, packet_sink_fn sink, void *userdata) {
        int count = 0;
        while (s->n_triggers_emitted < s->n_triggers) {
                int r = emit_trigger(s, TP_TRIGGER, &s->triggers[s->n_triggers_emitted], sink, userdata);
                if (r < 0)
                        return r;
                s->n_triggers_emitted++;
                count++;
        }
        return count;
}

void session_add_service_event(struct session *s, unsigned field) {
        if (s->n_events >= ELEMENTSOF(s->events))
                return;
        s->events[s->n_events++] = (struct service_event) {
                .field = field,
                .ts = clock_ns(CLOCK_BOOTTIME),
        };
}

/* ---- producer packets --------------------------------------------------- */

static size_t trailer(uint8_t *buf, uid_t uid, pid_t pid, uint32_t machine_id, uint32_t seq, bool dropped,
                      bool first) {
        size_t n = 0;
        if (machine_id != 0) {
                n += pbw_put_varint(buf + n, (TP_MACHINE_ID << 3) | 0);
                n += pbw_put_varint(buf + n, machine_id);
        }
        n += pbw_put_varint(buf + n, (TP_TRUSTED_UID << 3) | 0);
        n += pbw_put_varint(buf + n, (uint64_t) (int64_t) (int32_t) uid);
        n += pbw_put_varint(buf + n, (TP_TRUSTED_SEQUENCE_ID << 3) | 0);
        n += pbw_put_varint(buf + n, seq);
        if (pid > 0) {
                n += pbw_put_varint(buf + n, (TP_TRUSTED_PID << 3) | 0);
                n += pbw_put_varint(buf + n, (uint64_t) pid);
        }
        if (dropped) {
                n += pbw_put_varint(buf + n, (TP_PREVIOUS_PACKET_DROPPED << 3) | 0);
                n += pbw_put_varint(buf + n, 1);
        }
        if (first) {
                n += pbw_put_varint(buf + n, (TP_FIRST_PACKET_ON_SEQUENCE << 3) | 0);
                n += pbw_put_varint(buf + n, 1);
        }
        return n;
}

size_t session_packet_trailer(const struct trace_buffer_packet_info *info, uint32_t seq, bool first, uint8_t *buf) {
        return trailer(buf, info->producer_uid, info->producer_pid, info->machine_id, seq,
                       info->previous_packet_dropped, first);
}

static int read_buffer(struct session *s, struct trace_buffer *tb, packet_sink_fn sink, void *userdata,
                       bool *paused) {
        int count = 0, r;
        /* Packets come sequence by sequence: the last id found is the next
         * one's, most of the time. */
        bool have_last = false;
        uint16_t last_producer = 0, last_writer = 0;
        uint32_t last_seq = 0;

        trace_buffer_begin_read(tb);
        for (;;) {
                struct trace_buffer_packet pkt;
                struct trace_buffer_packet_info info;
                r = trace_buffer_read_next_packet(tb, &pkt, &info);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                if (!packet_is_valid(pkt.slices, pkt.n_slices, pkt.size)) {
                        /* An unfinished packet is left out as upstream
                         * leaves it: not counted as a malformed one. */
                        if (!info.unfinished)
                                s->packets_invalid++;
                        continue;
                }
                bool first = false;
                uint32_t seq;
                if (have_last && info.producer_id == last_producer && info.writer_id == last_writer)
                        seq = last_seq; /* seen already: not the first */
                else {
                        seq = last_seq = session_sequence_id(s, info.producer_id, info.writer_id, &first);
                        last_producer = info.producer_id;
                        last_writer = info.writer_id;
                        have_last = seq != 0;
                }
                uint8_t tail[SESSION_TRAILER_MAX];
                size_t tn = session_packet_trailer(&info, seq, first, tail);
                size_t n = pkt.n_slices;
                if (GREEDY_REALLOC(s->read_iov, s->read_iov_cap, n + 1) < 0)
                        return -ENOMEM;
                memcpy(s->read_iov, pkt.slices, n * sizeof(struct iovec));
                s->read_iov[n] = (struct iovec) { .iov_base = tail, .iov_len = tn };
                s->read_seq = seq;
                r = sink(s->read_iov, n + 1, pkt.size + tn, userdata);
                s->read_seq = 0;
                if (r < 0)
                        return r;
                count++;
                if (r > 0) {
                        *paused = true;
                        break;
                }
        }
        return count;
}

/* What opens every file: the clocks, a marker, the config, the trace's
 * uuid and the system. */
static int emit_head(struct session *s, packet_sink_fn sink, void *userdata) {
        int r;
        if ((r = emit_clock_snapshot(s, sink, userdata)) < 0 || (r = emit_sync_marker(s, sink, userdata)) < 0 ||
            (r = emit_trace_config(s, sink, userdata)) < 0 || (r = emit_trace_uuid(s, sink, userdata)) < 0 ||
            (r = emit_system_info(s, sink, userdata)) < 0)
                return r;
        return 5;
}

int session_emit_file_head(struct session *s, packet_sink_fn sink, void *userdata) {
        int r = emit_head(s, sink, userdata);
        if (r < 0)
                return r;
        /* Relayed machines again: each file describes its machines. */
        s->n_machines_emitted = 0;
        int k = emit_relayed_machines(s, sink, userdata);
        return k < 0 ? k : r + k;
}

int session_emit_file_tail(struct session *s, packet_sink_fn sink, void *userdata) {
        int r;
        if ((r = emit_service_events(s, sink, userdata)) < 0 || (r = emit_clock_snapshot(s, sink, userdata)) < 0 ||
            (r = emit_trace_stats(s, sink, userdata)) < 0)
                return r;
        return 2;
}

int session_read_packets(struct session *s, packet_sink_fn sink, void *userdata) {
        bool paused;
        return session_read_packets_paced(s, sink, userdata, &paused);
}

int session_read_packets_paced(struct session *s, packet_sink_fn sink, void *userdata, bool *ret_paused) {
        int r, count = 0;
        *ret_paused = false;
        uint64_t now = clock_ns(CLOCK_MONOTONIC) / 1000u;

        if (!s->initial_packets_emitted) {
                s->initial_packets_emitted = true;
                s->last_sync_marker_usec = now;
                if ((r = emit_head(s, sink, userdata)) < 0)
                        return r;
                count += r;
                if (s->clone_trigger.trigger_name) {
                        r = emit_trigger(s, TP_CLONE_SNAPSHOT_TRIGGER, &s->clone_trigger, sink, userdata);
                        if (r < 0)
                                return r;
                        count++;
                }
        } else if (now - s->last_sync_marker_usec >= SERVICE_SYNC_MARKER_PERIOD_USEC) {
                s->last_sync_marker_usec = now;
                if ((r = emit_sync_marker(s, sink, userdata)) < 0 || (r = emit_clock_snapshot(s, sink, userdata)) < 0)
                        return r;
                count += 2;
        }
        r = emit_received_triggers(s, sink, userdata);
        if (r < 0)
                return r;
        count += r;
        r = emit_service_events(s, sink, userdata);
        if (r < 0)
                return r;
        r = emit_relayed_machines(s, sink, userdata);
        if (r < 0)
                return r;
        count += r;

        for (size_t i = 0; i < s->n_buffers; i++) {
                r = read_buffer(s, s->buffers[i].tb, sink, userdata, ret_paused);
                if (r < 0)
                        return r;
                count += r;
                if (*ret_paused)
                        return count;
        }

        if (s->state == SESSION_DISABLED && !s->final_stats_emitted) {
                s->final_stats_emitted = true;
                session_add_service_event(s, SERVICE_EVENT_READ_BUFFERS_COMPLETED);
                if ((r = emit_service_events(s, sink, userdata)) < 0 || (r = emit_clock_snapshot(s, sink, userdata)) < 0 ||
                    (r = emit_trace_stats(s, sink, userdata)) < 0)
                        return r;
                count += 3;
        }
        return count;
}
