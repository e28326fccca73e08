/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* example-producer: registers the data source "example.data" and, when a
 * session starts it, writes N TracePackets of a chosen size (for_testing {
 * str, seq_value }), then flushes. Used by the tests and benchmarks; the
 * payload of packet i is reproducible (bytes 'a' + (i + k) % 26). With
 * --threads T, T threads each write N packets through a writer of their
 * own (one sequence each); with --reconnect it outlives a restart of the
 * service and serves the next one; with --track-events it writes N slices
 * on a thread's track instead, with their arguments and a counter sampled
 * at each end.
 *
 * Written from the installed files alone (pkg-config libtraced-client):
 * the packets are built with the typed writers generated from traced's
 * protos, serialized into a buffer and handed over whole, or with
 * --stream written straight into the shared memory buffer. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid() */
#endif
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-event.h>
#include <traced/pbzero/perfetto/trace/trace_packet.pbw.h>
#include <traced/producer.h>

struct state {
        sd_event *event;
        unsigned long packets;
        size_t size;
        const char *ds;
        unsigned long written, dropped;
        bool exit_on_stop;
        bool stream; /* zero-copy streaming API instead of whole packets */
        bool track_events; /* slices on a thread track instead of for_testing */
        bool reconnect;
        bool hold;
        bool after_start; /* --after-start: the loop thread writes once the start is acknowledged */
        sd_event_source *later;
        uint64_t later_id;
        unsigned long burst;    /* --burst: pause after this many packets */
        unsigned pause_ms;
        unsigned delay_ms; /* --delay-ms: each thread waits this long before its first packet */
        unsigned threads;
        pthread_t tids[64];
        unsigned n_tids;
        atomic_uint n_done;
        atomic_bool stopping;
        uint64_t stopping_id;
        sd_event_source *reaper;
        traced_producer *producer;
        pthread_mutex_t lock;
};

struct job {
        struct state *st;
        traced_trace_writer *w;
};

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Packet i of the sequence: TracePacket { timestamp, for_testing { str:
 * size bytes of payload, seq_value: i } }. */
static void fill_packet(TracePacket *pkt, const char *payload, size_t size, unsigned long i) {
        TestEvent ev;
        TracePacket_set_timestamp(pkt, boottime_ns());
        TracePacket_begin_for_testing(pkt, &ev);
        TestEvent_set_str_n(&ev, payload, size);
        TestEvent_set_seq_value(&ev, (uint32_t) i);
        TracePacket_end_for_testing(pkt, &ev);
}

/* --track-events: the tracks, once per sequence (clearing its state): the
 * thread's, and a counter of the payload bytes written. */
#define TRACK_THREAD 0x657861000001ull
#define TRACK_BYTES 0x657861000002ull

