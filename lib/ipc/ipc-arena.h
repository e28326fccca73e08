/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Memory for messages unpacked from one frame and dropped together: a
 * protobuf-c allocator that hands out pieces of one block and frees nothing
 * until ipc_arena_reset. A frame that needed more than the block takes the
 * rest from malloc once, and the block grows to fit it at the reset (up to
 * IPC_ARENA_KEEP_MAX), so frames of a steady size allocate nothing. */

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* The largest block kept between frames; a frame that needs more is served
 * from malloc every time. */
#define IPC_ARENA_KEEP_MAX (256u * 1024u)

struct ipc_arena_spill;

struct ipc_arena {
        ProtobufCAllocator allocator; /* pass &arena->allocator to *_unpack */
        uint8_t *block;
        size_t cap, used;
        struct ipc_arena_spill *spills; /* what did not fit, since the reset */
        size_t spilled;
        uint64_t mallocs; /* calls to malloc so far (block and spills) */
};

void ipc_arena_init(struct ipc_arena *a);
/* Frees everything handed out since the last reset (and before it). */
void ipc_arena_reset(struct ipc_arena *a);
void ipc_arena_done(struct ipc_arena *a);
