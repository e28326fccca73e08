/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/macro.h"
#include "producer-internal.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

#define DEFAULT_PRODUCER_SOCKET "/run/traced/producer.sock"

struct producer_instance *producer_find_instance(traced_producer *p, uint64_t id) {
        for (struct producer_instance *i = p->instances; i; i = i->next)
                if (i->id == id)
                        return i;
        return NULL;
}

_public_ int traced_producer_is_ready(const traced_producer *p) {
        return p && p->ready;
}

struct smb_chunk producer_acquire_chunk(traced_producer *p, uint16_t writer_id, uint32_t chunk_id) {
        /* Start where the last search ended, so writers spread over pages. */
        for (size_t k = 0; k < p->abi.num_pages; k++) {
                size_t page = (p->next_page_hint + k) % p->abi.num_pages;
                if (smb_page_bitmap(&p->abi, page) == 0)
                        (void) smb_try_partition_page(&p->abi, page, SMB_PAGE_DIV4);
                uint32_t n = smb_bitmap_num_chunks(smb_page_bitmap(&p->abi, page));
                for (uint32_t i = 0; i < n; i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_writing(&p->abi, page, i, writer_id, chunk_id);
                        if (smb_chunk_is_valid(&c)) {
                                p->next_page_hint = page;
                                return c;
                        }
                }
        }
        return (struct smb_chunk) {};
}

static int on_commit_defer(sd_event_source *s, void *userdata) {
        traced_producer *p = userdata;
        p->commit_defer = sd_event_source_disable_unref(p->commit_defer);
        (void) producer_commit(p, 0);
        return 0;
}

int producer_queue_commit(traced_producer *p, size_t page, size_t chunk, uint32_t target_buffer) {
        if (p->n_pending == PRODUCER_MAX_PENDING_COMMITS) {
                int r = producer_commit(p, 0);
                if (r < 0)
                        return r;
        }
        p->pending[p->n_pending].page = (uint32_t) page;
        p->pending[p->n_pending].chunk = (uint32_t) chunk;
        p->pending[p->n_pending].target_buffer = target_buffer;
        p->n_pending++;
        /* Commit in batches: at the latest when control returns to the
         * loop, or right away once half the buffer waits. */
        if (p->n_pending * p->abi.page_size / 4 >= p->smb_size / 2)
                return producer_commit(p, 0);
        if (!p->commit_defer)
                (void) sd_event_add_defer(p->event, &p->commit_defer, on_commit_defer, p);
        return 0;
}

int producer_queue_patch(traced_producer *p, const struct pending_patch *patch) {
        if (p->n_patches == p->cap_patches) {
                size_t cap = p->cap_patches ? p->cap_patches * 2 : 64;
                struct pending_patch *n = realloc(p->patches, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                p->patches = n;
                p->cap_patches = cap;
        }
        p->patches[p->n_patches++] = *patch;
        if (!p->commit_defer)
                (void) sd_event_add_defer(p->event, &p->commit_defer, on_commit_defer, p);
        return 0;
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

        if (!p->client)
                return -ENOTCONN;
        do {
                size_t n = MIN(p->n_pending - done, ELEMENTSOF(moves));
                for (size_t i = 0; i < n; i++) {
                        moves[i] = (Perfetto__Protos__CommitDataRequest__ChunksToMove)
                                PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
                        moves[i].has_page = moves[i].has_chunk = moves[i].has_target_buffer = true;
                        moves[i].page = p->pending[done + i].page;
                        moves[i].chunk = p->pending[done + i].chunk;
                        moves[i].target_buffer = p->pending[done + i].target_buffer;
                        ptrs[i] = &moves[i];
                }
                req.n_chunks_to_move = n;
                req.chunks_to_move = ptrs;
                done += n;
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
                req.has_flush_request_id = flush_request_id && done == p->n_pending && pdone == p->n_patches;
                req.flush_request_id = flush_request_id;
                if (n == 0 && np == 0 && !req.has_flush_request_id)
                        break;
                int64_t r = ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                if (r < 0)
                        return (int) r;
                req.n_chunks_to_patch = 0;
        } while (done < p->n_pending || pdone < p->n_patches);
        p->n_pending = 0;
        p->n_patches = 0;
        return 0;
}

static void commit_instance_writers(traced_producer *p, uint64_t instance_id) {
        for (traced_trace_writer *w = p->writers; w; w = w->next)
                if (w->instance_id == instance_id && smb_chunk_is_valid(&w->cur)) {
                        size_t page, idx;
                        atomic_store_explicit(&smb_chunk_header(&w->cur)->packets,
                                              smb_packets_pack(w->cur_count, w->cur_flags), memory_order_release);
                        if (smb_chunk_location(&p->abi, &w->cur, &page, &idx) == 0 &&
                            smb_release_chunk_as_complete(&p->abi, &w->cur) >= 0)
                                (void) producer_queue_commit(p, page, idx, w->target_buffer);
                        w->cur = (struct smb_chunk) {};
                }
}

static int notify(traced_producer *p, const char *method, uint64_t instance_id) {
        Perfetto__Protos__NotifyDataSourceStoppedRequest rq = PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
        rq.has_data_source_id = true;
        rq.data_source_id = instance_id;
        int64_t r = ipc_client_invoke(p->client, method, &rq.base, NULL, -EBADF, NULL, NULL);
        return r < 0 ? (int) r : 0;
}

_public_ int traced_producer_notify_stopped(traced_producer *p, uint64_t instance_id) {
        if (!p || !p->client)
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

static void on_setup_tracing(traced_producer *p, const Perfetto__Protos__GetAsyncCommandResponse__SetupTracing *st,
                             int fd) {
        if (p->smb || fd < 0)
                return;
        size_t page = (size_t) st->shared_buffer_page_size_kb * 1024u;
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0)
                return;
        void *m = mmap(NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
                return;
        if (smb_abi_init(&p->abi, m, (size_t) size, page) < 0) {
                munmap(m, (size_t) size);
                return;
        }
        p->smb = m;
        p->smb_size = (size_t) size;
        p->ready = true;
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
        i->notify_on_stop = ds_flags(p, cfg->name) & TRACED_DS_WILL_NOTIFY_ON_STOP;
        i->next = p->instances;
        p->instances = i;
}

static void remove_instance(traced_producer *p, uint64_t id) {
        for (struct producer_instance **pp = &p->instances; *pp; pp = &(*pp)->next)
                if ((*pp)->id == id) {
                        struct producer_instance *i = *pp;
                        *pp = i->next;
                        free(i->data_source);
                        free(i);
                        return;
                }
}

static void on_async(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        traced_producer *p = ud;
        const Perfetto__Protos__GetAsyncCommandResponse *cmd = (const void *) reply;
        _cleanup_close_ int owned = fd;

        if (error < 0 || !cmd)
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
                (void) producer_commit(p, f->request_id ? f->request_id : 0);
                break;
        }
        default:
                break;
        }
}

