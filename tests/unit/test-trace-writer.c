/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's writers without a service: packets are written into
 * an in-memory SMB, then the chunks and the queued patches are handed to
 * the service's trace buffer exactly as traced would; every packet must
 * come back byte for byte. Covers chunk fragmentation, the zero-copy
 * encoder's size fields (in place and patched), and loss on a full SMB:
 * a packet given up mid-fragment must leave nothing a strict service (one
 * that reads like upstream Perfetto's) would wait for forever. */

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "basic/pb-buf.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "producer-internal.h"
#include "core/buffers/trace-buffer.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define SMB_SIZE (256u * 1024u)

static traced_producer *fake_producer(sd_event **ret_event) {
        traced_producer *p = calloc(1, sizeof(*p));
        cr_assert_eq(producer_init(p), 0);
        cr_assert_eq(sd_event_new(ret_event), 0);
        p->event = sd_event_ref(*ret_event);
        void *m = mmap(NULL, SMB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(m, MAP_FAILED);
        cr_assert_eq(smb_abi_init(&p->abi, m, SMB_SIZE, 4096), 0);
        p->smb = m;
        p->smb_size = SMB_SIZE;
        p->ready = true;
        struct producer_instance *i = calloc(1, sizeof(*i));
        i->id = 7;
        i->target_buffer = 1;
        i->data_source = strdup("test");
        p->instances = i;
        return p;
}

static void commit_into(traced_producer *p, struct trace_buffer *tb);

/* What traced does with the SMB: take every complete chunk, then apply
 * the patches, then read. */
static struct trace_buffer *service_side(traced_producer *p) {
        struct trace_buffer *tb;
        cr_assert_eq(trace_buffer_new(16u << 20, TRACE_BUFFER_RING_BUFFER, &tb), 0);
        commit_into(p, tb);
        return tb;
}

static void expected_packet(uint32_t seq, size_t size, struct pb_buf *b) {
        char *s = malloc(size + 1);
        for (size_t k = 0; k < size; k++)
                s[k] = (char) ('a' + (seq + k) % 26);
        TracePacket pkt;
        TestEvent ev;
        TracePacket_init(&pkt, pb_buf_stream(b));
        TracePacket_set_timestamp(&pkt, 1000 + seq);
        TracePacket_begin_for_testing(&pkt, &ev);
        TestEvent_set_str_n(&ev, s, size);
        TestEvent_set_seq_value(&ev, seq);
        TracePacket_end_for_testing(&pkt, &ev);
        cr_assert_eq(traced_pb_msg_finish(&pkt.msg), 0);
        free(s);
}

static void write_streamed(traced_trace_writer *w, uint32_t seq, size_t size) {
        traced_msg *root, *ev;
        char *s = malloc(size + 1);
        for (size_t k = 0; k < size; k++)
                s[k] = (char) ('a' + (seq + k) % 26);
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), 0);
        cr_assert_eq(traced_msg_append_varint(root, 8, 1000 + seq), 0);
        cr_assert_eq(traced_msg_begin_nested(root, 900, &ev), 0);
        cr_assert_eq(traced_msg_append_bytes(ev, 1, s, size), 0);
        cr_assert_eq(traced_msg_append_varint(ev, 2, seq), 0);
        cr_assert_eq(traced_msg_end_nested(ev), 0);
        cr_assert_eq(traced_trace_writer_end_packet(w), 0);
        free(s);
}

/* The canonical encoding of a packet (nested sizes written by the
 * streaming encoder are 4-byte redundant varints: equal, not identical). */
static uint8_t *canonical(const void *data, size_t len, size_t *ret_len) {
        Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, len, data);
        cr_assert_not_null(p, "a packet does not decode");
        *ret_len = perfetto__protos__trace_packet__get_packed_size(p);
        uint8_t *b = malloc(*ret_len + 1);
        perfetto__protos__trace_packet__pack(p, b);
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
        return b;
}

static void check_all(struct trace_buffer *tb, unsigned n, size_t size) {
        struct trace_buffer_packet pkt;
        struct trace_buffer_packet_info info;
        trace_buffer_set_final(tb, false);
        trace_buffer_begin_read(tb);
        for (unsigned seq = 0; seq < n; seq++) {
                cr_assert_eq(trace_buffer_read_next_packet(tb, &pkt, &info), 1, "packet %u missing", seq);
                struct pb_buf want = {};
                expected_packet(seq, size, &want);
                size_t gl, wl;
                uint8_t *flat = malloc(pkt.size ? pkt.size : 1);
                cr_assert_not_null(flat);
                cr_assert_eq(trace_buffer_packet_gather(&pkt, flat, pkt.size), pkt.size);
                uint8_t *got = canonical(flat, pkt.size, &gl);
                free(flat);
                uint8_t *exp = canonical(pb_buf_data(&want), pb_buf_len(&want), &wl);
                cr_assert_eq(gl, wl, "packet %u: %zu bytes, expected %zu", seq, gl, wl);
                cr_assert_arr_eq(got, exp, wl, "packet %u differs", seq);
                free(got);
                free(exp);
                cr_assert_not(info.previous_packet_dropped);
                pb_buf_done(&want);
        }
        cr_assert_eq(trace_buffer_read_next_packet(tb, &pkt, &info), 0, "more packets than written");
}

struct wcase {
        unsigned n;
        size_t size;
        bool stream;
};

static void run_case(const struct wcase *c) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        for (uint32_t seq = 0; seq < c->n; seq++) {
                if (c->stream)
                        write_streamed(w, seq, c->size);
                else {
                        struct pb_buf pkt = {};
                        expected_packet(seq, c->size, &pkt);
                        cr_assert_eq(traced_trace_writer_write_packet(w, pb_buf_data(&pkt), pb_buf_len(&pkt)), 0);
                        pb_buf_done(&pkt);
                }
        }
        (void) traced_trace_writer_flush(w); /* no service: the commit itself fails */
        if (c->stream && c->size > 1000)
                cr_assert_gt(p->n_patches, 0, "a message spanning chunks must be patched");
        struct trace_buffer *tb = service_side(p);
        check_all(tb, c->n, c->size);
        trace_buffer_free(tb);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer, whole_packets_small) {
        run_case(&(struct wcase) { 500, 10, false });
}
Test(trace_writer, whole_packets_spanning_chunks) {
        run_case(&(struct wcase) { 30, 3000, false });
}
Test(trace_writer, streamed_small) {
        run_case(&(struct wcase) { 500, 10, true });
}
Test(trace_writer, streamed_about_a_chunk) {
        run_case(&(struct wcase) { 60, 1000, true });
}
Test(trace_writer, streamed_spanning_chunks_are_patched) {
        run_case(&(struct wcase) { 10, 20000, true });
}

