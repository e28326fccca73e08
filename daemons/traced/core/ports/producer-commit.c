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

        for (struct smb_walk w = smb_walk_start_fd(&p->abi, p->smb_fd, SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN)); smb_walk_next(&w);)
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

void producer_commit_done(struct producer *p) {
        free(p->held);
        free(p->scraped);
        p->held = NULL;
        p->scraped = NULL;
        p->n_held = p->cap_held = p->n_scraped = p->cap_scraped = 0;
}

/* Copies one chunk found by a scrape: a complete one taken for reading
 * (c), given back free; one being written as is, its state unchanged (its
 * writer still owns it; it is committed again, and replaces this copy,
 * later). */
static void scrape_copy(struct producer *p, const struct smb_chunk *c, bool complete) {
        (void) chunk_sink_copy(p->svc, p, CHUNK_SINK_TARGET_FROM_WRITER, c->begin, c->size,
                               complete ? CHUNK_SINK_COMPLETE : 0);
        if (complete)
                (void) smb_release_chunk_as_free(&p->abi, c);
}

static int scraped_cmp(const void *a, const void *b) {
        const struct scraped_chunk *x = a, *y = b;
        if (x->writer_id != y->writer_id)
                return x->writer_id < y->writer_id ? -1 : 1;
        int32_t d = (int32_t) (x->chunk_id - y->chunk_id);
        if (d != 0)
                return d < 0 ? -1 : 1;
        /* The same chunk found being written, then complete: the
         * complete copy goes in last and replaces the other. */
        return (int) x->complete - (int) y->complete;
}

/* Notes a chunk found by the scrape; false when there is no room (the
 * chunk is then copied at once). */
static bool scrape_note(struct producer *p, const struct smb_chunk *c, bool complete) {
        if (GREEDY_REALLOC(p->scraped, p->cap_scraped, p->n_scraped + 1) < 0)
                return false;
        const struct smb_chunk_header *h = smb_chunk_header(c);
        p->scraped[p->n_scraped++] = (struct scraped_chunk) {
                .chunk = *c,
                .writer_id = atomic_load_explicit(&h->writer_id, memory_order_relaxed),
                .chunk_id = atomic_load_explicit(&h->chunk_id, memory_order_relaxed),
                .complete = complete,
        };
        return true;
}

void producer_scrape(struct producer *p, bool scrape_incomplete) {
        if (!p->smb)
                return;
        /* The chunks are copied in each writer's order, not the buffer's:
         * what they hold may be read (and written to the session's file)
         * between two copies, and a chunk copied after a later one of its
         * sequence was read would be a gap in the trace. The producer
         * writes on meanwhile: the chunks being written are looked for
         * first, the complete ones after. A writer has one chunk being
         * written at a time, and those it completed before it stay
         * complete until freed here: the second walk finds every one of
         * them, also those completed behind the first walk. */
        p->n_scraped = 0;
        if (scrape_incomplete)
                for (struct smb_walk w = smb_walk_start_fd(&p->abi, p->smb_fd, SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN));
                     smb_walk_next(&w);)
                        if (!scrape_note(p, &w.chunk, false))
                                scrape_copy(p, &w.chunk, false);
        for (struct smb_walk w = smb_walk_start_fd(&p->abi, p->smb_fd, SMB_STATE_BIT(SMB_CHUNK_COMPLETE)); smb_walk_next(&w);) {
                struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, w.page, w.chunk_idx);
                if (!smb_chunk_is_valid(&c))
                        continue;
                if (!scrape_note(p, &c, true))
                        scrape_copy(p, &c, true);
        }
        if (p->n_scraped > 1)
                qsort(p->scraped, p->n_scraped, sizeof(p->scraped[0]), scraped_cmp);
        for (size_t i = 0; i < p->n_scraped; i++)
                scrape_copy(p, &p->scraped[i].chunk, p->scraped[i].complete);
        p->n_scraped = 0;
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
