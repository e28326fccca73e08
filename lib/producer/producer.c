/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "producer-internal.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

#define DEFAULT_PRODUCER_SOCKET "/run/traced/producer.sock"

static void lock(traced_producer *p) {
        pthread_mutex_lock(&p->lock);
}
static void unlock(traced_producer *p) {
        pthread_mutex_unlock(&p->lock);
}

bool producer_on_loop(const traced_producer *p) {
        return pthread_equal(pthread_self(), p->loop_thread);
}

struct producer_instance *producer_find_instance(traced_producer *p, uint64_t id) {
        struct producer_instance *found = NULL;
        lock(p);
        for (struct producer_instance *i = p->instances; i && !found; i = i->next)
                if (i->id == id)
                        found = i;
        unlock(p);
        return found;
}

_public_ int traced_producer_is_ready(const traced_producer *p) {
        return p && atomic_load(&p->ready);
}

_public_ unsigned traced_producer_reconnects(const traced_producer *p) {
        return p ? p->reconnects : 0;
}

void writer_note_thread(traced_trace_writer *w) {
        if (atomic_load_explicit(&w->used_on, memory_order_relaxed) == WRITER_USED_NOWHERE)
                atomic_store(&w->used_on, producer_on_loop(w->producer) ? WRITER_USED_ON_LOOP : WRITER_USED_ELSEWHERE);
}

bool writer_alive(const traced_trace_writer *w) {
        traced_producer *p = w->producer;
        return atomic_load(&p->ready) && w->generation == atomic_load(&p->generation);
}

static struct smb_chunk try_acquire(traced_trace_writer *w, uint32_t chunk_id) {
        traced_producer *p = w->producer;
        struct smb_abi *abi = &w->abi;
        /* Start where the last search ended, so writers spread over pages.
         * The SMB's own compare-and-swap makes concurrent writers safe; the
         * hint is only a hint. */
        size_t hint = atomic_load_explicit(&p->next_page_hint, memory_order_relaxed);
        for (size_t k = 0; k < abi->num_pages; k++) {
                size_t page = (hint + k) % abi->num_pages;
                if (smb_page_bitmap(abi, page) == 0)
                        (void) smb_try_partition_page(abi, page, SMB_PAGE_DIV4);
                uint32_t n = smb_bitmap_num_chunks(smb_page_bitmap(abi, page));
                for (uint32_t i = 0; i < n; i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_writing(abi, page, i, w->writer_id, chunk_id);
                        if (smb_chunk_is_valid(&c)) {
                                atomic_store_explicit(&p->next_page_hint, page, memory_order_relaxed);
                                return c;
                        }
                }
        }
        return (struct smb_chunk) {};
}

