/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef TRACED_PBZERO_H
#define TRACED_PBZERO_H

/*
 * The low-level protobuf writer under traced's typed writers: the headers
 * generated from traced's .proto files, <traced/pbzero/perfetto/...pbw.h>,
 * which name every field (TracePacket_set_timestamp(&pkt, ts)) and call
 * what is here. Header only, C89 with the compiler's inline, no
 * allocation: bytes go where the stream points.
 *
 * A stream is a window [wp, end) of a buffer and a grow function that the
 * writers call when the window is too small: it hands the buffer on (a
 * trace writer's chunk to the service, a heap block to realloc) and opens
 * the window on the next one, or fails. Everything else is inline and
 * writes through wp. Streams are made by what owns the buffer:
 * traced_pb_stream_init_buffer() below (a caller's fixed buffer),
 * libtraced-client's traced_trace_writer_begin_pb_packet() and the plugin
 * host's begin_packet (a trace writer's chunks).
 *
 * A message is written on a stream field by field. A nested message is
 * begun and ended: begin writes its tag and reserves a 4-byte size field
 * (a redundant varint), end fills it in place; a message that ended under
 * 128 bytes with its size field in the stream's current buffer is moved
 * up to a 1-byte size instead. A grow function that gives a buffer up
 * (rather than moving it whole, as realloc does) first points the
 * size_field of each message still open in it elsewhere (a trace writer
 * sends those sizes to the service as patches of the earlier chunk): it
 * finds them from the stream's root message down the chain of open nested
 * messages. Only the innermost open message of a stream is written to;
 * ending a message ends what is still open inside it.
 *
 * Errors are sticky: the first is kept in stream->error (negative errno:
 * -ENOBUFS no room, -EMSGSIZE a nested message over 256 MiB) and every
 * write after it is dropped; the owner of the stream reports it when the
 * root message ends.
 *
 * Both structures are part of libtraced-client's ABI and of the plugin
 * ABI (inline code of callers reads and writes them): their layout is
 * fixed for the life of libtraced-client.so.0 and plugin ABI 1.x.
 */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__cplusplus)
#define TRACED_PB_INLINE static inline
#elif defined(__GNUC__)
#define TRACED_PB_INLINE static __inline__
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define TRACED_PB_INLINE static inline
#else
#define TRACED_PB_INLINE static
#endif
#if defined(__GNUC__)
/* The slow paths: out of line, so that the fast ones stay small. */
#define TRACED_PB_SLOW static __attribute__((__unused__, __noinline__, __cold__))
#else
#define TRACED_PB_SLOW TRACED_PB_INLINE
#endif

/* Wire types. */
#define TRACED_PB_WIRE_VARINT 0u
#define TRACED_PB_WIRE_FIXED64 1u
#define TRACED_PB_WIRE_LEN 2u
#define TRACED_PB_WIRE_FIXED32 5u

/* A nested message's reserved size field, and the largest size it holds. */
#define TRACED_PB_SIZE_FIELD_BYTES 4u
#define TRACED_PB_MAX_NESTED_SIZE ((1u << 28) - 1u)

struct traced_pb_stream;
struct traced_pb_msg;

/* Called when fewer than need bytes remain in [wp, end), with error 0:
 * opens the window on a buffer with room for need bytes (at least: a
 * bigger need is a hint, of which one byte is enough; a size field asks
 * for its 4 bytes, which must not be split), after moving the size fields
 * of open messages out of the buffer it gives up, and keeps before +
 * (wp - begin) counting the bytes written. Returns 0 or a negative errno
 * (the stream is then broken). */
typedef int32_t (*traced_pb_grow_fn)(struct traced_pb_stream *s, size_t need);

struct traced_pb_stream {
        uint8_t *wp;                /* the next byte goes here */
        uint8_t *end;               /* end of the window */
        uint8_t *begin;             /* start of the current buffer */
        uint64_t before;            /* bytes written into earlier buffers */
        struct traced_pb_msg *root; /* the message begun on the stream */
        traced_pb_grow_fn grow;     /* NULL: a fixed buffer */
        void *opaque;               /* the owner's */
        int32_t error;              /* 0, or the first error */
};

struct traced_pb_msg {
        struct traced_pb_stream *stream;
        /* Where the size goes once grow gave up the buffer holding the
         * field (until then it is found from start, whatever moved the
         * buffer); NULL for a root message. */
        uint8_t *size_field;
        uint64_t start;               /* stream position after the size field */
        struct traced_pb_msg *nested; /* the nested message open in this one */
};

/* A packed repeated field being written (begun and ended as a message,
 * its elements appended with traced_pb_packed_*). */
typedef struct traced_pb_packed {
        struct traced_pb_msg msg;
} traced_pb_packed;

/* ---- streams ---- */