/* A packet of TestPayloads nested depth deep, each with a string of size
 * bytes and, once what it holds has ended, a number: with strings longer
 * than a chunk, every level's size field is in a chunk handed over before
 * the level ends. */
#define DEEP_MAX 48
static void deep_packet(TracePacket *pkt, uint32_t seq, unsigned depth, size_t size) {
        TestEvent ev;
        TestEvent_TestPayload levels[DEEP_MAX];
        char *s = malloc(size + 1);
        cr_assert(depth >= 1 && depth <= DEEP_MAX);
        for (size_t k = 0; k < size; k++)
                s[k] = (char) ('a' + (seq + k) % 26);
        TracePacket_set_timestamp(pkt, 1000 + seq);
        TracePacket_begin_for_testing(pkt, &ev);
        TestEvent_set_seq_value(&ev, seq);
        TestEvent_begin_payload(&ev, &levels[0]);
        for (unsigned d = 0; d < depth; d++) {
                TestEvent_TestPayload_add_str_n(&levels[d], s, size);
                TestEvent_TestPayload_set_remaining_nesting_depth(&levels[d], depth - d);
                if (d + 1 < depth)
                        TestEvent_TestPayload_begin_nested(&levels[d], &levels[d + 1]);
        }
        for (unsigned d = depth - 1; d > 0; d--) {
                TestEvent_TestPayload_add_repeated_ints(&levels[d], (int32_t) d);
                TestEvent_TestPayload_end_nested(&levels[d - 1], &levels[d]);
        }
        TestEvent_end_payload(&ev, &levels[0]);
        TracePacket_end_for_testing(pkt, &ev);
        free(s);
}

/* Reads packet seq back and compares it with what deep_packet writes. */
static void check_deep(struct trace_buffer *tb, uint32_t seq, unsigned depth, size_t size, bool after_loss) {
        struct trace_buffer_packet pkt;
        struct trace_buffer_packet_info info;
        cr_assert_eq(trace_buffer_read_next_packet(tb, &pkt, &info), 1, "packet %u missing", seq);
        uint8_t *flat = malloc(pkt.size ? pkt.size : 1);
        cr_assert_eq(trace_buffer_packet_gather(&pkt, flat, pkt.size), pkt.size);
        size_t gl, wl;
        uint8_t *got = canonical(flat, pkt.size, &gl);
        free(flat);
        struct pb_buf want = {};
        TracePacket w;
        TracePacket_init(&w, pb_buf_stream(&want));
        deep_packet(&w, seq, depth, size);
        if (after_loss)
                TracePacket_set_previous_packet_dropped(&w, TracePacket_DATA_LOSS_PRESENT | TracePacket_DATA_LOSS_SMB_FULL);
        cr_assert_eq(traced_pb_msg_finish(&w.msg), 0);
        uint8_t *exp = canonical(pb_buf_data(&want), pb_buf_len(&want), &wl);
        cr_assert_eq(gl, wl, "packet %u: %zu bytes, expected %zu", seq, gl, wl);
        cr_assert_arr_eq(got, exp, wl, "packet %u differs", seq);
        free(got);
        free(exp);
        pb_buf_done(&want);
}

/* Typed packets through traced_trace_writer_begin_pb_packet: nested
 * messages whose size fields are in chunks handed over come back
 * patched, whatever the nesting. */
Test(trace_writer, typed_packets_nested_across_chunks) {
        static const struct {
                unsigned depth;
                size_t size;
        } cases[] = { { 1, 10 }, { 5, 10 }, { 3, 300 }, { 20, 100 }, { 4, 5000 }, { 20, 1500 } };
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                sd_event *e;
                traced_producer *p = fake_producer(&e);
                traced_trace_writer *w;
                cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
                for (uint32_t seq = 0; seq < 5; seq++) {
                        TracePacket pkt;
                        cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), 0);
                        cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), -EBUSY);
                        deep_packet(&pkt, seq, cases[c].depth, cases[c].size);
                        int r = traced_trace_writer_end_pb_packet(w, &pkt.msg);
                        cr_assert_eq(r, 0, "case %zu, packet %u: %s", c, seq, strerror(-r));
                }
                (void) traced_trace_writer_flush(w);
                if (cases[c].size * cases[c].depth > 8192)
                        cr_assert_gt(p->n_patches, 0, "case %zu: no size field was patched", c);
                struct trace_buffer *tb = service_side(p);
                trace_buffer_set_final(tb, false);
                trace_buffer_begin_read(tb);
                for (uint32_t seq = 0; seq < 5; seq++)
                        check_deep(tb, seq, cases[c].depth, cases[c].size, false);
                struct trace_buffer_packet pkt;
                struct trace_buffer_packet_info info;
                cr_assert_eq(trace_buffer_read_next_packet(tb, &pkt, &info), 0, "more packets than written");
                trace_buffer_free(tb);
                traced_producer_free(p);
                sd_event_unref(e);
        }
}

/* More messages open across a chunk boundary than the writer has patch
 * slots: the packet is lost (and counted, and said in the next one), the
 * chunks it left waiting for patches get them, the next packets arrive. */
