/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Drives a small trace buffer with operations decoded from the input:
 * chunk copies and takes (some held until a settle) with arbitrary headers
 * and payloads, patches, reads (some final). Anything goes in; the buffer
 * must neither crash nor exceed its budget. Every payload is a heap copy
 * that is freed as soon as the buffer may no longer use it (after the call,
 * or after the settle for held ones), so that ASan catches a buffer that
 * still points into it. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buffers/trace-buffer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
        const uint8_t *p;
        size_t left;
};

static uint32_t take(struct input *in, unsigned bytes) {
        uint32_t v = 0;
        for (unsigned i = 0; i < bytes; i++) {
                v <<= 8;
                if (in->left) {
                        v |= *in->p++;
                        in->left--;
                }
        }
        return v;
}

static void consume(const struct iovec *iov, size_t n) {
        volatile uint8_t sink = 0;
        for (size_t k = 0; k < n; k++)
                for (size_t i = 0; i < iov[k].iov_len; i++)
                        sink ^= ((const uint8_t *) iov[k].iov_base)[i];
        (void) sink;
}

static int take_fn(const struct iovec *iov, size_t n_iov, size_t size, const struct trace_buffer_packet_info *info,
                   void *userdata) {
        consume(iov, n_iov);
        return 0;
}

#define MAX_HELD 64

struct held {
        uint8_t *payloads[MAX_HELD];
        size_t n;
};

/* The producer gets its held chunks back: rewritten, then gone. */
static void settle(struct trace_buffer *tb, struct held *h) {
        trace_buffer_settle(tb);
        for (size_t i = 0; i < h->n; i++) {
                memset(h->payloads[i], 0xee, 1);
                free(h->payloads[i]);
        }
        h->n = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct trace_buffer *tb;
        struct input in = { data, size };
        struct held held = {};

        if (trace_buffer_new(8192, take(&in, 1) & 1 ? TRACE_BUFFER_DISCARD : TRACE_BUFFER_RING_BUFFER, &tb) < 0)
                return 0;
        while (in.left > 0) {
                unsigned op = take(&in, 1) % 6;
                switch (op) {
                case 0:
                case 1:
                case 4: {
                        struct trace_buffer_chunk c = {
                                .producer_id = (uint16_t) (take(&in, 1) % 3),
                                .writer_id = (uint16_t) (take(&in, 1) % 3 + 1),
                                .chunk_id = take(&in, 1) % 8,
                                .num_fragments = (uint16_t) (take(&in, 1) % 8),
                                .flags = (uint8_t) (take(&in, 1) & 7),
                                .complete = take(&in, 1) & 1,
                        };
                        size_t n = take(&in, 2) % 4096;
                        if (n > in.left)
                                n = in.left;
                        uint8_t *payload = malloc(n ? n : 1);
                        if (!payload)
                                abort();
                        memcpy(payload, in.p, n);
                        in.p += n;
                        in.left -= n;
                        c.payload = payload;
                        c.payload_size = n;
                        c.payload_stays = op == 4 && held.n < MAX_HELD;
                        int r = op == 0 ? trace_buffer_copy_chunk(tb, &c) : trace_buffer_take_chunk(tb, &c, take_fn, NULL);
                        if (op != 0 && r == 2) {
                                if (!c.payload_stays)
                                        abort(); /* held without being allowed to */
                                held.payloads[held.n++] = payload;
                        } else
                                free(payload);
                        break;
                }
                case 5:
                        settle(tb, &held);
                        break;
                case 2: {
                        struct trace_buffer_patch p = { .offset = take(&in, 2) };
                        uint32_t v = take(&in, 4);
                        memcpy(p.data, &v, 4);
                        (void) trace_buffer_try_patch(tb, (uint16_t) (take(&in, 1) % 3), (uint16_t) (take(&in, 1) % 3 + 1),
                                                      take(&in, 1) % 8, &p, 1, take(&in, 1) & 1);
                        break;
                }
                case 3: {
                        struct trace_buffer_packet pkt;
                        struct trace_buffer_packet_info info;
                        trace_buffer_set_final(tb, take(&in, 1) & 1);
                        trace_buffer_begin_read(tb);
                        while (trace_buffer_read_next_packet(tb, &pkt, &info) > 0)
                                consume(pkt.slices, pkt.n_slices);
                        break;
                }
                }
                if (trace_buffer_used_bytes(tb) > 8192)
                        abort();
        }
        settle(tb, &held);
        trace_buffer_free(tb);
        return 0;
}
