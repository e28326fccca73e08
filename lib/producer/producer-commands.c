/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's handling of the service's commands: SetupTracing
 * (mapping the SMB), SetupDataSource, StartDataSource, StopDataSource,
 * Flush and ClearIncrementalState, with the data source instances they
 * make and end. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/macro.h"
#include "producer-internal.h"

#include "perfetto/ipc/producer_port.pb-c.h"
#include "traced/ipc/producer_command_view.pb-c.h"

struct producer_instance *producer_find_instance(traced_producer *p, uint64_t id) {
        struct producer_instance *found = NULL;
        producer_lock(p);
        for (struct producer_instance *i = p->instances; i && !found; i = i->next)
                if (i->id == id)
                        found = i;
        producer_unlock(p);
        return found;
}

/* Hands over the current chunk of each writer of the instance that the
 * loop thread writes with; writers of other threads (even if made on the
 * loop thread) flush themselves, and are not touched here. */
static void commit_instance_writers(traced_producer *p, uint64_t instance_id) {
        producer_lock(p);
        for (traced_trace_writer *w = p->writers; w; w = w->next)
                if (w->instance_id == instance_id && atomic_load(&w->used_on) == WRITER_USED_ON_LOOP &&
                    smb_chunk_is_valid(&w->cur) && !w->in_packet)
                        (void) writer_complete_chunk(w);
        producer_unlock(p);
}

void producer_end_instance_writers(traced_producer *p, uint64_t id) {
        producer_lock(p);
        for (traced_trace_writer *w = p->writers; w; w = w->next)
                if (w->instance_id == id)
                        atomic_store(&w->ended, true);
        producer_unlock(p);
}

struct stop_lookup {
        uint64_t id;
        bool found;
};

static void look_for_stop(const ProtobufCMessage *reply, void *userdata) {
        const Traced__View__GetAsyncCommandResponseView *cmd = (const void *) reply;
        struct stop_lookup *l = userdata;
        if (cmd->cmd_case == TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_STOP_DATA_SOURCE &&
            cmd->stop_data_source->instance_id == l->id)
                l->found = true;
}

bool producer_stop_pending(traced_producer *p, uint64_t id) {
        struct stop_lookup l = { .id = id };
        if (!p->client || p->commands_request_id <= 0)
                return false;
        (void) ipc_client_peek_replies(p->client, p->commands_request_id, look_for_stop, &l);
        return l.found;
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
        int r = notify(p, "NotifyDataSourceStopped", instance_id);
        /* The service has what it waited for: later writes go nowhere. */
        producer_end_instance_writers(p, instance_id);
        producer_remove_instance(p, instance_id);
        return r;
}

_public_ int traced_producer_report_error(traced_producer *p, uint64_t instance_id, const char *field,
                                          const char *message) {
        Perfetto__Protos__TracedReportDataSourceErrorRequest rq =
                PERFETTO__PROTOS__TRACED_REPORT_DATA_SOURCE_ERROR_REQUEST__INIT;
        if (!p || !p->client || !atomic_load(&p->ready))
                return -ENOTCONN;
        /* Upstream's service binds methods by name and has no such one. */
        if (!ipc_client_has_method(p->client, "TracedReportDataSourceError"))
                return -EOPNOTSUPP;
        rq.has_data_source_id = true;
        rq.data_source_id = instance_id;
        rq.field = (char *) field;
        rq.message = (char *) message;
        int64_t r = ipc_client_invoke(p->client, "TracedReportDataSourceError", &rq.base, NULL, -EBADF, NULL, NULL);
        return r < 0 ? (int) r : 0;
}

_public_ int traced_producer_activate_triggers(traced_producer *p, const char *const *names, size_t n_names) {
        Perfetto__Protos__ActivateTriggersRequest rq = PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
        if (!p || !p->client)
                return -ENOTCONN;
        if (n_names == 0 || !names)
                return -EINVAL;
        rq.n_trigger_names = n_names;
        rq.trigger_names = (char **) names;
        int64_t r = ipc_client_invoke(p->client, "ActivateTriggers", &rq.base, NULL, -EBADF, NULL, NULL);
        return r < 0 ? (int) r : 0;
}

static void sync_unlink(struct producer_sync *s) {
        for (struct producer_sync **pp = &s->p->syncs; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        return;
                }
}

static void on_sync_reply(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                          void *userdata) {
        struct producer_sync *s = userdata;
        safe_close(fd);
        sync_unlink(s);
        s->cb(s->p, error < 0 ? error : 0, s->userdata);
        free(s);
}

_public_ int traced_producer_sync(traced_producer *p, traced_producer_sync_cb cb, void *userdata) {
        Perfetto__Protos__SyncRequest rq = PERFETTO__PROTOS__SYNC_REQUEST__INIT;
        if (!p)
                return -EINVAL;
        if (!p->client)
                return -ENOTCONN;
        if (!cb) {
                int64_t r = ipc_client_invoke(p->client, "Sync", &rq.base, NULL, -EBADF, NULL, NULL);
                return r < 0 ? (int) r : 0;
        }
        struct producer_sync *s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (struct producer_sync) { .next = p->syncs, .p = p, .cb = cb, .userdata = userdata };
        int64_t r = ipc_client_invoke(p->client, "Sync", &rq.base, &perfetto__protos__sync_response__descriptor,
                                      -EBADF, on_sync_reply, s);
        if (r < 0) {
                free(s);
                return (int) r;
        }
        p->syncs = s;
        return 0;
}

