/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A small protobuf writer into a growable heap buffer, for messages built
 * field by field (nested messages are built in their own writer and
 * appended). Errors are sticky: check w->error once at the end. */

#include <stddef.h>
#include <stdint.h>

struct pbw {
        uint8_t *buf;
        size_t len;
        size_t cap;
        int error;
};

void pbw_done(struct pbw *w);
/* Empties w but keeps its memory for the next message. */
void pbw_reset(struct pbw *w);
/* Bytes a varint of v takes. */
size_t pbw_varint_size(uint64_t v);
void pbw_raw(struct pbw *w, const void *data, size_t n);
void pbw_tag(struct pbw *w, uint32_t field, unsigned wire_type);
/* A bare varint, for the elements of packed repeated fields. */
void pbw_raw_varint(struct pbw *w, uint64_t v);
void pbw_varint(struct pbw *w, uint32_t field, uint64_t v);
void pbw_sint(struct pbw *w, uint32_t field, int64_t v);
void pbw_fixed64(struct pbw *w, uint32_t field, uint64_t v);
void pbw_fixed32(struct pbw *w, uint32_t field, uint32_t v);
void pbw_bytes(struct pbw *w, uint32_t field, const void *data, size_t n);
void pbw_string(struct pbw *w, uint32_t field, const char *s);
void pbw_message(struct pbw *w, uint32_t field, const struct pbw *sub);
/* Encodes v as a varint into p (at least 10 bytes); returns its length. */
size_t pbw_put_varint(uint8_t *p, uint64_t v);

/* pbw_raw_varint, inline when the buffer has room: for loops that append
 * a few varints per record (packed columns). */
static inline void pbw_raw_varint_inline(struct pbw *w, uint64_t v) {
        if (w->cap - w->len < 10) {
                pbw_raw_varint(w, v);
                return;
        }
        uint8_t *p = w->buf + w->len;
        while (v >= 0x80) {
                *p++ = (uint8_t) (v | 0x80);
                v >>= 7;
        }
        *p++ = (uint8_t) v;
        w->len = (size_t) (p - w->buf);
}
