/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Our .proto files against what upstream Perfetto really puts on the wire:
 * the recorded traces, the QueryServiceState reply and the IPC streams in
 * tests/data/upstream are decoded with the generated protobuf-c code. Every
 * field upstream wrote must land in a declared field (no unknown fields),
 * and the decoded values must be the ones recorded.
 */

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"
#include "perfetto/ipc/wire_protocol.pb-c.h"
#include "perfetto/trace/trace.pb-c.h"

#define UPSTREAM_DIR TEST_DATA_DIR "/upstream/"

/* ---- helpers ------------------------------------------------------------ */

static uint8_t *slurp(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));

        size_t cap = 4096, len = 0;
        uint8_t *buf = malloc(cap);
        cr_assert_not_null(buf);
        for (;;) {
                if (len == cap) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        cr_assert_not_null(buf);
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                if (n == 0)
                        break;
                len += n;
        }
        cr_assert(!ferror(f));
        fclose(f);
        *ret_len = len;
        return buf;
}

/* Unknown fields anywhere in the message tree, found through descriptors.
 * Zero means every field upstream wrote is declared in our protos. */
static size_t count_unknown(const ProtobufCMessage *m) {
        const ProtobufCMessageDescriptor *d = m->descriptor;
        const char *base = (const char *) m;
        size_t n = m->n_unknown_fields;

        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];

                if (f->type != PROTOBUF_C_TYPE_MESSAGE)
                        continue;

                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t count = *(const size_t *) (base + f->quantifier_offset);
                        ProtobufCMessage *const *items = *(ProtobufCMessage *const *const *) (base + f->offset);
                        for (size_t j = 0; j < count; j++)
                                n += count_unknown(items[j]);
                        continue;
                }

                if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                    *(const uint32_t *) (base + f->quantifier_offset) != f->id)
                        continue;

                const ProtobufCMessage *sub = *(const ProtobufCMessage *const *) (base + f->offset);
                if (sub)
                        n += count_unknown(sub);
        }
        return n;
}

/* ---- the recorded IPC streams (NN-*.hex) ---------------------------------- */

enum { DIR_CS, DIR_SC, _DIR_MAX };

#define MAX_FRAMES 128
#define MAX_FD_LINES 8
#define MAX_METHODS 32
#define MAX_REQUESTS 256

struct frame {
        Perfetto__Protos__IPCFrame *msg;
        /* The method this frame invokes or answers, from the bind reply. */
        const char *method;
        /* A file descriptor came with the syscall that started this frame. */
        bool with_fd;
};

struct stream {
        uint8_t *buf;
        size_t len, cap;
        size_t fd_offsets[MAX_FD_LINES];
        size_t n_fd_offsets;
        struct frame frames[MAX_FRAMES];
        size_t n_frames;
};

struct conn {
        struct stream dir[_DIR_MAX];
        char *methods[MAX_METHODS];
        const char *request_method[MAX_REQUESTS];
        char *service_name;
};

