/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "core/ports/chunk-sink.h"
#include "core/limits.h"
#include "core/ports/ports.h"
#include "core/service.h"
#include "core/sessions/producer.h"
#include "core/sessions/session.h"
#include "core/buffers/trace-buffer.h"

int chunk_sink_set_writer_target(struct producer *p, uint16_t writer_id, uint32_t target_buffer) {
        if (writer_id == 0 || writer_id > SMB_MAX_WRITER_ID)
                return -EINVAL;
        if (!p->writer_targets) {
                p->writer_targets = calloc(SMB_MAX_WRITER_ID + 1, sizeof(uint32_t));
                if (!p->writer_targets)
                        return -ENOMEM;
        }
        p->writer_targets[writer_id] = target_buffer;
        return 0;
}

uint32_t chunk_sink_writer_target(const struct producer *p, uint16_t writer_id) {
        if (!p->writer_targets || writer_id > SMB_MAX_WRITER_ID)
                return 0;
        return p->writer_targets[writer_id];
}

bool chunk_sink_count_torn(struct producer *p, uint16_t writer_id) {
        uint32_t target = chunk_sink_writer_target(p, writer_id);
        return target != 0 && sessions_count_torn_chunk(p->svc, target, p->id);
}

int chunk_sink_copy(struct traced_service *svc, struct producer *p, uint32_t target_buffer, const uint8_t *chunk,
                    size_t size, enum chunk_sink_flags flags) {
        const struct smb_chunk_header *h = (const struct smb_chunk_header *) chunk;
        struct trace_buffer *tb;

        if (size < SMB_CHUNK_HEADER_SIZE)
                return -EBADMSG;
        /* Read the header once: the producer can change shared memory at
         * any time, the copy below is validated again when read back. */
        uint32_t chunk_id = atomic_load_explicit(&h->chunk_id, memory_order_relaxed);
        uint16_t writer_id = atomic_load_explicit(&h->writer_id, memory_order_relaxed);
        uint16_t packets = atomic_load_explicit(&h->packets, memory_order_acquire);

        if (writer_id == 0 || writer_id > SMB_MAX_WRITER_ID) {
                p->abi_violations++;
                return 0; /* a free or garbage chunk: nothing to keep */
        }
        if (target_buffer == CHUNK_SINK_TARGET_FROM_WRITER) {
                target_buffer = chunk_sink_writer_target(p, writer_id);
                if (target_buffer == 0)
                        return 0;
        } else if (chunk_sink_writer_target(p, writer_id) == 0)
                (void) chunk_sink_set_writer_target(p, writer_id, target_buffer);

        struct session *s = sessions_writable_buffer(svc, target_buffer, p->id, &tb);
        if (!s) {
                /* The session may have ended meanwhile: drop, count. */
                sessions_count_chunk_without_buffer(svc, p->id);
                return 0;
        }
        const struct trace_buffer_chunk c = {
                .producer_id = p->id,
                .producer_uid = p->uid,
                .producer_pid = p->pid,
                .machine_id = p->machine_id,
                .writer_id = writer_id,
                .chunk_id = chunk_id,
                .num_fragments = smb_packets_count(packets),
                .flags = smb_packets_flags(packets),
                .complete = flags & CHUNK_SINK_COMPLETE,
                .payload = chunk + SMB_CHUNK_HEADER_SIZE,
                .payload_size = size - SMB_CHUNK_HEADER_SIZE,
                .payload_stays = flags & CHUNK_SINK_MAY_HOLD,
        };
        return session_commit_chunk(s, tb, &c);
}

void chunk_sink_settle(struct traced_service *svc) {
        sessions_settle(svc);
}

int chunk_sink_patch(struct traced_service *svc, struct producer *p,
                     const Perfetto__Protos__CommitDataRequest__ChunkToPatch *c) {
        struct trace_buffer *tb;
        struct trace_buffer_patch patches[64];

        if (!c->has_writer_id || !c->has_chunk_id || c->writer_id == 0 || c->writer_id > SMB_MAX_WRITER_ID)
                return -EBADMSG;
        if (c->n_patches > ELEMENTSOF(patches))
                return -EBADMSG;
        for (size_t i = 0; i < c->n_patches; i++) {
                const Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *pt = c->patches[i];
                if (!pt->has_offset || !pt->has_data || pt->data.len != TRACE_BUFFER_PATCH_SIZE)
                        return -EBADMSG;
                patches[i].offset = pt->offset;
                memcpy(patches[i].data, pt->data.data, TRACE_BUFFER_PATCH_SIZE);
        }
        struct session *s = sessions_writable_buffer(svc, c->target_buffer, p->id, &tb);
        if (!s)
                return 0;
        int r = trace_buffer_try_patch(tb, p->id, (uint16_t) c->writer_id, c->chunk_id, patches, c->n_patches,
                                       c->has_has_more_patches && c->has_more_patches);
        if (r < 0)
                session_count_discarded_patch(s);
        return 0;
}
