/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "smb/smb-abi.h"

const uint32_t smb_num_chunks_for_layout[_SMB_PAGE_LAYOUT_MAX] = { 0, 1, 2, 4, 7, 14, 0, 0 };

/* Bounded compare-and-swap retries: the other side may be contending. */
#define SMB_CAS_ATTEMPTS 64

uint16_t smb_chunk_size_for_layout(size_t page_size, enum smb_page_layout layout) {
        if ((unsigned) layout >= _SMB_PAGE_LAYOUT_MAX)
                return 0;
        uint32_t n = smb_num_chunks_for_layout[layout];
        if (n == 0 || page_size <= SMB_PAGE_HEADER_SIZE)
                return 0;
        size_t size = ((page_size - SMB_PAGE_HEADER_SIZE) / n) & ~(size_t) (SMB_CHUNK_ALIGNMENT - 1);
        return size > UINT16_MAX ? 0 : (uint16_t) size;
}

int smb_abi_init(struct smb_abi *abi, uint8_t *start, size_t size, size_t page_size) {
        if (!abi || !start)
                return -EINVAL;
        if (page_size < SMB_MIN_PAGE_SIZE || page_size > SMB_MAX_PAGE_SIZE || page_size % SMB_MIN_PAGE_SIZE != 0)
                return -EINVAL;
        if (size == 0 || size % page_size != 0 || (uintptr_t) start % SMB_MIN_PAGE_SIZE != 0)
                return -EINVAL;
        *abi = (struct smb_abi) {
                .start = start,
                .size = size,
                .page_size = page_size,
                .num_pages = size / page_size,
        };
        for (unsigned l = 0; l < _SMB_PAGE_LAYOUT_MAX; l++)
                abi->chunk_sizes[l] = smb_chunk_size_for_layout(page_size, (enum smb_page_layout) l);
        return 0;
}

bool smb_try_partition_page(struct smb_abi *abi, size_t page_idx, enum smb_page_layout layout) {
        if (page_idx >= abi->num_pages || layout < SMB_PAGE_DIV1 || layout > SMB_PAGE_DIV14)
                return false;
        uint32_t expected = 0;
        uint32_t next = ((uint32_t) layout << SMB_LAYOUT_SHIFT) & SMB_LAYOUT_MASK;
        return atomic_compare_exchange_strong_explicit(&smb_page_header(abi, page_idx)->header_bitmap, &expected, next,
                                                       memory_order_acq_rel, memory_order_relaxed);
}

struct smb_chunk smb_get_chunk_unchecked(const struct smb_abi *abi, size_t page_idx, uint32_t bitmap, size_t chunk_idx) {
        uint32_t n = smb_bitmap_num_chunks(bitmap);
        if (page_idx >= abi->num_pages || chunk_idx >= n)
                return (struct smb_chunk) {};
        uint16_t csize = abi->chunk_sizes[smb_bitmap_layout(bitmap)];
        if (csize < SMB_CHUNK_HEADER_SIZE)
                return (struct smb_chunk) {};
        uint8_t *begin = abi->start + abi->page_size * page_idx + SMB_PAGE_HEADER_SIZE + chunk_idx * csize;
        return (struct smb_chunk) {
                .begin = begin,
                .size = csize,
                .chunk_idx = (uint8_t) chunk_idx,
        };
}

static struct smb_chunk try_acquire(struct smb_abi *abi, size_t page_idx, size_t chunk_idx,
                                    enum smb_chunk_state desired, uint16_t writer_id, uint32_t chunk_id) {
        if (page_idx >= abi->num_pages)
                return (struct smb_chunk) {};
        _Atomic uint32_t *hdr = &smb_page_header(abi, page_idx)->header_bitmap;
        enum smb_chunk_state expected_state = desired == SMB_CHUNK_BEING_WRITTEN ? SMB_CHUNK_FREE : SMB_CHUNK_COMPLETE;

        for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS; attempt++) {
                uint32_t bitmap = atomic_load_explicit(hdr, memory_order_acquire);
                if (chunk_idx >= smb_bitmap_num_chunks(bitmap))
                        return (struct smb_chunk) {};
                if (smb_bitmap_chunk_state(bitmap, chunk_idx) != expected_state)
                        return (struct smb_chunk) {};
                uint32_t next = bitmap & ~(SMB_CHUNK_MASK << (chunk_idx * SMB_CHUNK_SHIFT));
                next |= (uint32_t) desired << (chunk_idx * SMB_CHUNK_SHIFT);
                if (atomic_compare_exchange_strong_explicit(hdr, &bitmap, next, memory_order_acq_rel,
                                                            memory_order_relaxed)) {
                        struct smb_chunk c = smb_get_chunk_unchecked(abi, page_idx, bitmap, chunk_idx);
                        if (smb_chunk_is_valid(&c) && desired == SMB_CHUNK_BEING_WRITTEN) {
                                struct smb_chunk_header *h = smb_chunk_header(&c);
                                atomic_store_explicit(&h->writer_id, writer_id, memory_order_relaxed);
                                atomic_store_explicit(&h->chunk_id, chunk_id, memory_order_relaxed);
                                atomic_store_explicit(&h->packets, 0, memory_order_release);
                        }
                        return c;
                }
                if (attempt > SMB_CAS_ATTEMPTS / 2)
                        sched_yield();
        }
        return (struct smb_chunk) {};
}

