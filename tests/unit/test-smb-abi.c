/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "smb/smb-abi.h"

static uint8_t *map(size_t size) {
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(m, MAP_FAILED);
        return m;
}

Test(smb_abi, chunk_sizes_match_the_abi) {
        /* ((page - 8) / n) rounded down to 4. */
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_DIV1), 4088);
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_DIV2), 2044);
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_DIV4), 1020);
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_DIV7), 584);
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_DIV14), 292);
        cr_assert_eq(smb_chunk_size_for_layout(32768, SMB_PAGE_DIV1), 32760);
        cr_assert_eq(smb_chunk_size_for_layout(65536, SMB_PAGE_DIV14), 4680);
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_NOT_PARTITIONED), 0);
        cr_assert_eq(smb_chunk_size_for_layout(4096, SMB_PAGE_DIV_RESERVED1), 0);
}

Test(smb_abi, packet_word_bit_layout) {
        uint16_t w = smb_packets_pack(1023, 0x3f);
        cr_assert_eq(w, 0xffff);
        w = smb_packets_pack(5, SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT);
        cr_assert_eq(w, 5 | (2 << 10));
        cr_assert_eq(smb_packets_count(w), 5);
        cr_assert_eq(smb_packets_flags(w), 2);
}

Test(smb_abi, bitmap_decoding) {
        uint32_t bm = (SMB_PAGE_DIV4 << SMB_LAYOUT_SHIFT) | (SMB_CHUNK_COMPLETE << 0) | (SMB_CHUNK_BEING_WRITTEN << 2) |
                      (SMB_CHUNK_BEING_READ << 6);
        cr_assert_eq(smb_bitmap_layout(bm), SMB_PAGE_DIV4);
        cr_assert_eq(smb_bitmap_num_chunks(bm), 4);
        cr_assert_eq(smb_bitmap_chunk_state(bm, 0), SMB_CHUNK_COMPLETE);
        cr_assert_eq(smb_bitmap_chunk_state(bm, 1), SMB_CHUNK_BEING_WRITTEN);
        cr_assert_eq(smb_bitmap_chunk_state(bm, 2), SMB_CHUNK_FREE);
        cr_assert_eq(smb_bitmap_chunk_state(bm, 3), SMB_CHUNK_BEING_READ);
}

Test(smb_abi, geometry_is_validated) {
        struct smb_abi abi;
        uint8_t *m = map(65536);
        cr_assert_eq(smb_abi_init(&abi, m, 65536, 4096), 0);
        cr_assert_eq(abi.num_pages, 16);
        cr_assert_eq(smb_abi_init(&abi, m, 65536, 2048), -EINVAL);
        cr_assert_eq(smb_abi_init(&abi, m, 65536, 6144), -EINVAL);
        cr_assert_eq(smb_abi_init(&abi, m, 65536, 131072), -EINVAL);
        cr_assert_eq(smb_abi_init(&abi, m, 10000, 4096), -EINVAL);
        cr_assert_eq(smb_abi_init(&abi, m + 8, 4096, 4096), -EINVAL);
        cr_assert_eq(smb_abi_init(&abi, m, 0, 4096), -EINVAL);
        munmap(m, 65536);
}

Test(smb_abi, chunk_lifecycle) {
        struct smb_abi abi;
        uint8_t *m = map(8192);
        size_t page, idx;
        cr_assert_eq(smb_abi_init(&abi, m, 8192, 4096), 0);

        /* Unpartitioned: nothing to acquire. */
        cr_assert_not(smb_chunk_is_valid(&(struct smb_chunk) { 0 }));
        struct smb_chunk c = smb_try_acquire_chunk_for_writing(&abi, 0, 0, 1, 1);
        cr_assert_not(smb_chunk_is_valid(&c));

        cr_assert(smb_try_partition_page(&abi, 1, SMB_PAGE_DIV4));
        cr_assert_not(smb_try_partition_page(&abi, 1, SMB_PAGE_DIV2), "a partitioned page was re-partitioned");
        cr_assert_eq(smb_free_chunks(&abi, 1), 0xf);

        c = smb_try_acquire_chunk_for_writing(&abi, 1, 2, 7, 42);
        cr_assert(smb_chunk_is_valid(&c));
        cr_assert_eq(c.size, 1020);
        cr_assert_eq(c.begin, m + 4096 + 8 + 2 * 1020);
        cr_assert_eq(smb_chunk_header(&c)->writer_id, 7);
        cr_assert_eq(smb_chunk_header(&c)->chunk_id, 42);
        cr_assert_eq(smb_chunk_location(&abi, &c, &page, &idx), 0);
        cr_assert_eq(page, 1);
        cr_assert_eq(idx, 2);
        cr_assert_eq(smb_free_chunks(&abi, 1), 0xb);

        /* Writing twice, reading before completion: refused. */
        cr_assert_not(smb_chunk_is_valid(&(struct smb_chunk) { 0 }));
        struct smb_chunk again = smb_try_acquire_chunk_for_writing(&abi, 1, 2, 7, 43);
        cr_assert_not(smb_chunk_is_valid(&again));
        struct smb_chunk early = smb_try_acquire_chunk_for_reading(&abi, 1, 2);
        cr_assert_not(smb_chunk_is_valid(&early));
        /* Freeing a chunk that is being written: refused. */
        cr_assert_eq(smb_release_chunk_as_free(&abi, &c), -EBUSY);

        cr_assert_eq(smb_release_chunk_as_complete(&abi, &c), 1);
        cr_assert_eq(smb_bitmap_chunk_state(smb_page_bitmap(&abi, 1), 2), SMB_CHUNK_COMPLETE);
        struct smb_chunk r = smb_try_acquire_chunk_for_reading(&abi, 1, 2);
        cr_assert(smb_chunk_is_valid(&r));
        cr_assert_eq(r.begin, c.begin);
        cr_assert_eq(smb_release_chunk_as_free(&abi, &r), 1);
        /* The last busy chunk freed: the page is free and unpartitioned. */
        cr_assert_eq(smb_page_bitmap(&abi, 1), 0);
        cr_assert_eq(smb_chunk_header(&r)->writer_id, 0);
        munmap(m, 8192);
}

