/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A third-party style traced plugin: data source "example.hello" writes,
 * every 100 ms, a counter packet (TracePacket.for_testing { seq_value })
 * and the same count on a counter track of its own (a TrackDescriptor
 * once, then TrackEvent counter values), with the typed writers generated
 * from traced's protos. Its own setting, the period, comes from the
 * session's DataSourceConfig.legacy_config ("period_ms=50"). Built out of
 * tree with only
 *   cc -shared -fPIC $(pkg-config --cflags traced-plugin) hello.c -o hello.so */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <traced/pbzero/perfetto/config/data_source_config.pbw.h>
#include <traced/pbzero/perfetto/trace/trace_packet.pbw.h>
#include <traced/plugin.h>

#define HELLO_TRACK_UUID 0x68656c6c6f000001ull
#define HELLO_PERIOD_MS 100u

struct hello {
        const struct traced_host_api *api;
        struct traced_host *host;
        uint64_t instance;
        struct traced_writer *writer;
        struct traced_source *timer;
        uint32_t counter;
};

/* Whether the host writes packets straight into its shared memory (plugin
 * ABI 1.2); an older host takes whole packets with write_packet. */
static int host_has_begin_packet(const struct traced_host_api *api) {
        return api->struct_size >= offsetof(struct traced_host_api, end_packet) + sizeof(api->end_packet) &&
               api->begin_packet && api->end_packet;
}

/* A packet, begun: in the writer's shared memory, or in buf for an older
 * host. */
static int packet_begin(struct hello *h, TracePacket *pkt, struct traced_pb_stream *s, uint8_t *buf, size_t size) {
        if (host_has_begin_packet(h->api))
                return h->api->begin_packet(h->writer, &pkt->msg);
        traced_pb_stream_init_buffer(s, buf, size);
        TracePacket_init(pkt, s);
        return 0;
}

