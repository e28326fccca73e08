/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where chunks copied out of a producer's SMB go: the trace buffer of the
 * session that owns the target buffer id, if the producer may write there
 * (or straight into its file: session_commit_chunk decides). The sink
 * resolves a writer's target buffer and hands the chunk down to the
 * sessions layer; it keeps no session state and bumps no session's
 * counters itself. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfetto/common/commit_data_request.pb-c.h"

struct traced_service;
struct producer;

/* Use the target buffer the writer registered (RegisterTraceWriter). */
#define CHUNK_SINK_TARGET_FROM_WRITER UINT32_MAX

enum chunk_sink_flags {
        /* Committed (not scraped while still being written). */
        CHUNK_SINK_COMPLETE = 1 << 0,
        /* The chunk stays readable, and is not given back to the producer,
         * until chunk_sink_settle: a file being written may then read a
         * packet that goes on in the next chunk straight from it. */
        CHUNK_SINK_MAY_HOLD = 1 << 1,
};

/* chunk points at the chunk header (read once, the producer may change it
 * concurrently). 0 on success or when the chunk is legitimately dropped
 * (no such buffer any more); 1 when, with CHUNK_SINK_MAY_HOLD, the chunk
 * is still read from: give it back only after chunk_sink_settle; -EBADMSG
 * for a protocol violation. */
int chunk_sink_copy(struct traced_service *svc, struct producer *p, uint32_t target_buffer, const uint8_t *chunk,
                    size_t size, enum chunk_sink_flags flags);
/* The target buffer of a producer's writer (RegisterTraceWriter, or its
 * first commit); 0: none. */
int chunk_sink_set_writer_target(struct producer *p, uint16_t writer_id, uint32_t target_buffer);
uint32_t chunk_sink_writer_target(const struct producer *p, uint16_t writer_id);
/* A chunk of writer_id that a departing producer left being written: lost
 * for the session its writer served, which counts it. Whether one did. */
bool chunk_sink_count_torn(struct producer *p, uint16_t writer_id);
/* Copies into the buffers what they still read from held chunks. */
void chunk_sink_settle(struct traced_service *svc);
int chunk_sink_patch(struct traced_service *svc, struct producer *p,
                     const Perfetto__Protos__CommitDataRequest__ChunkToPatch *patch);
