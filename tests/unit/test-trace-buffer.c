/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "smb/smb-abi.h"
#include "core/buffers/trace-buffer.h"

/* Builds chunk payloads: fragments, each with a 4-byte redundant varint. */
struct cbuf {
        uint8_t data[8192];
        size_t len;
        uint16_t frags;
};

static void put_frag(struct cbuf *b, const void *data, uint32_t len) {
        b->data[b->len++] = (uint8_t) ((len & 0x7f) | 0x80);
        b->data[b->len++] = (uint8_t) (((len >> 7) & 0x7f) | 0x80);
        b->data[b->len++] = (uint8_t) (((len >> 14) & 0x7f) | 0x80);
        b->data[b->len++] = (uint8_t) ((len >> 21) & 0x7f);
        memcpy(b->data + b->len, data, len);
        b->len += len;
        b->frags++;
}

static struct trace_buffer_chunk chunk_of(uint16_t producer, uint16_t writer, uint32_t id, const struct cbuf *b,
                                          uint8_t flags, bool complete) {
        return (struct trace_buffer_chunk) {
                .producer_id = producer,
                .producer_uid = 1000,
                .producer_pid = 42,
                .writer_id = writer,
                .chunk_id = id,
                .num_fragments = b->frags,
                .flags = flags,
                .complete = complete,
                .payload = b->data,
                .payload_size = b->len,
        };
}

static int copy(struct trace_buffer *tb, uint16_t producer, uint16_t writer, uint32_t id, const struct cbuf *b,
                uint8_t flags, bool complete) {
        struct trace_buffer_chunk c = chunk_of(producer, writer, id, b, flags, complete);
        return trace_buffer_copy_chunk(tb, &c);
}

struct got {
        char text[64][256];
        size_t len[64];
        bool lost[64];
        uint16_t writer[64];
        int n;
};

static void read_all(struct trace_buffer *tb, struct got *g) {
        struct trace_buffer_packet p;
        struct trace_buffer_packet_info info;
        memset(g, 0, sizeof(*g));
        trace_buffer_begin_read(tb);
        while (trace_buffer_read_next_packet(tb, &p, &info) > 0 && g->n < 64) {
                cr_assert_eq(trace_buffer_packet_gather(&p, (uint8_t *) g->text[g->n], 255), (p.size < 255 ? p.size : 255));
                g->len[g->n] = p.size;
                g->lost[g->n] = info.previous_packet_dropped;
                g->writer[g->n] = info.writer_id;
                cr_assert_eq(info.producer_uid, 1000);
                cr_assert_eq(info.producer_pid, 42);
                g->n++;
        }
}

static struct trace_buffer *new_tb(size_t size, enum trace_buffer_policy pol) {
        struct trace_buffer *tb;
        cr_assert_eq(trace_buffer_new(size, pol, &tb), 0);
        return tb;
}

Test(trace_buffer, single_and_many_packets) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf b = {};
        put_frag(&b, "alpha", 5);
        put_frag(&b, "beta", 4);
        put_frag(&b, "gamma", 5);
        cr_assert_eq(copy(tb, 1, 1, 0, &b, 0, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 3);
        cr_assert_str_eq(g.text[0], "alpha");
        cr_assert_str_eq(g.text[1], "beta");
        cr_assert_str_eq(g.text[2], "gamma");
        cr_assert_not(g.lost[0]);
        /* Reading consumes. */
        read_all(tb, &g);
        cr_assert_eq(g.n, 0);
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_eq(st->chunks_written, 1);
        cr_assert_eq(st->chunks_read, 1);
        cr_assert_eq(st->bytes_read, 14);
        trace_buffer_free(tb);
}

Test(trace_buffer, fragments_across_chunks) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {}, c = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "tw", 2);                                   /* starts "two-three-four" */
        put_frag(&b, "o-thr", 5);                                /* middle */
        put_frag(&c, "ee-four", 7);                              /* end */
        put_frag(&c, "five", 4);
        cr_assert_eq(copy(tb, 1, 1, 10, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 11, &b,
                          SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV | SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true),
                     0);
        struct got g;
        read_all(tb, &g);
        /* The fragmented packet is not complete yet: only "one". */
        cr_assert_eq(g.n, 1);
        cr_assert_str_eq(g.text[0], "one");
        cr_assert_eq(copy(tb, 1, 1, 12, &c, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_str_eq(g.text[0], "two-three-four");
        cr_assert_str_eq(g.text[1], "five");
        cr_assert_not(g.lost[0]);
        cr_assert_not(g.lost[1]);
        trace_buffer_free(tb);
}

Test(trace_buffer, out_of_order_commits_read_in_order) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "first", 5);
        put_frag(&b, "second", 6);
        cr_assert_eq(copy(tb, 1, 1, 6, &b, 0, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 5, &a, 0, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_str_eq(g.text[0], "first");
        cr_assert_str_eq(g.text[1], "second");
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_committed_out_of_order, 1);
        trace_buffer_free(tb);
}

Test(trace_buffer, chunk_id_gap_marks_loss) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "a", 1);
        put_frag(&b, "b", 1);
        cr_assert_eq(copy(tb, 1, 1, 1, &a, 0, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 1);
        cr_assert_eq(copy(tb, 1, 1, 3, &b, 0, true), 0); /* 2 never came */
        read_all(tb, &g);
        cr_assert_eq(g.n, 1);
        cr_assert(g.lost[0], "a chunk id gap must set previous_packet_dropped");
        /* A late duplicate of a chunk already read is ignored. */
        cr_assert_eq(copy(tb, 1, 1, 1, &a, 0, true), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 0);
        trace_buffer_free(tb);
}

