/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Data source descriptors as large as a frame carries, and
 * QueryServiceState answers larger than what the service may queue for a
 * consumer at once (IPC_SEND_QUEUE_MAX): both listed whole, by a consumer
 * on the IPC layer and by tracectl query. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "ipc/ipc.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

/* A descriptor of an IPC frame's size (128 KiB) less 64 bytes. */
#define FRAME_DESCRIPTOR_SIZE (128u * 1024u - 64u)
/* Upstream's PerfettoTracedIntegrationTest.QueryServiceStateLargeResponse:
 * the track_event_descriptor_raw alone is that large, the name and the
 * field's tag and length come on top. */
#define UPSTREAM_RAW_SIZE (128u * 1024u - 64u)
/* The field upstream's SDK puts its TrackEventDescriptor in; ours does
 * not declare it, so it travels as an unknown field, byte for byte. */
#define TRACK_EVENT_DESCRIPTOR_FIELD 6u
#define TIMEOUT_MS 60000u

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev));
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev));
}

TestSuite(descriptors, .init = setup, .fini = teardown, .timeout = 240);

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

struct registrations {
        int ok, refused, failed;
        char last_error[256];
};

static void on_registered(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct registrations *g = ud;
        const Perfetto__Protos__RegisterDataSourceResponse *r = (const void *) reply;
        if (fd >= 0)
                close(fd);
        if (error < 0 || !r)
                g->failed++;
        else if (r->error && r->error[0]) {
                g->refused++;
                snprintf(g->last_error, sizeof(g->last_error), "%s", r->error);
        } else
                g->ok++;
}

static ipc_client *producer_connect(const char *name) {
        ipc_client *c = NULL;
        cr_assert_eq(ipc_client_connect(ev, inst.producer_path, &c), 0);
        cr_assert_eq(ipc_client_bind_sync(c, "ProducerPort", 10000000), 0);
        Perfetto__Protos__InitializeConnectionRequest init = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        init.producer_name = (char *) name;
        cr_assert_gt(ipc_client_invoke(c, "InitializeConnection", &init.base, NULL, -EBADF, NULL, NULL), 0);
        return c;
}

/* The payload byte i of descriptor name: a pattern of its own, so a
 * descriptor mixed up with another, cut or shifted shows. */
static uint8_t payload_byte(const char *name, size_t i) {
        uint8_t h = 0;
        for (const char *p = name; *p; p++)
                h = (uint8_t) (h * 31u + (uint8_t) *p);
        return (uint8_t) (h + i * 7u + (i >> 8));
}

/* A descriptor named name whose encoding is exactly size bytes: the name,
 * then an opaque field 6 filling the rest. */
static uint8_t *descriptor_new(const char *name, size_t size, size_t *ret_len) {
        size_t name_part = 2 + strlen(name);
        cr_assert_gt(size, name_part + 4 + 16384);
        size_t payload = size - name_part - 4; /* tag, 3-byte length */
        uint8_t *d = malloc(size);
        cr_assert_not_null(d);
        size_t o = 0;
        d[o++] = 0x0a;
        d[o++] = (uint8_t) strlen(name);
        memcpy(d + o, name, strlen(name));
        o += strlen(name);
        d[o++] = (uint8_t) (TRACK_EVENT_DESCRIPTOR_FIELD << 3 | 2);
        d[o++] = (uint8_t) (payload | 0x80);
        d[o++] = (uint8_t) ((payload >> 7) | 0x80);
        d[o++] = (uint8_t) (payload >> 14);
        for (size_t i = 0; i < payload; i++)
                d[o++] = payload_byte(name, i);
        cr_assert_eq(o, size);
        *ret_len = size;
        return d;
}

static void register_descriptor(ipc_client *c, const char *name, size_t size, struct registrations *g) {
        size_t len;
        _cleanup_free_ uint8_t *bytes = descriptor_new(name, size, &len);
        Perfetto__Protos__DataSourceDescriptor *d = perfetto__protos__data_source_descriptor__unpack(NULL, len, bytes);
        cr_assert_not_null(d);
        cr_assert_eq(protobuf_c_message_get_packed_size(&d->base), size);
        Perfetto__Protos__RegisterDataSourceRequest reg = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
        reg.data_source_descriptor = d;
        cr_assert_gt(ipc_client_invoke(c, "RegisterDataSource", &reg.base,
                                       &perfetto__protos__register_data_source_response__descriptor, -EBADF,
                                       on_registered, g),
                     0);
        perfetto__protos__data_source_descriptor__free_unpacked(d, NULL);
}

