/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "smb/smb-walk.h"

#define ALL_STATES                                                                                                     \
        (SMB_STATE_BIT(SMB_CHUNK_FREE) | SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN) | SMB_STATE_BIT(SMB_CHUNK_BEING_READ) | \
         SMB_STATE_BIT(SMB_CHUNK_COMPLETE))

static struct smb_abi abi;
static uint8_t *mem;
static size_t mem_size;

static void setup_smb(size_t size, size_t page_size) {
        mem_size = size;
        mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(mem, MAP_FAILED);
        cr_assert_eq(smb_abi_init(&abi, mem, size, page_size), 0);
}

static void teardown_smb(void) {
        munmap(mem, mem_size);
}

static void set_bitmap(size_t page, uint32_t bitmap) {
        atomic_store(&smb_page_header(&abi, page)->header_bitmap, bitmap);
}

static uint32_t layout_bits(enum smb_page_layout layout) {
        return (uint32_t) layout << SMB_LAYOUT_SHIFT;
}

static uint32_t state_bits(size_t chunk, enum smb_chunk_state st) {
        return (uint32_t) st << (chunk * SMB_CHUNK_SHIFT);
}

/* Walks with mask; checks every chunk handed out lies in its page, and
 * returns how many there were. */
static size_t count_walk(unsigned mask) {
        size_t n = 0;
        for (struct smb_walk w = smb_walk_start(&abi, mask); smb_walk_next(&w);) {
                const uint8_t *page = mem + w.page * abi.page_size;
                cr_assert_lt(w.page, abi.num_pages);
                cr_assert_geq(w.chunk.begin, page + SMB_PAGE_HEADER_SIZE);
                cr_assert_leq(w.chunk.begin + w.chunk.size, page + abi.page_size);
                cr_assert(mask & SMB_STATE_BIT(w.state));
                cr_assert_eq(w.state, smb_bitmap_chunk_state(w.bitmap, w.chunk_idx));
                cr_assert_leq(++n, abi.num_pages * SMB_MAX_CHUNKS_PER_PAGE, "the walk does not end");
        }
        return n;
}

TestSuite(smb_walk, .init = NULL, .fini = teardown_smb);

Test(smb_walk, empty_smb_has_no_chunks) {
        setup_smb(4 * 4096, 4096);
        cr_assert_eq(count_walk(ALL_STATES), 0);
}

Test(smb_walk, zeroed_view_walks_nothing) {
        setup_smb(4096, 4096);
        struct smb_abi none = {};
        struct smb_walk w = smb_walk_start(&none, ALL_STATES);
        cr_assert_not(smb_walk_next(&w));
        w = smb_walk_start(NULL, ALL_STATES);
        cr_assert_not(smb_walk_next(&w));
}

Test(smb_walk, every_valid_layout_yields_its_chunks_in_order) {
        static const enum smb_page_layout layouts[] = { SMB_PAGE_DIV1, SMB_PAGE_DIV2, SMB_PAGE_DIV4, SMB_PAGE_DIV7,
                                                        SMB_PAGE_DIV14 };
        setup_smb(5 * 8192, 8192);
        for (size_t page = 0; page < 5; page++)
                cr_assert(smb_try_partition_page(&abi, page, layouts[page]));

        size_t expect_page = 0, expect_idx = 0, n = 0;
        for (struct smb_walk w = smb_walk_start(&abi, ALL_STATES); smb_walk_next(&w); n++) {
                if (expect_idx == smb_num_chunks_for_layout[layouts[expect_page]]) {
                        expect_page++;
                        expect_idx = 0;
                }
                cr_assert_eq(w.page, expect_page);
                cr_assert_eq(w.chunk_idx, expect_idx);
                cr_assert_eq(w.state, SMB_CHUNK_FREE);
                cr_assert_eq(w.chunk.size, abi.chunk_sizes[layouts[expect_page]]);
                cr_assert_eq(w.chunk.begin,
                             mem + expect_page * 8192 + SMB_PAGE_HEADER_SIZE + expect_idx * w.chunk.size);
                expect_idx++;
        }
        cr_assert_eq(n, 1 + 2 + 4 + 7 + 14);
}

Test(smb_walk, the_mask_selects_states) {
        setup_smb(2 * 4096, 4096);
        set_bitmap(0, layout_bits(SMB_PAGE_DIV4) | state_bits(0, SMB_CHUNK_COMPLETE) |
                              state_bits(1, SMB_CHUNK_BEING_WRITTEN) | state_bits(3, SMB_CHUNK_COMPLETE));
        set_bitmap(1, layout_bits(SMB_PAGE_DIV2) | state_bits(1, SMB_CHUNK_BEING_READ));

        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_COMPLETE)), 2);
        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN)), 1);
        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_BEING_READ)), 1);
        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_FREE)), 2);
        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_COMPLETE) | SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN)), 3);
        cr_assert_eq(count_walk(0), 0);

        struct smb_walk w = smb_walk_start(&abi, SMB_STATE_BIT(SMB_CHUNK_COMPLETE));
        cr_assert(smb_walk_next(&w));
        cr_assert_eq(w.page, 0);
        cr_assert_eq(w.chunk_idx, 0);
        cr_assert(smb_walk_next(&w));
        cr_assert_eq(w.page, 0);
        cr_assert_eq(w.chunk_idx, 3);
        cr_assert_not(smb_walk_next(&w));
        cr_assert_not(smb_walk_next(&w), "a finished walk starts again");
}

