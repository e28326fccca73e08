/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The shared memory buffer (SMB) layout shared by a producer and the
 * service. These are facts of the Perfetto tracing ABI: the buffer is cut in
 * pages of 4..64 KiB; each page starts with an 8-byte header whose first
 * 32-bit word is updated atomically and packs the page layout (how many
 * chunks the page is cut into) and a 2-bit state per chunk; each chunk starts
 * with an 8-byte chunk header followed by packets, each packet prefixed by a
 * 4-byte redundant varint holding its size.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SMB_MIN_PAGE_SIZE 4096u
#define SMB_MAX_PAGE_SIZE 65536u
#define SMB_MAX_CHUNKS_PER_PAGE 14u
#define SMB_PAGE_HEADER_SIZE 8u
#define SMB_CHUNK_HEADER_SIZE 8u
#define SMB_PACKET_HEADER_SIZE 4u
/* A packet header with this size tells the reader to drop the packet. */
#define SMB_PACKET_SIZE_DROP_PACKET ((1u << 28) - 1)
#define SMB_CHUNK_ALIGNMENT 4u
#define SMB_MAX_PACKET_COUNT 1023u /* 10-bit counter */
#define SMB_MAX_WRITER_ID 1023u    /* upstream kMaxWriterID */

enum smb_chunk_state {
        SMB_CHUNK_FREE = 0,
        SMB_CHUNK_BEING_WRITTEN = 1,
        SMB_CHUNK_BEING_READ = 2,
        SMB_CHUNK_COMPLETE = 3,
};

enum smb_page_layout {
        SMB_PAGE_NOT_PARTITIONED = 0,
        SMB_PAGE_DIV1 = 1,
        SMB_PAGE_DIV2 = 2,
        SMB_PAGE_DIV4 = 3,
        SMB_PAGE_DIV7 = 4,
        SMB_PAGE_DIV14 = 5,
        SMB_PAGE_DIV_RESERVED1 = 6,
        SMB_PAGE_DIV_RESERVED2 = 7,
        _SMB_PAGE_LAYOUT_MAX = 8,
};

/* Flags in the 6-bit flags field of a chunk's packet word. */
enum {
        SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV = 1u << 0,
        SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT = 1u << 1,
        SMB_CHUNK_NEEDS_PATCHING = 1u << 2,
        SMB_CHUNK_FLAGS_MASK = 0x7u,
};

#define SMB_CHUNK_SHIFT 2u
#define SMB_CHUNK_MASK 0x3u
#define SMB_LAYOUT_SHIFT 28u
#define SMB_LAYOUT_MASK 0x70000000u
#define SMB_ALL_CHUNKS_MASK 0x0FFFFFFFu

struct smb_page_header {
        _Atomic uint32_t header_bitmap;
        uint32_t reserved;
};

/* packets: count in bits 0..9, flags in bits 10..15 (little-endian bitfield
 * order of the upstream struct). */
struct smb_chunk_header {
        _Atomic uint32_t chunk_id;
        _Atomic uint16_t writer_id;
        _Atomic uint16_t packets;
};

_Static_assert(sizeof(struct smb_page_header) == SMB_PAGE_HEADER_SIZE, "page header size");
_Static_assert(sizeof(struct smb_chunk_header) == SMB_CHUNK_HEADER_SIZE, "chunk header size");

static inline uint16_t smb_packets_pack(uint16_t count, uint8_t flags) {
        return (uint16_t) ((count & 0x3FFu) | ((uint16_t) (flags & 0x3Fu) << 10));
}
static inline uint16_t smb_packets_count(uint16_t packets) {
        return packets & 0x3FFu;
}
static inline uint8_t smb_packets_flags(uint16_t packets) {
        return (uint8_t) (packets >> 10);
}

extern const uint32_t smb_num_chunks_for_layout[_SMB_PAGE_LAYOUT_MAX];

static inline enum smb_page_layout smb_bitmap_layout(uint32_t bitmap) {
        return (enum smb_page_layout) ((bitmap & SMB_LAYOUT_MASK) >> SMB_LAYOUT_SHIFT);
}
static inline uint32_t smb_bitmap_num_chunks(uint32_t bitmap) {
        return smb_num_chunks_for_layout[smb_bitmap_layout(bitmap)];
}
static inline enum smb_chunk_state smb_bitmap_chunk_state(uint32_t bitmap, size_t chunk_idx) {
        return (enum smb_chunk_state) ((bitmap >> (chunk_idx * SMB_CHUNK_SHIFT)) & SMB_CHUNK_MASK);
}

