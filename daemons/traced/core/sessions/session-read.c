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
#include "basic/pb-buf.h"
#include "basic/varint.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-read.h"
#include "core/sessions/session-stats.h"
#include "core/buffers/trace-buffer.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

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
        if (field == TracePacket_FIELD_trusted_uid || field == TracePacket_FIELD_trusted_packet_sequence_id ||
            field == TracePacket_FIELD_trusted_pid || field == TracePacket_FIELD_machine_id)
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
                        if ((key >> 3) == TracePacket_FIELD_sequence_flags)
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

/* A service packet being built: the packet, and the buffer it is in. */
struct service_packet {
        struct pb_buf buf;
        TracePacket pkt;
};

static TracePacket *service_packet_begin(struct service_packet *sp) {
        *sp = (struct service_packet) {};
        TracePacket_init(&sp->pkt, pb_buf_stream(&sp->buf));
        return &sp->pkt;
}

static void service_packet_done(struct service_packet *sp) {
        pb_buf_done(&sp->buf);
}

/* Hands the packet to the sink, with the fields the service signs its
 * packets with (trusted_uid as a producer's, unless told not to). */
static int service_packet_emit(struct service_packet *sp, bool with_clock_id, bool with_sequence,
                               packet_sink_fn sink, void *userdata) {
        if (with_clock_id)
                TracePacket_set_timestamp_clock_id(&sp->pkt, BuiltinClock_BUILTIN_CLOCK_BOOTTIME);
        TracePacket_set_trusted_uid(&sp->pkt, (int32_t) getuid());
        if (with_sequence)
                TracePacket_set_trusted_packet_sequence_id(&sp->pkt, SERVICE_SEQUENCE_ID);
        int r = traced_pb_msg_finish(&sp->pkt.msg);
        if (r < 0)
                return r;
        struct iovec iov = { .iov_base = (void *) pb_buf_data(&sp->buf), .iov_len = pb_buf_len(&sp->buf) };
        return sink(&iov, 1, iov.iov_len, userdata);
}

static int emit_service_packet(struct service_packet *sp, bool with_clock_id, packet_sink_fn sink,
                               void *userdata) {
        return service_packet_emit(sp, with_clock_id, true, sink, userdata);
}

static int emit_clock_snapshot(struct session *s, packet_sink_fn sink, void *userdata) {
        static const struct {
                uint32_t id;
                clockid_t clk;
        } clocks[] = {
                { ClockSnapshot_Clock_BOOTTIME, CLOCK_BOOTTIME },
                { ClockSnapshot_Clock_REALTIME_COARSE, CLOCK_REALTIME_COARSE },
                { ClockSnapshot_Clock_MONOTONIC_COARSE, CLOCK_MONOTONIC_COARSE },
                { ClockSnapshot_Clock_REALTIME, CLOCK_REALTIME },
                { ClockSnapshot_Clock_MONOTONIC, CLOCK_MONOTONIC },
                { ClockSnapshot_Clock_MONOTONIC_RAW, CLOCK_MONOTONIC_RAW },
        };
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket *pkt = service_packet_begin(&sp);
        ClockSnapshot snap;

        TracePacket_begin_clock_snapshot(pkt, &snap);
        for (size_t i = 0; i < ELEMENTSOF(clocks); i++) {
                ClockSnapshot_Clock c;
                ClockSnapshot_begin_clocks(&snap, &c);
                ClockSnapshot_Clock_set_clock_id(&c, clocks[i].id);
                ClockSnapshot_Clock_set_timestamp(&c, clock_ns(clocks[i].clk));
                ClockSnapshot_end_clocks(&snap, &c);
        }
        ClockSnapshot_set_primary_trace_clock(&snap, BuiltinClock_BUILTIN_CLOCK_BOOTTIME);
        TracePacket_end_clock_snapshot(pkt, &snap);
        return emit_service_packet(&sp, true, sink, userdata);
}

static int emit_sync_marker(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket_set_synchronization_marker(service_packet_begin(&sp), sync_marker, sizeof(sync_marker));
        return emit_service_packet(&sp, false, sink, userdata);
}

