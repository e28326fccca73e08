/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "basic/macro.h"
#include "core/ports/chunk-sink.h"
#include "core/service.h"
#include "core/buffers/trace-buffer.h"

static struct session_buffer *resolve(struct traced_service *svc, struct producer *p, uint32_t target_buffer,
                                      struct session **ret_session) {
        struct session *s = NULL;
        struct session_buffer *b = service_find_buffer(svc, target_buffer, &s);
        /* A producer may only write into buffers of sessions it serves. */
        if (!b || !session_producer_may_write(s, p->id))
                return NULL;
        *ret_session = s;
        return b;
}

int chunk_sink_copy(struct traced_service *svc, struct producer *p, uint32_t target_buffer, const uint8_t *chunk,
                    size_t size, enum chunk_sink_flags flags) {
        const struct smb_chunk_header *h = (const struct smb_chunk_header *) chunk;
        struct session *s = NULL;

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
                target_buffer = producer_writer_target(p, writer_id);
                if (target_buffer == 0)
                        return 0;
        } else if (producer_writer_target(p, writer_id) == 0)
                (void) producer_set_writer_target(p, writer_id, target_buffer);

        struct session_buffer *b = resolve(svc, p, target_buffer, &s);
        if (!b) {
                /* The session may have ended meanwhile: drop, count. */
                for (struct session *o = svc->sessions; o; o = o->next)
                        if (session_producer_may_write(o, p->id))
                                o->chunks_discarded_no_buffer++;
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
        /* A file being written takes whole packets at once, else the
         * chunk waits in the buffer to be read. */
        int r = s->file_fd >= 0 ? session_output_take_chunk(s, b->tb, &c) : 0;
        if (r != 0) {
                s->chunks_taken++;
                s->chunks_held += r == 2;
                return r < 0 ? r : r == 2;
        }
        s->chunks_stored++;
        r = trace_buffer_copy_chunk(b->tb, &c);
        if (r >= 0 && s->file_fd >= 0)
                session_output_pressure(s, b->tb);
        return r;
}

void chunk_sink_settle(struct traced_service *svc) {
        for (struct session *s = svc->sessions; s; s = s->next)
                for (size_t i = 0; i < s->n_buffers; i++)
                        trace_buffer_settle(s->buffers[i].tb);
}

int chunk_sink_patch(struct traced_service *svc, struct producer *p,
                     const Perfetto__Protos__CommitDataRequest__ChunkToPatch *c) {
        struct session *s = NULL;
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
        struct session_buffer *b = resolve(svc, p, c->target_buffer, &s);
        if (!b) {
                return 0;
        }
        int r = trace_buffer_try_patch(b->tb, p->id, (uint16_t) c->writer_id, c->chunk_id, patches, c->n_patches,
                                       c->has_has_more_patches && c->has_more_patches);
        if (r < 0)
                s->patches_discarded++;
        return 0;
}