static int hex_nibble(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static void stream_append_hex(struct stream *s, const char *hex, size_t n) {
        cr_assert(n % 2 == 0, "odd hex length");
        if (s->len + n / 2 > s->cap) {
                s->cap = (s->len + n / 2) * 2;
                s->buf = realloc(s->buf, s->cap);
                cr_assert_not_null(s->buf);
        }
        for (size_t i = 0; i < n; i += 2) {
                int hi = hex_nibble(hex[i]), lo = hex_nibble(hex[i + 1]);
                cr_assert(hi >= 0 && lo >= 0, "bad hex digit");
                s->buf[s->len++] = (uint8_t) (hi << 4 | lo);
        }
}

/* One line: "<seconds> <C>S|S>C> <hex> [+fdN]"; '#' lines are comments. */
static void parse_hex_line(struct conn *c, char *line) {
        char *save = NULL;
        char *ts = strtok_r(line, " \t\n", &save);
        if (!ts || ts[0] == '#')
                return;
        char *dir = strtok_r(NULL, " \t\n", &save);
        char *hex = strtok_r(NULL, " \t\n", &save);
        char *extra = strtok_r(NULL, " \t\n", &save);
        cr_assert_not_null(dir);
        cr_assert_not_null(hex);

        struct stream *s;
        if (strcmp(dir, "C>S") == 0)
                s = &c->dir[DIR_CS];
        else if (strcmp(dir, "S>C") == 0)
                s = &c->dir[DIR_SC];
        else
                cr_assert_fail("bad direction '%s'", dir);

        if (extra) {
                cr_assert(strncmp(extra, "+fd", 3) == 0, "bad trailer '%s'", extra);
                cr_assert_lt(s->n_fd_offsets, MAX_FD_LINES);
                s->fd_offsets[s->n_fd_offsets++] = s->len;
        }
        stream_append_hex(s, hex, strlen(hex));
}

/* Cut a byte stream into <u32 LE length><IPCFrame> frames and decode them. */
static void split_frames(struct stream *s) {
        size_t off = 0;
        while (off < s->len) {
                cr_assert_geq(s->len - off, 4, "truncated frame header");
                uint32_t n = (uint32_t) s->buf[off] | (uint32_t) s->buf[off + 1] << 8 |
                             (uint32_t) s->buf[off + 2] << 16 | (uint32_t) s->buf[off + 3] << 24;
                cr_assert_geq(s->len - off - 4, n, "truncated frame");
                cr_assert_lt(s->n_frames, MAX_FRAMES);

                struct frame *f = &s->frames[s->n_frames++];
                f->msg = perfetto__protos__ipcframe__unpack(NULL, n, s->buf + off + 4);
                cr_assert_not_null(f->msg, "frame %zu does not decode as IPCFrame", s->n_frames - 1);
                cr_assert_eq(count_unknown(&f->msg->base), 0);
                for (size_t i = 0; i < s->n_fd_offsets; i++)
                        if (s->fd_offsets[i] >= off && s->fd_offsets[i] < off + 4 + n)
                                f->with_fd = true;
                off += 4 + n;
        }
}

static void conn_load(struct conn *c, const char *name) {
        char path[512];
        snprintf(path, sizeof(path), UPSTREAM_DIR "%s.hex", name);

        *c = (struct conn) {};
        FILE *fp = fopen(path, "re");
        cr_assert_not_null(fp, "cannot open %s", path);
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, fp) >= 0)
                parse_hex_line(c, line);
        free(line);
        fclose(fp);

        for (int d = 0; d < _DIR_MAX; d++)
                split_frames(&c->dir[d]);

        /* Bind: one BindService from the client, its reply lists the
         * methods by id. */
        uint64_t bind_request = UINT64_MAX;
        for (size_t i = 0; i < c->dir[DIR_CS].n_frames; i++) {
                Perfetto__Protos__IPCFrame *m = c->dir[DIR_CS].frames[i].msg;
                if (m->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE) {
                        bind_request = m->request_id;
                        c->service_name = m->msg_bind_service->service_name;
                }
        }
        cr_assert_neq(bind_request, UINT64_MAX, "no BindService frame");
        for (size_t i = 0; i < c->dir[DIR_SC].n_frames; i++) {
                Perfetto__Protos__IPCFrame *m = c->dir[DIR_SC].frames[i].msg;
                if (m->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY ||
                    m->request_id != bind_request)
                        continue;
                Perfetto__Protos__IPCFrame__BindServiceReply *r = m->msg_bind_service_reply;
                cr_assert(r->success);
                for (size_t j = 0; j < r->n_methods; j++) {
                        cr_assert_lt(r->methods[j]->id, MAX_METHODS);
                        c->methods[r->methods[j]->id] = r->methods[j]->name;
                }
        }

        /* Which method each request id belongs to. */
        for (size_t i = 0; i < c->dir[DIR_CS].n_frames; i++) {
                struct frame *f = &c->dir[DIR_CS].frames[i];
                if (f->msg->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD)
                        continue;
                uint32_t id = f->msg->msg_invoke_method->method_id;
                cr_assert_lt(id, MAX_METHODS);
                cr_assert_not_null(c->methods[id], "method id %u not bound", id);
                cr_assert_lt(f->msg->request_id, MAX_REQUESTS);
                f->method = c->methods[id];
                c->request_method[f->msg->request_id] = f->method;
        }
        for (size_t i = 0; i < c->dir[DIR_SC].n_frames; i++) {
                struct frame *f = &c->dir[DIR_SC].frames[i];
                if (f->msg->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY)
                        continue;
                cr_assert_lt(f->msg->request_id, MAX_REQUESTS);
                f->method = c->request_method[f->msg->request_id];
                cr_assert_not_null(f->method, "reply to unknown request %" PRIu64, f->msg->request_id);
        }
}

static void conn_free(struct conn *c) {
        for (int d = 0; d < _DIR_MAX; d++) {
                for (size_t i = 0; i < c->dir[d].n_frames; i++)
                        perfetto__protos__ipcframe__free_unpacked(c->dir[d].frames[i].msg, NULL);
                free(c->dir[d].buf);
        }
}

static bool is_method(const struct frame *f, const char *name) {
        return f->method && strcmp(f->method, name) == 0;
}

static const ProtobufCBinaryData *args_of(const struct frame *f) {
        cr_assert_eq(f->msg->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD);
        return &f->msg->msg_invoke_method->args_proto;
}