Test(trace_writer, typed_packet_too_deep_across_chunks_is_lost) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        TracePacket pkt;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), 0);
        deep_packet(&pkt, 0, 40, 3000);
        cr_assert_eq(traced_trace_writer_end_pb_packet(w, &pkt.msg), -E2BIG);
        cr_assert_eq(traced_trace_writer_dropped(w), 1);
        for (uint32_t seq = 1; seq < 3; seq++) {
                cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), 0);
                deep_packet(&pkt, seq, 3, 100);
                cr_assert_eq(traced_trace_writer_end_pb_packet(w, &pkt.msg), 0);
        }
        (void) traced_trace_writer_flush(w);
        struct trace_buffer *tb = service_side(p);
        trace_buffer_set_final(tb, false);
        trace_buffer_begin_read(tb);
        check_deep(tb, 1, 3, 100, true);
        check_deep(tb, 2, 3, 100, false);
        struct trace_buffer_packet tp;
        struct trace_buffer_packet_info info;
        cr_assert_eq(trace_buffer_read_next_packet(tb, &tp, &info), 0, "the lost packet was read");
        trace_buffer_free(tb);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer, full_buffer_drops_and_counts) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        /* No service frees chunks: the 256 KiB SMB fills up. */
        unsigned ok = 0, dropped = 0;
        for (uint32_t seq = 0; seq < 400; seq++) {
                struct pb_buf pkt = {};
                expected_packet(seq, 1000, &pkt);
                if (traced_trace_writer_write_packet(w, pb_buf_data(&pkt), pb_buf_len(&pkt)) == 0)
                        ok++;
                else
                        dropped++;
                pb_buf_done(&pkt);
        }
        cr_assert_gt(ok, 100);
        cr_assert_gt(dropped, 0);
        cr_assert_eq(traced_trace_writer_dropped(w), dropped);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer, misuse_is_refused) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        traced_msg *root, *a, *b;
        cr_assert_eq(traced_producer_new_writer(p, 99, &w), -ENOENT, "unknown instance");
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), 0);
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), -EINVAL, "packets do not nest");
        cr_assert_eq(traced_msg_begin_nested(root, 1, &a), 0);
        cr_assert_eq(traced_msg_append_varint(root, 2, 1), -EINVAL, "only the innermost message is writable");
        cr_assert_eq(traced_msg_begin_nested(a, 3, &b), 0);
        /* end_packet closes what is still open */
        cr_assert_eq(traced_trace_writer_end_packet(w), 0);
        cr_assert_eq(traced_trace_writer_end_packet(w), -EINVAL);
        traced_producer_free(p);
        sd_event_unref(e);
}

/* Fills the SMB with complete chunks through a dropping writer. */
static void fill_smb(traced_producer *p) {
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        for (uint32_t seq = 0;; seq++) {
                struct pb_buf pkt = {};
                expected_packet(seq, 1000, &pkt);
                int r = traced_trace_writer_write_packet(w, pb_buf_data(&pkt), pb_buf_len(&pkt));
                pb_buf_done(&pkt);
                if (r == -ENOBUFS)
                        break;
                cr_assert_eq(r, 0);
                cr_assert_lt(seq, 10000);
        }
        (void) traced_trace_writer_flush(w);
}

struct freer {
        traced_producer *p;
        atomic_bool freed;
};

/* Plays the service: after a while, takes one complete chunk. */
static void *free_one_chunk_later(void *arg) {
        struct freer *f = arg;
        struct timespec ts = { .tv_nsec = 100 * 1000000L };
        nanosleep(&ts, NULL);
        for (size_t page = 0; page < f->p->abi.num_pages && !atomic_load(&f->freed); page++) {
                uint32_t bm = smb_page_bitmap(&f->p->abi, page);
                for (uint32_t i = 0; i < smb_bitmap_num_chunks(bm); i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_reading(&f->p->abi, page, i);
                        if (smb_chunk_is_valid(&c) && smb_release_chunk_as_free(&f->p->abi, &c) >= 0) {
                                atomic_store(&f->freed, true);
                                break;
                        }
                }
        }
        return NULL;
}

static int write_one(traced_trace_writer *w) {
        struct pb_buf pkt = {};
        expected_packet(1, 100, &pkt);
        int r = traced_trace_writer_write_packet(w, pb_buf_data(&pkt), pb_buf_len(&pkt));
        pb_buf_done(&pkt);
        return r;
}

/* Complete or being-written chunks of the SMB. */
static unsigned chunks_in_use(traced_producer *p) {
        unsigned n = 0;
        for (size_t page = 0; page < p->abi.num_pages; page++) {
                uint32_t bm = smb_page_bitmap(&p->abi, page);
                for (uint32_t i = 0; i < smb_bitmap_num_chunks(bm); i++)
                        n += smb_bitmap_chunk_state(bm, i) != SMB_CHUNK_FREE;
        }
        return n;
}

