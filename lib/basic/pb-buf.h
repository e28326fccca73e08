/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A growable heap buffer that the typed writers (traced/pbzero/...pbw.h)
 * write into: a traced_pb_stream whose grow function reallocates. For
 * what is built before it is known where it goes (a message kept and
 * written again, the columns of a packed field, a packet handed over
 * whole). A zeroed struct pb_buf is empty and ready; pb_buf_stream()
 * gives the stream to begin a message on:
 *
 *     _cleanup_(pb_buf_done) struct pb_buf b = {};
 *     TracePacket pkt;
 *     TracePacket_init(&pkt, pb_buf_stream(&b));
 *     TracePacket_set_timestamp(&pkt, ts);
 *     if (traced_pb_msg_finish(&pkt.msg) < 0) ...  (-ENOMEM)
 *     write(pb_buf_data(&b), pb_buf_len(&b));
 *
 * Errors are the stream's, sticky until pb_buf_reset(). */

#include <stddef.h>
#include <stdint.h>

#include "traced/pbzero.h"

struct pb_buf {
        struct traced_pb_stream s; /* first: the grow function finds the buffer from it */
        size_t cap;
};

int32_t pb_buf_grow(struct traced_pb_stream *s, size_t need);
void pb_buf_done(struct pb_buf *b);
/* Empties b but keeps its memory for the next message. */
void pb_buf_reset(struct pb_buf *b);
/* Forgets the bytes written so far (the caller has handed them on) but
 * keeps the stream's position and its root message, whose next fields
 * are written from the start of the buffer: for a root message sent field
 * by field, each once it ended. -EBUSY while a message is open in the
 * root (its size field is among the bytes). */
int pb_buf_drain(struct pb_buf *b);

static inline struct traced_pb_stream *pb_buf_stream(struct pb_buf *b) {
        b->s.grow = pb_buf_grow;
        return &b->s;
}

static inline const uint8_t *pb_buf_data(const struct pb_buf *b) {
        return b->s.begin;
}

static inline size_t pb_buf_len(const struct pb_buf *b) {
        return (size_t) (b->s.wp - b->s.begin);
}

/* 0, or the first error (-ENOMEM, -EMSGSIZE). */
static inline int pb_buf_error(const struct pb_buf *b) {
        return b->s.error;
}

/* Raw bytes and varints (the elements of a packed field built apart). */
static inline void pb_buf_append(struct pb_buf *b, const void *data, size_t n) {
        traced_pb_stream_write(pb_buf_stream(b), data, n);
}

static inline void pb_buf_append_varint(struct pb_buf *b, uint64_t v) {
        traced_pb_stream_varint(pb_buf_stream(b), v);
}