/* Bytes written so far (the position of wp). */
TRACED_PB_INLINE uint64_t traced_pb_stream_pos(const struct traced_pb_stream *s) {
        return s->before + (uint64_t) (s->wp - s->begin);
}

/* Breaks the stream: keeps the first error, writes nothing more. */
TRACED_PB_INLINE void traced_pb_stream_fail(struct traced_pb_stream *s, int32_t error) {
        if (!s->error)
                s->error = error;
        s->end = s->wp;
}

/* A stream over a caller's buffer of size bytes; writing past it breaks
 * the stream with -ENOBUFS. */
TRACED_PB_INLINE void traced_pb_stream_init_buffer(struct traced_pb_stream *s, void *buf, size_t size) {
        memset(s, 0, sizeof(*s));
        s->begin = s->wp = (uint8_t *) buf;
        s->end = s->begin + size;
}

/* Calls the grow function for need bytes, of which at least min_room
 * (a size field's 4 at most) must then fit; 0, or the stream's
 * error. */
TRACED_PB_SLOW int32_t traced_pb_stream_grow(struct traced_pb_stream *s, size_t need, size_t min_room) {
        int32_t r;
        if (s->error)
                return s->error;
        r = s->grow ? s->grow(s, need) : -ENOBUFS;
        if (r >= 0 && (size_t) (s->end - s->wp) < min_room)
                r = -ENOBUFS; /* a grow function that made too little room */
        if (r < 0) {
                traced_pb_stream_fail(s, r);
                return r;
        }
        return 0;
}

/* Appends n bytes across as many buffers as it takes. */
TRACED_PB_SLOW void traced_pb_stream_write_slow(struct traced_pb_stream *s, const uint8_t *p, size_t n) {
        size_t room, k;
        while (n > 0) {
                room = (size_t) (s->end - s->wp);
                if (room == 0) {
                        if (traced_pb_stream_grow(s, n, 1) < 0)
                                return;
                        continue;
                }
                k = room < n ? room : n;
                memcpy(s->wp, p, k);
                s->wp += k;
                p += k;
                n -= k;
        }
}

TRACED_PB_INLINE void traced_pb_stream_write(struct traced_pb_stream *s, const void *p, size_t n) {
        if ((size_t) (s->end - s->wp) >= n) {
                if (n)
                        memcpy(s->wp, p, n);
                s->wp += n;
        } else
                traced_pb_stream_write_slow(s, (const uint8_t *) p, n);
}

/* ---- encodings ---- */

TRACED_PB_INLINE size_t traced_pb_varint_size(uint64_t v) {
        size_t n = 1;
        while (v >= 0x80) {
                v >>= 7;
                n++;
        }
        return n;
}

/* Encodes v at p (room for 10 bytes); returns the end. */
TRACED_PB_INLINE uint8_t *traced_pb_put_varint(uint8_t *p, uint64_t v) {
        while (v >= 0x80) {
                *p++ = (uint8_t) (v | 0x80);
                v >>= 7;
        }
        *p++ = (uint8_t) v;
        return p;
}

TRACED_PB_INLINE uint8_t *traced_pb_put_fixed32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
        p[2] = (uint8_t) (v >> 16);
        p[3] = (uint8_t) (v >> 24);
        return p + 4;
}

TRACED_PB_INLINE uint8_t *traced_pb_put_fixed64(uint8_t *p, uint64_t v) {
        traced_pb_put_fixed32(p, (uint32_t) v);
        return traced_pb_put_fixed32(p + 4, (uint32_t) (v >> 32));
}

/* A size field of 4 bytes holding v (< 2^28): a redundant varint. */
TRACED_PB_INLINE void traced_pb_put_size_field(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) ((v & 0x7f) | 0x80);
        p[1] = (uint8_t) (((v >> 7) & 0x7f) | 0x80);
        p[2] = (uint8_t) (((v >> 14) & 0x7f) | 0x80);
        p[3] = (uint8_t) ((v >> 21) & 0x7f);
}

TRACED_PB_INLINE uint64_t traced_pb_zigzag32(int32_t v) {
        return (uint64_t) (((uint32_t) v << 1) ^ (uint32_t) (0u - ((uint32_t) v >> 31)));
}

TRACED_PB_INLINE uint64_t traced_pb_zigzag64(int64_t v) {
        return ((uint64_t) v << 1) ^ (uint64_t) (0u - ((uint64_t) v >> 63));
}

TRACED_PB_INLINE uint32_t traced_pb_float_bits(float f) {
        uint32_t u;
        memcpy(&u, &f, sizeof(u));
        return u;
}

TRACED_PB_INLINE uint64_t traced_pb_double_bits(double d) {
        uint64_t u;
        memcpy(&u, &d, sizeof(u));
        return u;
}