static int emit_trace_config(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket_set_trace_config_serialized(service_packet_begin(&sp), s->config_bytes, s->config_size);
        return emit_service_packet(&sp, true, sink, userdata);
}

static int emit_trace_uuid(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket *pkt = service_packet_begin(&sp);
        TraceUuid u;
        TracePacket_begin_trace_uuid(pkt, &u);
        TraceUuid_set_msb(&u, (int64_t) s->uuid_msb);
        TraceUuid_set_lsb(&u, (int64_t) s->uuid_lsb);
        TracePacket_end_trace_uuid(pkt, &u);
        return emit_service_packet(&sp, true, sink, userdata);
}

static int emit_system_info(struct session *s, packet_sink_fn sink, void *userdata) {
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket *pkt = service_packet_begin(&sp);
        SystemInfo si;
        struct utsname u;
        struct sysinfo info;

        TracePacket_begin_system_info(pkt, &si);
        if (uname(&u) == 0) {
                Utsname uts;
                SystemInfo_begin_utsname(&si, &uts);
                Utsname_set_sysname(&uts, u.sysname);
                Utsname_set_version(&uts, u.version);
                Utsname_set_release(&uts, u.release);
                Utsname_set_machine(&uts, u.machine);
                SystemInfo_end_utsname(&si, &uts);
        }
        SystemInfo_set_tracing_service_version(&si, "traced " PACKAGE_VERSION);
        long page = sysconf(_SC_PAGESIZE);
        if (page > 0)
                SystemInfo_set_page_size(&si, (uint32_t) page);
        /* The CPUs possible (glibc reads them from sysfs at each call) do
         * not change while the system runs: read once, not at every file
         * a rotation opens. */
        static long cpus = 0;
        if (cpus <= 0)
                cpus = sysconf(_SC_NPROCESSORS_CONF);
        if (cpus > 0)
                SystemInfo_set_num_cpus(&si, (uint32_t) cpus);
        long hz = sysconf(_SC_CLK_TCK);
        if (hz > 0)
                SystemInfo_set_hz(&si, hz);
        if (sysinfo(&info) == 0)
                SystemInfo_set_system_ram_bytes(&si, (uint64_t) info.totalram * info.mem_unit);
        TracePacket_end_system_info(pkt, &si);
        return emit_service_packet(&sp, true, sink, userdata);
}

static void put_clocks(ClockSnapshot *snap, const struct relay_clock *c, size_t n) {
        for (size_t i = 0; i < n; i++) {
                ClockSnapshot_Clock one;
                ClockSnapshot_begin_clocks(snap, &one);
                ClockSnapshot_Clock_set_clock_id(&one, c[i].id);
                ClockSnapshot_Clock_set_timestamp(&one, c[i].ts);
                ClockSnapshot_end_clocks(snap, &one);
        }
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

                _cleanup_(service_packet_done) struct service_packet sp = {};
                TracePacket *pkt = service_packet_begin(&sp);
                TracePacket_set_system_info_serialized(pkt, m->system_info, m->system_info_size);
                TracePacket_set_machine_id(pkt, m->machine_id);
                r = emit_service_packet(&sp, false, sink, userdata);
                if (r < 0)
                        return r;

                _cleanup_(service_packet_done) struct service_packet sp2 = {};
                pkt = service_packet_begin(&sp2);
                RemoteClockSync sync;
                TracePacket_begin_remote_clock_sync(pkt, &sync);
                for (size_t k = 0; k < m->n_syncs; k++) {
                        const struct relay_sync *y = &m->syncs[(m->syncs_start + k) % RELAY_KEPT_SYNCS];
                        RemoteClockSync_SyncedClocks pair;
                        ClockSnapshot snap;
                        RemoteClockSync_begin_synced_clocks(&sync, &pair);
                        RemoteClockSync_SyncedClocks_begin_client_clocks(&pair, &snap);
                        put_clocks(&snap, y->client, y->n_client);
                        RemoteClockSync_SyncedClocks_end_client_clocks(&pair, &snap);
                        RemoteClockSync_SyncedClocks_begin_host_clocks(&pair, &snap);
                        put_clocks(&snap, y->host, y->n_host);
                        RemoteClockSync_SyncedClocks_end_host_clocks(&pair, &snap);
                        RemoteClockSync_end_synced_clocks(&sync, &pair);
                }
                TracePacket_end_remote_clock_sync(pkt, &sync);
                TracePacket_set_machine_id(pkt, m->machine_id);
                r = service_packet_emit(&sp2, false, false, sink, userdata);
                if (r < 0)
                        return r;
                count += 2;
        }
        return count;
}