Test(trace_buffer, ring_overwrites_oldest) {
        struct trace_buffer *tb = new_tb(4096, TRACE_BUFFER_RING_BUFFER);
        char big[900];
        memset(big, 'x', sizeof(big));
        for (uint32_t id = 0; id < 10; id++) {
                struct cbuf b = {};
                big[0] = (char) ('0' + id);
                put_frag(&b, big, sizeof(big));
                cr_assert_eq(copy(tb, 1, 1, id, &b, 0, true), 0);
        }
        cr_assert_leq(trace_buffer_used_bytes(tb), 4096);
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_gt(st->chunks_overwritten, 0);
        cr_assert_eq(st->chunks_overwritten + 4, 10, "expected 4 chunks to fit, %llu overwritten",
                     (unsigned long long) st->chunks_overwritten);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 4);
        cr_assert_eq(g.text[0][0], '6');
        cr_assert_eq(g.text[3][0], '9');
        cr_assert(g.lost[0], "overwritten data must be reported");
        cr_assert_not(g.lost[1]);
        trace_buffer_free(tb);
}

Test(trace_buffer, discard_keeps_oldest) {
        struct trace_buffer *tb = new_tb(4096, TRACE_BUFFER_DISCARD);
        char big[900];
        memset(big, 'y', sizeof(big));
        for (uint32_t id = 0; id < 10; id++) {
                struct cbuf b = {};
                big[0] = (char) ('0' + id);
                put_frag(&b, big, sizeof(big));
                cr_assert_eq(copy(tb, 1, 1, id, &b, 0, true), 0);
        }
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_discarded, 6);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 4);
        cr_assert_eq(g.text[0][0], '0');
        cr_assert_eq(g.text[3][0], '3');
        trace_buffer_free(tb);
}

Test(trace_buffer, patches_apply_only_to_their_chunk) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {};
        put_frag(&a, "ABCDEFGH", 8);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_NEEDS_PATCHING, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 0, "a chunk that needs patching must be held back");

        struct trace_buffer_patch p = { .offset = 4 + 2, .data = { 'x', 'y', 'z', 'w' } };
        cr_assert_eq(trace_buffer_try_patch(tb, 2, 1, 0, &p, 1, false), -ENOENT, "another producer's chunk");
        struct trace_buffer_patch far = { .offset = 9, .data = { 0 } };
        cr_assert_eq(trace_buffer_try_patch(tb, 1, 1, 0, &far, 1, false), -ERANGE);
        cr_assert_eq(trace_buffer_try_patch(tb, 1, 1, 0, &p, 1, true), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 0, "more patches pending");
        struct trace_buffer_patch p2 = { .offset = 4, .data = { 'a', 'b', 'X', 'Y' } };
        cr_assert_eq(trace_buffer_try_patch(tb, 1, 1, 0, &p2, 1, false), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 1);
        cr_assert_str_eq(g.text[0], "abXYzwGH");
        cr_assert_eq(trace_buffer_try_patch(tb, 1, 1, 0, &p2, 1, false), -ENOENT, "chunk already gone");
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_eq(st->patches_succeeded, 2);
        cr_assert_eq(st->patches_failed, 3);
        trace_buffer_free(tb);
}

Test(trace_buffer, scraped_chunk_then_committed) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf partial = {}, full = {};
        put_frag(&partial, "p1", 2);
        put_frag(&partial, "p2", 2);
        full = partial;
        put_frag(&full, "p3", 2);
        partial.len = full.len; /* a chunk has one size, scraped or not */
        cr_assert_eq(copy(tb, 1, 1, 0, &partial, 0, false), 0);
        struct got g;
        read_all(tb, &g);
        /* The last fragment of a chunk still being written may grow. */
        cr_assert_eq(g.n, 1);
        cr_assert_str_eq(g.text[0], "p1");
        cr_assert_eq(copy(tb, 1, 1, 0, &full, 0, true), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_str_eq(g.text[0], "p2");
        cr_assert_str_eq(g.text[1], "p3");
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_rewritten, 1);
        trace_buffer_free(tb);
}

Test(trace_buffer, sequences_are_separate) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        for (uint32_t i = 0; i < 3; i++)
                for (uint16_t w = 1; w <= 2; w++) {
                        struct cbuf b = {};
                        char t[8] = { (char) ('a' + w), (char) ('0' + i), 0 };
                        put_frag(&b, t, 2);
                        cr_assert_eq(copy(tb, 1, w, i, &b, 0, true), 0);
                }
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 6);
        for (int k = 0; k < 6; k++) {
                int w = g.writer[k];
                cr_assert_eq(g.text[k][0], 'a' + w);
        }
        /* Per writer, in order. */
        int last[3] = { -1, -1, -1 };
        for (int k = 0; k < 6; k++) {
                int w = g.writer[k], v = g.text[k][1] - '0';
                cr_assert_gt(v, last[w]);
                last[w] = v;
        }
        trace_buffer_free(tb);
}

