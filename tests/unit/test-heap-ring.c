/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heap/heap-addrset.h"
#include "heap/heap-ring.h"

static void *ring_mem(size_t data, struct heap_ring *r) {
        size_t total = heap_ring_total_size(data);
        void *m = aligned_alloc(4096, total);
        cr_assert_not_null(m);
        cr_assert_eq(heap_ring_format(m, total, r), 0);
        return m;
}

static void put(struct heap_ring *r, uint32_t value, uint32_t size) {
        uint8_t *at = heap_ring_begin_write(r, size, false, 0);
        cr_assert_not_null(at, "room for %u bytes", size);
        memset(at, 0, size);
        memcpy(at, &value, sizeof(value));
        heap_ring_end_write(r, at);
}

Test(heap_ring, sizes_are_powers_of_two_past_the_header) {
        cr_assert_eq(heap_ring_total_size(1), HEAP_RING_HEADER + HEAP_RING_MIN_DATA);
        cr_assert_eq(heap_ring_total_size(8u << 20), HEAP_RING_HEADER + (8u << 20));
        cr_assert_eq(heap_ring_total_size((8u << 20) + 1), HEAP_RING_HEADER + (16u << 20));
}

Test(heap_ring, entries_come_back_in_order_across_the_wrap) {
        struct heap_ring r;
        void *m = ring_mem(4096, &r);
        uint64_t pos = 0;
        uint32_t next_read = 0, next_write = 0;
        /* Entries of odd sizes, read as they go: the ring wraps many times. */
        for (int round = 0; round < 200; round++) {
                for (int k = 0; k < 3; k++)
                        put(&r, next_write++, (uint32_t) (40 + (round * 7 + k * 13) % 300));
                const uint8_t *e;
                uint32_t size;
                int err;
                while ((e = heap_ring_read(&r, &pos, &size, &err))) {
                        uint32_t v;
                        memcpy(&v, e, sizeof(v));
                        cr_assert_eq(v, next_read, "entry %u read as %u", next_read, v);
                        next_read++;
                }
                cr_assert_eq(err, 0);
                heap_ring_consume(&r, pos);
        }
        cr_assert_eq(next_read, next_write);
        cr_assert_gt(r.h->head, 4 * 4096u, "the ring wrapped");
        cr_assert_eq(r.h->dropped, 0);
        free(m);
}

/* A writer copying its entry in (reserved, not committed) holds up the
 * reader there, not the other writers. */
/* How many of the n pages from at are in memory. */
static size_t resident_pages(const uint8_t *at, size_t n) {
        unsigned char v[512];
        cr_assert_leq(n, sizeof(v));
        cr_assert_eq(mincore((void *) at, n * 4096u, v), 0, "mincore: %s", strerror(errno));
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += v[i] & 1u;
        return k;
}

/* Everything written read and consumed. */
static void drain(struct heap_ring *r, uint64_t *pos) {
        uint32_t size;
        int err;
        while (heap_ring_read(r, pos, &size, &err))
                ;
        cr_assert_eq(err, 0);
        heap_ring_consume(r, *pos);
}

/* An entry of 30000 bytes, then everything read and consumed. */
static void put_and_drain(struct heap_ring *r, uint64_t *pos) {
        put(r, 2, 30000);
        drain(r, pos);
}