Test(trace_writer, oversize_packets_are_refused_whole) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        /* Dropping on a full buffer, the writer carries what the 256 KiB
         * SMB of 4 KiB pages holds at once: 64 pages less 20 bytes each. */
        size_t max = SMB_SIZE - (SMB_SIZE / 4096) * 20;
        cr_assert_eq(writer_max_packet_size(w), max);
        uint8_t *big = calloc(1, SMB_SIZE);
        cr_assert_eq(traced_trace_writer_write_packet(w, big, max + 1), -EMSGSIZE);
        cr_assert_eq(traced_trace_writer_write_packet(w, big, TRACED_MAX_PACKET_SIZE + 1), -EMSGSIZE);
        cr_assert_eq(chunks_in_use(p), 0, "a refused packet took chunks");
        cr_assert_eq(traced_trace_writer_dropped(w), 2);
        /* The next packet goes in, saying that packets were lost. */
        cr_assert_eq(write_one(w), 0);
        cr_assert_eq(traced_trace_writer_flush(w), -ENOTCONN); /* no service: the commit itself fails */
        struct trace_buffer *tb = service_side(p);
        struct trace_buffer_packet pk;
        struct trace_buffer_packet_info info;
        trace_buffer_set_final(tb, false);
        trace_buffer_begin_read(tb);
        cr_assert_eq(trace_buffer_read_next_packet(tb, &pk, &info), 1);
        uint8_t *flat = malloc(pk.size ? pk.size : 1);
        cr_assert_eq(trace_buffer_packet_gather(&pk, flat, pk.size), pk.size);
        Perfetto__Protos__TracePacket *tp = perfetto__protos__trace_packet__unpack(NULL, pk.size, flat);
        cr_assert_not_null(tp);
        cr_assert(tp->has_previous_packet_dropped && tp->previous_packet_dropped);
        cr_assert_eq(tp->for_testing->seq_value, 1);
        perfetto__protos__trace_packet__free_unpacked(tp, NULL);
        free(flat);
        cr_assert_eq(trace_buffer_read_next_packet(tb, &pk, &info), 0, "more than the one small packet");
        trace_buffer_free(tb);

        /* A stalling writer carries up to the service's bound: a packet
         * over the SMB is tried (and dropped here, where nobody frees
         * chunks), one over TRACED_MAX_PACKET_SIZE is refused at once. */
        p->stall_limit_usec = 20000;
        p->instances->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP;
        traced_trace_writer *s;
        cr_assert_eq(traced_producer_new_writer(p, 7, &s), 0);
        cr_assert_eq(writer_max_packet_size(s), TRACED_MAX_PACKET_SIZE);
        cr_assert_eq(traced_trace_writer_write_packet(s, big, TRACED_MAX_PACKET_SIZE + 1), -EMSGSIZE);
        cr_assert_eq(traced_trace_writer_write_packet(s, big, max + 1), -ENOBUFS);
        free(big);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer, full_buffer_stall_waits_for_a_free_chunk) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        fill_smb(p);
        traced_trace_writer *drop, *stall;
        cr_assert_eq(traced_producer_new_writer(p, 7, &drop), 0);
        p->instances->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(traced_producer_new_writer(p, 7, &stall), 0);
        /* Dropping gives up at once. */
        cr_assert_eq(write_one(drop), -ENOBUFS);
        /* Stalling waits until the "service" frees a chunk. */
        struct freer f = { .p = p };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, free_one_chunk_later, &f), 0);
        cr_assert_eq(write_one(stall), 0, "the stalling writer did not get the freed chunk");
        pthread_join(t, NULL);
        cr_assert(atomic_load(&f.freed));
        cr_assert_eq(traced_trace_writer_dropped(stall), 0);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer, full_buffer_stall_then_drop_gives_up) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        p->stall_limit_usec = 200000;
        fill_smb(p);
        p->instances->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP;
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        cr_assert_eq(write_one(w), -ENOBUFS);
        cr_assert_eq(traced_trace_writer_dropped(w), 1);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer, full_buffer_stall_then_abort_aborts, .signal = SIGABRT) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        p->stall_limit_usec = 100000;
        fill_smb(p);
        p->instances->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT;
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        (void) write_one(w);
}

Test(trace_writer, writers_of_a_lost_connection_drop) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        cr_assert_eq(write_one(w), 0);
        /* What the library does when the connection ends. */
        atomic_store(&p->ready, false);
        atomic_fetch_add(&p->generation, 1);
        cr_assert_eq(write_one(w), -ENOTCONN);
        traced_msg *root;
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), -ENOTCONN);
        cr_assert_eq(traced_trace_writer_dropped(w), 2);
        /* Even once a new connection is up, the old writer stays out. */
        atomic_store(&p->ready, true);
        cr_assert_eq(write_one(w), -ENOTCONN);
        traced_trace_writer *fresh;
        cr_assert_eq(traced_producer_new_writer(p, 7, &fresh), 0);
        cr_assert_eq(write_one(fresh), 0);
        traced_producer_free(p);
        sd_event_unref(e);
}

/* ---- giving up on a packet -------------------------------------------- */

/* Chunks as a service took them out of the SMB. */
struct taken {
        uint16_t writer_id;
        uint32_t chunk_id;
        uint16_t num_fragments;
        uint8_t flags;
        size_t size;
        uint8_t payload[SMB_MAX_PAGE_SIZE];
};

struct strict {
        struct taken **c;
        size_t n, cap;
        unsigned patches_failed;
};

static void strict_free(struct strict *st) {
        for (size_t i = 0; i < st->n; i++)
                free(st->c[i]);
        free(st->c);
}

/* Plays the service: copies and frees every complete chunk, then applies
 * the queued patches. */
static void strict_take(traced_producer *p, struct strict *st) {
        for (size_t page = 0; page < p->abi.num_pages; page++) {
                uint32_t bm = smb_page_bitmap(&p->abi, page);
                for (uint32_t i = 0; i < smb_bitmap_num_chunks(bm); i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, page, i);
                        if (!smb_chunk_is_valid(&c))
                                continue;
                        struct smb_chunk_header *h = smb_chunk_header(&c);
                        struct taken *t = calloc(1, sizeof(*t));
                        uint16_t packets = atomic_load(&h->packets);
                        t->writer_id = atomic_load(&h->writer_id);
                        t->chunk_id = atomic_load(&h->chunk_id);
                        t->num_fragments = smb_packets_count(packets);
                        t->flags = smb_packets_flags(packets);
                        t->size = smb_chunk_payload_size(&c);
                        memcpy(t->payload, smb_chunk_payload(&c), t->size);
                        if (st->n == st->cap) {
                                st->cap = st->cap ? st->cap * 2 : 64;
                                st->c = realloc(st->c, st->cap * sizeof(*st->c));
                        }
                        st->c[st->n++] = t;
                        cr_assert_geq(smb_release_chunk_as_free(&p->abi, &c), 0);
                }
        }
        for (size_t i = 0; i < p->n_patches; i++) {
                const struct pending_patch *pt = &p->patches[i];
                struct taken *t = NULL;
                for (size_t k = 0; k < st->n && !t; k++)
                        if (st->c[k]->writer_id == pt->writer_id && st->c[k]->chunk_id == pt->chunk_id)
                                t = st->c[k];
                if (!t || pt->offset + 4 > t->size) {
                        st->patches_failed++;
                        continue;
                }
                memcpy(t->payload + pt->offset, pt->data, 4);
                if (!pt->more)
                        t->flags &= (uint8_t) ~SMB_CHUNK_NEEDS_PATCHING;
        }
        p->n_patches = 0;
        p->n_pending = 0; /* no connection: nothing was sent */
}

static int taken_cmp(const void *a, const void *b) {
        const struct taken *x = *(struct taken *const *) a, *y = *(struct taken *const *) b;
        return x->chunk_id < y->chunk_id ? -1 : x->chunk_id > y->chunk_id;
}