Test(trace_buffer, malicious_fragment_sizes) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct got g;

        /* Size past the end of the chunk. */
        struct cbuf a = {};
        put_frag(&a, "ok", 2);
        a.data[a.len++] = 0x7f; /* claims 127 bytes */
        a.data[a.len++] = 'z';
        a.frags++;
        cr_assert_eq(copy(tb, 1, 1, 0, &a, 0, true), 0);
        /* An endless varint. */
        struct cbuf b = {};
        memset(b.data, 0xff, 16);
        b.len = 16;
        b.frags = 1;
        cr_assert_eq(copy(tb, 1, 1, 1, &b, 0, true), 0);
        /* More fragments claimed than present. */
        struct cbuf c = {};
        put_frag(&c, "c1", 2);
        c.frags = 50;
        cr_assert_eq(copy(tb, 1, 1, 2, &c, 0, true), 0);
        /* A continuation whose start never existed, then a good packet. */
        struct cbuf d = {};
        put_frag(&d, "orphan", 6);
        put_frag(&d, "good", 4);
        cr_assert_eq(copy(tb, 1, 1, 3, &d, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        /* Zero-sized packets carry nothing and are skipped. */
        struct cbuf e = {};
        put_frag(&e, "", 0);
        put_frag(&e, "last", 4);
        cr_assert_eq(copy(tb, 1, 1, 4, &e, 0, true), 0);

        read_all(tb, &g);
        cr_assert_eq(g.n, 4);
        cr_assert_str_eq(g.text[0], "ok");
        cr_assert_str_eq(g.text[1], "c1");
        cr_assert(g.lost[1]);
        cr_assert_str_eq(g.text[2], "good");
        cr_assert(g.lost[2], "an orphan continuation is a loss");
        cr_assert_str_eq(g.text[3], "last");
        cr_assert_geq(trace_buffer_get_stats(tb)->abi_violations, 2);

        /* Inconsistent metadata is refused outright. */
        struct trace_buffer_chunk huge = { .producer_id = 1, .writer_id = 1, .chunk_id = 9, .num_fragments = 2000,
                                           .payload = a.data, .payload_size = 10, .complete = true };
        cr_assert_eq(trace_buffer_copy_chunk(tb, &huge), -EINVAL);
        huge.num_fragments = 1;
        huge.payload_size = 1u << 20;
        cr_assert_eq(trace_buffer_copy_chunk(tb, &huge), -EINVAL);
        trace_buffer_free(tb);
}

Test(trace_buffer, huge_chunk_id_jumps) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        uint32_t ids[] = { 0, 0x7fffffff, 0x80000000u, 0xffffffffu, 5 };
        for (size_t i = 0; i < 5; i++) {
                struct cbuf b = {};
                put_frag(&b, "j", 1);
                cr_assert_eq(copy(tb, 1, 1, ids[i], &b, 0, true), 0);
        }
        struct got g;
        read_all(tb, &g);
        cr_assert_geq(g.n, 1);
        cr_assert_leq(g.n, 5);
        trace_buffer_free(tb);
}

Test(trace_buffer, final_read_drops_unfinished_packets) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "start", 5);
        put_frag(&b, "held", 4);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        cr_assert_eq(copy(tb, 1, 2, 0, &b, SMB_CHUNK_NEEDS_PATCHING, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 0);
        trace_buffer_set_final(tb, true);
        read_all(tb, &g);
        /* The unfinished packet is dropped, the unpatched chunk read. */
        cr_assert_eq(g.n, 1);
        cr_assert_str_eq(g.text[0], "held");
        cr_assert_eq(trace_buffer_get_stats(tb)->readaheads_failed, 1);
        trace_buffer_free(tb);
}

/* A packet streamed across chunks whose writer left a size to patch in
 * the chunk it began in (a nested message still open when the chunk went)
 * and whose patch never came, as when the service stops reading before
 * the producer's last commit: at the final read the packet is lost,
 * never read with a size of zero, and the packets around it are read;
 * the same when the unpatched chunk is one the packet only goes through. */
Test(trace_buffer, final_read_loses_a_packet_whose_patches_never_came) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "p1", 2);
        put_frag(&a, "sta", 3);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT | SMB_CHUNK_NEEDS_PATCHING, true),
                     0);
        put_frag(&b, "rt", 2);
        put_frag(&b, "p2", 2);
        cr_assert_eq(copy(tb, 1, 1, 1, &b, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);

        struct cbuf c = {}, d = {}, e = {};
        put_frag(&c, "thr", 3);
        cr_assert_eq(copy(tb, 1, 2, 0, &c, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        put_frag(&d, "ou", 2);
        cr_assert_eq(copy(tb, 1, 2, 1, &d,
                          SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV | SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT |
                                  SMB_CHUNK_NEEDS_PATCHING,
                          true),
                     0);
        put_frag(&e, "gh", 2);
        put_frag(&e, "p3", 2);
        cr_assert_eq(copy(tb, 1, 2, 2, &e, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);

        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 0, "held back while the patches may come");
        trace_buffer_set_final(tb, true);
        read_all(tb, &g);
        cr_assert_eq(g.n, 3);
        cr_assert_str_eq(g.text[0], "p1");
        cr_assert_not(g.lost[0]);
        cr_assert_str_eq(g.text[1], "p2");
        cr_assert(g.lost[1], "the packet after the lost one says so");
        cr_assert_str_eq(g.text[2], "p3");
        cr_assert(g.lost[2]);
        cr_assert_eq(trace_buffer_get_stats(tb)->readaheads_failed, 2);
        trace_buffer_free(tb);
}

/* At the final read the last packet of a chunk scraped while its writer
 * was still writing is read too (whole by its size), marked unfinished:
 * its bytes may be stale (here a size header left behind by a writer that
 * had not written the packet yet), which the reader must not take for a
 * malformed packet. The same for the end of a packet started in the chunk
 * before. Every other packet is not marked. */
Test(trace_buffer, final_read_marks_the_packet_a_scraped_chunk_ends_with) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, c = {}, d = {};
        put_frag(&a, "p1", 2);
        put_frag(&a, "meame\0\0\0", 8);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, 0, false), 0);
        put_frag(&c, "sta", 3);
        cr_assert_eq(copy(tb, 1, 3, 0, &c, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        put_frag(&d, "rt", 2);
        cr_assert_eq(copy(tb, 1, 3, 1, &d, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, false), 0);

        struct trace_buffer_packet p;
        struct trace_buffer_packet_info info;
        trace_buffer_begin_read(tb);
        cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 1);
        cr_assert_eq(p.size, 2);
        cr_assert_not(info.unfinished);
        cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 0);

        trace_buffer_set_final(tb, true);
        const char *want[] = { "meame", "start" };
        trace_buffer_begin_read(tb);
        for (size_t i = 0; i < 2; i++) {
                char text[16] = {};
                cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 1);
                trace_buffer_packet_gather(&p, (uint8_t *) text, sizeof(text) - 1);
                cr_assert_str_eq(text, want[i]);
                cr_assert(info.unfinished, "\"%s\" is not marked unfinished", want[i]);
        }
        cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 0);
        trace_buffer_free(tb);
}

/* One producer cycling through every writer id must not make the buffer's
 * index outgrow the buffer: each sequence's chunk array has to shrink as
 * its chunks are overwritten. */