Test(heap_ring, the_first_pass_maps_a_run_ahead_of_the_head) {
        const size_t data = 4u * HEAP_RING_POPULATE_RUN, total = heap_ring_total_size(data);
        const size_t run_pages = HEAP_RING_POPULATE_RUN / 4096u;
        int fd = memfd_create("test-heap-ring", MFD_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, (off_t) total), 0);
        uint8_t *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(m, MAP_FAILED);
        struct heap_ring r;
        cr_assert_eq(heap_ring_format(m, total, &r), 0);
        cr_assert_eq(resident_pages(r.data, run_pages), 0, "a new memfd holds no page");
        put(&r, 1, 64);
        if (r.populate_refused) {
                munmap(m, total);
                close(fd);
                cr_skip_test("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)");
        }
        /* One small entry: its run and the next are in, the rest is not. */
        cr_assert_eq(resident_pages(r.data, run_pages), run_pages);
        cr_assert_eq(resident_pages(r.data + HEAP_RING_POPULATE_RUN, run_pages), run_pages);
        cr_assert_eq(resident_pages(r.data + 2 * HEAP_RING_POPULATE_RUN, run_pages), 0);
        cr_assert_eq(r.populated, 2 * HEAP_RING_POPULATE_RUN);
        /* Past the first run, the third comes in. */
        uint64_t pos = 0;
        while (r.h->head <= HEAP_RING_POPULATE_RUN)
                put_and_drain(&r, &pos);
        cr_assert_eq(resident_pages(r.data + 2 * HEAP_RING_POPULATE_RUN, run_pages), run_pages);
        cr_assert_eq(resident_pages(r.data + 3 * HEAP_RING_POPULATE_RUN, run_pages), 0);
        /* To the end of the data, and no further. */
        while (r.h->head <= data)
                put_and_drain(&r, &pos);
        cr_assert_eq(r.populated, data);
        cr_assert_eq(r.h->dropped, 0);
        munmap(m, total);
        close(fd);
}

/* Entries of 30000 bytes, numbered from *next, until the head's offset
 * in the data reaches `until`; read and consumed after each when read. */
static void fill_to(struct heap_ring *r, uint64_t *pos, uint32_t *next, uint64_t until, bool read) {
        while ((r->h->head & (r->size - 1)) < until) {
                uint64_t before = r->h->head;
                put(r, (*next)++, 30000);
                cr_assert_gt(r->h->head & (r->size - 1), before & (r->size - 1), "no early return yet");
                if (read)
                        drain(r, pos);
        }
}

/* A ring of 8 x HEAP_RING_REWIND_AT data bytes, filled to that point. */
static void *ring_to_rewind(struct heap_ring *r, uint64_t *pos, uint32_t *next, bool read) {
        void *m = ring_mem(8u * HEAP_RING_REWIND_AT, r);
        fill_to(r, pos, next, HEAP_RING_REWIND_AT, read);
        return m;
}

Test(heap_ring, a_ring_the_reader_keeps_up_with_goes_back_to_its_start) {
        struct heap_ring r;
        uint64_t pos = 0;
        uint32_t next = 0;
        void *m = ring_to_rewind(&r, &pos, &next, true);
        /* Read up to here: the next entry starts the data again. */
        uint8_t *at = heap_ring_begin_write(&r, 16, false, 0);
        cr_assert_not_null(at);
        cr_assert_lt((size_t) (at - r.data), 64u, "the entry went to offset %zu", (size_t) (at - r.data));
        memcpy(at, &next, sizeof(next));
        heap_ring_end_write(&r, at);
        uint32_t size, v;
        int err;
        const uint8_t *e = heap_ring_read(&r, &pos, &size, &err);
        cr_assert_not_null(e, "the reader passes the padding");
        memcpy(&v, e, sizeof(v));
        cr_assert_eq(v, next);
        heap_ring_consume(&r, pos);
        /* Its pages past the rewind were never needed. */
        cr_assert_lt(r.populated, r.size);
        cr_assert_eq(r.h->dropped, 0);
        free(m);
}

Test(heap_ring, a_backlog_keeps_the_ring_going_forward) {
        struct heap_ring r;
        uint64_t pos = 0;
        uint32_t next = 0;
        /* Nothing read: more than half the bytes behind the head wait. */
        void *m = ring_to_rewind(&r, &pos, &next, false);
        uint64_t before = r.h->head;
        put(&r, next++, 30000);
        cr_assert_eq(r.h->head, before + 30008u, "no padding while the reader is behind");
        /* All of them, in order. */
        uint32_t size, v, want = 0;
        int err;
        const uint8_t *e;
        while ((e = heap_ring_read(&r, &pos, &size, &err))) {
                memcpy(&v, e, sizeof(v));
                cr_assert_eq(v, want++);
        }
        cr_assert_eq(err, 0);
        cr_assert_eq(want, next);
        free(m);
}