/* Whether a chunk says its last packet goes on in a chunk that is not
 * there (or that does not say it continues one). */
static bool dangling_continuation(const struct strict *st, uint16_t writer_id, uint32_t *ret_chunk) {
        for (size_t i = 0; i < st->n; i++) {
                const struct taken *t = st->c[i];
                if (t->writer_id != writer_id || !(t->flags & SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT))
                        continue;
                bool next = false;
                for (size_t k = 0; k < st->n && !next; k++)
                        next = st->c[k]->writer_id == writer_id && st->c[k]->chunk_id == t->chunk_id + 1 &&
                               (st->c[k]->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV);
                if (!next) {
                        *ret_chunk = t->chunk_id;
                        return true;
                }
        }
        return false;
}

static uint32_t frag_size(const struct taken *t, size_t off) {
        cr_assert_leq(off + 4, t->size, "chunk %u: fragment header outside the chunk", t->chunk_id);
        const uint8_t *b = t->payload + off;
        return (uint32_t) (b[0] & 0x7f) | (uint32_t) (b[1] & 0x7f) << 7 | (uint32_t) (b[2] & 0x7f) << 14 |
               (uint32_t) (b[3] & 0x7f) << 21;
}

struct strict_result {
        uint8_t **pkts;
        size_t *lens;
        size_t n;
        bool stalled;
        uint32_t stalled_at;
        unsigned drop_markers;
};

static void result_free(struct strict_result *r) {
        for (size_t i = 0; i < r->n; i++)
                free(r->pkts[i]);
        free(r->pkts);
        free(r->lens);
}

static void emit(struct strict_result *r, const uint8_t *data, size_t len) {
        r->pkts = realloc(r->pkts, (r->n + 1) * sizeof(*r->pkts));
        r->lens = realloc(r->lens, (r->n + 1) * sizeof(*r->lens));
        r->pkts[r->n] = malloc(len + 1);
        memcpy(r->pkts[r->n], data, len);
        r->lens[r->n++] = len;
}

/* Reads one writer's sequence the way upstream Perfetto's trace buffer
 * does, which is stricter than traced's: in chunk id order, stopping for
 * good at a missing chunk id, a chunk still waiting for patches, or a
 * fragment chain whose next chunk does not continue it. A fragment with
 * the drop-packet size discards the packet and the rest of its chunk; a
 * fragment that does not fit its chunk is an ABI violation (the test
 * fails). */
static struct strict_result strict_read(struct strict *st, uint16_t writer_id) {
        struct strict_result r = {};
        struct taken **ch = calloc(st->n + 1, sizeof(*ch));
        size_t n = 0;
        for (size_t i = 0; i < st->n; i++)
                if (st->c[i]->writer_id == writer_id)
                        ch[n++] = st->c[i];
        qsort(ch, n, sizeof(*ch), taken_cmp);

        uint8_t *buf = NULL;
        size_t blen = 0;
        bool assembling = false;
        for (size_t i = 0; i < n && !r.stalled; i++) {
                const struct taken *t = ch[i];
                if ((i > 0 && t->chunk_id != ch[i - 1]->chunk_id + 1) || (t->flags & SMB_CHUNK_NEEDS_PATCHING)) {
                        r.stalled = true;
                        r.stalled_at = t->chunk_id;
                        break;
                }
                size_t off = 0;
                for (uint16_t f = 0; f < t->num_fragments; f++) {
                        uint32_t size = frag_size(t, off);
                        bool cont_prev = f == 0 && (t->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV);
                        bool cont_next = f + 1 == t->num_fragments &&
                                         (t->flags & SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT);
                        if (assembling && !cont_prev) {
                                r.stalled = true; /* the chain does not go on where it must */
                                r.stalled_at = t->chunk_id;
                                break;
                        }
                        if (size == SMB_PACKET_SIZE_DROP_PACKET) {
                                r.drop_markers++;
                                assembling = false;
                                break;
                        }
                        cr_assert_leq(off + 4 + size, t->size, "chunk %u fragment %u: size %u past the chunk",
                                      t->chunk_id, f, size);
                        const uint8_t *data = t->payload + off + 4;
                        off += 4 + size;
                        if (cont_prev && !assembling)
                                continue; /* the rest of a packet whose start is gone */
                        if (!cont_prev)
                                blen = 0;
                        buf = realloc(buf, blen + size + 1);
                        memcpy(buf + blen, data, size);
                        blen += size;
                        assembling = cont_next;
                        if (!assembling && blen > 0)
                                emit(&r, buf, blen);
                }
        }
        if (assembling && !r.stalled) {
                r.stalled = true;
                r.stalled_at = n ? ch[n - 1]->chunk_id + 1 : 0;
        }
        free(buf);
        free(ch);
        return r;
}

/* Checks that the packets read are, in order, exactly those the writer
 * accepted (seq numbers in ok[]), and that the first packet after each loss
 * says packets were dropped. */
static void check_strict(const struct strict_result *r, const uint32_t *ok, const bool *after_loss, size_t n_ok) {
        cr_assert_not(r->stalled, "the sequence stalls at chunk %u: %zu of %zu packets read", r->stalled_at, r->n,
                      n_ok);
        cr_assert_eq(r->n, n_ok, "%zu packets read, %zu written", r->n, n_ok);
        for (size_t i = 0; i < n_ok; i++) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, r->lens[i], r->pkts[i]);
                cr_assert_not_null(p, "packet %zu does not decode", i);
                cr_assert(p->has_timestamp);
                cr_assert_eq(p->timestamp, 1000 + ok[i], "packet %zu is seq %" PRIu64 ", expected %u", i,
                             p->timestamp - 1000, ok[i]);
                if (after_loss[i]) {
                        cr_assert(p->has_previous_packet_dropped, "seq %u follows a loss but does not say so", ok[i]);
                        cr_assert_eq(p->previous_packet_dropped, 257u);
                } else
                        cr_assert_not(p->has_previous_packet_dropped && p->previous_packet_dropped,
                                      "seq %u says packets were lost", ok[i]);
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
}

struct drop_run {
        uint32_t *ok;
        bool *after_loss;
        size_t n_ok;
        bool lost;
        unsigned dropped;
};

