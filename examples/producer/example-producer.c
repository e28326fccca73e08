/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* example-producer: registers the data source "example.data" and, when a
 * session starts it, writes N TracePackets of a chosen size (for_testing {
 * str, seq_value }), then flushes. Used by the tests and benchmarks; the
 * payload of packet i is reproducible (bytes 'a' + (i + k) % 26). */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-event.h>

#include "basic/pbw.h"
#include "traced/producer.h"

struct state {
        sd_event *event;
        unsigned long packets;
        size_t size;
        const char *ds;
        unsigned long written, dropped;
        bool exit_on_stop;
        bool stream; /* zero-copy streaming API instead of whole packets */
};

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void on_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t n, void *ud) {
        struct state *st = ud;
        traced_trace_writer *w;
        char *payload = malloc(st->size + 1);
        if (!payload || traced_producer_new_writer(p, id, &w) < 0) {
                free(payload);
                return;
        }
        for (unsigned long i = 0; i < st->packets; i++) {
                struct pbw pkt = {}, ev = {};
                for (size_t k = 0; k < st->size; k++)
                        payload[k] = (char) ('a' + (i + k) % 26);
                if (st->stream) {
                        /* Written field by field into the shared memory. */
                        traced_msg *root, *test;
                        int r = traced_trace_writer_begin_packet(w, &root);
                        if (r >= 0)
                                r = traced_msg_append_varint(root, 8, boottime_ns());
                        if (r >= 0)
                                r = traced_msg_begin_nested(root, 900, &test);
                        if (r >= 0)
                                r = traced_msg_append_bytes(test, 1, payload, st->size);
                        if (r >= 0)
                                r = traced_msg_append_varint(test, 2, i);
                        if (r >= 0)
                                r = traced_msg_end_nested(test);
                        int e = traced_trace_writer_end_packet(w);
                        if (r >= 0 && e >= 0)
                                st->written++;
                        else
                                st->dropped++;
                        continue;
                }
                pbw_bytes(&ev, 1, payload, st->size);
                pbw_varint(&ev, 2, i);
                pbw_varint(&pkt, 8, boottime_ns());
                pbw_message(&pkt, 900, &ev);
                if (!pkt.error && traced_trace_writer_write_packet(w, pkt.buf, pkt.len) == 0)
                        st->written++;
                else
                        st->dropped++;
                pbw_done(&ev);
                pbw_done(&pkt);
        }
        (void) traced_trace_writer_flush(w);
        traced_trace_writer_free(w);
        free(payload);
        fprintf(stderr, "example-producer: instance %llu: wrote %lu packets of %zu bytes, dropped %lu\n",
                (unsigned long long) id, st->written, st->size, st->dropped);
}

static void on_stop(traced_producer *p, uint64_t id, void *ud) {
        struct state *st = ud;
        if (st->exit_on_stop)
                sd_event_exit(st->event, 0);
}

static void on_disconnected(traced_producer *p, void *ud) {
        struct state *st = ud;
        fprintf(stderr, "example-producer: the service went away\n");
        sd_event_exit(st->event, 1);
}

int main(int argc, char **argv) {
        struct state st = { .packets = 1000, .size = 100, .ds = "example.data" };
        struct traced_producer_options o = { .struct_size = sizeof(o), .name = "example-producer" };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },  { "packets", required_argument, NULL, 'n' },
                { "size", required_argument, NULL, 'z' },    { "smb-kb", required_argument, NULL, 'm' },
                { "page-kb", required_argument, NULL, 'p' }, { "once", no_argument, NULL, '1' },
                { "stream", no_argument, NULL, 'S' },
                { "help", no_argument, NULL, 'h' },          {},
        };
        int c, r;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        o.socket_path = optarg;
                        break;
                case 'n':
                        st.packets = strtoul(optarg, NULL, 0);
                        break;
                case 'z':
                        st.size = strtoul(optarg, NULL, 0);
                        break;
                case 'm':
                        o.smb_size_hint = (uint32_t) strtoul(optarg, NULL, 0) * 1024u;
                        break;
                case 'p':
                        o.page_size_hint = (uint32_t) strtoul(optarg, NULL, 0) * 1024u;
                        break;
                case '1':
                        st.exit_on_stop = true;
                        break;
                case 'S':
                        st.stream = true;
                        break;
                case 'h':
                        printf("Usage: example-producer [--socket PATH] [--packets N] [--size BYTES]\n"
                               "                        [--smb-kb KB] [--page-kb KB] [--once] [--stream]\n"
                               "Registers \"example.data\"; each started instance gets N packets.\n"
                               "--once exits when the first instance stops; --stream writes packets\n"
                               "field by field with the zero-copy API.\n");
                        return 0;
                default:
                        return 2;
                }
        }
        r = sd_event_default(&st.event);
        if (r < 0)
                return 1;
        struct traced_producer_ops ops = {
                .struct_size = sizeof(ops),
                .start = on_start,
                .stop = on_stop,
                .disconnected = on_disconnected,
        };
        traced_producer *p;
        r = traced_producer_connect(st.event, &o, &ops, &st, &p);
        if (r < 0) {
                fprintf(stderr, "example-producer: cannot connect: %s\n", strerror(-r));
                return 1;
        }
        r = traced_producer_register_data_source(p, st.ds, 0);
        if (r < 0) {
                fprintf(stderr, "example-producer: cannot register: %s\n", strerror(-r));
                return 1;
        }
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sd_event_add_signal(st.event, NULL, SIGTERM, NULL, NULL);
        sd_event_add_signal(st.event, NULL, SIGINT, NULL, NULL);
        fprintf(stderr, "example-producer: ready\n");
        r = sd_event_loop(st.event);
        traced_producer_free(p);
        sd_event_unref(st.event);
        return r < 0 ? 1 : r;
}