Test(smb_abi, page_completion) {
        struct smb_abi abi;
        uint8_t *m = map(4096);
        cr_assert_eq(smb_abi_init(&abi, m, 4096, 4096), 0);
        cr_assert_not(smb_page_is_complete(&abi, 0));
        cr_assert(smb_try_partition_page(&abi, 0, SMB_PAGE_DIV2));
        struct smb_chunk a = smb_try_acquire_chunk_for_writing(&abi, 0, 0, 1, 0);
        struct smb_chunk b = smb_try_acquire_chunk_for_writing(&abi, 0, 1, 1, 1);
        cr_assert_eq(smb_release_chunk_as_complete(&abi, &a), 0);
        cr_assert_not(smb_page_is_complete(&abi, 0));
        cr_assert_eq(smb_release_chunk_as_complete(&abi, &b), 0);
        cr_assert(smb_page_is_complete(&abi, 0));
        munmap(m, 4096);
}

Test(smb_abi, out_of_range_requests_fail_safely) {
        struct smb_abi abi;
        uint8_t *m = map(4096);
        cr_assert_eq(smb_abi_init(&abi, m, 4096, 4096), 0);
        cr_assert(smb_try_partition_page(&abi, 0, SMB_PAGE_DIV14));
        struct smb_chunk c = smb_try_acquire_chunk_for_writing(&abi, 0, 14, 1, 0);
        cr_assert_not(smb_chunk_is_valid(&c));
        c = smb_try_acquire_chunk_for_reading(&abi, 5, 0);
        cr_assert_not(smb_chunk_is_valid(&c));
        cr_assert_not(smb_try_partition_page(&abi, 3, SMB_PAGE_DIV1));
        cr_assert_not(smb_try_partition_page(&abi, 0, SMB_PAGE_DIV_RESERVED1));
        struct smb_chunk bogus = { .begin = m + 13, .size = 100 };
        size_t p, i;
        cr_assert_eq(smb_chunk_location(&abi, &bogus, &p, &i), -EINVAL);
        /* A garbage bitmap written by a hostile peer (reserved layout). */
        atomic_store(&smb_page_header(&abi, 0)->header_bitmap, 0x7fffffffu);
        c = smb_try_acquire_chunk_for_reading(&abi, 0, 0);
        cr_assert_not(smb_chunk_is_valid(&c));
        munmap(m, 4096);
}

struct stress {
        struct smb_abi *abi;
        unsigned rounds;
        unsigned long written, read;
        uint32_t bad;
};

static void *writer(void *arg) {
        struct stress *s = arg;
        uint32_t id = 0;
        while (id < s->rounds) {
                for (size_t page = 0; page < s->abi->num_pages && id < s->rounds; page++) {
                        if (smb_page_bitmap(s->abi, page) == 0)
                                (void) smb_try_partition_page(s->abi, page, SMB_PAGE_DIV4);
                        for (size_t i = 0; i < 4 && id < s->rounds; i++) {
                                struct smb_chunk c = smb_try_acquire_chunk_for_writing(s->abi, page, i, 1, id);
                                if (!smb_chunk_is_valid(&c))
                                        continue;
                                memcpy(smb_chunk_payload(&c), &id, sizeof(id));
                                id++;
                                if (smb_release_chunk_as_complete(s->abi, &c) < 0)
                                        s->bad++;
                                s->written++;
                        }
                }
        }
        return NULL;
}

static void *reader(void *arg) {
        struct stress *s = arg;
        while (s->read < s->rounds) {
                for (size_t page = 0; page < s->abi->num_pages; page++)
                        for (size_t i = 0; i < 4; i++) {
                                struct smb_chunk c = smb_try_acquire_chunk_for_reading(s->abi, page, i);
                                if (!smb_chunk_is_valid(&c))
                                        continue;
                                uint32_t id;
                                memcpy(&id, smb_chunk_payload(&c), sizeof(id));
                                if (id != smb_chunk_header(&c)->chunk_id)
                                        s->bad++;
                                if (smb_release_chunk_as_free(s->abi, &c) < 0)
                                        s->bad++;
                                s->read++;
                        }
        }
        return NULL;
}

Test(smb_abi, concurrent_writer_and_reader, .timeout = 60) {
        struct smb_abi abi;
        uint8_t *m = map(4 * 4096);
        cr_assert_eq(smb_abi_init(&abi, m, 4 * 4096, 4096), 0);
        struct stress s = { .abi = &abi, .rounds = 200000 };
        pthread_t w, r;
        pthread_create(&w, NULL, writer, &s);
        pthread_create(&r, NULL, reader, &s);
        pthread_join(w, NULL);
        pthread_join(r, NULL);
        cr_assert_eq(s.bad, 0, "%u chunks were mishandled", s.bad);
        cr_assert_eq(s.written, 200000);
        cr_assert_eq(s.read, 200000, "chunks lost: written %lu, read %lu", s.written, s.read);
        munmap(m, 4 * 4096);
}