static const ProtobufCBinaryData *reply_of(const struct frame *f) {
        cr_assert_eq(f->msg->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
        cr_assert(f->msg->msg_invoke_method_reply->success);
        return &f->msg->msg_invoke_method_reply->reply_proto;
}

/* Unpack a payload with the given descriptor and require no unknown fields. */
static void *unpack_known(const ProtobufCMessageDescriptor *d, const ProtobufCBinaryData *b) {
        ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, b->len, b->data);
        cr_assert_not_null(m, "payload does not decode as %s", d->name);
        cr_assert_eq(count_unknown(m), 0, "%s has unknown fields", d->name);
        return m;
}

/* ---- traces -------------------------------------------------------------- */

static Perfetto__Protos__Trace *load_trace(const char *name) {
        char path[512];
        size_t len;
        snprintf(path, sizeof(path), UPSTREAM_DIR "%s", name);
        uint8_t *data = slurp(path, &len);
        Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, len, data);
        free(data);
        cr_assert_not_null(t, "%s does not decode as Trace", name);
        return t;
}

/* The values of config-*.pbtxt, as the consumer sent them. */
static void check_config(const Perfetto__Protos__TraceConfig *c, bool write_into_file) {
        cr_assert_eq(c->n_buffers, 1);
        cr_assert(c->buffers[0]->has_size_kb);
        cr_assert_eq(c->buffers[0]->size_kb, 4096);
        cr_assert_eq(c->buffers[0]->fill_policy, PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);

        cr_assert_eq(c->n_data_sources, 2);
        const Perfetto__Protos__DataSourceConfig *ftrace = c->data_sources[0]->config;
        cr_assert_not_null(ftrace);
        cr_assert_str_eq(ftrace->name, "linux.ftrace");
        cr_assert_not_null(ftrace->ftrace_config);
        cr_assert_eq(ftrace->ftrace_config->n_ftrace_events, 1);
        cr_assert_str_eq(ftrace->ftrace_config->ftrace_events[0], "ftrace/print");
        cr_assert_not_null(c->data_sources[1]->config);
        cr_assert_str_eq(c->data_sources[1]->config->name, "linux.process_stats");
        cr_assert_null(c->data_sources[1]->config->ftrace_config);

        cr_assert_eq(c->duration_ms, 1500);
        cr_assert_eq(c->has_write_into_file && c->write_into_file, write_into_file);
        if (write_into_file)
                cr_assert_eq(c->file_write_period_ms, 500);
        else
                cr_assert(!c->has_file_write_period_ms);
}

static void check_trace(const char *name, bool write_into_file) {
        Perfetto__Protos__Trace *t = load_trace(name);
        unsigned n_config = 0, n_clock = 0, n_sysinfo = 0, n_stats = 0, n_sync = 0, n_bundles = 0,
                 n_prints = 0, n_uuid = 0, n_started = 0, n_disabled = 0;
        uint64_t last_bytes_written = 0;

        cr_assert_gt(t->n_packet, 10);
        cr_assert_eq(count_unknown(&t->base), 0, "%s: some fields are not declared in our protos", name);

        for (size_t i = 0; i < t->n_packet; i++) {
                const Perfetto__Protos__TracePacket *p = t->packet[i];

                /* The service stamps these on every packet it reads back. */
                cr_assert_eq(p->optional_trusted_uid_case,
                             PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_UID_TRUSTED_UID);
                cr_assert_eq(p->optional_trusted_packet_sequence_id_case,
                             PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID);
                cr_assert_gt(p->trusted_packet_sequence_id, 0);

                switch (p->data_case) {
                case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG:
                        n_config++;
                        check_config(p->trace_config, write_into_file);
                        break;

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT: {
                        bool boot = false, mono = false, real = false;
                        n_clock++;
                        for (size_t j = 0; j < p->clock_snapshot->n_clocks; j++) {
                                const Perfetto__Protos__ClockSnapshot__Clock *k = p->clock_snapshot->clocks[j];
                                cr_assert_gt(k->timestamp, 0);
                                boot |= k->clock_id == PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__BUILTIN_CLOCKS__BOOTTIME;
                                mono |= k->clock_id == PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__BUILTIN_CLOCKS__MONOTONIC;
                                real |= k->clock_id == PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__BUILTIN_CLOCKS__REALTIME;
                        }
                        cr_assert(boot && mono && real, "clock snapshot lacks BOOTTIME/MONOTONIC/REALTIME");
                        break;
                }

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO:
                        n_sysinfo++;
                        cr_assert_not_null(p->system_info->utsname);
                        cr_assert_str_eq(p->system_info->utsname->sysname, "Linux");
                        cr_assert_str_eq(p->system_info->utsname->machine, "x86_64");
                        cr_assert_str_eq(p->system_info->tracing_service_version, "Perfetto v0.0 (unknown)");
                        cr_assert_gt(p->system_info->page_size, 0);
                        cr_assert_gt(p->system_info->num_cpus, 0);
                        break;

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS:
                        n_stats++;
                        cr_assert_eq(p->trace_stats->n_buffer_stats, 1);
                        /* write_into_file also gets one at the start, before
                         * anything was written; the last one has data. */
                        last_bytes_written = p->trace_stats->buffer_stats[0]->bytes_written;
                        cr_assert_eq(p->trace_stats->buffer_stats[0]->buffer_size, 4096 * 1024);
                        cr_assert_eq(p->trace_stats->producers_connected, 1);
                        break;

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYNCHRONIZATION_MARKER:
                        n_sync++;
                        cr_assert_eq(p->synchronization_marker.len, 16);
                        break;

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
                        n_bundles++;
                        for (size_t j = 0; j < p->ftrace_events->n_event; j++) {
                                const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[j];
                                char want[64];
                                if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT)
                                        continue;
                                n_prints++;
                                snprintf(want, sizeof(want), "upstream-capture-marker-%u\n", n_prints);
                                cr_assert_str_eq(e->print->buf, want);
                                cr_assert_gt(e->timestamp, 0);
                                cr_assert_gt(e->pid, 0);
                        }
                        break;

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID:
                        n_uuid++;
                        cr_assert_neq(p->trace_uuid->msb, 0);
                        cr_assert_neq(p->trace_uuid->lsb, 0);
                        break;

                case PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT:
                        if (p->service_event->event_type_case ==
                            PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_STARTED)
                                n_started++;
                        if (p->service_event->event_type_case ==
                            PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_DISABLED)
                                n_disabled++;
                        break;

                default:
                        break;
                }
        }

        cr_assert_eq(n_config, 1);
        cr_assert_geq(n_clock, 1);
        cr_assert_eq(n_sysinfo, 1);
        cr_assert_eq(n_stats, write_into_file ? 2 : 1);
        cr_assert_eq(last_bytes_written, 32768);
        cr_assert_geq(n_sync, 1);
        cr_assert_eq(n_bundles, 1);
        cr_assert_eq(n_prints, 3);
        cr_assert_eq(n_uuid, 1);
        cr_assert_eq(n_started, 1);
        cr_assert_eq(n_disabled, 1);

        perfetto__protos__trace__free_unpacked(t, NULL);
}

