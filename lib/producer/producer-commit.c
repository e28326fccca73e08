/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's commits: the queue of completed chunks and patches,
 * the CommitData requests that report them (with the chunks' bytes when
 * shared memory is emulated), and the scrape of chunks still being written
 * when a flush needs them over emulated shared memory. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "producer-internal.h"
#include "smb/smb-walk.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

void producer_wake_loop(traced_producer *p) {
        if (p->wake_fd >= 0)
                (void) eventfd_write(p->wake_fd, 1);
}

static int on_commit_defer(sd_event_source *s, void *userdata) {
        traced_producer *p = userdata;
        p->commit_defer = sd_event_source_disable_unref(p->commit_defer);
        (void) producer_commit(p, 0);
        return 0;
}

int producer_on_wake(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        traced_producer *p = userdata;
        eventfd_t v;
        (void) eventfd_read(fd, &v);
        (void) producer_commit(p, 0);
        return 0;
}

/* With the lock held: make sure the queue gets sent soon. */
static int schedule_commit(traced_producer *p) {
        if (!producer_on_loop(p)) {
                producer_wake_loop(p);
                return 0;
        }
        if (!p->commit_defer)
                (void) sd_event_add_defer(p->event, &p->commit_defer, on_commit_defer, p);
        return 0;
}

int writer_queue_commit(traced_trace_writer *w, size_t page, size_t chunk) {
        traced_producer *p = w->producer;
        bool now = false;

        producer_lock(p);
        if (w->generation != atomic_load(&p->generation)) {
                producer_unlock(p);
                return 0; /* that SMB is gone with its connection */
        }
        while (p->n_pending == PRODUCER_MAX_PENDING_COMMITS) {
                if (producer_on_loop(p)) {
                        int r = producer_commit(p, 0);
                        if (r < 0) {
                                producer_unlock(p);
                                return r;
                        }
                        continue;
                }
                /* Another thread: let the loop drain the queue. */
                producer_wake_loop(p);
                producer_unlock(p);
                struct timespec ts = { .tv_nsec = 1000000 };
                (void) nanosleep(&ts, NULL);
                producer_lock(p);
                if (w->generation != atomic_load(&p->generation)) {
                        producer_unlock(p);
                        return 0;
                }
        }
        p->pending[p->n_pending].page = (uint32_t) page;
        p->pending[p->n_pending].chunk = (uint32_t) chunk;
        p->pending[p->n_pending].target_buffer = w->target_buffer;
        p->n_pending++;
        /* Commit in batches: at the latest when control returns to the
         * loop, or right away once half the buffer waits. */
        now = p->emulate ? p->n_pending * p->abi.page_size / 4 >= PRODUCER_EMULATED_COMMIT_BYTES :
                           p->n_pending * p->abi.page_size / 4 >= p->smb_size / 2;
        /* The chunk is queued either way; a connection that failed is
         * dealt with by its disconnect handler. */
        if (now && producer_on_loop(p))
                (void) producer_commit(p, 0);
        else
                (void) schedule_commit(p);
        producer_unlock(p);
        return 0;
}

int writer_queue_patch(traced_trace_writer *w, const struct pending_patch *patch) {
        traced_producer *p = w->producer;
        producer_lock(p);
        if (w->generation != atomic_load(&p->generation)) {
                producer_unlock(p);
                return 0;
        }
        if (GREEDY_REALLOC_MIN(p->patches, p->cap_patches, p->n_patches + 1, 64) < 0) {
                producer_unlock(p);
                return -ENOMEM;
        }
        p->patches[p->n_patches++] = *patch;
        (void) schedule_commit(p);
        producer_unlock(p);
        return 0;
}

/* Emulated shared memory: commits wait while this much is queued on the
 * socket, so that a producer faster than its link fills its SMB (and its
 * writers stall or drop, by policy) rather than the send queue. */
static bool emulated_link_busy(traced_producer *p) {
        (void) ipc_client_flush(p->client);
        return p->client && ipc_client_queued_bytes(p->client) > PRODUCER_EMULATED_QUEUE_MAX;
}

static int on_commit_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        traced_producer *p = userdata;
        p->commit_retry = sd_event_source_disable_unref(p->commit_retry);
        (void) producer_commit(p, 0);
        return 0;
}

/* Moves [from, n_pending) of the queue to its start. */
static void keep_pending_from(traced_producer *p, size_t from) {
        memmove(p->pending, p->pending + from, (p->n_pending - from) * sizeof(p->pending[0]));
        p->n_pending -= from;
}

