/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* IPCFrame codec: <u32 little-endian length><serialized IPCFrame>. Pure
 * functions over memory, no I/O. */

#include <stddef.h>
#include <stdint.h>

#include "perfetto/ipc/wire_protocol.pb-c.h"

#define IPC_FRAME_HEADER_SIZE 4u

/* Incremental decoder fed with whatever the socket produced. Memory is
 * bounded by IPC_FRAME_HEADER_SIZE + max_frame_size. */
struct ipc_frame_decoder {
        uint8_t *buf;
        size_t len;
        size_t cap;
        size_t max_frame_size;
};

void ipc_frame_decoder_init(struct ipc_frame_decoder *d, size_t max_frame_size);
void ipc_frame_decoder_done(struct ipc_frame_decoder *d);

/* Space to receive into directly: at least one byte is always offered while
 * the buffered data is below the frame bound. -ENOMEM on allocation
 * failure. */
int ipc_frame_decoder_space(struct ipc_frame_decoder *d, uint8_t **ret_ptr, size_t *ret_avail);
/* Marks n bytes written into the space as received. */
void ipc_frame_decoder_commit(struct ipc_frame_decoder *d, size_t n);
/* Copies data in (for tests and fuzzing). May fail with -EMSGSIZE when the
 * data would exceed the bound before frames are popped. */
int ipc_frame_decoder_feed(struct ipc_frame_decoder *d, const void *data, size_t n);

/*
 * Pops the next whole frame.
 *   1: *ret is a decoded frame (free with perfetto__protos__ipcframe__free_unpacked)
 *   0: more bytes are needed
 *   -EMSGSIZE: the length header exceeds the bound (the stream is unusable)
 *   -EBADMSG:  the frame's bytes are not a valid IPCFrame (the stream is
 *              unusable: the peer is broken or hostile)
 */
int ipc_frame_decoder_pop(struct ipc_frame_decoder *d, Perfetto__Protos__IPCFrame **ret);
/* The same with the frame's memory from allocator (an ipc_arena's, say:
 * then the frame is dropped with the arena's reset, not freed). */
int ipc_frame_decoder_pop_into(struct ipc_frame_decoder *d, ProtobufCAllocator *allocator,
                               Perfetto__Protos__IPCFrame **ret);

/* Looks at the whole frames buffered from *off on without taking them:
 * 1 and the next one's serialized IPCFrame (*off moves past it), 0 when no
 * whole frame is left, -EMSGSIZE for a length over the bound. Start with
 * *off 0; the pointers last until the decoder is next changed. */
int ipc_frame_decoder_peek(const struct ipc_frame_decoder *d, size_t *off, const uint8_t **ret_data,
                           size_t *ret_size);

/* Serializes a frame with its length header into a new buffer. -EMSGSIZE if
 * the frame exceeds IPC_FRAME_MAX_SEND_SIZE. */
int ipc_frame_encode(const Perfetto__Protos__IPCFrame *frame, uint8_t **ret_buf, size_t *ret_len);
/* The two halves of the above, for a caller that picks the buffer by the
 * size: how many bytes the frame takes with its header (-EMSGSIZE beyond
 * IPC_FRAME_MAX_SEND_SIZE), and the encoding into exactly that many. buf holds
 * len bytes, len as ipc_frame_encoded_len gave it for the same frame:
 * -EINVAL when the frame packs shorter than that (only a longer len can be
 * caught without overrunning buf). */
int ipc_frame_encoded_len(const Perfetto__Protos__IPCFrame *frame, size_t *ret_len);
int ipc_frame_encode_to(const Perfetto__Protos__IPCFrame *frame, uint8_t *buf, size_t len);