/* Size of each chunk of a page of page_size cut with layout; 0 for
 * unpartitioned or reserved layouts. */
uint16_t smb_chunk_size_for_layout(size_t page_size, enum smb_page_layout layout);

/* A view of a mapped SMB. Does not own the mapping. */
struct smb_abi {
        uint8_t *start;
        size_t size;
        size_t page_size;
        size_t num_pages;
        uint16_t chunk_sizes[_SMB_PAGE_LAYOUT_MAX];
};

/* A chunk handed out by acquire: begin points at the chunk header. */
struct smb_chunk {
        uint8_t *begin;
        uint16_t size;
        uint8_t chunk_idx;
};

static inline bool smb_chunk_is_valid(const struct smb_chunk *c) {
        return c->begin && c->size > 0;
}
static inline struct smb_chunk_header *smb_chunk_header(const struct smb_chunk *c) {
        return (struct smb_chunk_header *) c->begin;
}
static inline uint8_t *smb_chunk_payload(const struct smb_chunk *c) {
        return c->begin + SMB_CHUNK_HEADER_SIZE;
}
static inline size_t smb_chunk_payload_size(const struct smb_chunk *c) {
        return c->size - SMB_CHUNK_HEADER_SIZE;
}
/* The writer id in the chunk's header, as the other side last stored it:
 * any value, to be checked before use. */
static inline uint16_t smb_chunk_writer_id(const struct smb_chunk *c) {
        return atomic_load_explicit(&smb_chunk_header(c)->writer_id, memory_order_relaxed);
}

/* Validates geometry: page_size a multiple of 4 KiB in [4 KiB, 64 KiB],
 * size a non-zero multiple of page_size, start 4 KiB aligned. -EINVAL else. */
int smb_abi_init(struct smb_abi *abi, uint8_t *start, size_t size, size_t page_size);

static inline struct smb_page_header *smb_page_header(const struct smb_abi *abi, size_t page_idx) {
        return (struct smb_page_header *) (abi->start + abi->page_size * page_idx);
}
static inline uint32_t smb_page_bitmap(const struct smb_abi *abi, size_t page_idx) {
        return atomic_load_explicit(&smb_page_header(abi, page_idx)->header_bitmap, memory_order_acquire);
}

/* Cuts a free page into chunks. false when the page was not free. */
bool smb_try_partition_page(struct smb_abi *abi, size_t page_idx, enum smb_page_layout layout);

/* Free -> BeingWritten, copying *header into the chunk. Returns an invalid
 * chunk when the chunk is not free or does not exist. */
struct smb_chunk smb_try_acquire_chunk_for_writing(
                struct smb_abi *abi, size_t page_idx, size_t chunk_idx, uint16_t writer_id, uint32_t chunk_id);

/* Complete -> BeingRead. */
struct smb_chunk smb_try_acquire_chunk_for_reading(struct smb_abi *abi, size_t page_idx, size_t chunk_idx);

/* Chunk at chunk_idx of a page whose bitmap was read as bitmap; no state
 * check. Invalid chunk when chunk_idx is out of range for the layout. */
struct smb_chunk smb_get_chunk_unchecked(const struct smb_abi *abi, size_t page_idx, uint32_t bitmap, size_t chunk_idx);

/* BeingWritten -> Complete. Returns the page index, or -errno. */
int smb_release_chunk_as_complete(struct smb_abi *abi, const struct smb_chunk *chunk);

/* BeingRead -> Free; when every chunk of the page is then free the page
 * returns to the unpartitioned state. Returns the page index, or -errno. */
int smb_release_chunk_as_free(struct smb_abi *abi, const struct smb_chunk *chunk);

/* Page and chunk index of a chunk inside this SMB; -EINVAL when it is not. */
int smb_chunk_location(const struct smb_abi *abi, const struct smb_chunk *chunk, size_t *ret_page, size_t *ret_chunk);

/* Bit i set when chunk i of the page is free. */
uint32_t smb_free_chunks(const struct smb_abi *abi, size_t page_idx);

/* True when the page is partitioned and all its chunks are Complete. */
bool smb_page_is_complete(const struct smb_abi *abi, size_t page_idx);
