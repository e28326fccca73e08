/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The mapped ring buffer reader on a mapping faked in memory: a meta page
 * and four sub-buffers that the test fills and swaps as the kernel would,
 * including a reader sub-buffer the writer is still appending to, losses
 * reported either way, and layouts or sub-buffers that make no sense. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "page.h"
#include "ring-map.h"

#define META_SIZE 4096u
#define SUBBUF_SIZE 4096u
#define NR_SUBBUFS 4u

static _Alignas(4096) uint8_t mem[META_SIZE + NR_SUBBUFS * SUBBUF_SIZE];

static struct ring_map_meta *meta(void) {
        return (struct ring_map_meta *) mem;
}

static uint8_t *subbuf(uint32_t id) {
        return mem + META_SIZE + (size_t) id * SUBBUF_SIZE;
}

static void reset(void) {
        memset(mem, 0, sizeof(mem));
        *meta() = (struct ring_map_meta) {
                .meta_page_size = META_SIZE,
                .meta_struct_len = sizeof(struct ring_map_meta),
                .subbuf_size = SUBBUF_SIZE,
                .nr_subbufs = NR_SUBBUFS,
        };
}

static size_t data_len(uint32_t id) {
        uint64_t commit;
        memcpy(&commit, subbuf(id) + 8, 8);
        return (size_t) (commit & 0xfffffffull);
}

static void set_commit(uint32_t id, size_t len, uint64_t flags) {
        uint64_t commit = len | flags;
        memcpy(subbuf(id) + 8, &commit, 8);
}

/* Appends a record of 4 bytes (its value) delta after the previous one, as
 * the writer does: the record first, the commit after it. */
static void append(uint32_t id, uint32_t delta, uint32_t value) {
        size_t len = data_len(id);
        uint32_t hdr = (delta << 5) | 1;
        memcpy(subbuf(id) + PAGE_HEADER_SIZE + len, &hdr, 4);
        memcpy(subbuf(id) + PAGE_HEADER_SIZE + len + 4, &value, 4);
        uint64_t commit;
        memcpy(&commit, subbuf(id) + 8, 8);
        set_commit(id, len + 8, commit & (PAGE_COMMIT_MISSED_EVENTS | PAGE_COMMIT_MISSED_STORED));
}

static void start_subbuf(uint32_t id, uint64_t ts) {
        memset(subbuf(id), 0, SUBBUF_SIZE);
        memcpy(subbuf(id), &ts, 8);
}

/* The kernel swapping in sub-buffer id as the reader. */
static void swap_in(uint32_t id, uint64_t lost_events) {
        meta()->reader.id = id;
        meta()->reader.read = (uint32_t) data_len(id);
        meta()->reader.lost_events = lost_events;
}

struct seen {
        uint64_t ts[32];
        uint32_t value[32];
        int n;
};

static void on_rec(uint64_t ts, const uint8_t *data, size_t len, void *ud) {
        struct seen *s = ud;
        cr_assert_eq(len, 4);
        if (s->n < 32) {
                s->ts[s->n] = ts;
                memcpy(&s->value[s->n], data, 4);
                s->n++;
        }
}

Test(ftrace_ring_map, layouts_that_make_no_sense_are_refused) {
        struct ring_map m;
        reset();
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
        cr_assert_eq(m.nr_subbufs, NR_SUBBUFS);
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem) - 1), -EPROTO, "shorter than its sub-buffers");
        cr_assert_eq(ring_map_attach(&m, mem, 40), -EPROTO, "shorter than the meta page");
        meta()->meta_struct_len = 24;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "no reader fields");
        reset();
        meta()->meta_struct_len = META_SIZE + 1;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "meta struct past its page");
        reset();
        meta()->nr_subbufs = 1;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "a ring needs two sub-buffers");
        reset();
        meta()->subbuf_size = PAGE_HEADER_SIZE;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "no room for data");
        reset();
        meta()->nr_subbufs = UINT32_MAX;
        meta()->subbuf_size = UINT32_MAX;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "overflowing size");
        reset();
        meta()->reader.id = NR_SUBBUFS;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "reader outside the ring");
        reset();
        meta()->reader.read = SUBBUF_SIZE;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), -EPROTO, "read past the reader's data");
        /* A newer kernel's longer meta struct is fine. */
        reset();
        meta()->meta_struct_len = sizeof(struct ring_map_meta) + 16;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
}

Test(ftrace_ring_map, what_was_read_before_the_mapping_is_skipped) {
        struct ring_map m;
        struct ring_map_read rd;
        struct seen seen = {};
        reset();
        start_subbuf(2, 1000);
        append(2, 1, 10);
        append(2, 2, 11);
        swap_in(2, 0);
        meta()->reader.read = 8; /* the first record went out through read() */
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_not(rd.new_subbuf);
        cr_assert_eq(rd.lost, 0);
        cr_assert_eq(seen.n, 1);
        cr_assert_eq(seen.value[0], 11);
        cr_assert_eq(seen.ts[0], 1003, "the skipped record's delta still counts");
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 0, "nothing new");
}