TRACED_PB_INLINE uint64_t traced_pb_tag(uint32_t field, uint32_t wire_type) {
        return ((uint64_t) field << 3) | wire_type;
}

/* ---- raw values, for packed elements ---- */

TRACED_PB_SLOW void traced_pb_stream_varint_slow(struct traced_pb_stream *s, uint64_t v) {
        uint8_t b[10];
        traced_pb_stream_write_slow(s, b, (size_t) (traced_pb_put_varint(b, v) - b));
}

TRACED_PB_INLINE void traced_pb_stream_varint(struct traced_pb_stream *s, uint64_t v) {
        if (s->end - s->wp >= 10)
                s->wp = traced_pb_put_varint(s->wp, v);
        else
                traced_pb_stream_varint_slow(s, v);
}

TRACED_PB_INLINE void traced_pb_stream_fixed32(struct traced_pb_stream *s, uint32_t v) {
        uint8_t b[4];
        traced_pb_put_fixed32(b, v);
        traced_pb_stream_write(s, b, 4);
}

TRACED_PB_INLINE void traced_pb_stream_fixed64(struct traced_pb_stream *s, uint64_t v) {
        uint8_t b[8];
        traced_pb_put_fixed64(b, v);
        traced_pb_stream_write(s, b, 8);
}

/* ---- messages ---- */

/* Begins the root message of s (the stream remembers it: its grow
 * function finds the open size fields from there). */
TRACED_PB_INLINE void traced_pb_msg_init(struct traced_pb_msg *root, struct traced_pb_stream *s) {
        root->stream = s;
        root->size_field = NULL;
        root->start = traced_pb_stream_pos(s);
        root->nested = NULL;
        s->root = root;
}

/* The bytes of m so far (for a root message: of the message). */
TRACED_PB_INLINE uint64_t traced_pb_msg_size(const struct traced_pb_msg *m) {
        return traced_pb_stream_pos(m->stream) - m->start;
}

TRACED_PB_SLOW void traced_pb_msg_tag_varint_slow(struct traced_pb_stream *s, uint64_t tag, uint64_t v) {
        uint8_t b[20];
        uint8_t *p = traced_pb_put_varint(b, tag);
        p = traced_pb_put_varint(p, v);
        traced_pb_stream_write_slow(s, b, (size_t) (p - b));
}

/* A varint field (int32 and enums sign-extended to 64 bits first). */
TRACED_PB_INLINE void traced_pb_msg_varint(struct traced_pb_msg *m, uint32_t field, uint64_t v) {
        struct traced_pb_stream *s = m->stream;
        if (s->end - s->wp >= 15)
                s->wp = traced_pb_put_varint(traced_pb_put_varint(s->wp, traced_pb_tag(field, TRACED_PB_WIRE_VARINT)), v);
        else
                traced_pb_msg_tag_varint_slow(s, traced_pb_tag(field, TRACED_PB_WIRE_VARINT), v);
}

TRACED_PB_INLINE void traced_pb_msg_fixed32(struct traced_pb_msg *m, uint32_t field, uint32_t v) {
        struct traced_pb_stream *s = m->stream;
        uint8_t b[9];
        uint8_t *p = traced_pb_put_varint(b, traced_pb_tag(field, TRACED_PB_WIRE_FIXED32));
        p = traced_pb_put_fixed32(p, v);
        traced_pb_stream_write(s, b, (size_t) (p - b));
}

TRACED_PB_INLINE void traced_pb_msg_fixed64(struct traced_pb_msg *m, uint32_t field, uint64_t v) {
        struct traced_pb_stream *s = m->stream;
        uint8_t b[13];
        uint8_t *p = traced_pb_put_varint(b, traced_pb_tag(field, TRACED_PB_WIRE_FIXED64));
        p = traced_pb_put_fixed64(p, v);
        traced_pb_stream_write(s, b, (size_t) (p - b));
}

/* A length-delimited field's tag and length; its n bytes follow. */
TRACED_PB_INLINE void traced_pb_msg_len_header(struct traced_pb_msg *m, uint32_t field, size_t n) {
        struct traced_pb_stream *s = m->stream;
        if (s->end - s->wp >= 15)
                s->wp = traced_pb_put_varint(traced_pb_put_varint(s->wp, traced_pb_tag(field, TRACED_PB_WIRE_LEN)),
                                             (uint64_t) n);
        else
                traced_pb_msg_tag_varint_slow(s, traced_pb_tag(field, TRACED_PB_WIRE_LEN), (uint64_t) n);
}

TRACED_PB_INLINE void traced_pb_msg_bytes(struct traced_pb_msg *m, uint32_t field, const void *data, size_t n) {
        traced_pb_msg_len_header(m, field, n);
        traced_pb_stream_write(m->stream, data, n);
}

