/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Inside the trace buffer, shared by its three files: trace-buffer.c
 * stores chunks (index by sequence, byte budget, eviction, pool, patches,
 * clones), trace-buffer-read.c hands packets out of a read pass
 * (fragments reassembled in place) and trace-buffer-take.c reads a
 * sequence as its chunk arrives, from the producer's memory. Nothing
 * outside these three includes this header.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buffers/trace-buffer.h"
#include "smb/smb-abi.h"


#define SEQ_BUCKETS 1024u
#define MAX_SEQUENCES 65536u
#define MAX_CHUNK_PAYLOAD (SMB_MAX_PAGE_SIZE - SMB_PAGE_HEADER_SIZE - SMB_CHUNK_HEADER_SIZE)
/* Largest packet reassembled from fragments; larger ones are dropped. */
#define MAX_PACKET_SIZE (64u * 1024u * 1024u)
/* Released chunks kept for reuse, so that a steady stream of commits does
 * not allocate: at most this many, and at most 1/8 of the buffer. */
#define POOL_MAX_CHUNKS 64u


struct tb_chunk {
        struct tb_chunk *fifo_prev, *fifo_next;
        struct tb_seq *seq;
        uint32_t chunk_id;
        uint16_t num_fragments;
        uint16_t fragments_read;
        uint8_t flags;
        bool complete;
        /* Being taken (trace_buffer_take_chunk): the payload is the
         * producer's, the chunk is in its sequence only, for that call or
         * (payload_stays) until trace_buffer_settle. */
        bool external;
        /* Its last fragment starts a packet its writer gave up later
         * (tb_drop_torn_chain): read as lost. */
        bool last_torn;
        size_t read_off;
        size_t size;
        size_t cost;
        size_t payload_cap;
        uint8_t *payload;
};

struct tb_seq {
        struct tb_seq *next, *hnext;
        uint16_t producer_id, writer_id;
        uid_t uid;
        uint32_t machine_id;
        pid_t pid;
        /* Chunks ordered by chunk id; live entries are [head, n). */
        struct tb_chunk **chunks;
        size_t head, n, cap;
        bool have_last;
        uint32_t last_chunk_id; /* last chunk consumed or given up on */
        bool data_lost;
        /* The chunks of the last packet given up that tb_drop_torn_chain
         * dropped: patches of them are no failure. */
        bool have_torn;
        uint32_t torn_first, torn_last;
};

struct trace_buffer {
        enum trace_buffer_policy policy;
        size_t capacity;
        size_t used;
        struct tb_chunk *fifo_head, *fifo_tail;
        struct tb_seq *buckets[SEQ_BUCKETS];
        struct tb_seq *seqs, *seqs_tail;
        size_t n_seqs;
        struct tb_seq *read_seq;
        bool final;
        /* Chunks to reuse (linked by fifo_next). */
        struct tb_chunk *pool;
        size_t pool_n, pool_bytes;
        /* Chunks that left the buffer while a packet handed out still
         * points into them: to the pool at the next call. */
        struct tb_chunk *retired;
        /* Taken chunks whose payload stays the caller's until
         * trace_buffer_settle, and spare ones (linked by fifo_next). */
        struct tb_chunk *held, *held_spare;
        /* The slices of the packet handed out last, and whether it ends a
         * chunk still being written. */
        struct iovec *iov;
        bool unfinished;
        size_t iov_cap;
        struct trace_buffer_stats stats;
};

/* The sequence of c's (producer, writer), made on first use; NULL past
 * MAX_SEQUENCES or on ENOMEM. */
struct tb_seq *tb_seq_get(struct trace_buffer *tb, const struct trace_buffer_chunk *c);

/* Index of chunk_id among live entries, or where it would go. */
size_t tb_seq_search(const struct tb_seq *s, uint32_t chunk_id, bool *ret_found);

/* Puts c at index pos of s's live entries (0 or -ENOMEM). */
int tb_seq_insert(struct tb_seq *s, size_t pos, struct tb_chunk *c);

/* Takes c out of s's index. */
void tb_seq_remove(struct tb_seq *s, struct tb_chunk *c);

/* Keeps a chunk that left the buffer for reuse, or frees it. */
void tb_chunk_recycle(struct trace_buffer *tb, struct tb_chunk *c);

/* A chunk with room for size payload bytes, from the pool if it has one
 * (its payload contents are stale), NULL on ENOMEM. */
struct tb_chunk *tb_chunk_alloc(struct trace_buffer *tb, size_t size);

/* Appends a stored chunk to the arrival order. */
void tb_fifo_append(struct trace_buffer *tb, struct tb_chunk *c);

/* Makes room for cost more bytes: 0, or -ENOSPC when the policy keeps
 * what is there (discard, or nothing left to overwrite). */
int tb_make_room(struct trace_buffer *tb, size_t cost);

/* The first chunk of its sequence was read to its end: it leaves the
 * buffer (into the pool). */
void tb_chunk_consumed(struct trace_buffer *tb, struct tb_chunk *c);

/* The same for a chunk the packet being handed out still points into: it
 * leaves the buffer now, its memory at the next call (tb_release_retired). */
void tb_chunk_consumed_retired(struct trace_buffer *tb, struct tb_chunk *c);

/* Reads the fragment header at off of a payload of size bytes. Every
 * byte is loaded once (the payload may be shared memory its producer is
 * still writing). 0 ok, -EBADMSG. */
int tb_fragment_header(const uint8_t *payload, size_t size, size_t off, size_t *ret_data_off, uint32_t *ret_size);

/* A chunk arrives whose first fragment ends, with the drop-packet size,
 * the packet the chunks before it carry: that packet's fragments, which
 * can never be read, leave the buffer now rather than when read (their
 * chunks are freed, the chunk it starts in marked last_torn), and the
 * loss is counted (trace_writer_packet_loss). */
void tb_drop_torn_chain(struct trace_buffer *tb, const struct trace_buffer_chunk *in);

/* 1: a packet from s, as *ret_n_slices slices in tb->iov (pointing into
 * the chunks); 0: nothing ready in s; -ENOMEM. */
int tb_seq_next_packet(struct trace_buffer *tb, struct tb_seq *s, size_t *ret_n_slices, size_t *ret_len,
                       bool *ret_lost);

/* Called for every packet: kept inline. */
static inline int32_t tb_id_cmp(uint32_t a, uint32_t b) {
        return (int32_t) (a - b);
}

static inline size_t tb_seq_count(const struct tb_seq *s) {
        return s->n - s->head;
}

static inline struct tb_chunk *tb_seq_first(const struct tb_seq *s) {
        return s->n > s->head ? s->chunks[s->head] : NULL;
}

static inline void tb_release_retired(struct trace_buffer *tb) {
        while (tb->retired) {
                struct tb_chunk *c = tb->retired;
                tb->retired = c->fifo_next;
                tb_chunk_recycle(tb, c);
        }
}

static inline struct trace_buffer_packet_info tb_seq_info(const struct trace_buffer *tb, const struct tb_seq *s,
                                                          bool lost) {
        return (struct trace_buffer_packet_info) {
                .producer_id = s->producer_id,
                .writer_id = s->writer_id,
                .producer_uid = s->uid,
                .machine_id = s->machine_id,
                .producer_pid = s->pid,
                .previous_packet_dropped = lost,
                .unfinished = tb->unfinished,
        };
}
