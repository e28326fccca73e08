/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The commit path of the ProducerPort: CommitData (chunks to move out of
 * the producer's shared memory buffer, or inside the request for a
 * relayed producer, and patches), scraping a producer's buffer on flush
 * and disconnect, and the trace writers' target buffers. Every chunk goes
 * to chunk-sink.c. */

#include <errno.h>
#include <stdlib.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/chunk-sink.h"
#include "core/ports/producer-port.h"
#include "core/sessions/producer.h"
#include "core/sessions/session.h"
#include "smb/smb-walk.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

/* Counts the chunks a departing producer left being written against the
 * sessions their writers served: what they held is lost, not silently.
 * Returns the number counted. */
size_t producer_count_torn_chunks(struct producer *p) {
        size_t n = 0;

        for (struct smb_walk w = smb_walk_start(&p->abi, SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN)); smb_walk_next(&w);)
                if (chunk_sink_count_torn(p, smb_chunk_writer_id(&w.chunk)))
                        n++;
        return n;
}

/* Moves one chunk, read from the SMB (or from data when the producer
 * emulates shared memory), into the target buffer. Returns -EBADMSG for a
 * protocol violation. */
static int move_chunk(struct producer *p, const Perfetto__Protos__CommitDataRequest__ChunksToMove *m) {
        uint32_t page = m->page, chunk_idx = m->chunk, target_buffer = m->target_buffer;
        if (m->has_data) {
                /* Shared memory emulation: the whole chunk, header
                 * included, with no page of ours behind it. */
                if (m->data.len < SMB_CHUNK_HEADER_SIZE || m->data.len > SMB_MAX_PAGE_SIZE)
                        return -EBADMSG;
                int r = chunk_sink_copy(p->svc, p,
                                       m->has_target_buffer ? target_buffer : CHUNK_SINK_TARGET_FROM_WRITER,
                                       m->data.data, m->data.len,
                                       (m->has_chunk_incomplete && m->chunk_incomplete ? 0 : CHUNK_SINK_COMPLETE) |
                                               CHUNK_SINK_MAY_HOLD);
                return MIN(r, 0);
        }
        if (!p->smb)
                return -EBADMSG;
        if (page >= p->abi.num_pages || chunk_idx >= SMB_MAX_CHUNKS_PER_PAGE)
                return -EBADMSG;

        struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, page, chunk_idx);
        if (!smb_chunk_is_valid(&c)) {
                /* Not Complete: a stale or duplicate commit. Upstream
                 * tolerates it (the chunk may have been scraped). */
                return 0;
        }
        /* The chunk may be read from until the request is done: room to
         * note it first, so that it is never left unreleased. */
        (void) GREEDY_REALLOC_MIN(p->held, p->cap_held, p->n_held + 1, 64);
        bool may_hold = p->n_held < p->cap_held;
        int r = chunk_sink_copy(p->svc, p, target_buffer, c.begin, c.size,
                                CHUNK_SINK_COMPLETE | (may_hold ? CHUNK_SINK_MAY_HOLD : 0));
        if (r > 0)
                p->held[p->n_held++] = c;
        else
                (void) smb_release_chunk_as_free(&p->abi, &c);
        return MIN(r, 0);
}

/* The end of a CommitData's chunks: what the buffers still read of them is
 * copied in, and they go back to the producer. */
static void settle_chunks(struct producer *p) {
        chunk_sink_settle(p->svc);
        for (size_t i = 0; i < p->n_held; i++)
                (void) smb_release_chunk_as_free(&p->abi, &p->held[i]);
        p->n_held = 0;
}

void producer_scrape(struct producer *p, bool scrape_incomplete) {
        if (!p->smb)
                return;
        unsigned states = SMB_STATE_BIT(SMB_CHUNK_COMPLETE) |
                          (scrape_incomplete ? SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN) : 0);
        for (struct smb_walk w = smb_walk_start(&p->abi, states); smb_walk_next(&w);) {
                if (w.state == SMB_CHUNK_COMPLETE) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, w.page, w.chunk_idx);
                        if (!smb_chunk_is_valid(&c))
                                continue;
                        (void) chunk_sink_copy(p->svc, p, CHUNK_SINK_TARGET_FROM_WRITER, c.begin, c.size,
                                               CHUNK_SINK_COMPLETE);
                        (void) smb_release_chunk_as_free(&p->abi, &c);
                } else
                        /* Copy without changing its state: the writer
                         * still owns it; it is committed again (and
                         * replaces this copy) later. */
                        (void) chunk_sink_copy(p->svc, p, CHUNK_SINK_TARGET_FROM_WRITER, w.chunk.begin, w.chunk.size,
                                               0);
        }
}

void m_commit_data(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__CommitDataRequest *a = (const void *) args;
        Perfetto__Protos__CommitDataResponse resp = PERFETTO__PROTOS__COMMIT_DATA_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (!p) {
                ipc_request_fail(req);
                return;
        }
        for (size_t i = 0; i < a->n_chunks_to_move; i++) {
                const Perfetto__Protos__CommitDataRequest__ChunksToMove *m = a->chunks_to_move[i];
                int r = move_chunk(p, m);
                if (r == -EBADMSG) {
                        settle_chunks(p);
                        ipc_request_fail(req);
                        producer_kick(p, "malformed CommitData (chunk outside its shared memory buffer)");
                        return;
                }
        }
        settle_chunks(p);
        for (size_t i = 0; i < a->n_chunks_to_patch; i++) {
                const Perfetto__Protos__CommitDataRequest__ChunkToPatch *c = a->chunks_to_patch[i];
                int r = chunk_sink_patch(p->svc, p, c);
                if (r == -EBADMSG) {
                        ipc_request_fail(req);
                        producer_kick(p, "malformed CommitData (bad patch)");
                        return;
                }
        }
        p->chunks_committed += a->n_chunks_to_move;
        p->commit_requests++;
        if (a->has_flush_request_id && a->flush_request_id)
                session_on_producer_flush_ack(p->svc, p->id, a->flush_request_id);
        reply_empty(req, &resp.base);
}

void m_register_trace_writer(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__RegisterTraceWriterRequest *a = (const void *) args;
        Perfetto__Protos__RegisterTraceWriterResponse resp = PERFETTO__PROTOS__REGISTER_TRACE_WRITER_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (p && a->has_trace_writer_id && a->trace_writer_id <= UINT16_MAX)
                (void) chunk_sink_set_writer_target(p, (uint16_t) a->trace_writer_id,
                                                    a->has_target_buffer ? a->target_buffer : 0);
        reply_empty(req, &resp.base);
}

void m_unregister_trace_writer(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__UnregisterTraceWriterRequest *a = (const void *) args;
        Perfetto__Protos__UnregisterTraceWriterResponse resp =
                PERFETTO__PROTOS__UNREGISTER_TRACE_WRITER_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (p && a->has_trace_writer_id && a->trace_writer_id <= UINT16_MAX)
                (void) chunk_sink_set_writer_target(p, (uint16_t) a->trace_writer_id, 0);
        reply_empty(req, &resp.base);
}