Test(ftrace_ring_map, records_the_writer_appends_to_the_reader_come_once) {
        struct ring_map m;
        struct ring_map_read rd;
        struct seen seen = {};
        reset();
        start_subbuf(0, 500);
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 0, "empty");
        /* The reader is also the page the writer fills. */
        append(0, 5, 1);
        append(0, 5, 2);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(seen.n, 2);
        cr_assert_eq(rd.info.records, 2);
        append(0, 7, 3);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_not(rd.new_subbuf);
        cr_assert_eq(seen.n, 3);
        cr_assert_eq(seen.value[2], 3);
        cr_assert_eq(seen.ts[2], 517);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 0);
        /* The writer moved on; the kernel swaps in the next sub-buffer. */
        start_subbuf(1, 600);
        append(1, 1, 4);
        swap_in(1, 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert(rd.new_subbuf);
        cr_assert_eq(rd.lost, 0);
        cr_assert_eq(seen.n, 4);
        cr_assert_eq(seen.ts[3], 601);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 0);
}

Test(ftrace_ring_map, losses_are_reported_once_per_subbuf) {
        struct ring_map m;
        struct ring_map_read rd;
        struct seen seen = {};
        reset();
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
        /* Counted by the kernel, stored after the data. */
        start_subbuf(1, 10);
        append(1, 1, 1);
        uint64_t lost = 37;
        memcpy(subbuf(1) + PAGE_HEADER_SIZE + data_len(1), &lost, 8);
        set_commit(1, data_len(1), PAGE_COMMIT_MISSED_EVENTS | PAGE_COMMIT_MISSED_STORED);
        swap_in(1, 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(rd.lost, 37);
        append(1, 1, 2);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(rd.lost, 0, "the same sub-buffer again: its losses were told");
        /* Only flagged: one, at least. */
        start_subbuf(2, 20);
        append(2, 1, 3);
        set_commit(2, data_len(2), PAGE_COMMIT_MISSED_EVENTS);
        swap_in(2, 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(rd.lost, 1);
        /* Only in the meta page. */
        start_subbuf(3, 30);
        append(3, 1, 4);
        swap_in(3, 5);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(rd.lost, 5);
        cr_assert_eq(seen.n, 4);
        /* An empty sub-buffer that only says events were lost. */
        start_subbuf(0, 40);
        set_commit(0, 0, PAGE_COMMIT_MISSED_EVENTS);
        swap_in(0, 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(rd.lost, 1);
        cr_assert_eq(rd.info.records, 0);
}

Test(ftrace_ring_map, a_subbuf_back_with_less_in_it_is_read_anew) {
        struct ring_map m;
        struct ring_map_read rd;
        struct seen seen = {};
        reset();
        start_subbuf(1, 0);
        append(1, 1, 1);
        append(1, 1, 2);
        swap_in(1, 0);
        meta()->reader.id = 0;
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
        swap_in(1, 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert_eq(seen.n, 2);
        /* Another reader went round the ring meanwhile. */
        start_subbuf(1, 100);
        append(1, 1, 9);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 1);
        cr_assert(rd.new_subbuf);
        cr_assert_eq(seen.n, 3);
        cr_assert_eq(seen.value[2], 9);
}

Test(ftrace_ring_map, broken_subbufs_are_refused_once) {
        struct ring_map m;
        struct ring_map_read rd;
        struct seen seen = {};
        reset();
        cr_assert_eq(ring_map_attach(&m, mem, sizeof(mem)), 0);
        /* A commit longer than the sub-buffer. */
        start_subbuf(1, 0);
        set_commit(1, SUBBUF_SIZE, 0);
        swap_in(1, 0);
        meta()->reader.read = 0;
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), -EBADMSG);
        cr_assert_eq(rd.info.status, PAGE_STATUS_INVALID_PAGE_HEADER);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 0, "not refused twice");
        /* A record longer than what is committed. */
        start_subbuf(2, 0);
        uint32_t hdr = (1u << 5) | 4; /* 16 bytes */
        memcpy(subbuf(2) + PAGE_HEADER_SIZE, &hdr, 4);
        set_commit(2, 8, 0);
        swap_in(2, 0);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), -EBADMSG);
        cr_assert_eq(rd.info.status, PAGE_STATUS_INVALID_DATA_LENGTH);
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), 0);
        /* A reader id outside the ring (the meta page is the kernel's, but
         * nothing in it is trusted). */
        meta()->reader.id = NR_SUBBUFS + 3;
        cr_assert_eq(ring_map_parse(&m, on_rec, &seen, &rd), -EBADMSG);
        cr_assert_eq(seen.n, 0);
}

Test(ftrace_page, a_range_of_the_data_only) {
        reset();
        start_subbuf(0, 100);
        for (uint32_t i = 0; i < 5; i++)
                append(0, 10, i);
        struct seen seen = {};
        struct page_info info;
        cr_assert_eq(page_parse_range(subbuf(0), SUBBUF_SIZE, 16, 32, on_rec, &seen, &info), 0);
        cr_assert_eq(info.records, 2);
        cr_assert_eq(info.data_len, 32);
        cr_assert_eq(seen.value[0], 2);
        cr_assert_eq(seen.ts[0], 130);
        cr_assert_eq(seen.value[1], 3);
        /* Past the commit: nothing, and the length stays the commit's. */
        seen.n = 0;
        cr_assert_eq(page_parse_range(subbuf(0), SUBBUF_SIZE, 64, SIZE_MAX, on_rec, &seen, &info), 0);
        cr_assert_eq(seen.n, 0);
        cr_assert_eq(info.data_len, 40);
}
