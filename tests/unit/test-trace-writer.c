/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's writers without a service: packets are written into
 * an in-memory SMB, then the chunks and the queued patches are handed to
 * the service's trace buffer exactly as traced would; every packet must
 * come back byte for byte. Covers chunk fragmentation, the zero-copy
 * encoder's size fields (in place and patched), and loss on a full SMB. */

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "basic/pbw.h"
#include "producer-internal.h"
#include "trace-buffer.h"

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

/* What traced does with the SMB: take every complete chunk, then apply
 * the patches, then read. */
static struct trace_buffer *service_side(traced_producer *p) {
        struct trace_buffer *tb;
        cr_assert_eq(trace_buffer_new(16u << 20, TRACE_BUFFER_RING_BUFFER, &tb), 0);
        for (size_t page = 0; page < p->abi.num_pages; page++) {
                uint32_t bm = smb_page_bitmap(&p->abi, page);
                for (uint32_t i = 0; i < smb_bitmap_num_chunks(bm); i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, page, i);
                        if (!smb_chunk_is_valid(&c))
                                continue;
                        struct smb_chunk_header *h = smb_chunk_header(&c);
                        uint16_t packets = atomic_load(&h->packets);
                        cr_assert_eq(trace_buffer_copy_chunk(tb, &(struct trace_buffer_chunk) {
                                                                         .producer_id = 1,
                                                                         .writer_id = atomic_load(&h->writer_id),
                                                                         .chunk_id = atomic_load(&h->chunk_id),
                                                                         .num_fragments = smb_packets_count(packets),
                                                                         .flags = smb_packets_flags(packets),
                                                                         .complete = true,
                                                                         .payload = smb_chunk_payload(&c),
                                                                         .payload_size = smb_chunk_payload_size(&c),
                                                                 }),
                                     0);
                        cr_assert_geq(smb_release_chunk_as_free(&p->abi, &c), 0);
                }
        }
        for (size_t i = 0; i < p->n_patches; i++) {
                struct trace_buffer_patch tp = { .offset = p->patches[i].offset };
                memcpy(tp.data, p->patches[i].data, 4);
                cr_assert_eq(trace_buffer_try_patch(tb, 1, p->patches[i].writer_id, p->patches[i].chunk_id, &tp, 1,
                                                    p->patches[i].more),
                             0, "patch %zu did not apply", i);
        }
        return tb;
}

static void expected_packet(uint32_t seq, size_t size, struct pbw *pkt) {
        struct pbw ev = {};
        char *s = malloc(size + 1);
        for (size_t k = 0; k < size; k++)
                s[k] = (char) ('a' + (seq + k) % 26);
        pbw_bytes(&ev, 1, s, size);
        pbw_varint(&ev, 2, seq);
        pbw_varint(pkt, 8, 1000 + seq);
        pbw_message(pkt, 900, &ev);
        pbw_done(&ev);
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
                struct pbw want = {};
                expected_packet(seq, size, &want);
                size_t gl, wl;
                uint8_t *got = canonical(pkt.slices[0].iov_base, pkt.size, &gl);
                uint8_t *exp = canonical(want.buf, want.len, &wl);
                cr_assert_eq(gl, wl, "packet %u: %zu bytes, expected %zu", seq, gl, wl);
                cr_assert_arr_eq(got, exp, wl, "packet %u differs", seq);
                free(got);
                free(exp);
                cr_assert_not(info.previous_packet_dropped);
                pbw_done(&want);
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
                        struct pbw pkt = {};
                        expected_packet(seq, c->size, &pkt);
                        cr_assert_eq(traced_trace_writer_write_packet(w, pkt.buf, pkt.len), 0);
                        pbw_done(&pkt);
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

Test(trace_writer, full_buffer_drops_and_counts) {
        sd_event *e;
        traced_producer *p = fake_producer(&e);
        traced_trace_writer *w;
        cr_assert_eq(traced_producer_new_writer(p, 7, &w), 0);
        /* No service frees chunks: the 256 KiB SMB fills up. */
        unsigned ok = 0, dropped = 0;
        for (uint32_t seq = 0; seq < 400; seq++) {
                struct pbw pkt = {};
                expected_packet(seq, 1000, &pkt);
                if (traced_trace_writer_write_packet(w, pkt.buf, pkt.len) == 0)
                        ok++;
                else
                        dropped++;
                pbw_done(&pkt);
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
                struct pbw pkt = {};
                expected_packet(seq, 1000, &pkt);
                int r = traced_trace_writer_write_packet(w, pkt.buf, pkt.len);
                pbw_done(&pkt);
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
        struct pbw pkt = {};
        expected_packet(1, 100, &pkt);
        int r = traced_trace_writer_write_packet(w, pkt.buf, pkt.len);
        pbw_done(&pkt);
        return r;
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
