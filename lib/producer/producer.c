/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's connection to the service: connecting, saying hello
 * (InitializeConnection and the command stream), registering data sources,
 * losing the connection and getting it back with growing pauses. */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/abi-struct.h"
#include "basic/macro.h"
#include "producer-internal.h"

#include "perfetto/ipc/producer_port.pb-c.h"
#include "traced/ipc/producer_command_view.pb-c.h"

#define DEFAULT_PRODUCER_SOCKET "/run/traced/producer.sock"

bool producer_on_loop(const traced_producer *p) {
        return pthread_equal(pthread_self(), p->loop_thread);
}

_public_ int traced_producer_is_ready(const traced_producer *p) {
        return p && atomic_load(&p->ready);
}

_public_ unsigned traced_producer_reconnects(const traced_producer *p) {
        return p ? p->reconnects : 0;
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
                d.has_will_notify_on_start = d.will_notify_on_start = true;
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
        producer_lock(p);
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
        producer_unlock(p);

        /* The instances ended with the connection. */
        for (;;) {
                producer_lock(p);
                struct producer_instance *i = p->instances;
                uint64_t id = i ? i->id : 0;
                bool stopped = i ? i->stopped : true;
                producer_unlock(p);
                if (!i)
                        break;
                if (!stopped && p->ops.stop)
                        p->ops.stop(p, id, p->userdata);
                producer_remove_instance(p, id);
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
        producer_lock(p);
        p->emulate = resp->has_use_shmem_emulation && resp->use_shmem_emulation;
        producer_unlock(p);
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
                                       &traced__view__get_async_command_response_view__descriptor, -EBADF, producer_on_async_command, p);
        if (id < 0)
                return (int) id;
        p->commands_request_id = id;
        return 0;
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

        if (!event || !o || !ret || !o->name)
                return -EINVAL;
        /* Callers built against an older header pass a shorter struct, and
         * those built against a newer one a longer one (abi-struct.h). */
        size_t o_size = abi_struct_size(o), ops_size = ops ? abi_struct_size(ops) : 0;
        if (o_size < offsetof(struct traced_producer_options, page_size_hint) + sizeof(uint32_t) ||
            o_size > ABI_STRUCT_MAX || ops_size > ABI_STRUCT_MAX)
                return -EINVAL;
        /* Every release's ops had start and stop: a table that ends before
         * them is not one. */
        if (ops && ops_size < offsetof(struct traced_producer_ops, stop) + sizeof(ops->stop))
                return -EINVAL;
        r = abi_check_tail(o, sizeof(*o), o_size);
        if (r >= 0 && ops)
                r = abi_check_tail(ops, sizeof(*ops), ops_size);
        if (r < 0)
                return r;
        int socket_fd = o_size >= offsetof(struct traced_producer_options, socket_fd) + sizeof(int) ?
                                o->socket_fd :
                                -EBADF;
        uint32_t flags = o_size >= offsetof(struct traced_producer_options, flags) + sizeof(uint32_t) ? o->flags : 0;
        r = abi_check_flags(flags, TRACED_PRODUCER_NO_RECONNECT | TRACED_PRODUCER_SOCKET_FD);
        if (r < 0)
                return r;
        if (flags & TRACED_PRODUCER_SOCKET_FD) {
                if (socket_fd < 0)
                        return -EBADF;
        } else if (socket_fd <= 0)
                socket_fd = -EBADF; /* zeroed options: by path */
        const char *path = o->socket_path;
        if (!path)
                path = getenv("PERFETTO_PRODUCER_SOCK_NAME");
        if (!path)
                path = DEFAULT_PRODUCER_SOCKET;

        traced_producer *p = calloc(1, sizeof(*p));
        if (!p || producer_init(p) < 0) {
                free(p);
                if (socket_fd >= 0)
                        safe_close(socket_fd);
                return -ENOMEM;
        }
        p->event = sd_event_ref(event);
        p->userdata = userdata;
        if (ops)
                memcpy(&p->ops, ops, MIN(ops_size, sizeof(p->ops)));
        p->name = strdup(o->name);
        p->socket_path = strdup(path);
        p->smb_size_hint = o->smb_size_hint;
        p->page_size_hint = o->page_size_hint;
        p->reconnect = socket_fd < 0 && !(flags & TRACED_PRODUCER_NO_RECONNECT);
        if (!p->name || !p->socket_path) {
                if (socket_fd >= 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return -ENOMEM;
        }
        p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->wake_fd < 0) {
                r = -errno;
                if (socket_fd >= 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return r;
        }
        r = sd_event_add_io(event, &p->wake_src, p->wake_fd, EPOLLIN, producer_on_wake, p);
        if (r < 0) {
                if (socket_fd >= 0)
                        safe_close(socket_fd);
                traced_producer_free(p);
                return r;
        }
        if (socket_fd >= 0)
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
        int k = abi_check_flags(flags, TRACED_DS_WILL_NOTIFY_ON_STOP | TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR |
                                               TRACED_DS_STALL_WHEN_FULL);
        if (k < 0)
                return k;
        /* It would promise the service what it has no callback for. */
        if ((flags & TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR) && !p->ops.clear_incremental_state)
                return -EINVAL;
        if (p->n_ds >= ELEMENTSOF(p->ds))
                return -ENOSPC;
        Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
        Perfetto__Protos__RegisterDataSourceRequest rq = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
        d.name = (char *) name;
        /* The start callback's end is told (producer-commands.c). */
        d.has_will_notify_on_start = true;
        d.will_notify_on_start = true;
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
                producer_remove_instance(p, p->instances->id);
        p->commit_defer = sd_event_source_disable_unref(p->commit_defer);
        p->commit_retry = sd_event_source_disable_unref(p->commit_retry);
        p->wake_src = sd_event_source_disable_unref(p->wake_src);
        p->wake_fd = safe_close(p->wake_fd);
        free(p->patches);
        free(p->emu_buf);
        p->client = ipc_client_free(p->client);
        p->dead_client = ipc_client_free(p->dead_client);
        producer_syncs_free(p);
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
