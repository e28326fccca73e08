/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where chunks copied out of a producer's SMB go: the trace buffer of the
 * session that owns the target buffer id, if the producer may write there. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfetto/common/commit_data_request.pb-c.h"

struct traced_service;
struct producer;

/* Use the target buffer the writer registered (RegisterTraceWriter). */
#define CHUNK_SINK_TARGET_FROM_WRITER UINT32_MAX

/* chunk points at the chunk header (read once, the producer may change it
 * concurrently). 0 on success or when the chunk is legitimately dropped
 * (no such buffer any more); -EBADMSG for a protocol violation. */
int chunk_sink_copy(struct traced_service *svc, struct producer *p, uint32_t target_buffer, const uint8_t *chunk,
                    size_t size, bool complete);
int chunk_sink_patch(struct traced_service *svc, struct producer *p,
                     const Perfetto__Protos__CommitDataRequest__ChunkToPatch *patch);