Test(trace_buffer, index_memory_follows_live_chunks) {
        struct trace_buffer *tb;
        const size_t cap = 1u << 20;
        cr_assert_eq(trace_buffer_new(cap, TRACE_BUFFER_RING_BUFFER, &tb), 0);
        uint8_t payload[284] = { 0x84, 0x80, 0x80, 0x00, 'a', 'b', 'c', 'd' };
        size_t before = mallinfo2().uordblks;
        uint32_t per_seq = (uint32_t) (cap / (sizeof(payload) + TRACE_BUFFER_CHUNK_OVERHEAD)) + 1;
        for (uint16_t w = 1; w <= SMB_MAX_WRITER_ID; w++)
                for (uint32_t id = 0; id < per_seq; id++)
                        cr_assert_eq(trace_buffer_copy_chunk(tb, &(struct trace_buffer_chunk) {
                                                                     .producer_id = 1,
                                                                     .writer_id = w,
                                                                     .chunk_id = id,
                                                                     .num_fragments = 1,
                                                                     .complete = true,
                                                                     .payload = payload,
                                                                     .payload_size = sizeof(payload),
                                                             }),
                                     0);
        size_t heap = mallinfo2().uordblks - before;
        cr_assert_leq(trace_buffer_used_bytes(tb), cap);
        cr_assert_lt(heap, 2 * cap, "%zu bytes of heap for a %zu byte buffer", heap, cap);
        trace_buffer_free(tb);
}

/* A fragment header holding only the drop sentinel (no data follows). */
static void put_drop(struct cbuf *b) {
        uint32_t v = SMB_PACKET_SIZE_DROP_PACKET;
        b->data[b->len++] = (uint8_t) ((v & 0x7f) | 0x80);
        b->data[b->len++] = (uint8_t) (((v >> 7) & 0x7f) | 0x80);
        b->data[b->len++] = (uint8_t) (((v >> 14) & 0x7f) | 0x80);
        b->data[b->len++] = (uint8_t) ((v >> 21) & 0x7f);
        b->frags++;
}

Test(trace_buffer, drop_sentinel_counts_and_marks_the_next_packet) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "cut", 3);
        /* The writer aborted the packet it had started in chunk 0. */
        put_drop(&b);
        struct cbuf c = {};
        put_frag(&c, "two", 3);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 1, &b, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 2, &c, 0, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_eq(memcmp(g.text[0], "one", 3), 0);
        cr_assert_eq(memcmp(g.text[1], "two", 3), 0);
        cr_assert_not(g.lost[0]);
        cr_assert(g.lost[1], "the packet after a dropped one must say so");
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_eq(st->trace_writer_packet_loss, 1);
        cr_assert_eq(st->abi_violations, 0);
        cr_assert_eq(st->readaheads_failed, 0, "a chain ended by the drop sentinel is not a failed readahead");

        /* The sentinel alone in a chunk of its own, between two whole
         * packets: nothing else shows the loss. */
        struct cbuf d = {}, e = {}, f = {};
        put_frag(&d, "three", 5);
        put_drop(&e);
        put_frag(&f, "four", 4);
        cr_assert_eq(copy(tb, 1, 2, 0, &d, 0, true), 0);
        cr_assert_eq(copy(tb, 1, 2, 1, &e, 0, true), 0);
        cr_assert_eq(copy(tb, 1, 2, 2, &f, 0, true), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_eq(memcmp(g.text[0], "three", 5), 0);
        cr_assert_eq(memcmp(g.text[1], "four", 4), 0);
        cr_assert_not(g.lost[0]);
        cr_assert(g.lost[1], "the packet after the sentinel must be flagged");
        cr_assert_eq(trace_buffer_get_stats(tb)->trace_writer_packet_loss, 2);
        cr_assert_eq(trace_buffer_get_stats(tb)->abi_violations, 0);
        trace_buffer_free(tb);
}

Test(trace_buffer, chunk_id_wraps_inside_a_fragmented_packet) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {}, c = {};
        put_frag(&a, "abc", 3);
        put_frag(&a, "defg", 4);
        put_frag(&b, "hijk", 4);
        put_frag(&b, "lmn", 3);
        put_frag(&c, "opq", 3);
        cr_assert_eq(copy(tb, 1, 1, UINT32_MAX, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 0, &b, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 1, &c, 0, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 4);
        cr_assert_eq(g.len[1], 8);
        cr_assert_eq(memcmp(g.text[1], "defghijk", 8), 0, "the packet spanning the wrap is not reassembled");
        cr_assert_eq(memcmp(g.text[2], "lmn", 3), 0);
        cr_assert_eq(memcmp(g.text[3], "opq", 3), 0);
        for (int i = 0; i < g.n; i++)
                cr_assert_not(g.lost[i], "packet %d flagged lost across the chunk id wrap", i);
        trace_buffer_free(tb);
}

Test(trace_buffer, ring_wrap_stats_are_exact) {
        const size_t payload = 500, per_chunk = payload + TRACE_BUFFER_CHUNK_OVERHEAD;
        struct trace_buffer *tb = new_tb(10 * per_chunk, TRACE_BUFFER_RING_BUFFER);
        for (uint32_t id = 0; id < 15; id++) {
                struct cbuf b = {};
                char data[496];
                memset(data, 'a' + (int) id, sizeof(data));
                put_frag(&b, data, sizeof(data));
                cr_assert_eq(b.len, payload);
                cr_assert_eq(copy(tb, 1, 1, id, &b, 0, true), 0);
        }
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_eq(st->chunks_written, 15);
        cr_assert_eq(st->bytes_written, 15 * payload);
        cr_assert_eq(st->chunks_overwritten, 5);
        cr_assert_eq(st->bytes_overwritten, 5 * payload);
        cr_assert_eq(st->write_wrap_count, 5);
        cr_assert_eq(st->chunks_discarded, 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 10);
        cr_assert_eq(g.text[0][0], 'a' + 5, "reading must start at the oldest chunk left");
        cr_assert(g.lost[0], "the overwritten chunks were never read: that is a loss");
        for (int i = 1; i < g.n; i++)
                cr_assert_not(g.lost[i]);
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_read, 10);
        trace_buffer_free(tb);
}