int producer_commit(traced_producer *p, uint64_t flush_request_id) {
        Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
        Perfetto__Protos__CommitDataRequest__ChunksToMove moves[512];
        Perfetto__Protos__CommitDataRequest__ChunksToMove *ptrs[512];
        Perfetto__Protos__CommitDataRequest__ChunkToPatch cps[64];
        Perfetto__Protos__CommitDataRequest__ChunkToPatch *cpp[64];
        Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch pts[64];
        Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *ptp[64];
        size_t done = 0, pdone = 0;

        if (!producer_on_loop(p)) {
                producer_wake_loop(p);
                return 0;
        }
        producer_lock(p);
        if (!p->client || !atomic_load(&p->ready)) {
                producer_unlock(p);
                return -ENOTCONN;
        }
        /* A flush acknowledgement waits for everything queued before it. */
        if (flush_request_id)
                p->flush_request_id = flush_request_id;
        if (p->emulate && !p->emu_buf) {
                p->emu_buf = malloc(PRODUCER_EMULATED_COMMIT_BYTES + SMB_MAX_PAGE_SIZE);
                if (!p->emu_buf) {
                        producer_unlock(p);
                        return -ENOMEM;
                }
        }
        do {
                if (p->emulate && emulated_link_busy(p)) {
                        if (!p->client || !atomic_load(&p->ready)) {
                                producer_unlock(p);
                                return -ENOTCONN;
                        }
                        /* Try again soon; what is not sent stays queued
                         * (its chunks stay taken in the SMB). */
                        keep_pending_from(p, done);
                        if (pdone) {
                                memmove(p->patches, p->patches + pdone, (p->n_patches - pdone) * sizeof(p->patches[0]));
                                p->n_patches -= pdone;
                        }
                        if (!p->commit_retry)
                                (void) sd_event_add_time_relative(p->event, &p->commit_retry, CLOCK_MONOTONIC,
                                                                  PRODUCER_EMULATED_RETRY_USEC, 0, on_commit_retry, p);
                        producer_unlock(p);
                        return 0;
                }
                size_t n = 0, bytes = 0;
                while (done < p->n_pending && n < ELEMENTSOF(moves)) {
                        Perfetto__Protos__CommitDataRequest__ChunksToMove *m = &moves[n];
                        *m = (Perfetto__Protos__CommitDataRequest__ChunksToMove)
                                PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
                        m->has_page = m->has_chunk = m->has_target_buffer = true;
                        m->page = p->pending[done].page;
                        m->chunk = p->pending[done].chunk;
                        m->target_buffer = p->pending[done].target_buffer;
                        if (p->emulate) {
                                /* The service cannot read this SMB: the
                                 * chunk travels whole, and is free again
                                 * once copied. */
                                uint32_t size = p->abi.chunk_sizes[smb_bitmap_layout(smb_page_bitmap(&p->abi, m->page))];
                                if (n > 0 && bytes + size > PRODUCER_EMULATED_COMMIT_BYTES)
                                        break;
                                struct smb_chunk c = smb_try_acquire_chunk_for_reading(&p->abi, m->page, m->chunk);
                                done++;
                                if (!smb_chunk_is_valid(&c))
                                        continue; /* not complete: nothing to send */
                                memcpy(p->emu_buf + bytes, c.begin, c.size);
                                m->has_data = true;
                                m->data.data = p->emu_buf + bytes;
                                m->data.len = c.size;
                                bytes += c.size;
                                (void) smb_release_chunk_as_free(&p->abi, &c);
                        } else
                                done++;
                        ptrs[n++] = m;
                }
                req.n_chunks_to_move = n;
                req.chunks_to_move = ptrs;
                /* Patches go in the last request, after every move. */
                size_t np = 0;
                if (done == p->n_pending) {
                        np = MIN(p->n_patches - pdone, ELEMENTSOF(cps));
                        for (size_t i = 0; i < np; i++) {
                                const struct pending_patch *pt = &p->patches[pdone + i];
                                cps[i] = (Perfetto__Protos__CommitDataRequest__ChunkToPatch)
                                        PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNK_TO_PATCH__INIT;
                                pts[i] = (Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch)
                                        PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNK_TO_PATCH__PATCH__INIT;
                                pts[i].has_offset = pts[i].has_data = true;
                                pts[i].offset = pt->offset;
                                pts[i].data.data = (uint8_t *) pt->data;
                                pts[i].data.len = 4;
                                ptp[i] = &pts[i];
                                cps[i].has_target_buffer = cps[i].has_writer_id = cps[i].has_chunk_id = true;
                                cps[i].target_buffer = pt->target_buffer;
                                cps[i].writer_id = pt->writer_id;
                                cps[i].chunk_id = pt->chunk_id;
                                cps[i].n_patches = 1;
                                cps[i].patches = &ptp[i];
                                cps[i].has_has_more_patches = pt->more;
                                cps[i].has_more_patches = pt->more;
                                cpp[i] = &cps[i];
                        }
                        req.n_chunks_to_patch = np;
                        req.chunks_to_patch = cpp;
                        pdone += np;
                }
                bool last = done == p->n_pending && pdone == p->n_patches;
                req.has_flush_request_id = p->flush_request_id && last;
                req.flush_request_id = p->flush_request_id;
                if (n == 0 && np == 0 && !req.has_flush_request_id)
                        break;
                int64_t r = ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                if (r < 0) {
                        producer_unlock(p);
                        return (int) r;
                }
                if (req.has_flush_request_id)
                        p->flush_request_id = 0;
                req.n_chunks_to_patch = 0;
        } while (done < p->n_pending || pdone < p->n_patches);
        p->n_pending = 0;
        p->n_patches = 0;
        producer_unlock(p);
        return 0;
}