static void wait_registrations(ipc_client *c, struct registrations *g, int n) {
        uint64_t deadline = now_usec() + TIMEOUT_MS * 1000u;
        while (g->ok + g->refused + g->failed < n && now_usec() < deadline && ipc_client_is_connected(c))
                sd_event_run(ev, 100000);
        cr_assert_eq(g->ok + g->refused + g->failed, n, "only %d of %d registrations answered",
                     g->ok + g->refused + g->failed, n);
}

/* QueryServiceState, its replies concatenated as the perfetto CLI does. */
struct answer {
        uint8_t *bytes;
        size_t len;
        int replies;
        bool done;
        int error;
};

static void on_answer(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct answer *k = ud;
        if (fd >= 0)
                close(fd);
        if (error < 0) {
                k->error = error;
                k->done = true;
                return;
        }
        size_t n = protobuf_c_message_get_packed_size(reply);
        k->bytes = realloc(k->bytes, k->len + n + 1);
        cr_assert_not_null(k->bytes);
        protobuf_c_message_pack(reply, k->bytes + k->len);
        k->len += n;
        k->replies++;
        k->done = !has_more;
}

/* Sends QueryServiceState on a connection of its own, on loop e. */
static void query_send(sd_event *e, struct test_consumer *c, struct answer *k) {
        Perfetto__Protos__QueryServiceStateRequest req = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        *k = (struct answer) {};
        cr_assert_eq(test_consumer_connect(c, e, inst.consumer_path), 0);
        cr_assert_gt(ipc_client_invoke(c->client, "QueryServiceState", &req.base,
                                       &perfetto__protos__query_service_state_response__descriptor, -EBADF, on_answer,
                                       k),
                     0);
        cr_assert_eq(ipc_client_flush(c->client), 0);
        cr_assert_eq(ipc_client_queued_bytes(c->client), 0);
}

/* Reads the answer to the end; the state it holds. */
static Perfetto__Protos__TracingServiceState *query_finish(sd_event *e, struct test_consumer *c, struct answer *k,
                                                           size_t *ret_bytes, int *ret_replies) {
        uint64_t deadline = now_usec() + TIMEOUT_MS * 1000u;
        while (!k->done && now_usec() < deadline)
                sd_event_run(e, 100000);
        cr_assert(k->done, "QueryServiceState not answered in %u ms (%d replies, %zu bytes)", TIMEOUT_MS, k->replies,
                  k->len);
        cr_assert_eq(k->error, 0, "QueryServiceState failed after %d replies, %zu bytes: %s", k->replies, k->len,
                     strerror(-k->error));
        test_consumer_free(c);
        Perfetto__Protos__QueryServiceStateResponse *r =
                perfetto__protos__query_service_state_response__unpack(NULL, k->len, k->bytes);
        cr_assert_not_null(r);
        Perfetto__Protos__TracingServiceState *st = TAKE_PTR(r->service_state);
        protobuf_c_message_free_unpacked(&r->base, NULL);
        *ret_bytes = k->len;
        *ret_replies = k->replies;
        free(k->bytes);
        return st;
}

static Perfetto__Protos__TracingServiceState *query(size_t *ret_bytes, int *ret_replies) {
        struct test_consumer c;
        struct answer k;
        query_send(ev, &c, &k);
        return query_finish(ev, &c, &k, ret_bytes, ret_replies);
}

/* How many of the listed data sources are named prefix*, each checked
 * byte for byte against what was registered. */
static int count_whole(const Perfetto__Protos__TracingServiceState *st, const char *prefix, size_t size) {
        int n = 0;
        for (size_t i = 0; i < st->n_data_sources; i++) {
                const Perfetto__Protos__DataSourceDescriptor *d = st->data_sources[i]->ds_descriptor;
                cr_assert_not_null(d);
                if (!d->name || strncmp(d->name, prefix, strlen(prefix)) != 0)
                        continue;
                size_t len = protobuf_c_message_get_packed_size(&d->base);
                cr_assert_eq(len, size, "%s: %zu bytes listed, %zu registered", d->name, len, size);
                _cleanup_free_ uint8_t *got = malloc(len);
                cr_assert_not_null(got);
                protobuf_c_message_pack(&d->base, got);
                size_t want_len;
                _cleanup_free_ uint8_t *want = descriptor_new(d->name, size, &want_len);
                cr_assert(memcmp(got, want, len) == 0, "%s: the listed descriptor differs from the registered one",
                          d->name);
                n++;
        }
        return n;
}