/* Where upstream's buffer is stricter than the reassembly needs, the same
 * statistics count it, so a producer tested against traced also works
 * against Perfetto's service. */
Test(trace_buffer, recommit_that_changes_a_chunk_is_an_abi_violation) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf two = {}, one = {}, bigger = {};
        put_frag(&two, "a1", 2);
        put_frag(&two, "a2", 2);
        put_frag(&one, "a1", 2);
        one.len = two.len;
        bigger = two;
        bigger.len += 8;
        cr_assert_eq(copy(tb, 1, 1, 0, &two, SMB_CHUNK_NEEDS_PATCHING, true), 0);
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);

        cr_assert_eq(copy(tb, 1, 1, 0, &two, SMB_CHUNK_NEEDS_PATCHING, true), 0);
        cr_assert_eq(st->abi_violations, 0, "the same chunk again is fine");
        cr_assert_eq(copy(tb, 1, 1, 0, &one, SMB_CHUNK_NEEDS_PATCHING, true), 0);
        cr_assert_eq(st->abi_violations, 1, "fewer fragments");
        cr_assert_eq(copy(tb, 1, 1, 0, &bigger, SMB_CHUNK_NEEDS_PATCHING, true), 0);
        cr_assert_eq(st->abi_violations, 2, "another size");
        cr_assert_eq(copy(tb, 1, 1, 0, &two, 0, true), 0);
        cr_assert_eq(st->abi_violations, 3, "a flag removed");

        /* The first copy stays, still waiting for its patch. */
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 0);
        struct trace_buffer_patch pt = { .offset = 0, .data = { 0x82, 0x80, 0x80, 0x00 } };
        cr_assert_eq(trace_buffer_try_patch(tb, 1, 1, 0, &pt, 1, false), 0);
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_eq(memcmp(g.text[0], "a1", 2), 0);
        trace_buffer_free(tb);
}