Test(smb_walk, unpartitioned_page_with_state_bits_has_no_chunks) {
        setup_smb(4096, 4096);
        set_bitmap(0, SMB_ALL_CHUNKS_MASK);
        cr_assert_eq(count_walk(ALL_STATES), 0);
}

Test(smb_walk, reserved_layouts_have_no_chunks) {
        setup_smb(2 * 4096, 4096);
        set_bitmap(0, layout_bits(SMB_PAGE_DIV_RESERVED1) | SMB_ALL_CHUNKS_MASK);
        set_bitmap(1, layout_bits(SMB_PAGE_DIV_RESERVED2) | SMB_ALL_CHUNKS_MASK);
        cr_assert_eq(count_walk(ALL_STATES), 0);
}

Test(smb_walk, state_bits_past_the_layout_are_ignored) {
        setup_smb(4096, 4096);
        /* Two chunks, with every state bit of the 14 set. */
        set_bitmap(0, layout_bits(SMB_PAGE_DIV2) | SMB_ALL_CHUNKS_MASK);
        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_COMPLETE)), 2);
        cr_assert_eq(count_walk(ALL_STATES), 2);
}

Test(smb_walk, the_top_bit_does_not_change_the_layout) {
        setup_smb(4096, 4096);
        set_bitmap(0, 0x80000000u | layout_bits(SMB_PAGE_DIV1) | state_bits(0, SMB_CHUNK_COMPLETE));
        cr_assert_eq(count_walk(SMB_STATE_BIT(SMB_CHUNK_COMPLETE)), 1);
}

Test(smb_walk, no_header_value_reads_past_a_page) {
        /* Every layout value with every state, at the smallest and the
         * largest page size: what is handed out stays inside its page. */
        static const size_t page_sizes[] = { SMB_MIN_PAGE_SIZE, SMB_MAX_PAGE_SIZE };
        for (size_t k = 0; k < 2; k++) {
                setup_smb(page_sizes[k] * _SMB_PAGE_LAYOUT_MAX, page_sizes[k]);
                size_t expect = 0;
                for (unsigned l = 0; l < _SMB_PAGE_LAYOUT_MAX; l++) {
                        set_bitmap(l, 0x80000000u | layout_bits((enum smb_page_layout) l) | SMB_ALL_CHUNKS_MASK);
                        expect += smb_num_chunks_for_layout[l];
                }
                cr_assert_eq(count_walk(ALL_STATES), expect);
                teardown_smb();
        }
        setup_smb(4096, 4096); /* for the fini */
}

Test(smb_walk, a_page_is_judged_on_one_snapshot) {
        setup_smb(2 * 4096, 4096);
        set_bitmap(0, layout_bits(SMB_PAGE_DIV4) | state_bits(0, SMB_CHUNK_COMPLETE) |
                              state_bits(2, SMB_CHUNK_COMPLETE));
        set_bitmap(1, layout_bits(SMB_PAGE_DIV1) | state_bits(0, SMB_CHUNK_COMPLETE));

        struct smb_walk w = smb_walk_start(&abi, SMB_STATE_BIT(SMB_CHUNK_COMPLETE));
        cr_assert(smb_walk_next(&w));
        cr_assert_eq(w.chunk_idx, 0);
        /* The peer re-lays the page out while the walk is in it: the rest
         * of the page is still read with the layout it was entered with. */
        set_bitmap(0, layout_bits(SMB_PAGE_DIV14) | SMB_ALL_CHUNKS_MASK);
        cr_assert(smb_walk_next(&w));
        cr_assert_eq(w.page, 0);
        cr_assert_eq(w.chunk_idx, 2);
        cr_assert_eq(w.chunk.size, abi.chunk_sizes[SMB_PAGE_DIV4]);
        /* The next page is read when entered. */
        set_bitmap(1, layout_bits(SMB_PAGE_DIV2) | state_bits(1, SMB_CHUNK_COMPLETE));
        cr_assert(smb_walk_next(&w));
        cr_assert_eq(w.page, 1);
        cr_assert_eq(w.chunk_idx, 1);
        cr_assert_not(smb_walk_next(&w));
}

