/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The scrape of a producer's shared memory buffer (producer_scrape): every
 * chunk a writer completed or is writing reaches the chunk sink, in each
 * writer's chunk id order whatever pages they sit in, and the complete
 * ones go back free. The sink is replaced (the test links with
 * --wrap=chunk_sink_copy) by one that notes each copy. */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "core/ports/chunk-sink.h"
#include "core/ports/producer-port.h"
#include "core/sessions/producer.h"
#include "smb/smb-walk.h"

#define PAGE 4096
#define N_PAGES 4

struct copy {
        uint16_t writer_id;
        uint32_t chunk_id;
        bool complete;
};

static struct copy copies[64];
static size_t n_copies;

int __wrap_chunk_sink_copy(struct traced_service *svc, struct producer *p, uint32_t target_buffer, const uint8_t *chunk,
                           size_t size, enum chunk_sink_flags flags);
int __wrap_chunk_sink_copy(struct traced_service *svc, struct producer *p, uint32_t target_buffer, const uint8_t *chunk,
                           size_t size, enum chunk_sink_flags flags) {
        (void) svc, (void) p, (void) target_buffer;
        const struct smb_chunk_header *h = (const void *) chunk;
        cr_assert_geq(size, SMB_CHUNK_HEADER_SIZE);
        cr_assert_lt(n_copies, sizeof(copies) / sizeof(copies[0]));
        copies[n_copies++] = (struct copy) {
                .writer_id = atomic_load(&h->writer_id),
                .chunk_id = atomic_load(&h->chunk_id),
                .complete = flags & CHUNK_SINK_COMPLETE,
        };
        return 0;
}

static uint8_t *mem;
static struct producer prod;

static void setup(void) {
        mem = mmap(NULL, N_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(mem, MAP_FAILED);
        prod = (struct producer) { .smb = mem, .smb_size = N_PAGES * PAGE };
        cr_assert_eq(smb_abi_init(&prod.abi, mem, N_PAGES * PAGE, PAGE), 0);
        for (size_t i = 0; i < N_PAGES; i++)
                cr_assert(smb_try_partition_page(&prod.abi, i, SMB_PAGE_DIV4));
        n_copies = 0;
}

static void teardown(void) {
        producer_commit_done(&prod);
        munmap(mem, N_PAGES * PAGE);
}

/* Writes chunk id of writer into chunk idx of page, one packet, and
 * leaves it complete or being written. */
static void put_chunk(size_t page, size_t idx, uint16_t writer, uint32_t id, bool complete) {
        struct smb_chunk c = smb_try_acquire_chunk_for_writing(&prod.abi, page, idx, writer, id);
        cr_assert(smb_chunk_is_valid(&c));
        atomic_store(&smb_chunk_header(&c)->packets, smb_packets_pack(1, 0));
        if (complete)
                cr_assert_geq(smb_release_chunk_as_complete(&prod.abi, &c), 0);
}

TestSuite(producer_scrape, .init = setup, .fini = teardown);

/* Writer 1 wrapped around the buffer: its oldest chunks sit in the last
 * page, its newest (one still being written) in the first ones; writer 2's
 * chunks lie between. */
Test(producer_scrape, chunks_go_to_the_sink_in_each_writers_order) {
        uint32_t id = 100;
        for (size_t i = 0; i < 4; i++)
                put_chunk(3, i, 1, id++, true);
        for (size_t i = 0; i < 4; i++)
                put_chunk(0, i, 1, id++, true);
        put_chunk(1, 0, 1, id++, true);
        put_chunk(1, 1, 1, id, false);
        put_chunk(2, 3, 2, 7, true);
        put_chunk(2, 0, 2, 8, true);
        put_chunk(2, 1, 2, 9, false);

        producer_scrape(&prod, true);

        cr_assert_eq(n_copies, 13, "%zu chunks copied", n_copies);
        for (size_t i = 0; i < 10; i++) {
                cr_assert_eq(copies[i].writer_id, 1);
                cr_assert_eq(copies[i].chunk_id, 100 + i, "copy %zu: chunk %u", i, copies[i].chunk_id);
                cr_assert_eq(copies[i].complete, i < 9);
        }
        for (size_t i = 10; i < 13; i++) {
                cr_assert_eq(copies[i].writer_id, 2);
                cr_assert_eq(copies[i].chunk_id, 7 + (i - 10), "copy %zu: chunk %u", i, copies[i].chunk_id);
                cr_assert_eq(copies[i].complete, i < 12);
        }
        /* The complete chunks are free again, those being written not. */
        for (struct smb_walk w = smb_walk_start(&prod.abi, SMB_STATE_BIT(SMB_CHUNK_COMPLETE) |
                                                                   SMB_STATE_BIT(SMB_CHUNK_BEING_READ));
             smb_walk_next(&w);)
                cr_assert_fail("chunk %u of page %zu was not given back", w.chunk_idx, w.page);
        size_t writing = 0;
        for (struct smb_walk w = smb_walk_start(&prod.abi, SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN)); smb_walk_next(&w);)
                writing++;
        cr_assert_eq(writing, 2);
}

/* Chunk ids wrap around at 2^32: the order follows them across. */
Test(producer_scrape, the_order_holds_across_the_wrap_of_chunk_ids) {
        put_chunk(0, 0, 3, 1, true);
        put_chunk(0, 1, 3, 0, true);
        put_chunk(1, 0, 3, UINT32_MAX, true);
        put_chunk(2, 2, 3, UINT32_MAX - 1, true);

        producer_scrape(&prod, false);

        uint32_t want[] = { UINT32_MAX - 1, UINT32_MAX, 0, 1 };
        cr_assert_eq(n_copies, 4);
        for (size_t i = 0; i < 4; i++)
                cr_assert_eq(copies[i].chunk_id, want[i], "copy %zu: chunk %u", i, copies[i].chunk_id);
}

/* Without the chunks being written, those stay as they are. */
Test(producer_scrape, chunks_being_written_are_left_alone_unless_asked_for) {
        put_chunk(0, 0, 1, 5, true);
        put_chunk(0, 1, 1, 6, false);

        producer_scrape(&prod, false);

        cr_assert_eq(n_copies, 1);
        cr_assert_eq(copies[0].chunk_id, 5);
        cr_assert(copies[0].complete);
}