/* tracectl query: the lines of data sources named prefix* with a
 * descriptor of size bytes. */
static int tracectl_count(const char *prefix, size_t size) {
        char cmd[1024], want[64], line[512];
        snprintf(cmd, sizeof(cmd), "%s --socket=%s query", TRACECTL_BINARY, inst.consumer_path);
        snprintf(want, sizeof(want), "descriptor %zu bytes", size);
        FILE *out = popen(cmd, "r");
        cr_assert_not_null(out);
        int n = 0;
        while (fgets(line, sizeof(line), out))
                if (strncmp(line + strspn(line, " "), prefix, strlen(prefix)) == 0 && strstr(line, want))
                        n++;
        cr_assert_eq(pclose(out), 0, "tracectl query failed");
        return n;
}

/* The size of a descriptor named name (descriptor_new's layout) whose
 * field 6 holds raw bytes. */
static size_t descriptor_size_for_raw(const char *name, size_t raw) {
        return 2 + strlen(name) + 4 + raw;
}

Test(descriptors, five_frame_sized_descriptors_are_listed_whole) {
        struct registrations g = {};
        ipc_client *p = producer_connect("sdk-app");
        char name[32];
        /* Upstream's own: five of them, each a little over 131008 bytes. */
        size_t size = descriptor_size_for_raw("track_event.0", UPSTREAM_RAW_SIZE);
        for (int i = 0; i < 5; i++) {
                snprintf(name, sizeof(name), "track_event.%d", i);
                register_descriptor(p, name, size, &g);
        }
        wait_registrations(p, &g, 5);
        cr_assert_eq(g.ok, 5, "%d refused: %s", g.refused, g.last_error);

        /* The largest one a listing frame carries is taken too, one byte
         * more (which still came in a valid frame) is refused and says
         * how large one may be. */
        register_descriptor(p, "over.limit", 131040, &g);
        wait_registrations(p, &g, 6);
        cr_assert_eq(g.refused, 1, "a descriptor of 131040 bytes was taken: it cannot be listed in a frame");
        size_t max = 0;
        const char *at = strstr(g.last_error, "at most ");
        cr_assert(at && sscanf(at, "at most %zu bytes", &max) == 1, "refused with \"%s\"", g.last_error);
        fprintf(stderr, "descriptors: the largest listable descriptor: %zu bytes\n", max);
        cr_assert_gt(max, size, "upstream's descriptors would not be taken");
        cr_assert_lt(max, 131040);
        register_descriptor(p, "at.limit", max, &g);
        register_descriptor(p, "over.limit", max + 1, &g);
        wait_registrations(p, &g, 8);
        cr_assert_eq(g.ok, 6, "the largest listable descriptor (%zu bytes) was refused: %s", max, g.last_error);
        cr_assert_eq(g.refused, 2);

        size_t bytes;
        int replies;
        Perfetto__Protos__TracingServiceState *st = query(&bytes, &replies);
        fprintf(stderr, "descriptors: QueryServiceState: %zu bytes in %d replies\n", bytes, replies);
        cr_assert_eq(count_whole(st, "track_event.", size), 5);
        cr_assert_eq(count_whole(st, "at.limit", max), 1);
        cr_assert_eq(count_whole(st, "over.limit", max + 1), 0);
        cr_assert_geq(replies, 6, "a frame-sized descriptor goes in a reply of its own");
        protobuf_c_message_free_unpacked(&st->base, NULL);

        cr_assert_eq(tracectl_count("track_event.", size), 5);
        cr_assert_eq(tracectl_count("at.limit", max), 1);

        /* Three calls at once on one connection: answered one after the
         * other, each whole. */
        struct test_consumer c;
        struct answer k[3] = {};
        Perfetto__Protos__QueryServiceStateRequest req = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        for (int i = 0; i < 3; i++)
                cr_assert_gt(ipc_client_invoke(c.client, "QueryServiceState", &req.base,
                                               &perfetto__protos__query_service_state_response__descriptor, -EBADF,
                                               on_answer, &k[i]),
                             0);
        uint64_t deadline = now_usec() + TIMEOUT_MS * 1000u;
        while (!(k[0].done && k[1].done && k[2].done) && now_usec() < deadline)
                sd_event_run(ev, 100000);
        for (int i = 0; i < 3; i++) {
                cr_assert(k[i].done && k[i].error == 0, "call %d: not answered (%d replies)", i, k[i].replies);
                Perfetto__Protos__QueryServiceStateResponse *r =
                        perfetto__protos__query_service_state_response__unpack(NULL, k[i].len, k[i].bytes);
                cr_assert_not_null(r);
                cr_assert_eq(count_whole(r->service_state, "track_event.", size), 5, "call %d", i);
                protobuf_c_message_free_unpacked(&r->base, NULL);
                free(k[i].bytes);
        }
        test_consumer_free(&c);
        ipc_client_free(p);
}