Test(heap_ring, an_entry_not_committed_stops_the_reader) {
        struct heap_ring r;
        void *m = ring_mem(4096, &r);
        put(&r, 1, 16);
        uint8_t *slow = heap_ring_begin_write(&r, 16, false, 0);
        cr_assert_not_null(slow);
        put(&r, 3, 16); /* another writer, meanwhile */
        uint64_t pos = 0;
        uint32_t size, v;
        int err;
        const uint8_t *e = heap_ring_read(&r, &pos, &size, &err);
        cr_assert_not_null(e);
        memcpy(&v, e, sizeof(v));
        cr_assert_eq(v, 1);
        cr_assert_null(heap_ring_read(&r, &pos, &size, &err), "the reserved entry is not read yet");
        cr_assert_eq(err, 0, "and the ring is not called corrupt");
        uint32_t two = 2;
        memset(slow, 0, 16);
        memcpy(slow, &two, sizeof(two));
        heap_ring_end_write(&r, slow);
        for (uint32_t want = 2; want <= 3; want++) {
                e = heap_ring_read(&r, &pos, &size, &err);
                cr_assert_not_null(e, "entry %u after the commit", want);
                memcpy(&v, e, sizeof(v));
                cr_assert_eq(v, want);
        }
        cr_assert_null(heap_ring_read(&r, &pos, &size, &err));
        free(m);
}

Test(heap_ring, a_full_ring_drops_and_counts) {
        struct heap_ring r;
        void *m = ring_mem(4096, &r);
        int kept = 0;
        for (int k = 0; k < 100; k++) {
                uint8_t *at = heap_ring_begin_write(&r, 200, false, 0);
                if (at) {
                        heap_ring_end_write(&r, at);
                        kept++;
                }
        }
        cr_assert_lt(kept, 100);
        cr_assert_eq(r.h->dropped, (uint64_t) (100 - kept));
        cr_assert_leq(heap_ring_used(&r), 4096u);
        /* An entry more than half the ring never fits. */
        cr_assert_null(heap_ring_begin_write(&r, 3000, false, 0));
        free(m);
}

Test(heap_ring, a_blocked_writer_gives_up_after_its_timeout) {
        struct heap_ring r;
        void *m = ring_mem(4096, &r);
        for (void *at; (at = heap_ring_begin_write(&r, 500, false, 0));)
                heap_ring_end_write(&r, at);
        cr_assert_null(heap_ring_begin_write(&r, 500, true, 20000));
        cr_assert_eq(r.h->timeouts, 1);
        cr_assert_gt(r.h->blocked_ns, 10000000u, "it waited: %llu ns", (unsigned long long) r.h->blocked_ns);
        free(m);
}

Test(heap_ring, a_scribbled_ring_is_refused) {
        struct heap_ring r;
        void *m = ring_mem(4096, &r);
        put(&r, 1, 64);
        uint32_t bad = 12345; /* not a multiple of 8, past the end */
        memcpy(r.data, &bad, sizeof(bad));
        uint64_t pos = 0;
        uint32_t size;
        int err;
        cr_assert_null(heap_ring_read(&r, &pos, &size, &err));
        cr_assert_eq(err, -EBADMSG);
        r.h->head = 1ull << 40; /* a head the ring cannot hold */
        pos = 0;
        cr_assert_null(heap_ring_read(&r, &pos, &size, &err));
        cr_assert_eq(err, -EBADMSG);
        free(m);
}