/* The writer of the given id, when it writes for one of the instances. */
static traced_trace_writer *scraped_writer(traced_producer *p, uint16_t writer_id, const uint64_t *ids, size_t n_ids) {
        for (traced_trace_writer *w = p->writers; w; w = w->next) {
                if (w->writer_id != writer_id || w->generation != atomic_load(&p->generation))
                        continue;
                for (size_t k = 0; k < n_ids; k++)
                        if (w->instance_id == ids[k])
                                return w;
        }
        return NULL;
}

int producer_scrape(traced_producer *p, const uint64_t *ids, size_t n_ids) {
        Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
        Perfetto__Protos__CommitDataRequest__ChunksToMove moves[64];
        Perfetto__Protos__CommitDataRequest__ChunksToMove *ptrs[64];
        size_t n = 0, bytes = 0;
        int r = 0;

        producer_lock(p);
        if (!p->client || !p->smb || !p->emu_buf) {
                producer_unlock(p);
                return 0;
        }
        /* Chunks still being written (by writers of other threads: the
         * loop's own were completed before this) go as they are, flagged
         * incomplete; the service keeps what they hold so far. Their
         * packets' sizes are only read as far as they were stored. */
        struct smb_walk walk = smb_walk_start(&p->abi, SMB_STATE_BIT(SMB_CHUNK_BEING_WRITTEN));
        while (r >= 0 && smb_walk_next(&walk)) {
                const struct smb_chunk *c = &walk.chunk;
                traced_trace_writer *w = scraped_writer(p, smb_chunk_writer_id(c), ids, n_ids);
                if (!w)
                        continue;
                if (n == ELEMENTSOF(moves) || (n > 0 && bytes + c->size > PRODUCER_EMULATED_COMMIT_BYTES)) {
                        req.n_chunks_to_move = n;
                        req.chunks_to_move = ptrs;
                        int64_t k = ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                        r = k < 0 ? (int) k : 0;
                        n = bytes = 0;
                }
                memcpy(p->emu_buf + bytes, c->begin, c->size);
                moves[n] = (Perfetto__Protos__CommitDataRequest__ChunksToMove)
                        PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
                moves[n].has_page = moves[n].has_chunk = moves[n].has_target_buffer = true;
                moves[n].page = (uint32_t) walk.page;
                moves[n].chunk = walk.chunk_idx;
                moves[n].target_buffer = w->target_buffer;
                moves[n].has_data = true;
                moves[n].data.data = p->emu_buf + bytes;
                moves[n].data.len = c->size;
                moves[n].has_chunk_incomplete = moves[n].chunk_incomplete = true;
                ptrs[n] = &moves[n];
                bytes += c->size;
                n++;
        }
        if (r >= 0 && n > 0) {
                req.n_chunks_to_move = n;
                req.chunks_to_move = ptrs;
                int64_t k = ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                r = k < 0 ? (int) k : 0;
        }
        producer_unlock(p);
        return r;
}
