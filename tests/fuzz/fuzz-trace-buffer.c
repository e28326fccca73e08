/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Drives a small trace buffer with operations decoded from the input:
 * chunk copies with arbitrary headers and payloads, patches, reads (some
 * final). Anything goes in; the buffer must neither crash nor exceed its
 * budget. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace-buffer.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct trace_buffer *tb;
        struct input in = { data, size };
        uint8_t payload[4096];

        if (trace_buffer_new(8192, take(&in, 1) & 1 ? TRACE_BUFFER_DISCARD : TRACE_BUFFER_RING_BUFFER, &tb) < 0)
                return 0;
        while (in.left > 0) {
                switch (take(&in, 1) % 4) {
                case 0:
                case 1: {
                        struct trace_buffer_chunk c = {
                                .producer_id = (uint16_t) (take(&in, 1) % 3),
                                .writer_id = (uint16_t) (take(&in, 1) % 3 + 1),
                                .chunk_id = take(&in, 1) % 8,
                                .num_fragments = (uint16_t) (take(&in, 1) % 8),
                                .flags = (uint8_t) (take(&in, 1) & 7),
                                .complete = take(&in, 1) & 1,
                        };
                        size_t n = take(&in, 2) % sizeof(payload);
                        if (n > in.left)
                                n = in.left;
                        memcpy(payload, in.p, n);
                        in.p += n;
                        in.left -= n;
                        c.payload = payload;
                        c.payload_size = n;
                        (void) trace_buffer_copy_chunk(tb, &c);
                        break;
                }
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
                        while (trace_buffer_read_next_packet(tb, &pkt, &info) > 0) {
                                volatile uint8_t sink = 0;
                                for (size_t k = 0; k < pkt.n_slices; k++)
                                        for (size_t i = 0; i < pkt.slices[k].iov_len; i++)
                                                sink ^= ((const uint8_t *) pkt.slices[k].iov_base)[i];
                                (void) sink;
                        }
                        break;
                }
                }
                if (trace_buffer_used_bytes(tb) > 8192)
                        abort();
        }
        trace_buffer_free(tb);
        return 0;
}