Test(protos, trace_readbuffers) {
        check_trace("trace-readbuffers.pftrace", false);
}

Test(protos, trace_write_into_file) {
        check_trace("trace-write-into-file.pftrace", true);
}

/* The packet fields of the ftrace bundle, in detail. */
Test(protos, trace_packet_fields) {
        Perfetto__Protos__Trace *t = load_trace("trace-readbuffers.pftrace");
        const Perfetto__Protos__TracePacket *bundle = NULL;

        for (size_t i = 0; i < t->n_packet; i++)
                if (t->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                        bundle = t->packet[i];
        cr_assert_not_null(bundle);
        cr_assert_eq(bundle->ftrace_events->cpu, 1);
        cr_assert_eq(bundle->ftrace_events->n_event, 3);
        cr_assert(bundle->ftrace_events->has_previous_bundle_end_timestamp);
        cr_assert(bundle->has_first_packet_on_sequence && bundle->first_packet_on_sequence);
        cr_assert(bundle->has_previous_packet_dropped);
        cr_assert_eq(bundle->previous_packet_dropped, 1);
        cr_assert(bundle->has_trusted_pid);
        cr_assert_eq(bundle->trusted_pid, 10);
        cr_assert_eq(bundle->trusted_uid, 0);
        /* Timestamps increase within the bundle. */
        for (size_t j = 1; j < bundle->ftrace_events->n_event; j++)
                cr_assert_gt(bundle->ftrace_events->event[j]->timestamp,
                             bundle->ftrace_events->event[j - 1]->timestamp);

        perfetto__protos__trace__free_unpacked(t, NULL);
}

/* perfetto --query-raw prints the TracingServiceState itself. */
Test(protos, query_service_state) {
        size_t len;
        uint8_t *data = slurp(UPSTREAM_DIR "query-service-state.pb", &len);
        Perfetto__Protos__TracingServiceState *s = perfetto__protos__tracing_service_state__unpack(NULL, len, data);
        free(data);
        cr_assert_not_null(s);
        cr_assert_eq(count_unknown(&s->base), 0);

        cr_assert_eq(s->n_producers, 1);
        cr_assert_eq(s->producers[0]->id, 1);
        cr_assert_str_eq(s->producers[0]->name, "perfetto.traced_probes");
        cr_assert_eq(s->producers[0]->pid, 10);
        cr_assert_str_eq(s->producers[0]->sdk_version, "Perfetto v0.0 (unknown)");

        cr_assert_eq(s->n_data_sources, 19);
        bool ftrace = false, ps = false;
        for (size_t i = 0; i < s->n_data_sources; i++) {
                const Perfetto__Protos__TracingServiceState__DataSource *d = s->data_sources[i];
                cr_assert_eq(d->producer_id, 1);
                cr_assert_not_null(d->ds_descriptor);
                if (strcmp(d->ds_descriptor->name, "linux.ftrace") == 0)
                        ftrace = true;
                if (strcmp(d->ds_descriptor->name, "linux.process_stats") == 0)
                        ps = true;
        }
        cr_assert(ftrace && ps);
        cr_assert(s->has_supports_tracing_sessions && s->supports_tracing_sessions);
        cr_assert(s->has_num_sessions);
        cr_assert_eq(s->num_sessions, 0);
        cr_assert_str_eq(s->tracing_service_version, "Perfetto v0.0 (unknown)");

        perfetto__protos__tracing_service_state__free_unpacked(s, NULL);
}

/* ---- producer port -------------------------------------------------------- */

Test(protos, ipc_producer) {
        struct conn c;
        conn_load(&c, "01-producer");

        cr_assert_str_eq(c.service_name, "ProducerPort");
        static const char *const producer_methods[] = {
                "InitializeConnection", "RegisterDataSource", "UnregisterDataSource", "CommitData",
                "GetAsyncCommand", "RegisterTraceWriter", "UnregisterTraceWriter", "NotifyDataSourceStarted",
                "NotifyDataSourceStopped", "ActivateTriggers", "Sync", "UpdateDataSource",
        };
        for (size_t i = 0; i < sizeof(producer_methods) / sizeof(producer_methods[0]); i++) {
                bool found = false;
                for (size_t j = 0; j < MAX_METHODS; j++)
                        found |= c.methods[j] && strcmp(c.methods[j], producer_methods[i]) == 0;
                cr_assert(found, "method %s not offered", producer_methods[i]);
        }

        /* Client side. */
        unsigned n_init = 0, n_register = 0, n_commit = 0, n_started = 0, n_stopped = 0, n_writers = 0;
        bool saw_ftrace = false, saw_ps = false, saw_chunk = false;
        uint64_t flush_ids_seen = 0;
        const struct stream *cs = &c.dir[DIR_CS];
        for (size_t i = 0; i < cs->n_frames; i++) {
                const struct frame *f = &cs->frames[i];

                if (is_method(f, "InitializeConnection")) {
                        Perfetto__Protos__InitializeConnectionRequest *r =
                                unpack_known(&perfetto__protos__initialize_connection_request__descriptor, args_of(f));
                        n_init++;
                        cr_assert_eq(r->shared_memory_page_size_hint_bytes, 32768);
                        cr_assert_eq(r->shared_memory_size_hint_bytes, 2097152);
                        cr_assert_str_eq(r->producer_name, "perfetto.traced_probes");
                        cr_assert_eq(r->smb_scraping_mode,
                                     PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__PRODUCER_SMBSCRAPING_MODE__SMB_SCRAPING_DISABLED);
                        cr_assert_str_eq(r->sdk_version, "Perfetto v0.0 (unknown)");
                        cr_assert(!r->producer_provided_shmem);
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "RegisterDataSource")) {
                        Perfetto__Protos__RegisterDataSourceRequest *r =
                                unpack_known(&perfetto__protos__register_data_source_request__descriptor, args_of(f));
                        const Perfetto__Protos__DataSourceDescriptor *d = r->data_source_descriptor;
                        cr_assert_not_null(d);
                        if (n_register == 0) {
                                cr_assert_str_eq(d->name, "android.aflags");
                                cr_assert(d->will_notify_on_start && d->will_notify_on_stop);
                        }
                        n_register++;
                        saw_ftrace |= strcmp(d->name, "linux.ftrace") == 0;
                        saw_ps |= strcmp(d->name, "linux.process_stats") == 0;
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "CommitData")) {
                        Perfetto__Protos__CommitDataRequest *r =
                                unpack_known(&perfetto__protos__commit_data_request__descriptor, args_of(f));
                        n_commit++;
                        if (r->n_chunks_to_move > 0) {
                                cr_assert_eq(r->n_chunks_to_move, 1);
                                cr_assert(r->chunks_to_move[0]->has_page && r->chunks_to_move[0]->has_chunk);
                                cr_assert_eq(r->chunks_to_move[0]->page, 0);
                                cr_assert_eq(r->chunks_to_move[0]->chunk, 0);
                                cr_assert(r->chunks_to_move[0]->target_buffer == 1 ||
                                          r->chunks_to_move[0]->target_buffer == 2);
                                saw_chunk = true;
                        }
                        if (r->has_flush_request_id)
                                flush_ids_seen |= UINT64_C(1) << r->flush_request_id;
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "RegisterTraceWriter")) {
                        Perfetto__Protos__RegisterTraceWriterRequest *r =
                                unpack_known(&perfetto__protos__register_trace_writer_request__descriptor, args_of(f));
                        n_writers++;
                        cr_assert_eq(r->trace_writer_id, n_writers);
                        cr_assert_eq(r->target_buffer, n_writers <= 2 ? 1 : 2);
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "NotifyDataSourceStarted")) {
                        Perfetto__Protos__NotifyDataSourceStartedRequest *r =
                                unpack_known(&perfetto__protos__notify_data_source_started_request__descriptor, args_of(f));
                        n_started++;
                        cr_assert_eq(r->data_source_id, n_started);
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "NotifyDataSourceStopped")) {
                        Perfetto__Protos__NotifyDataSourceStoppedRequest *r =
                                unpack_known(&perfetto__protos__notify_data_source_stopped_request__descriptor, args_of(f));
                        n_stopped++;
                        cr_assert_eq(r->data_source_id, n_stopped);
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "GetAsyncCommand")) {
                        Perfetto__Protos__GetAsyncCommandRequest *r =
                                unpack_known(&perfetto__protos__get_async_command_request__descriptor, args_of(f));
                        protobuf_c_message_free_unpacked(&r->base, NULL);
                }
        }
        cr_assert_eq(n_init, 1);
        cr_assert_eq(n_register, 19);
        cr_assert(saw_ftrace && saw_ps);
        cr_assert_eq(n_commit, 6);
        cr_assert(saw_chunk);
        cr_assert_eq(flush_ids_seen, (UINT64_C(1) << 1) | (UINT64_C(1) << 2));
        cr_assert_eq(n_writers, 4);
        cr_assert_eq(n_started, 4);
        cr_assert_eq(n_stopped, 4);

        /* Service side. */
        unsigned n_setup_tracing = 0, n_setup_ds = 0, n_start_ds = 0, n_stop_ds = 0, n_flush = 0, n_init_reply = 0;
        const struct stream *ss = &c.dir[DIR_SC];
        for (size_t i = 0; i < ss->n_frames; i++) {
                const struct frame *f = &ss->frames[i];

                if (is_method(f, "InitializeConnection")) {
                        Perfetto__Protos__InitializeConnectionResponse *r =
                                unpack_known(&perfetto__protos__initialize_connection_response__descriptor, reply_of(f));
                        n_init_reply++;
                        cr_assert(r->has_using_shmem_provided_by_producer && !r->using_shmem_provided_by_producer);
                        cr_assert(r->has_direct_smb_patching_supported && r->direct_smb_patching_supported);
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "GetAsyncCommand")) {
                        Perfetto__Protos__GetAsyncCommandResponse *r =
                                unpack_known(&perfetto__protos__get_async_command_response__descriptor, reply_of(f));
                        /* A stream: every command says more may follow. */
                        cr_assert(f->msg->msg_invoke_method_reply->has_more);

                        switch (r->cmd_case) {
                        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING:
                                n_setup_tracing++;
                                cr_assert_eq(r->setup_tracing->shared_buffer_page_size_kb, 32);
                                cr_assert(f->with_fd, "SetupTracing must carry the SMB fd");
                                break;

                        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE: {
                                const Perfetto__Protos__DataSourceConfig *cfg = r->setup_data_source->config;
                                n_setup_ds++;
                                cr_assert_eq(r->setup_data_source->new_instance_id, n_setup_ds);
                                cr_assert_not_null(cfg);
                                cr_assert_str_eq(cfg->name, n_setup_ds % 2 ? "linux.ftrace" : "linux.process_stats");
                                cr_assert_eq(cfg->target_buffer, n_setup_ds <= 2 ? 1 : 2);
                                cr_assert_eq(cfg->tracing_session_id, n_setup_ds <= 2 ? 1 : 2);
                                cr_assert_eq(cfg->trace_duration_ms, 1500);
                                cr_assert_eq(cfg->stop_timeout_ms, 5000);
                                cr_assert(cfg->has_session_initiator);
                                if (n_setup_ds % 2) {
                                        cr_assert_not_null(cfg->ftrace_config);
                                        cr_assert_eq(cfg->ftrace_config->n_ftrace_events, 1);
                                        cr_assert_str_eq(cfg->ftrace_config->ftrace_events[0], "ftrace/print");
                                }
                                cr_assert(!f->with_fd);
                                break;
                        }

                        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
                                n_start_ds++;
                                cr_assert_eq(r->start_data_source->new_instance_id, n_start_ds);
                                cr_assert_not_null(r->start_data_source->config);
                                cr_assert_str_eq(r->start_data_source->config->name,
                                                 n_start_ds % 2 ? "linux.ftrace" : "linux.process_stats");
                                break;

                        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
                                n_flush++;
                                cr_assert_eq(r->flush->request_id, n_flush);
                                cr_assert_eq(r->flush->n_data_source_ids, 2);
                                cr_assert_eq(r->flush->data_source_ids[0], 2 * n_flush - 1);
                                cr_assert_eq(r->flush->data_source_ids[1], 2 * n_flush);
                                cr_assert_eq(r->flush->flags, 18);
                                break;

                        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
                                n_stop_ds++;
                                cr_assert_eq(r->stop_data_source->instance_id, n_stop_ds);
                                break;

                        default:
                                cr_assert_fail("unexpected async command %d", (int) r->cmd_case);
                        }
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "RegisterDataSource")) {
                        Perfetto__Protos__RegisterDataSourceResponse *r =
                                unpack_known(&perfetto__protos__register_data_source_response__descriptor, reply_of(f));
                        cr_assert(r->error == NULL || r->error[0] == '\0');
                        protobuf_c_message_free_unpacked(&r->base, NULL);

                } else if (is_method(f, "CommitData")) {
                        Perfetto__Protos__CommitDataResponse *r =
                                unpack_known(&perfetto__protos__commit_data_response__descriptor, reply_of(f));
                        protobuf_c_message_free_unpacked(&r->base, NULL);
                }
        }
        cr_assert_eq(n_init_reply, 1);
        cr_assert_eq(n_setup_tracing, 1);
        cr_assert_eq(n_setup_ds, 4);
        cr_assert_eq(n_start_ds, 4);
        cr_assert_eq(n_flush, 2);
        cr_assert_eq(n_stop_ds, 4);

        conn_free(&c);
}