static int packet_end(struct hello *h, TracePacket *pkt, uint8_t *buf) {
        if (host_has_begin_packet(h->api))
                return h->api->end_packet(h->writer, &pkt->msg);
        if (traced_pb_msg_finish(&pkt->msg) < 0)
                return -ENOBUFS;
        return h->api->write_packet(h->writer, buf, (size_t) traced_pb_msg_size(&pkt->msg));
}

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The counter track, described once (before its first value). */
static void describe_track(struct hello *h) {
        uint8_t buf[256];
        struct traced_pb_stream s;
        TracePacket pkt;
        TrackDescriptor td;
        CounterDescriptor cd;
        if (packet_begin(h, &pkt, &s, buf, sizeof(buf)) < 0)
                return;
        TracePacket_begin_track_descriptor(&pkt, &td);
        TrackDescriptor_set_uuid(&td, HELLO_TRACK_UUID);
        TrackDescriptor_set_name(&td, "example.hello ticks");
        TrackDescriptor_begin_counter(&td, &cd);
        CounterDescriptor_set_unit(&cd, CounterDescriptor_UNIT_COUNT);
        TrackDescriptor_end_counter(&td, &cd);
        TracePacket_end_track_descriptor(&pkt, &td);
        TracePacket_set_sequence_flags(&pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
        (void) packet_end(h, &pkt, buf);
}

static void tick(void *userdata) {
        struct hello *h = userdata;
        uint8_t buf[256];
        struct traced_pb_stream s;
        TracePacket pkt;
        TestEvent ev;
        TrackEvent te;
        uint64_t now = boottime_ns();

        if (h->counter == 0)
                describe_track(h);
        if (packet_begin(h, &pkt, &s, buf, sizeof(buf)) < 0)
                return;
        TracePacket_set_timestamp(&pkt, now);
        TracePacket_begin_for_testing(&pkt, &ev);
        TestEvent_set_seq_value(&ev, h->counter);
        TracePacket_end_for_testing(&pkt, &ev);
        (void) packet_end(h, &pkt, buf);

        if (packet_begin(h, &pkt, &s, buf, sizeof(buf)) < 0)
                return;
        TracePacket_set_timestamp(&pkt, now);
        TracePacket_begin_track_event(&pkt, &te);
        TrackEvent_set_type(&te, TrackEvent_TYPE_COUNTER);
        TrackEvent_set_track_uuid(&te, HELLO_TRACK_UUID);
        TrackEvent_set_counter_value(&te, (int64_t) h->counter);
        TracePacket_end_track_event(&pkt, &te);
        TracePacket_set_sequence_flags(&pkt, TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
        (void) packet_end(h, &pkt, buf);
        h->counter++;
}

/* Reads a varint at *p (before end); 0, or -1 when it is cut short. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;
        unsigned shift;
        for (shift = 0; *p < end && shift < 64; shift += 7) {
                uint8_t b = *(*p)++;
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -1;
}

/* The period the session asks for in legacy_config ("period_ms=N", N from
 * 10 to 10000), found by walking the config's top-level fields; the
 * default without one. */
static uint32_t config_period_ms(const uint8_t *cfg, size_t size) {
        const uint8_t *p = cfg, *end = cfg + size;
        uint64_t tag, len, skip;
        while (p < end && read_varint(&p, end, &tag) == 0) {
                switch (tag & 7u) {
                case 0: /* varint */
                        if (read_varint(&p, end, &skip) < 0)
                                return HELLO_PERIOD_MS;
                        break;
                case 1: /* fixed64 */
                case 5: /* fixed32 */
                        len = (tag & 7u) == 1 ? 8 : 4;
                        if ((uint64_t) (end - p) < len)
                                return HELLO_PERIOD_MS;
                        p += len;
                        break;
                case 2: /* length-delimited */
                        if (read_varint(&p, end, &len) < 0 || len > (uint64_t) (end - p))
                                return HELLO_PERIOD_MS;
                        /* legacy_config: a string for a data source's own use. */
                        if (tag >> 3 == DataSourceConfig_FIELD_legacy_config) {
                                char text[32];
                                unsigned long ms;
                                if (len >= sizeof(text))
                                        return HELLO_PERIOD_MS;
                                memcpy(text, p, (size_t) len);
                                text[len] = '\0';
                                if (sscanf(text, "period_ms=%lu", &ms) == 1 && ms >= 10 && ms <= 10000)
                                        return (uint32_t) ms;
                        }
                        p += len;
                        break;
                default:
                        return HELLO_PERIOD_MS;
                }
        }
        return HELLO_PERIOD_MS;
}

static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        struct hello *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->api = api;
        h->host = host;
        int32_t r = api->register_data_source(host, "example.hello", 0);
        if (r < 0) {
                free(h);
                return r;
        }
        *ret = h;
        return 0;
}

static void destroy(void *state) {
        struct hello *h = state;
        if (h->timer)
                h->api->remove_source(h->host, h->timer);
        if (h->writer)
                h->api->free_writer(h->writer);
        free(h);
}

static void start(void *state, uint64_t id, const char *ds, const uint8_t *cfg, size_t size) {
        struct hello *h = state;
        uint32_t period_ms = config_period_ms(cfg, size);
        char line[64];
        (void) ds;
        if (h->writer || h->api->new_writer(h->host, id, &h->writer) < 0)
                return;
        h->instance = id;
        h->counter = 0;
        h->api->add_timer(h->host, period_ms, tick, h, &h->timer);
        snprintf(line, sizeof(line), "example.hello started, every %u ms", (unsigned) period_ms);
        h->api->log(h->host, TRACED_LOG_INFO, line);
}

static void stop(void *state, uint64_t id) {
        struct hello *h = state;
        if (id != h->instance || !h->writer)
                return;
        h->api->remove_source(h->host, h->timer);
        h->timer = NULL;
        h->api->flush_writer(h->writer);
        h->api->free_writer(h->writer);
        h->writer = NULL;
}

/* Designated initializers: members a later minor appends stay zero. */
static const struct traced_plugin_ops ops = {
        .struct_size = sizeof(struct traced_plugin_ops),
        .create = create,
        .destroy = destroy,
        .start = start,
        .stop = stop,
};

TRACED_PLUGIN_DEFINE("hello", "1.0", 0, ops)
