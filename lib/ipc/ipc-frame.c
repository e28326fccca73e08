/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"

void ipc_frame_decoder_init(struct ipc_frame_decoder *d, size_t max_frame_size) {
        *d = (struct ipc_frame_decoder) {
                .max_frame_size = max_frame_size,
        };
}

void ipc_frame_decoder_done(struct ipc_frame_decoder *d) {
        free(d->buf);
        *d = (struct ipc_frame_decoder) {};
}

static uint32_t read_le32(const uint8_t *p) {
        return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static size_t bound(const struct ipc_frame_decoder *d) {
        return IPC_FRAME_HEADER_SIZE + d->max_frame_size;
}

int ipc_frame_decoder_space(struct ipc_frame_decoder *d, uint8_t **ret_ptr, size_t *ret_avail) {
        size_t want;

        /* Grow in steps; never beyond one maximal frame plus its header. */
        if (d->len >= d->cap) {
                if (d->cap >= bound(d))
                        return -EMSGSIZE;
                want = d->cap ? d->cap * 2 : 4096;
                if (want > bound(d))
                        want = bound(d);
                uint8_t *n = realloc(d->buf, want);
                if (!n)
                        return -ENOMEM;
                d->buf = n;
                d->cap = want;
        }
        *ret_ptr = d->buf + d->len;
        *ret_avail = d->cap - d->len;
        return 0;
}

void ipc_frame_decoder_commit(struct ipc_frame_decoder *d, size_t n) {
        d->len += n;
}

int ipc_frame_decoder_feed(struct ipc_frame_decoder *d, const void *data, size_t n) {
        const uint8_t *p = data;

        while (n > 0) {
                uint8_t *space;
                size_t avail;
                int r = ipc_frame_decoder_space(d, &space, &avail);
                if (r < 0)
                        return r;
                size_t k = MIN(avail, n);
                memcpy(space, p, k);
                ipc_frame_decoder_commit(d, k);
                p += k;
                n -= k;
        }
        return 0;
}

int ipc_frame_decoder_pop(struct ipc_frame_decoder *d, Perfetto__Protos__IPCFrame **ret) {
        return ipc_frame_decoder_pop_into(d, NULL, ret);
}

int ipc_frame_decoder_pop_into(struct ipc_frame_decoder *d, ProtobufCAllocator *allocator,
                               Perfetto__Protos__IPCFrame **ret) {
        if (d->len < IPC_FRAME_HEADER_SIZE)
                return 0;

        uint32_t size = read_le32(d->buf);
        if (size > d->max_frame_size)
                return -EMSGSIZE;
        if (d->len - IPC_FRAME_HEADER_SIZE < size)
                return 0;

        Perfetto__Protos__IPCFrame *f =
                perfetto__protos__ipcframe__unpack(allocator, size, d->buf + IPC_FRAME_HEADER_SIZE);
        size_t consumed = IPC_FRAME_HEADER_SIZE + size;
        memmove(d->buf, d->buf + consumed, d->len - consumed);
        d->len -= consumed;
        if (!f)
                return -EBADMSG;
        *ret = f;
        return 1;
}

int ipc_frame_decoder_peek(const struct ipc_frame_decoder *d, size_t *off, const uint8_t **ret_data,
                           size_t *ret_size) {
        size_t o = *off;
        if (o > d->len || d->len - o < IPC_FRAME_HEADER_SIZE)
                return 0;
        uint32_t size = read_le32(d->buf + o);
        if (size > d->max_frame_size)
                return -EMSGSIZE;
        if (d->len - o - IPC_FRAME_HEADER_SIZE < size)
                return 0;
        *ret_data = d->buf + o + IPC_FRAME_HEADER_SIZE;
        *ret_size = size;
        *off = o + IPC_FRAME_HEADER_SIZE + size;
        return 1;
}

static void put_header(uint8_t *buf, size_t size) {
        buf[0] = (uint8_t) size;
        buf[1] = (uint8_t) (size >> 8);
        buf[2] = (uint8_t) (size >> 16);
        buf[3] = (uint8_t) (size >> 24);
}

int ipc_frame_encoded_len(const Perfetto__Protos__IPCFrame *frame, size_t *ret_len) {
        size_t size = perfetto__protos__ipcframe__get_packed_size(frame);
        if (size > IPC_FRAME_MAX_SEND_SIZE)
                return -EMSGSIZE;
        *ret_len = IPC_FRAME_HEADER_SIZE + size;
        return 0;
}

int ipc_frame_encode_to(const Perfetto__Protos__IPCFrame *frame, uint8_t *buf, size_t len) {
        if (len < IPC_FRAME_HEADER_SIZE)
                return -EINVAL;
        size_t size = len - IPC_FRAME_HEADER_SIZE;
        put_header(buf, size);
        if (perfetto__protos__ipcframe__pack(frame, buf + IPC_FRAME_HEADER_SIZE) != size)
                return -EINVAL;
        return 0;
}

int ipc_frame_encode(const Perfetto__Protos__IPCFrame *frame, uint8_t **ret_buf, size_t *ret_len) {
        size_t len;
        int r = ipc_frame_encoded_len(frame, &len);
        if (r < 0)
                return r;
        uint8_t *buf = malloc(len);
        if (!buf)
                return -ENOMEM;
        r = ipc_frame_encode_to(frame, buf, len);
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}