TRACED_PB_INLINE void traced_pb_msg_string(struct traced_pb_msg *m, uint32_t field, const char *str) {
        traced_pb_msg_bytes(m, field, str, strlen(str));
}

/* Appends n bytes of fields already encoded for m's message type (the
 * fields of a message of the same type, which merge into m). */
TRACED_PB_INLINE void traced_pb_msg_append_raw(struct traced_pb_msg *m, const void *data, size_t n) {
        traced_pb_stream_write(m->stream, data, n);
}

/* Begins child as field of m; m's writes wait until child ends. */
TRACED_PB_INLINE void traced_pb_msg_begin_nested(struct traced_pb_msg *m, uint32_t field,
                                                 struct traced_pb_msg *child) {
        struct traced_pb_stream *s = m->stream;
        if (s->end - s->wp >= 5 + (ptrdiff_t) TRACED_PB_SIZE_FIELD_BYTES)
                s->wp = traced_pb_put_varint(s->wp, traced_pb_tag(field, TRACED_PB_WIRE_LEN));
        else {
                traced_pb_stream_varint_slow(s, traced_pb_tag(field, TRACED_PB_WIRE_LEN));
                /* The size field is patched in place: never split. */
                if ((size_t) (s->end - s->wp) < TRACED_PB_SIZE_FIELD_BYTES)
                        (void) traced_pb_stream_grow(s, TRACED_PB_SIZE_FIELD_BYTES, TRACED_PB_SIZE_FIELD_BYTES);
        }
        child->stream = s;
        child->nested = NULL;
        m->nested = child;
        if (s->error) {
                child->size_field = NULL;
                child->start = traced_pb_stream_pos(s);
                return;
        }
        child->size_field = s->wp;
        traced_pb_put_size_field(s->wp, 0);
        s->wp += TRACED_PB_SIZE_FIELD_BYTES;
        child->start = traced_pb_stream_pos(s);
}

TRACED_PB_INLINE void traced_pb_msg_end_nested(struct traced_pb_msg *m, struct traced_pb_msg *child);

/* Ends the messages still open inside m, innermost first. */
TRACED_PB_SLOW void traced_pb_msg_end_open(struct traced_pb_msg *m) {
        struct traced_pb_msg *p;
        while (m->nested) {
                p = m;
                while (p->nested->nested)
                        p = p->nested;
                traced_pb_msg_end_nested(p, p->nested);
        }
}

TRACED_PB_SLOW void traced_pb_msg_set_size(struct traced_pb_stream *s, uint8_t *field, uint64_t size) {
        if (size > TRACED_PB_MAX_NESTED_SIZE)
                traced_pb_stream_fail(s, -EMSGSIZE);
        else
                traced_pb_put_size_field(field, (uint32_t) size);
}

/* Ends child, the message open in m: fills its size field. */
TRACED_PB_INLINE void traced_pb_msg_end_nested(struct traced_pb_msg *m, struct traced_pb_msg *child) {
        struct traced_pb_stream *s = child->stream;
        uint64_t size;
        uint8_t *f;
        if (child->nested)
                traced_pb_msg_end_open(child);
        m->nested = NULL;
        if (s->error)
                return;
        size = traced_pb_stream_pos(s) - child->start;
        if (child->start < s->before + TRACED_PB_SIZE_FIELD_BYTES) {
                /* In a buffer given up: grow moved the field. */
                traced_pb_msg_set_size(s, child->size_field, size);
                return;
        }
        /* In this buffer, right before the message's bytes. */
        f = s->wp - size - TRACED_PB_SIZE_FIELD_BYTES;
        if (size < 0x80) {
                /* Short: a 1-byte size, the bytes moved up. */
                memmove(f + 1, f + TRACED_PB_SIZE_FIELD_BYTES, (size_t) size);
                f[0] = (uint8_t) size;
                s->wp -= TRACED_PB_SIZE_FIELD_BYTES - 1;
        } else
                traced_pb_msg_set_size(s, f, size);
}

/* Ends what is open in the root message m; returns the stream's error. */
TRACED_PB_INLINE int32_t traced_pb_msg_finish(struct traced_pb_msg *m) {
        if (m->nested)
                traced_pb_msg_end_open(m);
        return m->stream->error;
}

/* ---- packed repeated fields ---- */

TRACED_PB_INLINE void traced_pb_packed_varint(traced_pb_packed *p, uint64_t v) {
        traced_pb_stream_varint(p->msg.stream, v);
}

TRACED_PB_INLINE void traced_pb_packed_fixed32(traced_pb_packed *p, uint32_t v) {
        traced_pb_stream_fixed32(p->msg.stream, v);
}

TRACED_PB_INLINE void traced_pb_packed_fixed64(traced_pb_packed *p, uint64_t v) {
        traced_pb_stream_fixed64(p->msg.stream, v);
}

#ifdef __cplusplus
}
#endif

#endif