Test(trace_buffer, chunk_id_gap_mid_fragment_is_a_failed_readahead) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, c = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "cu", 2);
        put_frag(&c, "t", 1);
        put_frag(&c, "two", 3);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        /* Chunk 1 never comes. */
        cr_assert_eq(copy(tb, 1, 1, 2, &c, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_eq(memcmp(g.text[1], "two", 3), 0);
        cr_assert(g.lost[1]);
        cr_assert_eq(trace_buffer_get_stats(tb)->readaheads_failed, 1);
        trace_buffer_free(tb);
}

Test(trace_buffer, continuation_flags_that_do_not_match_are_a_failed_readahead) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "cu", 2);
        put_frag(&b, "two", 3);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        /* The next chunk does not say it continues anything. */
        cr_assert_eq(copy(tb, 1, 1, 1, &b, 0, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_eq(memcmp(g.text[1], "two", 3), 0);
        cr_assert(g.lost[1]);
        cr_assert_eq(trace_buffer_get_stats(tb)->readaheads_failed, 1);
        trace_buffer_free(tb);
}

/* Chunks read are reused for the chunks stored after them (their old bytes
 * still in place): what is read back is always the new data, whole, with a
 * chunk smaller than the one it reuses and with a larger one. */
Test(trace_buffer, reused_chunks_hold_only_new_data) {
        struct trace_buffer *tb = new_tb(16384, TRACE_BUFFER_RING_BUFFER);
        struct got g;
        for (uint32_t round = 0; round < 6; round++) {
                /* Sizes alternate large, small, larger than both. */
                size_t len = round % 3 == 0 ? 200 : round % 3 == 1 ? 20 : 250;
                for (uint32_t k = 0; k < 3; k++) {
                        char text[256];
                        memset(text, 'a' + (int) ((round * 3 + k) % 26), len);
                        struct cbuf b = {};
                        put_frag(&b, text, (uint32_t) len);
                        put_frag(&b, "end", 3);
                        cr_assert_eq(copy(tb, 1, 1, round * 3 + k, &b, 0, true), 0);
                }
                read_all(tb, &g);
                cr_assert_eq(g.n, 6, "round %u: %d packets", round, g.n);
                for (int i = 0; i < 6; i += 2) {
                        char want = (char) ('a' + (int) ((round * 3 + (uint32_t) i / 2) % 26));
                        cr_assert_eq(g.len[i], len, "round %u: a packet of %zu bytes, expected %zu", round, g.len[i], len);
                        for (size_t c = 0; c < len && c < 255; c++)
                                cr_assert_eq(g.text[i][c], want, "round %u: stale byte %zu", round, c);
                        cr_assert_eq(g.len[i + 1], 3);
                        cr_assert_arr_eq(g.text[i + 1], "end", 3);
                }
        }
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_free(tb);
}

/* A ring buffer wrapping under a writer whose packets span chunks, read
 * between commits as a file drain does: each packet read back is whole
 * and in order, the wrap shows as loss on the next packet, and no
 * fragment of a packet whose start was overwritten leaks out. */
Test(trace_buffer, fragments_spanning_the_wrap_read_back_whole) {
        struct trace_buffer *tb = new_tb(4096, TRACE_BUFFER_RING_BUFFER);
        /* Packet k is 1500 bytes of 'a' + k % 26, split over two chunks of
         * 750 bytes each: chunk 2k holds its head, 2k+1 its tail. */
        uint32_t next_expected = 0, read_packets = 0, losses = 0;
        for (uint32_t k = 0; k < 40; k++) {
                char half[750];
                memset(half, 'a' + (int) (k % 26), sizeof(half));
                struct cbuf head = {}, tail = {};
                put_frag(&head, half, sizeof(half));
                put_frag(&tail, half, sizeof(half));
                cr_assert_eq(copy(tb, 1, 1, 2 * k, &head, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
                /* Every fifth packet, read only after two more commits, so
                 * that the ring wraps over chunks not read yet. */
                cr_assert_eq(copy(tb, 1, 1, 2 * k + 1, &tail, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
                if (k % 5 == 4 || k % 5 == 0)
                        continue;
                struct trace_buffer_packet p;
                struct trace_buffer_packet_info info;
                trace_buffer_begin_read(tb);
                while (trace_buffer_read_next_packet(tb, &p, &info) > 0) {
                        cr_assert_eq(p.size, 1500, "a packet of %zu bytes: a fragment leaked", p.size);
                        uint8_t d[1500];
                        cr_assert_eq(trace_buffer_packet_gather(&p, d, sizeof(d)), 1500);
                        uint32_t id = (uint32_t) (d[0] - 'a');
                        for (size_t i = 0; i < p.size; i++)
                                cr_assert_eq(d[i], d[0], "packet mixes two writers' packets at byte %zu", i);
                        cr_assert_geq(id, next_expected % 26, "packets out of order");
                        if (info.previous_packet_dropped)
                                losses++;
                        next_expected = id + 1;
                        read_packets++;
                }
        }
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_gt(st->chunks_overwritten, 0, "the ring never wrapped");
        cr_assert_gt(read_packets, 0);
        cr_assert_gt(losses, 0, "overwritten packets were not reported as loss");
        cr_assert_gt(st->readaheads_succeeded, 0);
        trace_buffer_free(tb);
}

/* A packet written across chunks is handed out as slices of the stored
 * chunks, one per fragment, with no copy; the chunks it spans are gone
 * from the buffer at once, their memory only at the next call. The buffer
 * is small so that released chunks are freed, not pooled: under ASan a
 * slice into a freed chunk fails here. */
Test(trace_buffer, fragmented_packet_is_handed_out_in_place) {
        struct trace_buffer *tb = new_tb(16384, TRACE_BUFFER_RING_BUFFER);
        uint8_t part[3][3000];
        for (int i = 0; i < 3; i++)
                memset(part[i], 'x' + i, sizeof(part[i]));
        struct cbuf a = {}, b = {}, c = {};
        put_frag(&a, part[0], sizeof(part[0]));
        put_frag(&b, part[1], sizeof(part[1]));
        put_frag(&c, part[2], sizeof(part[2]));
        put_frag(&c, "tail", 4);
        cr_assert_eq(copy(tb, 1, 1, 0, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true), 0);
        cr_assert_eq(copy(tb, 1, 1, 1, &b,
                          SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV | SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true),
                     0);
        cr_assert_eq(copy(tb, 1, 1, 2, &c, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        size_t before = trace_buffer_used_bytes(tb);

        struct trace_buffer_packet p;
        struct trace_buffer_packet_info info;
        trace_buffer_begin_read(tb);
        cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 1);
        cr_assert_eq(p.size, 9000);
        cr_assert_eq(p.n_slices, 3, "%zu slices: the fragments were copied together", p.n_slices);
        for (size_t i = 0; i < 3; i++) {
                cr_assert_eq(p.slices[i].iov_len, 3000);
                const uint8_t *d = p.slices[i].iov_base;
                for (size_t k = 0; k < 3000; k++)
                        cr_assert_eq(d[k], 'x' + i, "slice %zu byte %zu", i, k);
        }
        /* The first two chunks left the buffer with the packet. */
        cr_assert_lt(trace_buffer_used_bytes(tb), before - 6000);
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_read, 2);
        cr_assert_eq(trace_buffer_get_stats(tb)->bytes_read, 9000);

        cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 1);
        cr_assert_eq(p.n_slices, 1);
        cr_assert_eq(p.size, 4);
        cr_assert_arr_eq(p.slices[0].iov_base, "tail", 4);
        cr_assert_eq(trace_buffer_read_next_packet(tb, &p, &info), 0);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_free(tb);
}

/* ---- trace_buffer_take_chunk ------------------------------------------- */

struct taken {
        char text[16][64];
        size_t slices[16];
        bool lost[16];
        int n;
        int fail_at; /* return -EIO at this packet (0: never) */
};

static int take_fn(const struct iovec *iov, size_t n_iov, size_t size, const struct trace_buffer_packet_info *info,
                   void *userdata) {
        struct taken *t = userdata;
        if (t->fail_at && t->n + 1 == t->fail_at)
                return -EIO;
        cr_assert_lt(t->n, 16);
        cr_assert_lt(size, 64u);
        size_t at = 0;
        for (size_t i = 0; i < n_iov; i++) {
                memcpy(t->text[t->n] + at, iov[i].iov_base, iov[i].iov_len);
                at += iov[i].iov_len;
        }
        cr_assert_eq(at, size);
        t->text[t->n][at] = 0;
        t->slices[t->n] = n_iov;
        t->lost[t->n] = info->previous_packet_dropped;
        cr_assert_eq(info->producer_uid, 1000);
        t->n++;
        return 0;
}

static int take(struct trace_buffer *tb, uint32_t id, const struct cbuf *b, uint8_t flags, bool complete,
                struct taken *t) {
        struct trace_buffer_chunk c = chunk_of(1, 1, id, b, flags, complete);
        return trace_buffer_take_chunk(tb, &c, take_fn, t);
}

Test(trace_buffer, take_hands_out_whole_packets_at_once) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf b = {};
        put_frag(&b, "alpha", 5);
        put_frag(&b, "", 0);
        put_frag(&b, "beta", 4);
        struct taken t = {};
        cr_assert_eq(take(tb, 7, &b, 0, true, &t), 1);
        cr_assert_eq(t.n, 2);
        cr_assert_str_eq(t.text[0], "alpha");
        cr_assert_str_eq(t.text[1], "beta");
        cr_assert_not(t.lost[0]);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0, "a chunk read whole is not kept");
        const struct trace_buffer_stats *st = trace_buffer_get_stats(tb);
        cr_assert_eq(st->chunks_written, 1);
        cr_assert_eq(st->chunks_read, 1);
        cr_assert_eq(st->bytes_read, 9);
        /* The same chunk again, and an older one: already read past. */
        cr_assert_eq(take(tb, 7, &b, 0, true, &t), 0);
        cr_assert_eq(take(tb, 6, &b, 0, true, &t), 0);
        cr_assert_eq(t.n, 2);
        trace_buffer_free(tb);
}

/* The start of a packet that goes on in the next chunk is copied in (the
 * producer's memory is reused once the call returns); the packet is handed
 * out when the chunk with its end is taken, as two slices. */
Test(trace_buffer, take_keeps_the_start_of_a_packet_for_the_next_chunk) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {}, c = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "tw", 2);
        struct taken t = {};
        cr_assert_eq(take(tb, 1, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true, &t), 1);
        cr_assert_eq(t.n, 1);
        cr_assert_str_eq(t.text[0], "one");
        cr_assert_gt(trace_buffer_used_bytes(tb), 0);
        memset(a.data, 'X', sizeof(a.data));
        put_frag(&b, "o-thr", 5);
        cr_assert_eq(take(tb, 2, &b,
                          SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV | SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true,
                          &t),
                     1);
        cr_assert_eq(t.n, 1, "a packet was handed out before its end arrived");
        memset(b.data, 'Y', sizeof(b.data));
        put_frag(&c, "ee", 2);
        put_frag(&c, "four", 4);
        cr_assert_eq(take(tb, 3, &c, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true, &t), 1);
        cr_assert_eq(t.n, 3);
        cr_assert_str_eq(t.text[1], "two-three");
        cr_assert_eq(t.slices[1], 3);
        cr_assert_str_eq(t.text[2], "four");
        cr_assert_not(t.lost[1]);
        cr_assert_not(t.lost[2]);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        cr_assert_eq(trace_buffer_get_stats(tb)->readaheads_succeeded, 1);
        trace_buffer_free(tb);
}