static void drop_run_write(struct drop_run *d, traced_trace_writer *w, uint32_t seq, size_t size, bool stream) {
        int r;
        if (stream) {
                traced_msg *root, *ev;
                char *s = malloc(size + 1);
                for (size_t k = 0; k < size; k++)
                        s[k] = (char) ('a' + (seq + k) % 26);
                r = traced_trace_writer_begin_packet(w, &root);
                if (r == 0) {
                        (void) traced_msg_append_varint(root, 8, 1000 + seq);
                        if (traced_msg_begin_nested(root, 900, &ev) == 0) {
                                (void) traced_msg_append_bytes(ev, 1, s, size);
                                (void) traced_msg_append_varint(ev, 2, seq);
                                (void) traced_msg_end_nested(ev);
                        }
                        r = traced_trace_writer_end_packet(w);
                }
                free(s);
        } else {
                struct pb_buf pkt = {};
                expected_packet(seq, size, &pkt);
                r = traced_trace_writer_write_packet(w, pb_buf_data(&pkt), pb_buf_len(&pkt));
                pb_buf_done(&pkt);
        }
        if (r == 0) {
                d->ok = realloc(d->ok, (d->n_ok + 1) * sizeof(*d->ok));
                d->after_loss = realloc(d->after_loss, (d->n_ok + 1) * sizeof(*d->after_loss));
                d->ok[d->n_ok] = seq;
                d->after_loss[d->n_ok++] = d->lost;
                d->lost = false;
        } else {
                cr_assert_eq(r, -ENOBUFS, "seq %u: %s", seq, strerror(-r));
                d->lost = true;
                d->dropped++;
        }
}

/* Writes packets of size bytes into an SMB nobody empties until the
 * writer drops, goes on dropping for a while, then the service takes the
 * chunks and the writer writes more. A strict reader must read every
 * packet the writer accepted, before and after the loss. */
static void drop_mid_fragment(size_t size, bool stream, uint32_t policy) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        p->stall_limit_usec = 50000;
        p->instances->exhausted_policy = policy;
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        struct strict st = {};
        struct drop_run d = {};
        uint32_t seq = 0;

        for (unsigned round = 0; round < 3; round++) {
                unsigned dropped_before = d.dropped;
                while (d.dropped < dropped_before + 3) {
                        drop_run_write(&d, w, seq++, size, stream);
                        cr_assert_lt(seq, 100000);
                }
                strict_take(p, &st);
                for (unsigned k = 0; k < 20; k++)
                        drop_run_write(&d, w, seq++, size, stream);
        }
        cr_assert_eq(traced_trace_writer_dropped(w), d.dropped);
        cr_assert_eq(traced_trace_writer_flush(w), -ENOTCONN); /* no service: the commit itself fails */
        strict_take(p, &st);
        cr_assert_eq(st.patches_failed, 0);

        uint32_t chunk;
        cr_assert_not(dangling_continuation(&st, w->writer_id, &chunk),
                      "chunk %u says its last packet continues in a chunk that never comes", chunk);
        struct strict_result r = strict_read(&st, w->writer_id);
        cr_assert_gt(r.drop_markers, 0, "no packet was given up mid-fragment: the test proves nothing");
        check_strict(&r, d.ok, d.after_loss, d.n_ok);
        result_free(&r);
        strict_free(&st);
        free(d.ok);
        free(d.after_loss);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer_drop, whole_packets_dropped_mid_fragment) {
        drop_mid_fragment(3000, false, TRACED_BUFFER_EXHAUSTED_DROP);
}
Test(trace_writer_drop, large_whole_packets_dropped_mid_fragment) {
        drop_mid_fragment(20000, false, TRACED_BUFFER_EXHAUSTED_DROP);
}
Test(trace_writer_drop, streamed_packets_dropped_mid_fragment) {
        drop_mid_fragment(3000, true, TRACED_BUFFER_EXHAUSTED_DROP);
}
Test(trace_writer_drop, large_streamed_packets_dropped_mid_fragment) {
        drop_mid_fragment(20000, true, TRACED_BUFFER_EXHAUSTED_DROP);
}
Test(trace_writer_drop, stall_timeout_mid_fragment) {
        drop_mid_fragment(3000, false, TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP);
}
Test(trace_writer_drop, streamed_stall_timeout_mid_fragment) {
        drop_mid_fragment(20000, true, TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP);
}

Test(trace_writer_drop, freed_mid_packet) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        uint16_t id = w->writer_id;
        for (uint32_t seq = 0; seq < 5; seq++)
                write_streamed(w, seq, 100);
        /* A packet whose nested message spans chunks, never ended. */
        traced_msg *root, *ev;
        char big[5000];
        memset(big, 'x', sizeof(big));
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), 0);
        cr_assert_eq(traced_msg_append_varint(root, 8, 2000), 0);
        cr_assert_eq(traced_msg_begin_nested(root, 900, &ev), 0);
        cr_assert_eq(traced_msg_append_bytes(ev, 1, big, sizeof(big)), 0);
        traced_trace_writer_free(w);

        struct strict st = {};
        strict_take(p, &st);
        cr_assert_eq(st.patches_failed, 0);
        uint32_t chunk;
        cr_assert_not(dangling_continuation(&st, id, &chunk), "chunk %u continues into nothing", chunk);
        struct strict_result r = strict_read(&st, id);
        cr_assert_not(r.stalled, "the sequence stalls at chunk %u", r.stalled_at);
        cr_assert_eq(r.n, 5, "%zu packets read", r.n);
        cr_assert_eq(r.drop_markers, 1, "the abandoned packet is not marked dropped");
        result_free(&r);
        strict_free(&st);
        traced_producer_free(p);
        sd_event_unref(e);
}