static void wake_loop(traced_producer *p) {
        if (p->wake_fd >= 0)
                (void) eventfd_write(p->wake_fd, 1);
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

struct smb_chunk writer_acquire_chunk(traced_trace_writer *w, uint32_t chunk_id) {
        traced_producer *p = w->producer;
        if (!writer_alive(w))
                return (struct smb_chunk) {};
        struct smb_chunk c = try_acquire(w, chunk_id);
        if (smb_chunk_is_valid(&c) || w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_DROP)
                return c;

        /* Stall: get what is written to the service, which frees chunks as
         * it copies them, and look again with growing pauses. */
        uint64_t start = now_usec(), limit = p->stall_limit_usec ? p->stall_limit_usec : PRODUCER_STALL_LIMIT_USEC;
        unsigned pause_usec = PRODUCER_STALL_FIRST_SLEEP_USEC;
        while (!smb_chunk_is_valid(&c)) {
                if (!writer_alive(w))
                        return (struct smb_chunk) {};
                if (now_usec() - start >= limit) {
                        if (w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT)
                                abort();
                        return c;
                }
                if (producer_on_loop(p))
                        (void) producer_commit(p, 0);
                else
                        wake_loop(p);
                struct timespec ts = { .tv_nsec = (long) pause_usec * 1000 };
                (void) nanosleep(&ts, NULL);
                pause_usec = MIN(pause_usec * 2, PRODUCER_STALL_MAX_SLEEP_USEC);
                c = try_acquire(w, chunk_id);
        }
        return c;
}

static int on_commit_defer(sd_event_source *s, void *userdata) {
        traced_producer *p = userdata;
        p->commit_defer = sd_event_source_disable_unref(p->commit_defer);
        (void) producer_commit(p, 0);
        return 0;
}

static int on_wake(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        traced_producer *p = userdata;
        eventfd_t v;
        (void) eventfd_read(fd, &v);
        (void) producer_commit(p, 0);
        return 0;
}

/* With the lock held: make sure the queue gets sent soon. */
static int schedule_commit(traced_producer *p) {
        if (!producer_on_loop(p)) {
                wake_loop(p);
                return 0;
        }
        if (!p->commit_defer)
                (void) sd_event_add_defer(p->event, &p->commit_defer, on_commit_defer, p);
        return 0;
}

int writer_queue_commit(traced_trace_writer *w, size_t page, size_t chunk) {
        traced_producer *p = w->producer;
        bool now = false;

        lock(p);
        if (w->generation != atomic_load(&p->generation)) {
                unlock(p);
                return 0; /* that SMB is gone with its connection */
        }
        while (p->n_pending == PRODUCER_MAX_PENDING_COMMITS) {
                if (producer_on_loop(p)) {
                        int r = producer_commit(p, 0);
                        if (r < 0) {
                                unlock(p);
                                return r;
                        }
                        continue;
                }
                /* Another thread: let the loop drain the queue. */
                wake_loop(p);
                unlock(p);
                struct timespec ts = { .tv_nsec = 1000000 };
                (void) nanosleep(&ts, NULL);
                lock(p);
                if (w->generation != atomic_load(&p->generation)) {
                        unlock(p);
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
        unlock(p);
        return 0;
}

int writer_queue_patch(traced_trace_writer *w, const struct pending_patch *patch) {
        traced_producer *p = w->producer;
        lock(p);
        if (w->generation != atomic_load(&p->generation)) {
                unlock(p);
                return 0;
        }
        if (GREEDY_REALLOC_MIN(p->patches, p->cap_patches, p->n_patches + 1, 64) < 0) {
                unlock(p);
                return -ENOMEM;
        }
        p->patches[p->n_patches++] = *patch;
        (void) schedule_commit(p);
        unlock(p);
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
                wake_loop(p);
                return 0;
        }
        lock(p);
        if (!p->client || !atomic_load(&p->ready)) {
                unlock(p);
                return -ENOTCONN;
        }
        /* A flush acknowledgement waits for everything queued before it. */
        if (flush_request_id)
                p->flush_request_id = flush_request_id;
        if (p->emulate && !p->emu_buf) {
                p->emu_buf = malloc(PRODUCER_EMULATED_COMMIT_BYTES + SMB_MAX_PAGE_SIZE);
                if (!p->emu_buf) {
                        unlock(p);
                        return -ENOMEM;
                }
        }
        do {
                if (p->emulate && emulated_link_busy(p)) {
                        if (!p->client || !atomic_load(&p->ready)) {
                                unlock(p);
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
                        unlock(p);
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
                        unlock(p);
                        return (int) r;
                }
                if (req.has_flush_request_id)
                        p->flush_request_id = 0;
                req.n_chunks_to_patch = 0;
        } while (done < p->n_pending || pdone < p->n_patches);
        p->n_pending = 0;
        p->n_patches = 0;
        unlock(p);
        return 0;
}

/* Hands over the current chunk of each writer of the instance that the
 * loop thread writes with; writers of other threads (even if made on the
 * loop thread) flush themselves, and are not touched here. */
static void commit_instance_writers(traced_producer *p, uint64_t instance_id) {
        lock(p);
        for (traced_trace_writer *w = p->writers; w; w = w->next)
                if (w->instance_id == instance_id && atomic_load(&w->used_on) == WRITER_USED_ON_LOOP &&
                    smb_chunk_is_valid(&w->cur) && !w->in_packet)
                        (void) writer_complete_chunk(w);
        unlock(p);
}

static int notify(traced_producer *p, const char *method, uint64_t instance_id) {
        Perfetto__Protos__NotifyDataSourceStoppedRequest rq = PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
        rq.has_data_source_id = true;
        rq.data_source_id = instance_id;
        int64_t r = ipc_client_invoke(p->client, method, &rq.base, NULL, -EBADF, NULL, NULL);
        return r < 0 ? (int) r : 0;
}

_public_ int traced_producer_notify_stopped(traced_producer *p, uint64_t instance_id) {
        if (!p || !p->client || !atomic_load(&p->ready))
                return -ENOTCONN;
        commit_instance_writers(p, instance_id);
        (void) producer_commit(p, 0);
        return notify(p, "NotifyDataSourceStopped", instance_id);
}

static uint32_t ds_flags(traced_producer *p, const char *name) {
        for (size_t i = 0; i < p->n_ds; i++)
                if (strcmp(p->ds[i].name, name) == 0)
                        return p->ds[i].flags;
        return 0;
}

/* The private SMB of an emulating connection: the hint when there is
 * one, in whole pages. */
static size_t emulated_smb_size(const traced_producer *p, size_t page) {
        size_t size = p->smb_size_hint ? p->smb_size_hint : PRODUCER_EMULATED_SMB_SIZE;
        size = MIN(MAX(size, page), (size_t) PRODUCER_EMULATED_SMB_MAX);
        return size / page * page;
}

static void on_setup_tracing(traced_producer *p, const Perfetto__Protos__GetAsyncCommandResponse__SetupTracing *st,
                             int fd) {
        void *m;
        off_t size;

        if (p->smb || (fd < 0 && !p->emulate))
                return;
        size_t page = (size_t) st->shared_buffer_page_size_kb * 1024u;
        if (fd >= 0) {
                size = lseek(fd, 0, SEEK_END);
                if (size <= 0)
                        return;
                m = mmap(NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        } else {
                if (page == 0)
                        page = SMB_MIN_PAGE_SIZE;
                size = (off_t) emulated_smb_size(p, page);
                m = mmap(NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        }
        if (m == MAP_FAILED)
                return;
        struct smb_abi abi;
        if (smb_abi_init(&abi, m, (size_t) size, page) < 0) {
                munmap(m, (size_t) size);
                return;
        }
        lock(p);
        p->abi = abi;
        p->smb = m;
        p->smb_size = (size_t) size;
        atomic_store(&p->ready, true);
        unlock(p);
}

static void add_instance(traced_producer *p, uint64_t id, const Perfetto__Protos__DataSourceConfig *cfg) {
        if (producer_find_instance(p, id) || !cfg || !cfg->name)
                return;
        struct producer_instance *i = calloc(1, sizeof(*i));
        if (!i)
                return;
        i->id = id;
        i->target_buffer = cfg->target_buffer;
        i->data_source = strdup(cfg->name);
        uint32_t flags = ds_flags(p, cfg->name);
        i->notify_on_stop = flags & TRACED_DS_WILL_NOTIFY_ON_STOP;
        /* The session's choice wins over the data source's default. */
        switch (cfg->has_buffer_exhausted_policy ? (int) cfg->buffer_exhausted_policy : 0) {
        case PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_ABORT:
                i->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT;
                break;
        case PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP:
                i->exhausted_policy = TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP;
                break;
        case PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_DROP:
                i->exhausted_policy = TRACED_BUFFER_EXHAUSTED_DROP;
                break;
        default:
                i->exhausted_policy = (flags & TRACED_DS_STALL_WHEN_FULL) ? TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP :
                                                                           TRACED_BUFFER_EXHAUSTED_DROP;
        }
        lock(p);
        i->next = p->instances;
        p->instances = i;
        unlock(p);
}

static void remove_instance(traced_producer *p, uint64_t id) {
        lock(p);
        for (struct producer_instance **pp = &p->instances; *pp; pp = &(*pp)->next)
                if ((*pp)->id == id) {
                        struct producer_instance *i = *pp;
                        *pp = i->next;
                        free(i->data_source);
                        free(i);
                        break;
                }
        unlock(p);
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

        lock(p);
        if (!p->client || !p->smb || !p->emu_buf) {
                unlock(p);
                return 0;
        }
        /* Chunks still being written (by writers of other threads: the
         * loop's own were completed before this) go as they are, flagged
         * incomplete; the service keeps what they hold so far. Their
         * packets' sizes are only read as far as they were stored. */
        for (size_t page = 0; page < p->abi.num_pages && r >= 0; page++) {
                uint32_t bitmap = smb_page_bitmap(&p->abi, page);
                uint32_t nc = smb_bitmap_num_chunks(bitmap);
                for (uint32_t i = 0; i < nc && r >= 0; i++) {
                        if (smb_bitmap_chunk_state(bitmap, i) != SMB_CHUNK_BEING_WRITTEN)
                                continue;
                        struct smb_chunk c = smb_get_chunk_unchecked(&p->abi, page, bitmap, i);
                        if (!smb_chunk_is_valid(&c))
                                continue;
                        uint16_t writer_id = atomic_load_explicit(&smb_chunk_header(&c)->writer_id, memory_order_relaxed);
                        traced_trace_writer *w = scraped_writer(p, writer_id, ids, n_ids);
                        if (!w)
                                continue;
                        if (n == ELEMENTSOF(moves) || (n > 0 && bytes + c.size > PRODUCER_EMULATED_COMMIT_BYTES)) {
                                req.n_chunks_to_move = n;
                                req.chunks_to_move = ptrs;
                                int64_t k = ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                                r = k < 0 ? (int) k : 0;
                                n = bytes = 0;
                        }
                        memcpy(p->emu_buf + bytes, c.begin, c.size);
                        moves[n] = (Perfetto__Protos__CommitDataRequest__ChunksToMove)
                                PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
                        moves[n].has_page = moves[n].has_chunk = moves[n].has_target_buffer = true;
                        moves[n].page = (uint32_t) page;
                        moves[n].chunk = i;
                        moves[n].target_buffer = w->target_buffer;
                        moves[n].has_data = true;
                        moves[n].data.data = p->emu_buf + bytes;
                        moves[n].data.len = c.size;
                        moves[n].has_chunk_incomplete = moves[n].chunk_incomplete = true;
                        ptrs[n] = &moves[n];
                        bytes += c.size;
                        n++;
                }
        }
        if (r >= 0 && n > 0) {
                req.n_chunks_to_move = n;
                req.chunks_to_move = ptrs;
                int64_t k = ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                r = k < 0 ? (int) k : 0;
        }
        unlock(p);
        return r;
}

static void on_async(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        traced_producer *p = ud;
        const Perfetto__Protos__GetAsyncCommandResponse *cmd = (const void *) reply;
        _cleanup_close_ int owned = fd;

        if (error < 0 || !cmd || c != p->client)
                return;
        switch (cmd->cmd_case) {
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING:
                on_setup_tracing(p, cmd->setup_tracing, owned);
                break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE:
                add_instance(p, cmd->setup_data_source->new_instance_id, cmd->setup_data_source->config);
                break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE: {
                const Perfetto__Protos__GetAsyncCommandResponse__StartDataSource *s = cmd->start_data_source;
                add_instance(p, s->new_instance_id, s->config);
                struct producer_instance *i = producer_find_instance(p, s->new_instance_id);
                if (!i || !p->ops.start)
                        break;
                size_t n = s->config ? perfetto__protos__data_source_config__get_packed_size(s->config) : 0;
                uint8_t *buf = malloc(n ? n : 1);
                if (!buf)
                        break;
                if (s->config)
                        perfetto__protos__data_source_config__pack(s->config, buf);
                p->ops.start(p, i->id, i->data_source, buf, n, p->userdata);
                free(buf);
                break;
        }
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE: {
                uint64_t id = cmd->stop_data_source->instance_id;
                struct producer_instance *i = producer_find_instance(p, id);
                if (!i)
                        break;
                bool notify_on_stop = i->notify_on_stop;
                i->stopped = true;
                if (p->ops.stop)
                        p->ops.stop(p, id, p->userdata);
                commit_instance_writers(p, id);
                (void) producer_commit(p, 0);
                if (notify_on_stop)
                        break; /* the data source acknowledges itself */
                remove_instance(p, id);
                break;
        }
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH: {
                const Perfetto__Protos__GetAsyncCommandResponse__Flush *f = cmd->flush;
                for (size_t k = 0; k < f->n_data_source_ids; k++) {
                        if (p->ops.flush)
                                p->ops.flush(p, f->data_source_ids[k], p->userdata);
                        commit_instance_writers(p, f->data_source_ids[k]);
                }
                /* Over emulated shared memory nobody else can scrape
                 * what is still being written: send it before the flush
                 * is acknowledged, so the flush covers it. */
                if (p->emulate) {
                        (void) producer_commit(p, 0);
                        (void) producer_scrape(p, f->data_source_ids, f->n_data_source_ids);
                }
                (void) producer_commit(p, f->request_id ? f->request_id : 0);
                break;
        }
        default:
                break;
        }
}

void producer_release_retired(traced_producer *p) {
        for (size_t i = 0; i < p->n_retired;) {
                bool used = false;
                for (traced_trace_writer *w = p->writers; w && !used; w = w->next)
                        used = w->generation == p->retired[i].generation;
                if (used) {
                        i++;
                        continue;
                }
                munmap(p->retired[i].mem, p->retired[i].size);
                p->retired[i] = p->retired[--p->n_retired];
        }
}

static int send_hello(traced_producer *p);
static void schedule_reconnect(traced_producer *p);

static void on_bound(ipc_client *c, int error, void *ud) {
        traced_producer *p = ud;
        if (c != p->client)
                return;
        if (error < 0 || send_hello(p) < 0) {
                p->dead_client = p->client;
                p->client = NULL;
                schedule_reconnect(p);
                return;
        }
        /* Everything the user registered, again. */
        for (size_t i = 0; i < p->n_ds; i++) {
                Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
                Perfetto__Protos__RegisterDataSourceRequest rq = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
                d.name = p->ds[i].name;
                d.has_will_notify_on_stop = d.will_notify_on_stop = (p->ds[i].flags & TRACED_DS_WILL_NOTIFY_ON_STOP) != 0;
                d.has_handles_incremental_state_clear = d.handles_incremental_state_clear =
                        (p->ds[i].flags & TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR) != 0;
                rq.data_source_descriptor = &d;
                (void) ipc_client_invoke(p->client, "RegisterDataSource", &rq.base, NULL, -EBADF, NULL, NULL);
        }
        p->backoff_usec = PRODUCER_BACKOFF_FIRST_USEC;
        p->reconnects++;
        if (p->ops.connected)
                p->ops.connected(p, p->userdata);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        traced_producer *p = userdata;
        p->retry = sd_event_source_disable_unref(p->retry);
        p->dead_client = ipc_client_free(p->dead_client);
        ipc_client *c = NULL;
        int r = ipc_client_connect(p->event, p->socket_path, &c);
        if (r >= 0) {
                p->client = c;
                ipc_client_set_disconnect_cb(c, NULL, NULL);
                r = ipc_client_bind(c, "ProducerPort", on_bound, p);
        }
        if (r < 0) {
                p->client = ipc_client_free(p->client);
                schedule_reconnect(p);
        }
        return 0;
}

static void schedule_reconnect(traced_producer *p) {
        if (!p->reconnect || p->retry)
                return;
        uint64_t delay = p->backoff_usec;
        p->backoff_usec = MIN(p->backoff_usec * 2, (uint64_t) PRODUCER_BACKOFF_MAX_USEC);
        (void) sd_event_add_time_relative(p->event, &p->retry, CLOCK_MONOTONIC, delay, delay / 10, on_retry, p);
}

static void on_disconnect(ipc_client *c, void *ud) {
        traced_producer *p = ud;
        if (c != p->client)
                return;

        /* Writers of this connection stop writing; its SMB stays mapped
         * while they hold chunks in it. */
        lock(p);
        atomic_store(&p->ready, false);
        atomic_fetch_add(&p->generation, 1);
        p->emulate = false;
        p->n_pending = 0;
        p->n_patches = 0;
        p->flush_request_id = 0;
        if (p->smb) {
                bool used = p->writers != NULL;
                if (used && p->n_retired < PRODUCER_MAX_RETIRED)
                        p->retired[p->n_retired++] = (struct retired_smb) {
                                .mem = p->smb,
                                .size = p->smb_size,
                                .generation = atomic_load(&p->generation) - 1,
                        };
                else if (!used)
                        munmap(p->smb, p->smb_size);
                /* else: more than PRODUCER_MAX_RETIRED dead connections
                 * with live writers; keep it mapped for good. */
                p->smb = NULL;
                p->smb_size = 0;
        }
        unlock(p);

        /* The instances ended with the connection. */
        for (;;) {
                lock(p);
                struct producer_instance *i = p->instances;
                uint64_t id = i ? i->id : 0;
                bool stopped = i ? i->stopped : true;
                unlock(p);
                if (!i)
                        break;
                if (!stopped && p->ops.stop)
                        p->ops.stop(p, id, p->userdata);
                remove_instance(p, id);
        }
        p->dead_client = p->client;
        p->client = NULL;
        if (p->ops.disconnected)
                p->ops.disconnected(p, p->userdata);
        schedule_reconnect(p);
}

static void on_init_reply(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        traced_producer *p = ud;
        const Perfetto__Protos__InitializeConnectionResponse *resp = (const void *) reply;
        _cleanup_close_ int owned = fd;

        if (error < 0 || !resp || c != p->client)
                return;
        /* Over TCP or vsock (upstream traced_relay forwards so), no fd
         * can cross: the SMB is ours alone and chunks travel in CommitData. */
        lock(p);
        p->emulate = resp->has_use_shmem_emulation && resp->use_shmem_emulation;
        unlock(p);
}

/* InitializeConnection and the command stream, on a bound client. */
static int send_hello(traced_producer *p) {
        Perfetto__Protos__InitializeConnectionRequest init = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        init.producer_name = p->name;
        init.sdk_version = (char *) "traced " PACKAGE_VERSION;
        if (p->smb_size_hint) {
                init.has_shared_memory_size_hint_bytes = true;
                init.shared_memory_size_hint_bytes = p->smb_size_hint;
        }
        if (p->page_size_hint) {
                init.has_shared_memory_page_size_hint_bytes = true;
                init.shared_memory_page_size_hint_bytes = p->page_size_hint;
        }
        ipc_client_set_disconnect_cb(p->client, on_disconnect, p);
        Perfetto__Protos__GetAsyncCommandRequest get = PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
        int64_t id = ipc_client_invoke(p->client, "InitializeConnection", &init.base,
                                       &perfetto__protos__initialize_connection_response__descriptor, -EBADF,
                                       on_init_reply, p);
        if (id >= 0)
                id = ipc_client_invoke(p->client, "GetAsyncCommand", &get.base,
                                       &perfetto__protos__get_async_command_response__descriptor, -EBADF, on_async, p);
        return id < 0 ? (int) id : 0;
}

int producer_init(traced_producer *p) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
        int r = -pthread_mutex_init(&p->lock, &a);
        pthread_mutexattr_destroy(&a);
        if (r < 0)
                return r;
        p->loop_thread = pthread_self();
        p->wake_fd = -EBADF;
        p->backoff_usec = PRODUCER_BACKOFF_FIRST_USEC;
        return 0;
}

_public_ int traced_producer_connect(sd_event *event, const struct traced_producer_options *o,
                            const struct traced_producer_ops *ops, void *userdata, traced_producer **ret) {
        int r;

        /* Callers built against an older header pass a shorter struct. */
        if (!event || !o || !ret || !o->name ||
            o->struct_size < offsetof(struct traced_producer_options, page_size_hint) + sizeof(uint32_t))
                return -EINVAL;
        int socket_fd = o->struct_size >= offsetof(struct traced_producer_options, socket_fd) + sizeof(int) ?
                                o->socket_fd :
                                -EBADF;
        uint32_t flags = o->struct_size >= offsetof(struct traced_producer_options, flags) + sizeof(uint32_t) ?
                                 o->flags :
                                 0;
        const char *path = o->socket_path;
        if (!path)
                path = getenv("PERFETTO_PRODUCER_SOCK_NAME");
        if (!path)
                path = DEFAULT_PRODUCER_SOCKET;

        traced_producer *p = calloc(1, sizeof(*p));
        if (!p || producer_init(p) < 0) {
                free(p);
                if (socket_fd > 0)
                        safe_close(socket_fd);
                return -ENOMEM;
        }
        p->event = sd_event_ref(event);
        p->userdata = userdata;
        if (ops)
                memcpy(&p->ops, ops, MIN(ops->struct_size, sizeof(p->ops)));
        p->name = strdup(o->name);
        p->socket_path = strdup(path);
        p->smb_size_hint = o->smb_size_hint;
        p->page_size_hint = o->page_size_hint;
        p->reconnect = socket_fd <= 0 && !(flags & TRACED_PRODUCER_NO_RECONNECT);
        if (!p->name || !p->socket_path) {
                if (socket_fd > 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return -ENOMEM;
        }
        p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->wake_fd < 0) {
                r = -errno;
                if (socket_fd > 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return r;
        }
        r = sd_event_add_io(event, &p->wake_src, p->wake_fd, EPOLLIN, on_wake, p);
        if (r < 0) {
                if (socket_fd > 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return r;
        }
        if (socket_fd > 0)
                r = ipc_client_from_fd(event, socket_fd, &p->client);
        else
                r = ipc_client_connect(event, path, &p->client);
        if (r >= 0)
                r = ipc_client_bind_sync(p->client, "ProducerPort", 10 * 1000000u);
        if (r >= 0)
                r = send_hello(p);
        if (r < 0) {
                traced_producer_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

_public_ int traced_producer_register_data_source(traced_producer *p, const char *name, uint32_t flags) {
        if (!p || !name || !name[0])
                return -EINVAL;
        if (p->n_ds >= ELEMENTSOF(p->ds))
                return -ENOSPC;
        Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
        Perfetto__Protos__RegisterDataSourceRequest rq = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
        d.name = (char *) name;
        if (flags & TRACED_DS_WILL_NOTIFY_ON_STOP) {
                d.has_will_notify_on_stop = true;
                d.will_notify_on_stop = true;
        }
        if (flags & TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR) {
                d.has_handles_incremental_state_clear = true;
                d.handles_incremental_state_clear = true;
        }
        rq.data_source_descriptor = &d;
        p->ds[p->n_ds].name = strdup(name);
        if (!p->ds[p->n_ds].name)
                return -ENOMEM;
        p->ds[p->n_ds].flags = flags;
        p->n_ds++;
        /* Without a connection right now, it is registered on the next. */
        if (!p->client)
                return 0;
        int64_t r = ipc_client_invoke(p->client, "RegisterDataSource", &rq.base, NULL, -EBADF, NULL, NULL);
        return r < 0 && r != -ENOTCONN ? (int) r : 0;
}

_public_ traced_producer *traced_producer_free(traced_producer *p) {
        if (!p)
                return NULL;
        p->retry = sd_event_source_disable_unref(p->retry);
        p->reconnect = false;
        while (p->writers)
                traced_trace_writer_free(p->writers);
        while (p->instances)
                remove_instance(p, p->instances->id);
        p->commit_defer = sd_event_source_disable_unref(p->commit_defer);
        p->commit_retry = sd_event_source_disable_unref(p->commit_retry);
        p->wake_src = sd_event_source_disable_unref(p->wake_src);
        p->wake_fd = safe_close(p->wake_fd);
        free(p->patches);
        free(p->emu_buf);
        p->client = ipc_client_free(p->client);
        p->dead_client = ipc_client_free(p->dead_client);
        if (p->smb)
                munmap(p->smb, p->smb_size);
        for (size_t i = 0; i < p->n_retired; i++)
                munmap(p->retired[i].mem, p->retired[i].size);
        for (size_t i = 0; i < p->n_ds; i++)
                free(p->ds[i].name);
        free(p->name);
        free(p->socket_path);
        sd_event_unref(p->event);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}