Test(heap_ring, attach_checks_the_header) {
        struct heap_ring r;
        void *m = ring_mem(4096, &r);
        struct heap_ring again;
        cr_assert_eq(heap_ring_attach(m, heap_ring_total_size(4096), &again), 0);
        cr_assert_eq(heap_ring_attach(m, heap_ring_total_size(8192), &again), -EPROTO);
        memset(m, 0, 8);
        cr_assert_eq(heap_ring_attach(m, heap_ring_total_size(4096), &again), -EPROTO);
        free(m);
}

struct writer_arg {
        struct heap_ring *r;
        uint32_t id;
};

static void *writer(void *p) {
        struct writer_arg *a = p;
        for (uint32_t k = 0; k < 20000; k++) {
                uint32_t v[2] = { a->id, k };
                uint8_t *at;
                while (!(at = heap_ring_begin_write(a->r, sizeof(v), false, 0)))
                        ;
                memcpy(at, v, sizeof(v));
                heap_ring_end_write(a->r, at);
        }
        return NULL;
}

/* Four writers, one reader: each writer's entries arrive whole and in its
 * order. */
Test(heap_ring, writers_of_many_threads) {
        struct heap_ring r;
        void *m = ring_mem(1 << 16, &r);
        pthread_t t[4];
        struct writer_arg a[4];
        for (uint32_t k = 0; k < 4; k++) {
                a[k] = (struct writer_arg) { &r, k };
                pthread_create(&t[k], NULL, writer, &a[k]);
        }
        uint32_t next[4] = { 0 };
        uint64_t pos = 0;
        while (next[0] + next[1] + next[2] + next[3] < 80000) {
                const uint8_t *e;
                uint32_t size;
                int err;
                while ((e = heap_ring_read(&r, &pos, &size, &err))) {
                        uint32_t v[2];
                        memcpy(v, e, sizeof(v));
                        cr_assert_lt(v[0], 4);
                        cr_assert_eq(v[1], next[v[0]], "writer %u: %u after %u", v[0], v[1], next[v[0]]);
                        next[v[0]]++;
                }
                cr_assert_eq(err, 0);
                heap_ring_consume(&r, pos);
        }
        for (int k = 0; k < 4; k++)
                pthread_join(t[k], NULL);
        free(m);
}

Test(heap_addrset, insert_remove_and_tombstones) {
        uint64_t n = 1024;
        void *mem = calloc(1, heap_addrset_bytes(n));
        struct heap_addrset s;
        heap_addrset_init(&s, mem, n);
        for (uint64_t a = 16; a < 16 * 500; a += 16)
                cr_assert(heap_addrset_insert(&s, a));
        cr_assert(heap_addrset_remove(&s, 32));
        cr_assert_not(heap_addrset_remove(&s, 32), "removed once");
        cr_assert_not(heap_addrset_remove(&s, 0x123450), "never there");
        /* Removals leave room that later inserts take. */
        for (int round = 0; round < 50; round++) {
                for (uint64_t a = 16; a < 16 * 500; a += 16)
                        (void) heap_addrset_remove(&s, a);
                for (uint64_t a = 16; a < 16 * 500; a += 16)
                        cr_assert(heap_addrset_insert(&s, a + (uint64_t) round * 0x100000), "round %d", round);
                for (uint64_t a = 16; a < 16 * 500; a += 16)
                        cr_assert(heap_addrset_remove(&s, a + (uint64_t) round * 0x100000));
                for (uint64_t a = 16; a < 16 * 500; a += 16)
                        cr_assert(heap_addrset_insert(&s, a));
        }
        free(mem);
}

Test(heap_addrset, a_full_neighbourhood_refuses) {
        uint64_t n = 64;
        void *mem = calloc(1, heap_addrset_bytes(n));
        struct heap_addrset s;
        heap_addrset_init(&s, mem, n);
        int in = 0;
        for (uint64_t a = 16; a < 16 * 100; a += 16)
                in += heap_addrset_insert(&s, a);
        cr_assert_eq(in, 64, "the 64 slots fill, then inserts fail");
        free(mem);
}