/* What the buffer must sort out is left to copy_chunk: a gap, an
 * unfinished (scraped) chunk, one waiting for patches. Once stored, the
 * chunks are read, in order, by the take of the chunk that follows them. */
Test(trace_buffer, take_leaves_gaps_scraped_and_patched_chunks_to_the_buffer) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {}, c = {}, d = {};
        put_frag(&a, "first", 5);
        put_frag(&b, "second", 6);
        put_frag(&c, "third", 5);
        put_frag(&d, "fourth", 6);
        struct taken t = {};
        cr_assert_eq(take(tb, 1, &a, 0, true, &t), 1);
        /* A gap: chunk 2 is still to come. */
        cr_assert_eq(take(tb, 3, &c, 0, true, &t), 0);
        cr_assert_eq(copy(tb, 1, 1, 3, &c, 0, true), 0);
        /* Scraped, and waiting for a patch: not taken either. */
        cr_assert_eq(take(tb, 2, &b, 0, false, &t), 0);
        cr_assert_eq(take(tb, 2, &b, SMB_CHUNK_NEEDS_PATCHING, true, &t), 0);
        cr_assert_eq(copy(tb, 1, 1, 2, &b, 0, true), 0);
        cr_assert_eq(t.n, 1);
        /* Chunk 4 follows the stored ones: all three are read by its take. */
        cr_assert_eq(take(tb, 4, &d, 0, true, &t), 1);
        cr_assert_eq(t.n, 4);
        cr_assert_str_eq(t.text[1], "second");
        cr_assert_str_eq(t.text[2], "third");
        cr_assert_str_eq(t.text[3], "fourth");
        cr_assert_not(t.lost[1]);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_free(tb);
}

/* Losses are marked as a read pass would: a chunk id gap taken later, a
 * broken fragment header (an ABI violation), the writer's drop sentinel. */
Test(trace_buffer, take_marks_losses_and_abi_violations) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, bad = {}, b = {}, drop = {}, c = {};
        put_frag(&a, "a", 1);
        struct taken t = {};
        cr_assert_eq(take(tb, 1, &a, 0, true, &t), 1);
        /* A fragment that claims more bytes than the chunk has. */
        put_frag(&bad, "xyz", 3);
        bad.data[0] = 0xff;
        bad.data[1] = 0xff;
        put_frag(&bad, "lost", 4);
        cr_assert_eq(take(tb, 2, &bad, 0, true, &t), 1);
        cr_assert_eq(t.n, 1);
        cr_assert_eq(trace_buffer_get_stats(tb)->abi_violations, 1);
        put_frag(&b, "b", 1);
        cr_assert_eq(take(tb, 3, &b, 0, true, &t), 1);
        cr_assert_eq(t.n, 2);
        cr_assert(t.lost[1], "the packet after a broken chunk is not marked");
        put_drop(&drop);
        cr_assert_eq(take(tb, 4, &drop, 0, true, &t), 1);
        cr_assert_eq(trace_buffer_get_stats(tb)->trace_writer_packet_loss, 1);
        put_frag(&c, "c", 1);
        cr_assert_eq(copy(tb, 1, 1, 6, &c, 0, true), 0); /* 5 never comes */
        struct cbuf e = {};
        put_frag(&e, "e", 1);
        cr_assert_eq(take(tb, 7, &e, 0, true, &t), 1);
        cr_assert_eq(t.n, 4);
        cr_assert_str_eq(t.text[2], "c");
        cr_assert(t.lost[2], "the packet after the drop sentinel and the gap is not marked");
        cr_assert_not(t.lost[3]);
        trace_buffer_free(tb);
}

/* A discard buffer with no room for the start of a packet: that start is
 * lost, counted, and the packet it began never appears (its end is skipped
 * and the next packet marked). */
