/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Feeds arbitrary bytes to the IPC frame decoder in pieces whose sizes come
 * from the input itself, as a socket would deliver them. Each decoded frame
 * is re-encoded, which must succeed for anything the decoder accepted.
 * Frames are unpacked into an arena, as connections do. */

#include <stdint.h>
#include <stdlib.h>

#include "ipc/ipc-arena.h"
#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct ipc_frame_decoder d;
        struct ipc_arena arena;
        size_t pos = 0;

        if (size < 1)
                return 0;
        /* First byte: read size granularity. */
        size_t step = (size_t) data[0] + 1;
        pos = 1;

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        ipc_arena_init(&arena);
        while (pos < size) {
                size_t n = size - pos < step ? size - pos : step;
                if (ipc_frame_decoder_feed(&d, data + pos, n) < 0)
                        break;
                pos += n;
                for (;;) {
                        Perfetto__Protos__IPCFrame *f = NULL;
                        int r = ipc_frame_decoder_pop_into(&d, &arena.allocator, &f);
                        if (r <= 0) {
                                if (r < 0)
                                        goto out;
                                break;
                        }
                        uint8_t *buf = NULL;
                        size_t len;
                        if (ipc_frame_encode(f, &buf, &len) == 0)
                                free(buf);
                        ipc_arena_reset(&arena);
                }
        }
out:
        ipc_frame_decoder_done(&d);
        ipc_arena_done(&arena);
        return 0;
}