Test(trace_writer_drop, flush_mid_packet_is_refused) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        uint16_t id = w->writer_id;
        traced_msg *root;
        cr_assert_eq(traced_trace_writer_begin_packet(w, &root), 0);
        cr_assert_eq(traced_msg_append_varint(root, 8, 1000), 0);
        cr_assert_eq(traced_trace_writer_flush(w), -EBUSY);
        cr_assert_eq(traced_trace_writer_write_packet(w, "", 0), -EBUSY, "a whole packet inside a packet");
        struct strict st = {};
        strict_take(p, &st);
        cr_assert_eq(st.n, 0, "a chunk with a packet half written was handed over");
        cr_assert_eq(traced_trace_writer_end_packet(w), 0);
        (void) traced_trace_writer_flush(w);
        strict_take(p, &st);
        struct strict_result r = strict_read(&st, id);
        cr_assert_eq(r.n, 1);
        result_free(&r);
        strict_free(&st);
        traced_trace_writer_free(w);
        traced_producer_free(p);
        sd_event_unref(e);
}

/* ---- the instance ended ------------------------------------------------ */

/* Once the instance ended (its stop acknowledged), a write is refused
 * with -ESHUTDOWN, not reported written: the session holds nothing
 * written now. */
Test(trace_writer_end, writes_after_the_instance_ended_are_refused) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w, *other;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        cr_assert_eq(write_one(w), 0);
        /* A streamed packet begun before the end and ended after it. */
        TracePacket pkt;
        cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), 0);
        TracePacket_set_timestamp(&pkt, 1);
        /* What the library does once the service's stop is acknowledged. */
        producer_end_instance_writers(p, 7);
        cr_assert_eq(traced_trace_writer_end_pb_packet(w, &pkt.msg), -ESHUTDOWN);
        cr_assert_eq(write_one(w), -ESHUTDOWN);
        cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), -ESHUTDOWN);
        cr_assert_eq(traced_trace_writer_dropped(w), 3);
        /* Writers of other instances go on. */
        struct producer_instance *i = calloc(1, sizeof(*i));
        i->id = 8;
        i->target_buffer = 1;
        i->data_source = strdup("test");
        i->next = p->instances;
        p->instances = i;
        cr_assert_eq(traced_producer_new_writer(p, 8, &other), 0);
        cr_assert_eq(write_one(other), 0);
        traced_producer_free(p);
        sd_event_unref(e);
}

struct ender {
        traced_producer *p;
        atomic_bool ended;
};

/* Plays the loop thread: after a while, the instance's stop. */
static void *end_instance_later(void *arg) {
        struct ender *x = arg;
        struct timespec ts = { .tv_nsec = 100 * 1000000L };
        nanosleep(&ts, NULL);
        atomic_store(&x->ended, true);
        producer_end_instance_writers(x->p, 7);
        return NULL;
}

/* A writer waiting for room (STALL_THEN_DROP, nobody frees chunks) when
 * its instance ends wakes and says -ESHUTDOWN, long before its 5 s. */
Test(trace_writer_end, a_stalled_writer_wakes_when_its_instance_ends) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        p->stall_limit_usec = 60u * 1000000u; /* the end, not the bound, must end the wait */
        fill_smb(p);
        p->instances->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP;
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        struct ender x = { .p = p };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, end_instance_later, &x), 0);
        cr_assert_eq(write_one(w), -ESHUTDOWN);
        cr_assert(atomic_load(&x.ended), "the write ended before the instance did");
        pthread_join(t, NULL);
        cr_assert_eq(traced_trace_writer_dropped(w), 1);
        traced_producer_free(p);
        sd_event_unref(e);
}

/* ---- a streamed packet past the limit ---------------------------------- */

struct seen_chunk {
        uint16_t writer_id;
        uint32_t chunk_id;
        uint16_t packets;
        struct smb_chunk c;
};

static int by_chunk_id(const void *a, const void *b) {
        const struct seen_chunk *x = a, *y = b;
        return x->chunk_id < y->chunk_id ? -1 : x->chunk_id > y->chunk_id;
}

/* What traced does on each CommitData: the complete chunks into the trace
 * buffer in their writer's order, freed in the SMB, then the patches. */
static void commit_into(traced_producer *p, struct trace_buffer *tb) {
        static struct seen_chunk seen[4096];
        size_t n = 0;
        for (size_t page = 0; page < p->abi.num_pages; page++) {
                uint32_t bm = smb_page_bitmap(&p->abi, page);
                for (uint32_t i = 0; i < smb_bitmap_num_chunks(bm); i++) {
                        if (smb_bitmap_chunk_state(bm, i) != SMB_CHUNK_COMPLETE)
                                continue;
                        struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, page, i);
                        if (!smb_chunk_is_valid(&c))
                                continue;
                        struct smb_chunk_header *h = smb_chunk_header(&c);
                        cr_assert_lt(n, sizeof(seen) / sizeof(seen[0]));
                        seen[n++] = (struct seen_chunk) { .writer_id = atomic_load(&h->writer_id),
                                                          .chunk_id = atomic_load(&h->chunk_id),
                                                          .packets = atomic_load(&h->packets),
                                                          .c = c };
                }
        }
        qsort(seen, n, sizeof(seen[0]), by_chunk_id);
        for (size_t k = 0; k < n; k++) {
                struct smb_chunk c = seen[k].c;
                cr_assert_eq(trace_buffer_copy_chunk(tb, &(struct trace_buffer_chunk) {
                                                                 .producer_id = 1,
                                                                 .writer_id = seen[k].writer_id,
                                                                 .chunk_id = seen[k].chunk_id,
                                                                 .num_fragments = smb_packets_count(seen[k].packets),
                                                                 .flags = smb_packets_flags(seen[k].packets),
                                                                 .complete = true,
                                                                 .payload = smb_chunk_payload(&c),
                                                                 .payload_size = smb_chunk_payload_size(&c),
                                                         }),
                             0);
                cr_assert_geq(smb_release_chunk_as_free(&p->abi, &c), 0);
        }
        for (size_t i = 0; i < p->n_patches; i++) {
                struct trace_buffer_patch tp = { .offset = p->patches[i].offset };
                memcpy(tp.data, p->patches[i].data, 4);
                cr_assert_eq(trace_buffer_try_patch(tb, 1, p->patches[i].writer_id, p->patches[i].chunk_id, &tp, 1,
                                                    p->patches[i].more),
                             0, "patch %zu of chunk %u did not apply", i, p->patches[i].chunk_id);
        }
        p->n_patches = 0;
}