Test(smb_walk, a_peer_rewriting_headers_cannot_keep_the_walk_going) {
        setup_smb(8 * 4096, 4096);
        for (size_t page = 0; page < 8; page++)
                set_bitmap(page, layout_bits(SMB_PAGE_DIV14) | SMB_ALL_CHUNKS_MASK);
        size_t n = 0;
        for (struct smb_walk w = smb_walk_start(&abi, ALL_STATES); smb_walk_next(&w); n++) {
                /* Every header full again, each time a chunk is seen. */
                for (size_t page = 0; page < 8; page++)
                        set_bitmap(page, layout_bits(SMB_PAGE_DIV14) | SMB_ALL_CHUNKS_MASK);
                cr_assert_leq(n, 8 * SMB_MAX_CHUNKS_PER_PAGE);
        }
        cr_assert_eq(n, 8 * SMB_MAX_CHUNKS_PER_PAGE);
}

Test(smb_walk, taking_a_chunk_during_the_walk) {
        /* As the service scrapes: the walk finds a complete chunk, the
         * caller takes it for reading and frees it. */
        setup_smb(2 * 4096, 4096);
        for (size_t page = 0; page < 2; page++) {
                cr_assert(smb_try_partition_page(&abi, page, SMB_PAGE_DIV2));
                for (size_t i = 0; i < 2; i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_writing(&abi, page, i, 5, (uint32_t) i);
                        cr_assert(smb_chunk_is_valid(&c));
                        cr_assert_eq(smb_chunk_writer_id(&c), 5);
                        cr_assert_geq(smb_release_chunk_as_complete(&abi, &c), 0);
                }
        }
        size_t taken = 0;
        for (struct smb_walk w = smb_walk_start(&abi, SMB_STATE_BIT(SMB_CHUNK_COMPLETE)); smb_walk_next(&w);) {
                struct smb_chunk c = smb_try_acquire_chunk_for_reading(&abi, w.page, w.chunk_idx);
                cr_assert(smb_chunk_is_valid(&c));
                cr_assert_eq(c.begin, w.chunk.begin);
                cr_assert_eq(smb_release_chunk_as_free(&abi, &c), (int) w.page);
                taken++;
        }
        cr_assert_eq(taken, 4);
        cr_assert_eq(smb_page_bitmap(&abi, 0), 0);
        cr_assert_eq(smb_page_bitmap(&abi, 1), 0);
}

/* Walked with its memfd, an SMB of 16 pages of 32 KiB where only pages 2
 * and 9 were written yields the chunks of those two and reads no other
 * page: the file still has holes everywhere else (a walk that read every
 * page header would have given each of those pages memory). With a file
 * that has no data at all, nothing is read. */
static bool page_has_data(int fd, size_t page, size_t page_size) {
        off_t at = (off_t) (page * page_size);
        off_t d = lseek(fd, at, SEEK_DATA);
        return d >= 0 && d < at + (off_t) page_size;
}

Test(smb_walk, with_its_file_unwritten_pages_are_not_read) {
        const size_t ps = 32 * 1024, n = 16;
        int fd = memfd_create("test-smb", MFD_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, (off_t) (ps * n)), 0);
        mem_size = ps * n;
        mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(mem, MAP_FAILED);
        cr_assert_eq(smb_abi_init(&abi, mem, mem_size, ps), 0);

        struct smb_walk w = smb_walk_start_fd(&abi, fd, ALL_STATES);
        cr_assert_not(smb_walk_next(&w), "an SMB nobody wrote has no chunks");

        set_bitmap(2, layout_bits(SMB_PAGE_DIV2) | state_bits(1, SMB_CHUNK_COMPLETE));
        set_bitmap(9, layout_bits(SMB_PAGE_DIV4) | state_bits(3, SMB_CHUNK_BEING_WRITTEN));
        size_t pages[8], k = 0;
        uint32_t idx[8];
        for (w = smb_walk_start_fd(&abi, fd, SMB_STATE_BIT(SMB_CHUNK_COMPLETE) | SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN));
             smb_walk_next(&w);) {
                cr_assert_lt(k, 8);
                pages[k] = w.page;
                idx[k++] = w.chunk_idx;
        }
        cr_assert_eq(k, 2);
        cr_assert_eq(pages[0], 2);
        cr_assert_eq(idx[0], 1);
        cr_assert_eq(pages[1], 9);
        cr_assert_eq(idx[1], 3);
        for (size_t p = 0; p < n; p++)
                cr_assert_eq(page_has_data(fd, p, ps), p == 2 || p == 9, "page %zu %s", p,
                             p == 2 || p == 9 ? "lost its data" : "was read");
        close(fd);
}

/* A file that cannot say where its data is (a pipe here) has every page
 * walked, as without one. */
Test(smb_walk, a_file_without_data_offsets_walks_every_page) {
        setup_smb(4 * 4096, 4096);
        set_bitmap(3, layout_bits(SMB_PAGE_DIV1) | state_bits(0, SMB_CHUNK_COMPLETE));
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        struct smb_walk w = smb_walk_start_fd(&abi, pfd[0], ALL_STATES);
        cr_assert(smb_walk_next(&w));
        cr_assert_eq(w.page, 3);
        cr_assert_not(smb_walk_next(&w));
        close(pfd[0]);
        close(pfd[1]);
}
