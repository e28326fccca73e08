/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* autopkgtest producer, built against the installed libtraced-client-dev:
 * registers the data source "debian.autopkgtest" and, when a session starts
 * it, writes COUNT packets (TracePacket.for_testing { seq_value = i }, with
 * the typed writers of traced-protos-dev) and flushes. Exits when the instance stops, or on SIGTERM/SIGINT.
 *   producer COUNT   (socket: $PERFETTO_PRODUCER_SOCK_NAME or the default) */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>
#include <traced/pbzero/perfetto/trace/trace_packet.pbw.h>
#include <traced/producer.h>

static unsigned long count;

static void on_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t size, void *u) {
        traced_trace_writer *w = NULL;
        int r;

        (void) cfg;
        (void) size;
        (void) u;
        r = traced_producer_new_writer(p, id, &w);
        if (r < 0) {
                fprintf(stderr, "producer: new_writer: %s\n", strerror(-r));
                return;
        }
        for (unsigned long i = 0; i < count; i++) {
                /* Written with the typed writers, straight into the
                 * shared memory buffer. */
                TracePacket pkt;
                TestEvent ev;
                r = traced_trace_writer_begin_pb_packet(w, &pkt.msg);
                if (r >= 0) {
                        TracePacket_begin_for_testing(&pkt, &ev);
                        TestEvent_set_seq_value(&ev, (uint32_t) i);
                        TracePacket_end_for_testing(&pkt, &ev);
                        r = traced_trace_writer_end_pb_packet(w, &pkt.msg);
                }
                if (r < 0)
                        fprintf(stderr, "producer: packet %lu: %s\n", i, strerror(-r));
        }
        traced_trace_writer_flush(w);
        traced_trace_writer_free(w);
        fprintf(stderr, "producer: wrote %lu packets for %s\n", count, ds);
}

static void on_stop(traced_producer *p, uint64_t id, void *u) {
        (void) p;
        (void) id;
        sd_event_exit(u, 0);
}

int main(int argc, char **argv) {
        sd_event *e = NULL;
        traced_producer *p = NULL;
        sigset_t ss;
        int r;

        count = argc > 1 ? strtoul(argv[1], NULL, 10) : 100;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        r = sd_event_default(&e);
        if (r < 0)
                goto fail;
        sd_event_add_signal(e, NULL, SIGTERM, NULL, NULL);
        sd_event_add_signal(e, NULL, SIGINT, NULL, NULL);

        struct traced_producer_options opts = {
                .struct_size = sizeof(opts),
                .name = "debian.autopkgtest",
        };
        struct traced_producer_ops ops = {
                .struct_size = sizeof(ops),
                .start = on_start,
                .stop = on_stop,
        };
        r = traced_producer_connect(e, &opts, &ops, e, &p);
        if (r < 0)
                goto fail;
        r = traced_producer_register_data_source(p, "debian.autopkgtest", 0);
        if (r < 0)
                goto fail;
        r = sd_event_loop(e);
        traced_producer_free(p);
        sd_event_unref(e);
        return r < 0 ? 1 : 0;
fail:
        fprintf(stderr, "producer: %s\n", strerror(-r));
        return 1;
}