static void on_disconnect(ipc_client *c, void *ud) {
        traced_producer *p = ud;
        p->ready = false;
        if (p->ops.disconnected)
                p->ops.disconnected(p, p->userdata);
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
        const char *path = o->socket_path;
        if (!path)
                path = getenv("PERFETTO_PRODUCER_SOCK_NAME");
        if (!path)
                path = DEFAULT_PRODUCER_SOCKET;

        traced_producer *p = calloc(1, sizeof(*p));
        if (!p) {
                if (socket_fd > 0)
                        safe_close(socket_fd);
                return -ENOMEM;
        }
        p->event = sd_event_ref(event);
        p->userdata = userdata;
        if (ops)
                memcpy(&p->ops, ops, MIN(ops->struct_size, sizeof(p->ops)));
        p->name = strdup(o->name);
        if (!p->name) {
                if (socket_fd > 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return -ENOMEM;
        }
        if (socket_fd > 0)
                r = ipc_client_from_fd(event, socket_fd, &p->client);
        else
                r = ipc_client_connect(event, path, &p->client);
        if (r >= 0)
                r = ipc_client_bind_sync(p->client, "ProducerPort", 10 * 1000000u);
        if (r < 0) {
                traced_producer_free(p);
                return r;
        }
        ipc_client_set_disconnect_cb(p->client, on_disconnect, p);

        Perfetto__Protos__InitializeConnectionRequest init = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        init.producer_name = p->name;
        init.sdk_version = (char *) "traced " PACKAGE_VERSION;
        if (o->smb_size_hint) {
                init.has_shared_memory_size_hint_bytes = true;
                init.shared_memory_size_hint_bytes = o->smb_size_hint;
        }
        if (o->page_size_hint) {
                init.has_shared_memory_page_size_hint_bytes = true;
                init.shared_memory_page_size_hint_bytes = o->page_size_hint;
        }
        Perfetto__Protos__GetAsyncCommandRequest get = PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
        int64_t id = ipc_client_invoke(p->client, "InitializeConnection", &init.base, NULL, -EBADF, NULL, NULL);
        if (id >= 0)
                id = ipc_client_invoke(p->client, "GetAsyncCommand", &get.base,
                                       &perfetto__protos__get_async_command_response__descriptor, -EBADF, on_async, p);
        if (id < 0) {
                traced_producer_free(p);
                return (int) id;
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
        int64_t r = ipc_client_invoke(p->client, "RegisterDataSource", &rq.base, NULL, -EBADF, NULL, NULL);
        return r < 0 ? (int) r : 0;
}

_public_ traced_producer *traced_producer_free(traced_producer *p) {
        if (!p)
                return NULL;
        while (p->writers)
                traced_trace_writer_free(p->writers);
        while (p->instances)
                remove_instance(p, p->instances->id);
        p->commit_defer = sd_event_source_disable_unref(p->commit_defer);
        free(p->patches);
        p->client = ipc_client_free(p->client);
        if (p->smb)
                munmap(p->smb, p->smb_size);
        for (size_t i = 0; i < p->n_ds; i++)
                free(p->ds[i].name);
        free(p->name);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}