static int emit_service_events(struct session *s, packet_sink_fn sink, void *userdata) {
        int r;
        for (size_t i = 0; i < s->n_events; i++) {
                _cleanup_(service_packet_done) struct service_packet sp = {};
                TracePacket *pkt = service_packet_begin(&sp);
                TracingServiceEvent ev;
                TracePacket_set_timestamp(pkt, s->events[i].ts);
                TracePacket_begin_service_event(pkt, &ev);
                /* The event is which of its fields is set (all of them
                 * flags, or DataSources lists already serialized). */
                if (s->events[i].msg)
                        traced_pb_msg_bytes(&ev.msg, s->events[i].field, s->events[i].msg, s->events[i].msg_len);
                else
                        traced_pb_msg_varint(&ev.msg, s->events[i].field, 1);
                TracePacket_end_service_event(pkt, &ev);
                r = emit_service_packet(&sp, true, sink, userdata);
                if (r < 0)
                        return r;
        }
        session_clear_service_events(s);
        return 0;
}

static int emit_trace_stats(struct session *s, packet_sink_fn sink, void *userdata) {
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
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket *pkt = service_packet_begin(&sp);
        TracePacket_set_timestamp(pkt, clock_ns(CLOCK_BOOTTIME));
        TracePacket_set_trace_stats_serialized(pkt, buf, n);
        return emit_service_packet(&sp, true, sink, userdata);
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

static int emit_trigger(struct session *s, bool clone_snapshot, const struct received_trigger *t,
                        packet_sink_fn sink, void *userdata) {
        _cleanup_(service_packet_done) struct service_packet sp = {};
        TracePacket *pkt = service_packet_begin(&sp);
        Trigger tr;
        TracePacket_set_timestamp(pkt, t->boot_time_ns);
        if (clone_snapshot)
                TracePacket_begin_clone_snapshot_trigger(pkt, &tr);
        else
                TracePacket_begin_trigger(pkt, &tr);
        Trigger_set_trigger_name(&tr, t->trigger_name ? t->trigger_name : "");
        Trigger_set_producer_name(&tr, t->producer_name ? t->producer_name : "");
        Trigger_set_trusted_producer_uid(&tr, (int32_t) t->producer_uid);
        Trigger_set_stop_delay_ms(&tr, t->stop_delay_ms);
        if (clone_snapshot)
                TracePacket_end_clone_snapshot_trigger(pkt, &tr);
        else
                TracePacket_end_trigger(pkt, &tr);
        return emit_service_packet(&sp, true, sink, userdata);
}

/* Each trigger the session received, once. */
static int emit_received_triggers(struct session *s, packet_sink_fn sink, void *userdata) {
        int count = 0;
        while (s->n_triggers_emitted < s->n_triggers) {
                int r = emit_trigger(s, false, &s->triggers[s->n_triggers_emitted], sink, userdata);
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
        struct traced_pb_stream st;
        TracePacket tail;
        traced_pb_stream_init_buffer(&st, buf, SESSION_TRAILER_MAX);
        TracePacket_init(&tail, &st);
        if (machine_id != 0)
                TracePacket_set_machine_id(&tail, machine_id);
        TracePacket_set_trusted_uid(&tail, (int32_t) uid);
        TracePacket_set_trusted_packet_sequence_id(&tail, seq);
        if (pid > 0)
                TracePacket_set_trusted_pid(&tail, (int32_t) pid);
        if (dropped)
                TracePacket_set_previous_packet_dropped(&tail, TracePacket_DATA_LOSS_PRESENT);
        if (first)
                TracePacket_set_first_packet_on_sequence(&tail, true);
        return (size_t) traced_pb_msg_size(&tail.msg);
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
                        r = emit_trigger(s, true, &s->clone_trigger, sink, userdata);
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