/* A packet streamed a piece at a time grows past what its dropping writer
 * carries (the SMB's size, 256 KiB: 10 MB were meant), while the service
 * takes its chunks as they fill, into a session buffer of 384 KiB (discard
 * when full): the writer gives it up (-EMSGSIZE); the service drops what
 * had arrived of it as soon as the end that gives it up does, rather than
 * keep it to the end of the session, and counts the loss; the next
 * packets go in, all 200 KB of them, the first saying that one was lost;
 * the trace holds nothing of the big one. */
Test(trace_writer_end, a_streamed_packet_given_up_past_the_limit_costs_the_session_buffer_nothing) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        struct trace_buffer *tb;
        cr_assert_eq(trace_buffer_new(384u * 1024u, TRACE_BUFFER_DISCARD, &tb), 0);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        cr_assert_eq(write_one(w), 0);

        static char piece[16 * 1024];
        memset(piece, 'x', sizeof(piece));
        TracePacket pkt;
        TestEvent ev;
        TestEvent_TestPayload pl;
        cr_assert_eq(traced_trace_writer_begin_pb_packet(w, &pkt.msg), 0);
        TracePacket_begin_for_testing(&pkt, &ev);
        TestEvent_begin_payload(&ev, &pl);
        size_t streamed = 0;
        while (streamed < 10u * 1024u * 1024u && pkt.msg.stream->error == 0) {
                TestEvent_TestPayload_add_str_n(&pl, piece, sizeof(piece));
                streamed += sizeof(piece);
                commit_into(p, tb);
        }
        TestEvent_end_payload(&ev, &pl);
        TracePacket_end_for_testing(&pkt, &ev);
        cr_assert_eq(traced_trace_writer_end_pb_packet(w, &pkt.msg), -EMSGSIZE);
        cr_assert_lt(streamed, 10u * 1024u * 1024u, "10 MB went through a 256 KiB writer");
        cr_assert_gt(streamed, SMB_SIZE / 2);
        commit_into(p, tb);
        /* Only what the packet starts in and ends in is left of it. */
        cr_assert_lt(trace_buffer_used_bytes(tb), 8u * 1024u, "the given-up packet still takes %zu bytes",
                     trace_buffer_used_bytes(tb));

        for (uint32_t seq = 0; seq < 200; seq++) {
                struct pb_buf b = {};
                expected_packet(seq, 1000, &b);
                cr_assert_eq(traced_trace_writer_write_packet(w, pb_buf_data(&b), pb_buf_len(&b)), 0);
                pb_buf_done(&b);
                commit_into(p, tb);
        }
        (void) traced_trace_writer_flush(w);
        commit_into(p, tb);
        struct trace_buffer_packet pk;
        struct trace_buffer_packet_info info;
        trace_buffer_set_final(tb, true);
        trace_buffer_begin_read(tb);
        for (unsigned k = 0; k < 201; k++) {
                cr_assert_eq(trace_buffer_read_next_packet(tb, &pk, &info), 1, "packet %u is missing", k);
                uint8_t *flat = malloc(pk.size ? pk.size : 1);
                cr_assert_eq(trace_buffer_packet_gather(&pk, flat, pk.size), pk.size);
                Perfetto__Protos__TracePacket *tp = perfetto__protos__trace_packet__unpack(NULL, pk.size, flat);
                cr_assert_not_null(tp, "packet %u does not decode: a fragment of the big one?", k);
                cr_assert(tp->for_testing && !tp->for_testing->payload &&
                                  tp->for_testing->seq_value == (k == 0 ? 1 : k - 1),
                          "packet %u is not the small one written then", k);
                cr_assert_eq(info.previous_packet_dropped, k == 1, "packet %u: previous_packet_dropped %d", k,
                             info.previous_packet_dropped);
                perfetto__protos__trace_packet__free_unpacked(tp, NULL);
                free(flat);
        }
        cr_assert_eq(trace_buffer_read_next_packet(tb, &pk, &info), 0, "more than the small packets");
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_eq(st->trace_writer_packet_loss, 1, "the loss is not counted");
        cr_assert_eq(st->chunks_discarded, 0, "the session buffer refused %llu chunks",
                     (unsigned long long) st->chunks_discarded);
        cr_assert_eq(st->patches_failed, 0);
        cr_assert_eq(st->abi_violations, 0);
        trace_buffer_free(tb);
        traced_producer_free(p);
        sd_event_unref(e);
}

/* A writer that writes a few chunks at a time, the service taking them
 * between bursts (an idle plugin host draining each second): the chunks
 * it gets are the first free ones, so it keeps using the same pages at
 * the start of the SMB instead of walking through all of them, each one
 * it touches resident in both processes for the rest of the session. 200
 * bursts of about 5 chunks of 1 KiB in an SMB of 64 pages of 4: at most
 * 2 pages ever hold a chunk (a search that resumed where the last ended
 * went on to the next page at each burst, and touched all 64); every
 * packet arrives. */
Test(trace_writer, bursts_reuse_the_first_pages) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        struct trace_buffer *tb;
        cr_assert_eq(trace_buffer_new(16u << 20, TRACE_BUFFER_RING_BUFFER, &tb), 0);
        uint32_t seq = 0;
        for (int burst = 0; burst < 200; burst++) {
                for (int k = 0; k < 8; k++, seq++) {
                        struct pb_buf pkt = {};
                        expected_packet(seq, 600, &pkt);
                        cr_assert_eq(traced_trace_writer_write_packet(w, pb_buf_data(&pkt), pb_buf_len(&pkt)), 0);
                        pb_buf_done(&pkt);
                }
                (void) traced_trace_writer_flush(w);
                commit_into(p, tb);
        }
        size_t used = 0;
        for (size_t page = 0; page < p->abi.num_pages; page++) {
                const uint8_t *b = p->abi.start + page * p->abi.page_size;
                bool touched = false;
                /* Past the page header: a chunk's header and payload. */
                for (size_t k = 8; k < p->abi.page_size && !touched; k++)
                        touched = b[k] != 0;
                used += touched;
        }
        cr_assert_leq(used, 2, "%zu of %zu pages held chunks", used, p->abi.num_pages);
        check_all(tb, seq, 600);
        trace_buffer_free(tb);
        traced_producer_free(p);
        sd_event_unref(e);
}