static void fill_tracks(TracePacket *pkt, bool counter) {
        TrackDescriptor td;
        TracePacket_begin_track_descriptor(pkt, &td);
        if (counter) {
                CounterDescriptor cd;
                TrackDescriptor_set_uuid(&td, TRACK_BYTES);
                TrackDescriptor_set_parent_uuid(&td, TRACK_THREAD);
                TrackDescriptor_set_name(&td, "example payload bytes");
                TrackDescriptor_begin_counter(&td, &cd);
                CounterDescriptor_set_unit(&cd, CounterDescriptor_UNIT_SIZE_BYTES);
                CounterDescriptor_set_is_incremental(&cd, 0);
                TrackDescriptor_end_counter(&td, &cd);
        } else {
                ThreadDescriptor th;
                TrackDescriptor_set_uuid(&td, TRACK_THREAD);
                TrackDescriptor_set_name(&td, "example-producer writer");
                TrackDescriptor_begin_thread(&td, &th);
                ThreadDescriptor_set_pid(&th, (int32_t) getpid());
                ThreadDescriptor_set_tid(&th, (int32_t) gettid());
                ThreadDescriptor_set_thread_name(&th, "example-writer");
                TrackDescriptor_end_thread(&td, &th);
        }
        TracePacket_end_track_descriptor(pkt, &td);
        TracePacket_set_sequence_flags(pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
}

/* --track-events: slice i begins (with its arguments) or ends (with the
 * bytes counter sampled at its end). */
static void fill_slice(TracePacket *pkt, unsigned long i, bool end, uint64_t bytes) {
        TrackEvent te;
        TracePacket_set_timestamp(pkt, boottime_ns());
        TracePacket_begin_track_event(pkt, &te);
        TrackEvent_set_track_uuid(&te, TRACK_THREAD);
        if (end) {
                TrackEvent_set_type(&te, TrackEvent_TYPE_SLICE_END);
                TrackEvent_add_extra_counter_track_uuids(&te, TRACK_BYTES);
                TrackEvent_add_extra_counter_values(&te, (int64_t) bytes);
        } else {
                DebugAnnotation arg;
                TrackEvent_set_type(&te, TrackEvent_TYPE_SLICE_BEGIN);
                TrackEvent_add_categories(&te, "example");
                TrackEvent_set_name(&te, "write payload");
                TrackEvent_begin_debug_annotations(&te, &arg);
                DebugAnnotation_set_name(&arg, "seq");
                DebugAnnotation_set_uint_value(&arg, i);
                TrackEvent_end_debug_annotations(&te, &arg);
                TrackEvent_add_flow_ids(&te, 0x100000000ull + i);
        }
        TracePacket_end_track_event(pkt, &te);
        TracePacket_set_sequence_flags(pkt, TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
}

/* What the packet being written is. */
enum packet_kind { PACKET_TEST, PACKET_THREAD_TRACK, PACKET_COUNTER_TRACK, PACKET_SLICE_BEGIN, PACKET_SLICE_END };

static void fill(TracePacket *pkt, enum packet_kind kind, const char *payload, size_t size, unsigned long i) {
        switch (kind) {
        case PACKET_TEST:
                fill_packet(pkt, payload, size, i);
                break;
        case PACKET_THREAD_TRACK:
        case PACKET_COUNTER_TRACK:
                fill_tracks(pkt, kind == PACKET_COUNTER_TRACK);
                break;
        case PACKET_SLICE_BEGIN:
        case PACKET_SLICE_END:
                fill_slice(pkt, i, kind == PACKET_SLICE_END, (uint64_t) size * (i + 1));
                break;
        }
}

/* One packet through w: straight into the shared memory (--stream), or
 * serialized into buf (of cap bytes) and handed over whole. */
static int write_one(const struct state *st, traced_trace_writer *w, uint8_t *buf, size_t cap, enum packet_kind kind,
                     const char *payload, unsigned long i) {
        TracePacket pkt;
        if (st->stream) {
                /* Written field by field into the shared memory. */
                int r = traced_trace_writer_begin_pb_packet(w, &pkt.msg);
                if (r < 0)
                        return r;
                fill(&pkt, kind, payload, st->size, i);
                return traced_trace_writer_end_pb_packet(w, &pkt.msg);
        }
        /* The payload is copied once into buf, and once more by the
         * library. */
        struct traced_pb_stream s;
        traced_pb_stream_init_buffer(&s, buf, cap);
        TracePacket_init(&pkt, &s);
        fill(&pkt, kind, payload, st->size, i);
        int r = traced_pb_msg_finish(&pkt.msg);
        if (r < 0)
                return r;
        return traced_trace_writer_write_packet(w, buf, (size_t) traced_pb_msg_size(&pkt.msg));
}

/* --burst N --pause-ms M: a pause after every N packets. */
static void pace(const struct state *st, unsigned long i) {
        if (st->burst && (i + 1) % st->burst == 0) {
                struct timespec ts = { .tv_sec = st->pause_ms / 1000, .tv_nsec = (long) (st->pause_ms % 1000) * 1000000 };
                (void) nanosleep(&ts, NULL);
        }
}

/* Writes the packets of one sequence through w, then frees w. */
static void write_all(struct state *st, traced_trace_writer *w) {
        unsigned long written = 0, dropped = 0;
        /* Filled once: packet i's payload ('a' + (i + k) % 26 at byte k)
         * starts at byte i % 26, so the loop measures the library, not
         * the making of payloads. */
        char *fill = malloc(st->size + 26);
        if (!fill) {
                traced_trace_writer_free(w);
                return;
        }
        for (size_t k = 0; k < st->size + 26; k++)
                fill[k] = (char) ('a' + k % 26);
        size_t cap = st->size + 512; /* the payload and what goes around it */
        uint8_t *pkt = malloc(cap);
        if (!pkt) {
                free(fill);
                traced_trace_writer_free(w);
                return;
        }
        if (st->track_events) {
                if (write_one(st, w, pkt, cap, PACKET_THREAD_TRACK, NULL, 0) < 0 ||
                    write_one(st, w, pkt, cap, PACKET_COUNTER_TRACK, NULL, 0) < 0)
                        dropped++;
        }
        for (unsigned long i = 0; i < st->packets && !atomic_load(&st->stopping); i++) {
                const char *payload = fill + i % 26;
                int r;
                if (st->track_events) {
                        r = write_one(st, w, pkt, cap, PACKET_SLICE_BEGIN, payload, i);
                        if (r >= 0)
                                r = write_one(st, w, pkt, cap, PACKET_SLICE_END, payload, i);
                } else
                        r = write_one(st, w, pkt, cap, PACKET_TEST, payload, i);
                if (r >= 0)
                        written++;
                else
                        dropped++;
                pace(st, i);
        }
        free(pkt);
        /* --hold: the writer keeps its last chunk unfinished (a thread
         * that stopped responding); traced_producer_free frees it. */
        if (!st->hold) {
                (void) traced_trace_writer_flush(w);
                traced_trace_writer_free(w);
        }
        free(fill);
        pthread_mutex_lock(&st->lock);
        st->written += written;
        st->dropped += dropped;
        pthread_mutex_unlock(&st->lock);
}

static void *thread_main(void *arg) {
        struct job *j = arg;
        struct state *st = j->st;
        if (st->delay_ms) {
                struct timespec ts = { .tv_sec = st->delay_ms / 1000, .tv_nsec = (long) (st->delay_ms % 1000) * 1000000 };
                (void) nanosleep(&ts, NULL);
        }
        write_all(st, j->w);
        free(j);
        atomic_fetch_add(&st->n_done, 1);
        return NULL;
}

static void join_threads(struct state *st) {
        for (unsigned i = 0; i < st->n_tids; i++)
                pthread_join(st->tids[i], NULL);
        st->n_tids = 0;
}

/* Writes the instance's packets on the loop thread, timed. */
static void write_on_loop(struct state *st, uint64_t id) {
        traced_trace_writer *w;
        if (traced_producer_new_writer(st->producer, id, &w) < 0)
                return;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        write_all(st, w);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double secs = (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9;
        fprintf(stderr, "example-producer: instance %llu: wrote %lu packets of %zu bytes, dropped %lu, in %.6f s\n",
                (unsigned long long) id, st->written, st->size, st->dropped, secs);
}

static int on_later(sd_event_source *s, uint64_t usec, void *ud) {
        struct state *st = ud;
        (void) s;
        (void) usec;
        st->later = sd_event_source_disable_unref(st->later);
        write_on_loop(st, st->later_id);
        return 0;
}

static void on_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t n, void *ud) {
        struct state *st = ud;
        (void) ds;
        (void) cfg;
        (void) n;
        if (st->threads == 0) {
                if (!st->after_start) {
                        write_on_loop(st, id);
                        return;
                }
                /* The service hears the instance started when this
                 * returns; the packets follow on the next turn. */
                st->later_id = id;
                if (!st->later)
                        (void) sd_event_add_time_relative(st->event, &st->later, CLOCK_MONOTONIC, 10000, 0, on_later, st);
                return;
        }
        /* The writers are made here, used and freed on their threads; the
         * loop keeps running to commit what they fill. */
        join_threads(st);
        atomic_store(&st->n_done, 0);
        atomic_store(&st->stopping, false);
        for (unsigned t = 0; t < st->threads && st->n_tids < 64; t++) {
                struct job *j = malloc(sizeof(*j));
                if (!j || traced_producer_new_writer(p, id, &j->w) < 0) {
                        free(j);
                        break;
                }
                j->st = st;
                if (pthread_create(&st->tids[st->n_tids], NULL, thread_main, j) != 0) {
                        traced_trace_writer_free(j->w);
                        free(j);
                        break;
                }
                st->n_tids++;
        }
        fprintf(stderr, "example-producer: instance %llu: %u threads writing\n", (unsigned long long) id,
                st->n_tids);
}

/* Threads still writing when the instance stops are asked to finish;
 * the loop must keep running meanwhile (it commits what they write), so
 * they are reaped from a timer and the stop is acknowledged then. */
static int on_reap(sd_event_source *s, uint64_t usec, void *ud) {
        struct state *st = ud;
        (void) usec;
        if (atomic_load(&st->n_done) < st->n_tids) {
                (void) sd_event_source_set_time_relative(s, 10000);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        st->reaper = sd_event_source_disable_unref(st->reaper);
        join_threads(st);
        fprintf(stderr, "example-producer: instance %llu: wrote %lu packets of %zu bytes, dropped %lu\n",
                (unsigned long long) st->stopping_id, st->written, st->size, st->dropped);
        (void) traced_producer_notify_stopped(st->producer, st->stopping_id);
        if (st->exit_on_stop)
                sd_event_exit(st->event, 0);
        return 0;
}

static void on_stop(traced_producer *p, uint64_t id, void *ud) {
        struct state *st = ud;
        (void) p;
        if (st->threads) {
                atomic_store(&st->stopping, true);
                st->stopping_id = id;
                if (!st->reaper)
                        (void) sd_event_add_time_relative(st->event, &st->reaper, CLOCK_MONOTONIC, 0, 0, on_reap, st);
                return;
        }
        if (st->exit_on_stop)
                sd_event_exit(st->event, 0);
}

static void on_disconnected(traced_producer *p, void *ud) {
        struct state *st = ud;
        (void) p;
        fprintf(stderr, "example-producer: the service went away\n");
        if (!st->reconnect)
                sd_event_exit(st->event, 1);
}

static void on_connected(traced_producer *p, void *ud) {
        (void) ud;
        fprintf(stderr, "example-producer: connected again (%u)\n", traced_producer_reconnects(p));
}

int main(int argc, char **argv) {
        struct state st = { .packets = 1000, .size = 100, .ds = "example.data", .lock = PTHREAD_MUTEX_INITIALIZER };
        struct traced_producer_options o = { .struct_size = sizeof(o), .name = "example-producer" };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },  { "packets", required_argument, NULL, 'n' },
                { "size", required_argument, NULL, 'z' },    { "smb-kb", required_argument, NULL, 'm' },
                { "page-kb", required_argument, NULL, 'p' }, { "once", no_argument, NULL, '1' },
                { "stream", no_argument, NULL, 'S' },        { "threads", required_argument, NULL, 'T' },
                { "reconnect", no_argument, NULL, 'R' },      { "hold", no_argument, NULL, 'H' },
                { "burst", required_argument, NULL, 'B' },    { "pause-ms", required_argument, NULL, 'P' },
                { "track-events", no_argument, NULL, 'E' },  { "help", no_argument, NULL, 'h' },
                { "after-start", no_argument, NULL, 'A' },   { "delay-ms", required_argument, NULL, 'D' },
                {},
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
                case 'T':
                        st.threads = (unsigned) strtoul(optarg, NULL, 0);
                        if (st.threads > 64) {
                                fprintf(stderr, "example-producer: at most 64 threads\n");
                                return 2;
                        }
                        break;
                case 'R':
                        st.reconnect = true;
                        break;
                case 'E':
                        st.track_events = true;
                        break;
                case 'H':
                        st.hold = true;
                        break;
                case 'A':
                        st.after_start = true;
                        break;
                case 'B':
                        st.burst = strtoul(optarg, NULL, 0);
                        break;
                case 'P':
                        st.pause_ms = (unsigned) strtoul(optarg, NULL, 0);
                        break;
                case 'D':
                        st.delay_ms = (unsigned) strtoul(optarg, NULL, 0);
                        break;
                case 'h':
                        printf("Usage: example-producer [--socket PATH] [--packets N] [--size BYTES]\n"
                               "                        [--smb-kb KB] [--page-kb KB] [--once] [--stream]\n"
                               "                        [--threads T] [--reconnect] [--hold]\n"
                               "                        [--burst N --pause-ms MS] [--track-events]\n"
                               "                        [--after-start] [--delay-ms MS]\n"
                               "Registers \"example.data\"; each started instance gets N packets.\n"
                               "--once exits when the first instance stops; --stream writes packets\n"
                               "field by field with the zero-copy API; --threads writes N packets\n"
                               "from each of T threads; --reconnect survives a restart of the service;\n"
                               "--hold leaves each thread's last chunk unfinished (the service, or\n"
                               "over TCP the library on Flush, must scrape it); --burst pauses MS\n"
                               "milliseconds after every N packets; --track-events writes N slices\n"
                               "(TrackEvent) on a thread track, each with an argument and a counter\n"
                               "sampled at its end, instead of test packets; --after-start writes\n"
                               "them on the loop thread once the start was acknowledged, not in the\n"
                               "start callback (without --threads); --delay-ms has each thread wait\n"
                               "MS milliseconds before its first packet (with --threads).\n");
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
                .connected = on_connected,
        };
        traced_producer *p;
        if (!st.reconnect)
                o.flags |= TRACED_PRODUCER_NO_RECONNECT;
        r = traced_producer_connect(st.event, &o, &ops, &st, &p);
        if (r < 0) {
                fprintf(stderr, "example-producer: cannot connect: %s\n", strerror(-r));
                return 1;
        }
        st.producer = p;
        /* With threads, the stop is acknowledged once they are done. */
        r = traced_producer_register_data_source(p, st.ds, st.threads ? TRACED_DS_WILL_NOTIFY_ON_STOP : 0);
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
        atomic_store(&st.stopping, true);
        join_threads(&st);
        st.reaper = sd_event_source_disable_unref(st.reaper);
        st.later = sd_event_source_disable_unref(st.later);
        traced_producer_free(p);
        sd_event_unref(st.event);
        return r < 0 ? 1 : r;
}