/* ---- consumer port -------------------------------------------------------- */

static void put_varint(uint8_t **p, uint64_t v) {
        while (v >= 0x80) {
                *(*p)++ = (uint8_t) (v | 0x80);
                v >>= 7;
        }
        *(*p)++ = (uint8_t) v;
}

Test(protos, ipc_consumer_readbuffers) {
        struct conn c;
        conn_load(&c, "02-consumer");
        cr_assert_str_eq(c.service_name, "ConsumerPort");

        int64_t uuid_msb = 0;
        unsigned n_enable = 0, n_read = 0;
        for (size_t i = 0; i < c.dir[DIR_CS].n_frames; i++) {
                const struct frame *f = &c.dir[DIR_CS].frames[i];
                if (is_method(f, "EnableTracing")) {
                        Perfetto__Protos__EnableTracingRequest *r =
                                unpack_known(&perfetto__protos__enable_tracing_request__descriptor, args_of(f));
                        n_enable++;
                        cr_assert_not_null(r->trace_config);
                        check_config(r->trace_config, false);
                        cr_assert_eq(r->trace_config->statsd_logging,
                                     PERFETTO__PROTOS__TRACE_CONFIG__STATSD_LOGGING__STATSD_LOGGING_DISABLED);
                        /* Deprecated upstream, but the CLI still sends it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
                        cr_assert(r->trace_config->has_trace_uuid_msb);
                        uuid_msb = r->trace_config->trace_uuid_msb;
#pragma GCC diagnostic pop
                        cr_assert(!f->with_fd);
                        protobuf_c_message_free_unpacked(&r->base, NULL);
                } else if (is_method(f, "ReadBuffers")) {
                        Perfetto__Protos__ReadBuffersRequest *r =
                                unpack_known(&perfetto__protos__read_buffers_request__descriptor, args_of(f));
                        n_read++;
                        protobuf_c_message_free_unpacked(&r->base, NULL);
                }
        }
        cr_assert_eq(n_enable, 1);
        cr_assert_eq(n_read, 1);

        /* Reassemble the packets from the slices; framed as a Trace they
         * must be byte for byte the file the CLI wrote. */
        size_t ref_len;
        uint8_t *ref = slurp(UPSTREAM_DIR "trace-readbuffers.pftrace", &ref_len);
        uint8_t *out = malloc(ref_len * 2 + 64), *w = out;
        uint8_t *pkt = malloc(ref_len + 1);
        size_t pkt_len = 0;
        unsigned n_slices = 0, n_packets = 0, n_disabled = 0;
        cr_assert(out && pkt);

        for (size_t i = 0; i < c.dir[DIR_SC].n_frames; i++) {
                const struct frame *f = &c.dir[DIR_SC].frames[i];
                if (is_method(f, "EnableTracing")) {
                        Perfetto__Protos__EnableTracingResponse *r =
                                unpack_known(&perfetto__protos__enable_tracing_response__descriptor, reply_of(f));
                        cr_assert_eq(r->state_case, PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED);
                        cr_assert(r->disabled);
                        cr_assert_null(r->error);
                        n_disabled++;
                        protobuf_c_message_free_unpacked(&r->base, NULL);
                } else if (is_method(f, "ReadBuffers")) {
                        Perfetto__Protos__ReadBuffersResponse *r =
                                unpack_known(&perfetto__protos__read_buffers_response__descriptor, reply_of(f));
                        for (size_t j = 0; j < r->n_slices; j++) {
                                const Perfetto__Protos__ReadBuffersResponse__Slice *s = r->slices[j];
                                n_slices++;
                                cr_assert_leq(pkt_len + s->data.len, ref_len);
                                memcpy(pkt + pkt_len, s->data.data, s->data.len);
                                pkt_len += s->data.len;
                                if (!s->last_slice_for_packet)
                                        continue;

                                Perfetto__Protos__TracePacket *p =
                                        perfetto__protos__trace_packet__unpack(NULL, pkt_len, pkt);
                                cr_assert_not_null(p, "packet %u does not decode", n_packets);
                                cr_assert_eq(count_unknown(&p->base), 0);
                                perfetto__protos__trace_packet__free_unpacked(p, NULL);

                                *w++ = 0x0a; /* Trace.packet, length-delimited */
                                put_varint(&w, pkt_len);
                                cr_assert_leq((size_t) (w - out) + pkt_len, ref_len * 2 + 64);
                                memcpy(w, pkt, pkt_len);
                                w += pkt_len;
                                pkt_len = 0;
                                n_packets++;
                        }
                        protobuf_c_message_free_unpacked(&r->base, NULL);
                }
        }
        cr_assert_eq(n_disabled, 1);
        cr_assert_eq(n_slices, 23);
        cr_assert_eq(n_packets, 20);
        cr_assert_eq(pkt_len, 0, "unterminated packet");
        cr_assert_eq((size_t) (w - out), ref_len);
        cr_assert(memcmp(out, ref, ref_len) == 0);

        /* The session's uuid travels from the config into the trace. */
        Perfetto__Protos__Trace *t = load_trace("trace-readbuffers.pftrace");
        bool found = false;
        for (size_t i = 0; i < t->n_packet; i++)
                if (t->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID) {
                        cr_assert_eq(t->packet[i]->trace_uuid->msb, uuid_msb);
                        found = true;
                }
        cr_assert(found);
        perfetto__protos__trace__free_unpacked(t, NULL);

        free(pkt);
        free(out);
        free(ref);
        conn_free(&c);
}

Test(protos, ipc_consumer_write_into_file) {
        struct conn c;
        conn_load(&c, "03-consumer");

        unsigned n_enable = 0;
        for (size_t i = 0; i < c.dir[DIR_CS].n_frames; i++) {
                const struct frame *f = &c.dir[DIR_CS].frames[i];
                if (!is_method(f, "EnableTracing"))
                        continue;
                Perfetto__Protos__EnableTracingRequest *r =
                        unpack_known(&perfetto__protos__enable_tracing_request__descriptor, args_of(f));
                n_enable++;
                check_config(r->trace_config, true);
                /* The output file's fd rides with EnableTracing. */
                cr_assert(f->with_fd);
                protobuf_c_message_free_unpacked(&r->base, NULL);
        }
        cr_assert_eq(n_enable, 1);
        conn_free(&c);
}

Test(protos, ipc_consumer_query_service_state) {
        struct conn c;
        conn_load(&c, "04-consumer");

        size_t ref_len;
        uint8_t *ref = slurp(UPSTREAM_DIR "query-service-state.pb", &ref_len);
        unsigned n_replies = 0;
        for (size_t i = 0; i < c.dir[DIR_SC].n_frames; i++) {
                const struct frame *f = &c.dir[DIR_SC].frames[i];
                if (!is_method(f, "QueryServiceState"))
                        continue;
                Perfetto__Protos__QueryServiceStateResponse *r =
                        unpack_known(&perfetto__protos__query_service_state_response__descriptor, reply_of(f));
                n_replies++;
                cr_assert_not_null(r->service_state);
                /* The CLI saved the reply's service_state: both decode to the
                 * same content (compared re-encoded, as upstream does not
                 * write fields in number order). */
                Perfetto__Protos__TracingServiceState *saved =
                        perfetto__protos__tracing_service_state__unpack(NULL, ref_len, ref);
                cr_assert_not_null(saved);
                size_t n = perfetto__protos__tracing_service_state__get_packed_size(r->service_state);
                cr_assert_eq(n, perfetto__protos__tracing_service_state__get_packed_size(saved));
                cr_assert_eq(n, ref_len);
                uint8_t *buf = malloc(n), *buf2 = malloc(n);
                cr_assert(buf && buf2);
                perfetto__protos__tracing_service_state__pack(r->service_state, buf);
                perfetto__protos__tracing_service_state__pack(saved, buf2);
                cr_assert(memcmp(buf, buf2, n) == 0);
                cr_assert_eq(r->service_state->n_data_sources, 19);
                free(buf2);
                perfetto__protos__tracing_service_state__free_unpacked(saved, NULL);
                free(buf);
                protobuf_c_message_free_unpacked(&r->base, NULL);
        }
        cr_assert_eq(n_replies, 1);
        free(ref);
        conn_free(&c);
}