Test(trace_buffer, take_without_room_for_the_rest_loses_that_packet) {
        struct trace_buffer *tb = new_tb(8192, TRACE_BUFFER_DISCARD);
        struct cbuf full = {};
        uint8_t big[7000];
        memset(big, 'z', sizeof(big));
        put_frag(&full, big, sizeof(big));
        /* Another writer's chunk fills the buffer. */
        cr_assert_eq(copy(tb, 1, 2, 1, &full, 0, true), 0);
        struct cbuf a = {}, b = {};
        put_frag(&a, "whole", 5);
        put_frag(&a, big, 2000);
        struct taken t = {};
        cr_assert_eq(take(tb, 1, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, true, &t), 1);
        cr_assert_eq(t.n, 1);
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_discarded, 1);
        put_frag(&b, "end", 3);
        put_frag(&b, "next", 4);
        cr_assert_eq(take(tb, 2, &b, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true, &t), 1);
        cr_assert_eq(t.n, 2);
        cr_assert_str_eq(t.text[1], "next");
        cr_assert(t.lost[1]);
        trace_buffer_free(tb);
}

/* A reader that fails stops the take: its error is returned, and what was
 * left of the chunk counts as lost. */
Test(trace_buffer, take_returns_the_readers_error) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "two", 3);
        put_frag(&a, "thr", 3);
        struct taken t = { .fail_at = 2 };
        cr_assert_eq(take(tb, 1, &a, 0, true, &t), -EIO);
        cr_assert_eq(t.n, 1);
        t.fail_at = 0;
        put_frag(&b, "four", 4);
        cr_assert_eq(take(tb, 2, &b, 0, true, &t), 1);
        cr_assert_eq(t.n, 2);
        cr_assert_str_eq(t.text[1], "four");
        cr_assert(t.lost[1]);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_free(tb);
}

/* ---- chunks held until trace_buffer_settle ------------------------------ */

static int take_held(struct trace_buffer *tb, uint32_t id, const struct cbuf *b, uint8_t flags, struct taken *t) {
        struct trace_buffer_chunk c = chunk_of(1, 1, id, b, flags, true);
        c.payload_stays = true;
        return trace_buffer_take_chunk(tb, &c, take_fn, t);
}

/* Within one commit, a packet across three chunks is read straight from
 * the producer's memory: nothing of it is copied into the buffer, and the
 * slices point into the producer's chunks. */
Test(trace_buffer, held_chunks_hand_a_packet_across_them_out_without_a_copy) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {}, c = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "tw", 2);
        put_frag(&b, "o-thr", 5);
        put_frag(&c, "ee", 2);
        put_frag(&c, "four", 4);
        struct taken t = {};
        cr_assert_eq(take_held(tb, 1, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, &t), 2);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0, "the start of the packet was copied although its chunk is held");
        cr_assert_eq(take_held(tb, 2, &b,
                               SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV | SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT,
                               &t),
                     2);
        cr_assert_eq(t.n, 1);
        cr_assert_eq(take_held(tb, 3, &c, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, &t), 1);
        cr_assert_eq(t.n, 3);
        cr_assert_str_eq(t.text[1], "two-three");
        cr_assert_eq(t.slices[1], 3);
        cr_assert_str_eq(t.text[2], "four");
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_settle(tb);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0, "settle copied chunks that were read to their end");
        cr_assert_eq(trace_buffer_get_stats(tb)->readaheads_succeeded, 1);
        cr_assert_eq(trace_buffer_get_stats(tb)->chunks_read, 3);
        trace_buffer_free(tb);
}

/* What the commit did not complete is copied in by settle: after it the
 * producer's memory may change, the packet still comes out whole. */
Test(trace_buffer, settle_copies_what_held_chunks_still_hold) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "tw", 2);
        struct taken t = {};
        cr_assert_eq(take_held(tb, 1, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, &t), 2);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_settle(tb);
        cr_assert_gt(trace_buffer_used_bytes(tb), 0, "settle kept nothing of the held chunk");
        memset(a.data, 'X', sizeof(a.data));
        put_frag(&b, "o", 1);
        cr_assert_eq(take_held(tb, 2, &b, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, &t), 1);
        cr_assert_eq(t.n, 2);
        cr_assert_str_eq(t.text[1], "two");
        cr_assert_not(t.lost[1]);
        trace_buffer_settle(tb);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_free(tb);
}

/* Chunks stored while another is held (a writer without room) are read
 * after it in order, and a patch never reaches a held chunk: it is the
 * producer's memory. */
Test(trace_buffer, held_chunk_with_stored_ones_after_it_and_patches) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        struct cbuf a = {}, b = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "tw", 2);
        put_frag(&b, "o", 1);
        put_frag(&b, "three", 5);
        struct taken t = {};
        cr_assert_eq(take_held(tb, 1, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, &t), 2);
        struct trace_buffer_patch patch = { .offset = 0, .data = { 'P', 'P', 'P', 'P' } };
        cr_assert_eq(trace_buffer_try_patch(tb, 1, 1, 1, &patch, 1, false), -ENOENT);
        cr_assert_arr_eq(a.data, "\x83\x80\x80\x00one", 7, "a patch was written into the producer's memory");
        cr_assert_eq(copy(tb, 1, 1, 2, &b, SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV, true), 0);
        struct got g;
        read_all(tb, &g);
        cr_assert_eq(g.n, 2);
        cr_assert_str_eq(g.text[0], "two");
        cr_assert_str_eq(g.text[1], "three");
        trace_buffer_settle(tb);
        cr_assert_eq(trace_buffer_used_bytes(tb), 0);
        trace_buffer_free(tb);
}

/* A buffer freed with chunks still held frees what it allocated for them
 * (under ASan a leak fails this), and settle with nothing held is a no-op. */
Test(trace_buffer, free_with_held_chunks) {
        struct trace_buffer *tb = new_tb(65536, TRACE_BUFFER_RING_BUFFER);
        trace_buffer_settle(tb);
        struct cbuf a = {};
        put_frag(&a, "one", 3);
        put_frag(&a, "tw", 2);
        struct taken t = {};
        cr_assert_eq(take_held(tb, 1, &a, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT, &t), 2);
        trace_buffer_free(tb);
}
