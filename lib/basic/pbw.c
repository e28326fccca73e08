/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/pbw.h"

void pbw_done(struct pbw *w) {
        free(w->buf);
        *w = (struct pbw) {};
}

void pbw_reset(struct pbw *w) {
        w->len = 0;
        w->error = 0;
}

size_t pbw_varint_size(uint64_t v) {
        size_t n = 1;
        while (v >= 0x80) {
                v >>= 7;
                n++;
        }
        return n;
}

static int reserve(struct pbw *w, size_t n) {
        if (w->error)
                return w->error;
        if (n > SIZE_MAX / 2 - w->len)
                return (w->error = -ENOMEM);
        if (GREEDY_REALLOC_MIN(w->buf, w->cap, w->len + n, 64) < 0)
                return (w->error = -ENOMEM);
        return 0;
}

void pbw_raw(struct pbw *w, const void *data, size_t n) {
        if (n == 0 || reserve(w, n) < 0)
                return;
        memcpy(w->buf + w->len, data, n);
        w->len += n;
}

size_t pbw_put_varint(uint8_t *p, uint64_t v) {
        size_t n = 0;
        do {
                uint8_t b = v & 0x7f;
                v >>= 7;
                p[n++] = (uint8_t) (b | (v ? 0x80 : 0));
        } while (v);
        return n;
}

static void raw_varint(struct pbw *w, uint64_t v) {
        /* Encoded in place: this runs for every field of every event. */
        if (w->len + 10 > w->cap && reserve(w, 10) < 0)
                return;
        w->len += pbw_put_varint(w->buf + w->len, v);
}

void pbw_raw_varint(struct pbw *w, uint64_t v) {
        raw_varint(w, v);
}

void pbw_tag(struct pbw *w, uint32_t field, unsigned wire_type) {
        raw_varint(w, ((uint64_t) field << 3) | wire_type);
}

void pbw_varint(struct pbw *w, uint32_t field, uint64_t v) {
        pbw_tag(w, field, 0);
        raw_varint(w, v);
}

void pbw_sint(struct pbw *w, uint32_t field, int64_t v) {
        pbw_varint(w, field, ((uint64_t) v << 1) ^ (uint64_t) (v >> 63));
}

void pbw_fixed64(struct pbw *w, uint32_t field, uint64_t v) {
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
                b[i] = (uint8_t) (v >> (8 * i));
        pbw_tag(w, field, 1);
        pbw_raw(w, b, 8);
}

void pbw_fixed32(struct pbw *w, uint32_t field, uint32_t v) {
        uint8_t b[4];
        for (int i = 0; i < 4; i++)
                b[i] = (uint8_t) (v >> (8 * i));
        pbw_tag(w, field, 5);
        pbw_raw(w, b, 4);
}

void pbw_bytes(struct pbw *w, uint32_t field, const void *data, size_t n) {
        pbw_tag(w, field, 2);
        raw_varint(w, n);
        pbw_raw(w, data, n);
}

void pbw_string(struct pbw *w, uint32_t field, const char *s) {
        pbw_bytes(w, field, s, strlen(s));
}

void pbw_message(struct pbw *w, uint32_t field, const struct pbw *sub) {
        if (sub->error && !w->error)
                w->error = sub->error;
        pbw_bytes(w, field, sub->buf, sub->len);
}