/* The producer goes away: no callback any more (its client drops the
 * replies' callbacks). */
void producer_syncs_free(traced_producer *p) {
        while (p->syncs) {
                struct producer_sync *s = p->syncs;
                p->syncs = s->next;
                free(s);
        }
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

static void on_setup_tracing(traced_producer *p, const Traced__View__GetAsyncCommandResponseView__SetupTracing *st,
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
        producer_lock(p);
        p->abi = abi;
        p->smb = m;
        p->smb_size = (size_t) size;
        atomic_store(&p->ready, true);
        producer_unlock(p);
}

static void add_instance(traced_producer *p, uint64_t id, bool has_config, ProtobufCBinaryData config) {
        if (producer_find_instance(p, id) || !has_config)
                return;
        /* The config as it came: only its head is read here. */
        Traced__View__DataSourceConfigHead *cfg =
                traced__view__data_source_config_head__unpack(NULL, config.len, config.data);
        if (!cfg)
                return;
        if (!cfg->name) {
                traced__view__data_source_config_head__free_unpacked(cfg, NULL);
                return;
        }
        struct producer_instance *i = calloc(1, sizeof(*i));
        if (!i) {
                traced__view__data_source_config_head__free_unpacked(cfg, NULL);
                return;
        }
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
        traced__view__data_source_config_head__free_unpacked(cfg, NULL);
        producer_lock(p);
        i->next = p->instances;
        p->instances = i;
        producer_unlock(p);
}

void producer_remove_instance(traced_producer *p, uint64_t id) {
        producer_lock(p);
        for (struct producer_instance **pp = &p->instances; *pp; pp = &(*pp)->next)
                if ((*pp)->id == id) {
                        struct producer_instance *i = *pp;
                        *pp = i->next;
                        free(i->data_source);
                        free(i);
                        break;
                }
        producer_unlock(p);
}

/* To the running instances whose data source said it handles a clear;
 * ids the service names for others (or that ended) are ignored. */
static void on_clear_incremental_state(traced_producer *p,
                                       const Traced__View__GetAsyncCommandResponseView__ClearIncrementalState *c) {
        if (!p->ops.clear_incremental_state)
                return;
        for (size_t k = 0; k < c->n_data_source_ids; k++) {
                struct producer_instance *i = producer_find_instance(p, c->data_source_ids[k]);
                if (i && !i->stopped && (ds_flags(p, i->data_source) & TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR))
                        p->ops.clear_incremental_state(p, i->id, p->userdata);
        }
}

void producer_on_async_command(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                               void *ud) {
        traced_producer *p = ud;
        const Traced__View__GetAsyncCommandResponseView *cmd = (const void *) reply;
        _cleanup_close_ int owned = fd;

        if (error < 0 || !cmd || c != p->client)
                return;
        switch (cmd->cmd_case) {
        case TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_SETUP_TRACING:
                on_setup_tracing(p, cmd->setup_tracing, owned);
                break;
        case TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_SETUP_DATA_SOURCE:
                add_instance(p, cmd->setup_data_source->new_instance_id, cmd->setup_data_source->has_config,
                             cmd->setup_data_source->config);
                break;
        case TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_START_DATA_SOURCE: {
                const Traced__View__GetAsyncCommandResponseView__StartDataSource *s = cmd->start_data_source;
                add_instance(p, s->new_instance_id, s->has_config, s->config);
                struct producer_instance *i = producer_find_instance(p, s->new_instance_id);
                /* The DataSourceConfig's bytes as the service sent them. */
                if (i && p->ops.start)
                        p->ops.start(p, i->id, i->data_source, s->has_config ? s->config.data : (const uint8_t *) "",
                                     s->has_config ? s->config.len : 0, p->userdata);
                /* Registered with will_notify_on_start: the service (and its
                 * consumer, ALL_DATA_SOURCES_STARTED) learns the instance
                 * runs once the start callback returned, not before. */
                (void) notify(p, "NotifyDataSourceStarted", s->new_instance_id);
                break;
        }
        case TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_STOP_DATA_SOURCE: {
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
                /* The service waits for nothing more of the instance:
                 * its writers' later packets are refused, not lost
                 * silently. */
                producer_end_instance_writers(p, id);
                producer_remove_instance(p, id);
                break;
        }
        case TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_FLUSH: {
                const Traced__View__GetAsyncCommandResponseView__Flush *f = cmd->flush;
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
        case TRACED__VIEW__GET_ASYNC_COMMAND_RESPONSE_VIEW__CMD_CLEAR_INCREMENTAL_STATE:
                on_clear_incremental_state(p, cmd->clear_incremental_state);
                break;
        default:
                break;
        }
}