struct smb_chunk smb_try_acquire_chunk_for_writing(struct smb_abi *abi, size_t page_idx, size_t chunk_idx,
                                                   uint16_t writer_id, uint32_t chunk_id) {
        return try_acquire(abi, page_idx, chunk_idx, SMB_CHUNK_BEING_WRITTEN, writer_id, chunk_id);
}

struct smb_chunk smb_try_acquire_chunk_for_reading(struct smb_abi *abi, size_t page_idx, size_t chunk_idx) {
        return try_acquire(abi, page_idx, chunk_idx, SMB_CHUNK_BEING_READ, 0, 0);
}

int smb_chunk_location(const struct smb_abi *abi, const struct smb_chunk *chunk, size_t *ret_page, size_t *ret_chunk) {
        if (!smb_chunk_is_valid(chunk) || chunk->begin < abi->start || chunk->begin + chunk->size > abi->start + abi->size)
                return -EINVAL;
        size_t rel = (size_t) (chunk->begin - abi->start);
        size_t page = rel / abi->page_size;
        size_t off = rel % abi->page_size;
        if (off < SMB_PAGE_HEADER_SIZE || (off - SMB_PAGE_HEADER_SIZE) % chunk->size != 0)
                return -EINVAL;
        size_t idx = (off - SMB_PAGE_HEADER_SIZE) / chunk->size;
        if (idx >= SMB_MAX_CHUNKS_PER_PAGE)
                return -EINVAL;
        *ret_page = page;
        *ret_chunk = idx;
        return 0;
}

static int release(struct smb_abi *abi, const struct smb_chunk *chunk, enum smb_chunk_state desired) {
        size_t page, idx;
        int r = smb_chunk_location(abi, chunk, &page, &idx);
        if (r < 0)
                return r;
        enum smb_chunk_state expected = desired == SMB_CHUNK_COMPLETE ? SMB_CHUNK_BEING_WRITTEN : SMB_CHUNK_BEING_READ;
        _Atomic uint32_t *hdr = &smb_page_header(abi, page)->header_bitmap;

        if (desired == SMB_CHUNK_FREE) {
                struct smb_chunk_header *h = smb_chunk_header(chunk);
                atomic_store_explicit(&h->writer_id, 0, memory_order_relaxed);
                atomic_store_explicit(&h->chunk_id, 0, memory_order_relaxed);
                atomic_store_explicit(&h->packets, 0, memory_order_release);
        }
        for (int attempt = 0; attempt < SMB_CAS_ATTEMPTS; attempt++) {
                uint32_t bitmap = atomic_load_explicit(hdr, memory_order_relaxed);
                /* The other side may have re-laid the page out or moved the
                 * chunk meanwhile: that is a broken peer, not a crash. */
                if (abi->chunk_sizes[smb_bitmap_layout(bitmap)] != chunk->size ||
                    idx >= smb_bitmap_num_chunks(bitmap) || smb_bitmap_chunk_state(bitmap, idx) != expected)
                        return -EBUSY;
                uint32_t next = bitmap & ~(SMB_CHUNK_MASK << (idx * SMB_CHUNK_SHIFT));
                next |= (uint32_t) desired << (idx * SMB_CHUNK_SHIFT);
                if ((next & SMB_ALL_CHUNKS_MASK) == 0)
                        next = 0; /* every chunk free: the page is free again */
                if (atomic_compare_exchange_strong_explicit(hdr, &bitmap, next, memory_order_acq_rel,
                                                            memory_order_relaxed))
                        return (int) page;
                if (attempt > SMB_CAS_ATTEMPTS / 2)
                        sched_yield();
        }
        return -EBUSY;
}

int smb_release_chunk_as_complete(struct smb_abi *abi, const struct smb_chunk *chunk) {
        return release(abi, chunk, SMB_CHUNK_COMPLETE);
}

int smb_release_chunk_as_free(struct smb_abi *abi, const struct smb_chunk *chunk) {
        return release(abi, chunk, SMB_CHUNK_FREE);
}

uint32_t smb_free_chunks(const struct smb_abi *abi, size_t page_idx) {
        if (page_idx >= abi->num_pages)
                return 0;
        uint32_t bitmap = smb_page_bitmap(abi, page_idx);
        uint32_t n = smb_bitmap_num_chunks(bitmap), res = 0;
        for (uint32_t i = 0; i < n; i++)
                if (smb_bitmap_chunk_state(bitmap, i) == SMB_CHUNK_FREE)
                        res |= 1u << i;
        return res;
}

bool smb_page_is_complete(const struct smb_abi *abi, size_t page_idx) {
        if (page_idx >= abi->num_pages)
                return false;
        uint32_t bitmap = smb_page_bitmap(abi, page_idx);
        uint32_t n = smb_bitmap_num_chunks(bitmap);
        if (n == 0)
                return false;
        uint32_t mask = (1u << (n * SMB_CHUNK_SHIFT)) - 1;
        return (bitmap & mask) == (0x0FFFFFFFu & mask);
}
