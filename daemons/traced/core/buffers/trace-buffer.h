/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A session's trace buffer, on the service side. Chunks copied out of
 * producers' shared memory are kept, within a byte budget, indexed by
 * (producer, writer, chunk id); packets are reassembled from fragments per
 * sequence (producer, writer) in chunk id order when read. Everything in a
 * chunk is untrusted: it is validated when read, and bad data costs the
 * packet (counted), never a crash.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

enum trace_buffer_policy {
        TRACE_BUFFER_RING_BUFFER, /* overwrite the oldest chunks */
        TRACE_BUFFER_DISCARD,     /* refuse chunks once full */
};

#define TRACE_BUFFER_PATCH_SIZE 4u
#define TRACE_BUFFER_MIN_SIZE 4096u
/* Accounting overhead per stored chunk. */
#define TRACE_BUFFER_CHUNK_OVERHEAD 64u

struct trace_buffer;

struct trace_buffer_chunk {
        uint16_t producer_id;
        uid_t producer_uid;
        pid_t producer_pid;
        uint32_t machine_id; /* 0: this machine */
        uint16_t writer_id;
        uint32_t chunk_id;
        uint16_t num_fragments;
        uint8_t flags; /* SMB_CHUNK_* flags */
        bool complete; /* false: scraped while still being written */
        const uint8_t *payload;
        size_t payload_size;
        /* For trace_buffer_take_chunk: the payload stays readable (and the
         * chunk the producer's) until trace_buffer_settle, so the start of
         * a packet that goes on in the next chunk need not be copied yet. */
        bool payload_stays;
};

struct trace_buffer_patch {
        uint32_t offset; /* from the start of the chunk payload */
        uint8_t data[TRACE_BUFFER_PATCH_SIZE];
};

/* One packet handed out by read, in place: one slice when it lies whole in
 * one stored chunk, one per fragment when it was written across chunks.
 * The slices and their bytes stay valid until the next call into the
 * buffer. */
struct trace_buffer_packet {
        const struct iovec *slices;
        size_t n_slices;
        size_t size;
};

struct trace_buffer_packet_info {
        uint16_t producer_id;
        uint16_t writer_id;
        uid_t producer_uid;
        pid_t producer_pid;
        uint32_t machine_id;
        /* Data of this sequence was lost before this packet. */
        bool previous_packet_dropped;
        /* The packet is the last one of a chunk scraped while its writer
         * was still writing it, read only because the session is over
         * (final). Its size header may predate the packet: some writers
         * count a packet before writing it, or leave bytes of a packet
         * they moved. Bytes that do not parse are an unfinished packet,
         * not a malformed one. */
        bool unfinished;
};

struct trace_buffer_stats {
        uint64_t buffer_size;
        uint64_t bytes_written;
        uint64_t bytes_overwritten;
        uint64_t bytes_read;
        uint64_t padding_bytes_written;
        uint64_t padding_bytes_cleared;
        uint64_t chunks_written;
        uint64_t chunks_rewritten;
        uint64_t chunks_overwritten;
        uint64_t chunks_discarded;
        uint64_t chunks_read;
        uint64_t chunks_committed_out_of_order;
        uint64_t write_wrap_count;
        uint64_t patches_succeeded;
        uint64_t patches_failed;
        uint64_t readaheads_succeeded;
        uint64_t readaheads_failed;
        uint64_t abi_violations;
        uint64_t trace_writer_packet_loss;
};

int trace_buffer_new(size_t size, enum trace_buffer_policy policy, struct trace_buffer **ret);
void trace_buffer_free(struct trace_buffer *tb);

/* Stores a chunk (copying the payload). A chunk with a key already stored
 * replaces the old copy when it is complete or larger (a scraped chunk
 * committed later). 0 when stored or legitimately dropped (discard policy,
 * larger than the buffer), -EINVAL for inconsistent metadata, -ENOMEM. */
int trace_buffer_copy_chunk(struct trace_buffer *tb, const struct trace_buffer_chunk *chunk);

/* Receives one packet of a chunk being taken, as slices of size bytes in
 * all, partly in the producer's memory (untrusted and still writable by
 * it: copy the bytes, then validate the copy). Negative return aborts. */
typedef int (*trace_buffer_take_fn)(const struct iovec *iov, size_t n_iov, size_t size,
                                    const struct trace_buffer_packet_info *info, void *userdata);

/* For a reader that takes packets as their chunks arrive (a file being
 * written): when the chunk is complete, needs no patch and is the next one
 * of its sequence, its sequence is read at once, the chunk's payload in
 * place: every packet that is ready goes to fn in order, exactly as a read
 * pass would hand it out (statistics, loss marks, ABI checks), and what is
 * left of the chunk (a packet that goes on in the next one) is copied in
 * and kept. 1 then (2 when payload_stays and the chunk is held, read from
 * until trace_buffer_settle); 0 when the chunk was not taken: store it with
 * trace_buffer_copy_chunk. A negative return of fn is returned (the rest
 * of the chunk is lost, and marked so). */
int trace_buffer_take_chunk(struct trace_buffer *tb, const struct trace_buffer_chunk *in, trace_buffer_take_fn fn,
                            void *userdata);

/* With payload_stays set, what is left of a taken chunk is not copied at
 * once: it stays in the producer's memory, where the chunks taken next
 * (the same commit) read the rest of the packet from it. This copies in
 * whatever is still left of such chunks; after it, the buffer no longer
 * points into any payload it was given. Call it before those payloads go
 * back to their producer (patches do not reach chunks still held). */
void trace_buffer_settle(struct trace_buffer *tb);

/* Patches 4-byte fields of a stored chunk of that producer. -ENOENT when
 * the chunk is gone, -ERANGE for an offset outside it. */
int trace_buffer_try_patch(struct trace_buffer *tb, uint16_t producer_id, uint16_t writer_id, uint32_t chunk_id,
                           const struct trace_buffer_patch *patches, size_t n, bool other_patches_pending);

/* Starts a read pass. */
void trace_buffer_begin_read(struct trace_buffer *tb);
/* 1 and a packet, 0 when nothing more is ready in this pass, -errno. With
 * final set, packets that can never complete are dropped instead of
 * waited for. Packets are consumed by reading. */
int trace_buffer_read_next_packet(struct trace_buffer *tb, struct trace_buffer_packet *ret,
                                  struct trace_buffer_packet_info *ret_info);
void trace_buffer_set_final(struct trace_buffer *tb, bool final);
/* Copies up to cap bytes of a packet read into dst; returns how many. */
size_t trace_buffer_packet_gather(const struct trace_buffer_packet *p, uint8_t *dst, size_t cap);

/* A deep copy (chunks, read progress, statistics), for CloneSession. */
int trace_buffer_clone(const struct trace_buffer *tb, struct trace_buffer **ret);

const struct trace_buffer_stats *trace_buffer_get_stats(const struct trace_buffer *tb);
size_t trace_buffer_used_bytes(const struct trace_buffer *tb);