/* Answers over what may be queued for a consumer at once (8 MiB): 3
 * producers, 24 descriptors each (within the producer's 8 MiB quota). */
#define BIG_PRODUCERS 3
#define BIG_PER_PRODUCER 24

Test(descriptors, answers_over_the_send_queue_bound_arrive_whole) {
        ipc_client *p[BIG_PRODUCERS];
        struct registrations g[BIG_PRODUCERS] = {};
        char name[64];
        for (int i = 0; i < BIG_PRODUCERS; i++) {
                snprintf(name, sizeof(name), "big-%d", i);
                p[i] = producer_connect(name);
                for (int k = 0; k < BIG_PER_PRODUCER; k++) {
                        snprintf(name, sizeof(name), "many.%d.%d", i, k);
                        register_descriptor(p[i], name, FRAME_DESCRIPTOR_SIZE, &g[i]);
                        /* Keep the producer's own send queue short. */
                        if (k % 8 == 7)
                                wait_registrations(p[i], &g[i], k + 1);
                }
                wait_registrations(p[i], &g[i], BIG_PER_PRODUCER);
                cr_assert_eq(g[i].ok, BIG_PER_PRODUCER, "producer %d: %d refused (%s)", i, g[i].refused,
                             g[i].last_error);
        }

        /* A consumer that reads nothing until the service has answered
         * others: its answer must wait for it, not overflow its queue. */
        sd_event *slow_ev = NULL;
        struct test_consumer slow;
        struct answer slow_k;
        cr_assert_eq(sd_event_new(&slow_ev), 0);
        query_send(slow_ev, &slow, &slow_k);

        /* Two whole answers to another consumer: the service took the
         * slow one's call before the second one's (it came first). */
        size_t bytes;
        int replies;
        for (int round = 0; round < 2; round++) {
                Perfetto__Protos__TracingServiceState *st = query(&bytes, &replies);
                fprintf(stderr, "descriptors: QueryServiceState: %zu bytes in %d replies\n", bytes, replies);
                cr_assert_gt(bytes, (size_t) IPC_SEND_QUEUE_MAX, "the answer (%zu bytes) is not over the queue bound",
                             bytes);
                cr_assert_eq(count_whole(st, "many.", FRAME_DESCRIPTOR_SIZE), BIG_PRODUCERS * BIG_PER_PRODUCER);
                protobuf_c_message_free_unpacked(&st->base, NULL);
        }

        Perfetto__Protos__TracingServiceState *st = query_finish(slow_ev, &slow, &slow_k, &bytes, &replies);
        fprintf(stderr, "descriptors: the slow consumer's QueryServiceState: %zu bytes in %d replies\n", bytes,
                replies);
        cr_assert_eq(count_whole(st, "many.", FRAME_DESCRIPTOR_SIZE), BIG_PRODUCERS * BIG_PER_PRODUCER);
        protobuf_c_message_free_unpacked(&st->base, NULL);
        slow_ev = sd_event_unref(slow_ev);

        cr_assert_eq(tracectl_count("many.", FRAME_DESCRIPTOR_SIZE), BIG_PRODUCERS * BIG_PER_PRODUCER);
        for (int i = 0; i < BIG_PRODUCERS; i++)
                ipc_client_free(p[i]);
}
