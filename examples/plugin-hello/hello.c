/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A third-party style traced plugin: data source "example.hello" writes a
 * counter packet (TracePacket.for_testing { seq_value }) every
 * 100 ms. Built out of tree with only
 *   cc -shared -fPIC $(pkg-config --cflags traced-plugin) hello.c -o hello.so */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <traced/plugin.h>

struct hello {
        const struct traced_host_api *api;
        struct traced_host *host;
        uint64_t instance;
        struct traced_writer *writer;
        struct traced_source *timer;
        uint32_t counter;
};

static size_t put_varint(uint8_t *p, uint64_t v) {
        size_t n = 0;
        do {
                p[n] = (uint8_t) (v & 0x7f);
                v >>= 7;
                if (v)
                        p[n] |= 0x80;
                n++;
        } while (v);
        return n;
}

static void tick(void *userdata) {
        struct hello *h = userdata;
        uint8_t ev[16], pkt[32];
        size_t n = 0, m = 0;
        ev[n++] = 0x10; /* TestEvent.seq_value = 2 (varint) */
        n += put_varint(ev + n, h->counter++);
        pkt[m++] = 0xa2; /* TracePacket.for_testing = 900 (length-delimited) */
        pkt[m++] = 0x38;
        m += put_varint(pkt + m, n);
        memcpy(pkt + m, ev, n);
        h->api->write_packet(h->writer, pkt, m + n);
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
        (void) ds;
        (void) cfg;
        (void) size;
        if (h->writer || h->api->new_writer(h->host, id, &h->writer) < 0)
                return;
        h->instance = id;
        h->counter = 0;
        h->api->add_timer(h->host, 100, tick, h, &h->timer);
        h->api->log(h->host, TRACED_LOG_INFO, "example.hello started");
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
