/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ProducerPort service: producer connections, their data source
 * registrations, their shared memory buffers and the async command stream. */

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/chunk-sink.h"
#include "core/limits.h"
#include "core/ports/ports.h"
#include "core/ports/startup-hold.h"
#include "core/ports/producer-port.h"
#include "core/ports/quota.h"
#include "core/service.h"
#include "core/sessions/producer.h"
#include "core/sessions/session.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

struct queued_cmd {
        struct queued_cmd *next;
        uint8_t *data;
        size_t size;
        int fd;
};

#define PRODUCER_MAX_QUEUED_CMDS 4096u

static uint16_t allocate_producer_id(struct traced_service *svc) {
        for (unsigned tries = 0; tries < 65535; tries++) {
                uint16_t id = ++svc->last_producer_id;
                if (id == 0)
                        continue;
                if (!sessions_find_producer(svc, id))
                        return id;
        }
        return 0;
}

static void producer_free(struct producer *p) {
        while (p->cmd_head) {
                struct queued_cmd *q = p->cmd_head;
                p->cmd_head = q->next;
                safe_close(q->fd);
                free(q->data);
                free(q);
        }
        if (p->async_req)
                ipc_request_unref(p->async_req);
        for (size_t i = 0; i < p->n_data_sources; i++) {
                free(p->data_sources[i].name);
                free(p->data_sources[i].descriptor);
        }
        free(p->data_sources);
        free(p->writer_targets);
        producer_commit_done(p);
        if (p->smb)
                munmap(p->smb, p->smb_size);
        free(p->machine_name);
        safe_close(p->smb_fd);
        safe_close(p->producer_smb_fd);
        free(p->name);
        free(p->sdk_version);
        free(p);
}

static int port_setup_data_source(struct producer *p, struct ds_instance *inst);
static int port_start_data_source(struct producer *p, struct ds_instance *inst);
static int port_stop_data_source(struct producer *p, struct ds_instance *inst);
static int port_flush(struct producer *p, uint64_t request_id, const uint64_t *ds_ids, size_t n);
static int port_clear_incremental_state(struct producer *p, const uint64_t *ds_ids, size_t n);

static const struct producer_ops port_ops = {
        .setup_data_source = port_setup_data_source,
        .start_data_source = port_start_data_source,
        .stop_data_source = port_stop_data_source,
        .flush = port_flush,
        .clear_incremental_state = port_clear_incremental_state,
        .scrape = producer_scrape,
};

static int on_bind(ipc_host_conn *conn, void *userdata) {
        struct traced_service *svc = userdata;

        if (svc->n_producers >= SERVICE_MAX_PRODUCERS) {
                log_warning("Refusing producer pid %d: %zu producers connected already.", (int) ipc_host_conn_pid(conn),
                            svc->n_producers);
                return -EUSERS;
        }
        struct producer *p = calloc(1, sizeof(*p));
        if (!p)
                return log_oom();
        *p = (struct producer) {
                .ops = &port_ops,
                .svc = svc,
                .conn = conn,
                .id = allocate_producer_id(svc),
                .uid = ipc_host_conn_uid(conn),
                .pid = ipc_host_conn_pid(conn),
                .producer_smb_fd = -EBADF,
                .smb_fd = -EBADF,
                .remote = ipc_host_conn_is_remote(conn),
                .machine_id = ipc_host_conn_machine_id(conn),
        };
        if (p->id == 0) {
                free(p);
                return -EUSERS;
        }
        if (p->remote) {
                size_t same = 0;
                for (struct producer *o = svc->producers; o; o = o->next)
                        same += o->remote && o->machine_id == p->machine_id;
                const char *mn = ipc_host_conn_machine_name(conn);
                if (same >= SERVICE_MAX_PRODUCERS_PER_MACHINE || (mn && !(p->machine_name = strdup(mn)))) {
                        log_warning("Refusing relayed producer of machine %" PRIu32 ": %zu producers of it "
                                    "connected already.", p->machine_id, same);
                        free(p);
                        return -EUSERS;
                }
        }
        p->plugin_host = service_take_plugin_conn(svc, ipc_host_conn_id(conn));
        p->next = svc->producers;
        svc->producers = p;
        svc->n_producers++;
        ipc_host_conn_set_userdata(conn, p);
        return 0;
}

static void on_disconnect(ipc_host_conn *conn, void *userdata) {
        struct traced_service *svc = userdata;
        struct producer *p = ipc_host_conn_get_userdata(conn);

        startup_hold_conn_gone(svc, ipc_host_conn_id(conn));
        if (!p)
                return;
        ipc_host_conn_set_userdata(conn, NULL);
        log_info("Producer %u \"%s\" (pid %d) disconnected.", p->id, strna(p->name), (int) p->pid);
        log_debug("Producer %u: %" PRIu64 " chunks committed in %" PRIu64 " requests.", p->id, p->chunks_committed,
                  p->commit_requests);
        /* Take what it committed before going away; count what it was
         * still writing. */
        if (p->smb) {
                producer_scrape(p, false);
                size_t torn = producer_count_torn_chunks(p);
                if (torn > 0)
                        log_info("Producer %u \"%s\" left %zu chunk(s) unfinished; counted as discarded.", p->id,
                                 strna(p->name), torn);
        }
        session_on_producer_gone(svc, p);
        for (struct producer **pp = &svc->producers; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        svc->n_producers--;
        bool trim = p->registration_bytes >= 1024u * 1024u;
        producer_free(p);
        /* Large registrations leave free heap behind; give it back. */
        if (trim)
                (void) malloc_trim(0);
        sessions_state_changed(svc);
}

/* A protocol violation: the producer loses its connection, nothing else
 * is affected. */
void producer_kick(struct producer *p, const char *why) {
        log_warning("Disconnecting producer %u \"%s\" (pid %d): %s", p->id, strna(p->name), (int) p->pid, why);
        ipc_host_conn_close(p->conn);
}

static void m_initialize_connection(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__InitializeConnectionRequest *a = (const void *) args;
        Perfetto__Protos__InitializeConnectionResponse resp = PERFETTO__PROTOS__INITIALIZE_CONNECTION_RESPONSE__INIT;
        struct producer *p = req_producer(req);
        _cleanup_close_ int fd = ipc_request_take_fd(req);

        if (!p || p->initialized) {
                ipc_request_fail(req);
                return;
        }
        if ((a->producer_name && strlen(a->producer_name) > SERVICE_MAX_NAME_LENGTH) ||
            (a->sdk_version && strlen(a->sdk_version) > SERVICE_MAX_NAME_LENGTH)) {
                log_notice("Refusing producer pid %d (uid %u): name or sdk_version longer than 1024 bytes.",
                           (int) p->pid, (unsigned) p->uid);
                ipc_request_fail(req);
                return;
        }
        if (a->producer_name && !service_producer_may_use_name(p->svc, p, a->producer_name)) {
                /* Nobody else may pass for one of the suite's plugins. */
                log_notice("Refusing producer \"%.64s\" (pid %d, uid %u): the name is reserved for the tracing "
                           "service's own plugins.", a->producer_name, (int) p->pid, (unsigned) p->uid);
                ipc_request_fail(req);
                return;
        }
        p->name = strdup(a->producer_name ? a->producer_name : "");
        p->sdk_version = a->sdk_version ? strdup(a->sdk_version) : NULL;
        if (!p->name) {
                ipc_request_fail(req);
                return;
        }
        p->smb_size_hint = a->has_shared_memory_size_hint_bytes ? a->shared_memory_size_hint_bytes : 0;
        p->smb_page_size_hint =
                a->has_shared_memory_page_size_hint_bytes ? a->shared_memory_page_size_hint_bytes : 0;

        if (a->has_producer_provided_shmem && a->producer_provided_shmem && fd >= 0) {
                /* Validated when the SMB is set up; keep it until then. */
                struct stat st;
                if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
                    (size_t) st.st_size <= SERVICE_MAX_SMB_SIZE) {
                        p->producer_smb_fd = TAKE_FD(fd);
                        p->smb_provided_by_producer = true;
                        resp.has_using_shmem_provided_by_producer = true;
                        resp.using_shmem_provided_by_producer = true;
                } else
                        log_notice("Producer \"%s\" offered an unusable SMB; using a service-created one.", p->name);
        }
        if (p->remote) {
                /* No fd crosses TCP or vsock: the producer keeps its SMB to
                 * itself and sends whole chunks in CommitData. */
                resp.has_use_shmem_emulation = true;
                resp.use_shmem_emulation = true;
                resp.has_using_shmem_provided_by_producer = false;
                resp.using_shmem_provided_by_producer = false;
                p->smb_provided_by_producer = false;
                p->producer_smb_fd = safe_close(p->producer_smb_fd);
        }
        p->initialized = true;
        log_info("Producer %u \"%s\" connected (pid %d, uid %u%s%s, machine %" PRIu32 "%s%s).", p->id, p->name,
                 (int) p->pid, (unsigned) p->uid, p->sdk_version ? ", " : "", p->sdk_version ? p->sdk_version : "",
                 p->machine_id, p->machine_name ? " " : "", p->machine_name ? p->machine_name : "");
        reply_empty(req, &resp.base);
        sessions_state_changed(p->svc);
}

static struct data_source_reg *find_ds(struct producer *p, const char *name) {
        for (size_t i = 0; i < p->n_data_sources; i++)
                if (strcmp(p->data_sources[i].name, name) == 0)
                        return &p->data_sources[i];
        return NULL;
}

static size_t ds_reg_cost(const char *name, size_t descriptor_size) {
        return registration_cost(name, descriptor_size);
}

/* Whether extra bytes of registrations fit this producer's, its uid's and
 * the service's quotas; *ret_error says which one does not. */
static bool registration_fits(struct producer *p, size_t extra, const char **ret_error) {
        struct registration_usage u = { .producer = p->registration_bytes };
        for (struct producer *o = p->svc->producers; o; o = o->next) {
                u.all += o->registration_bytes;
                if (o->uid == p->uid)
                        u.uid += o->registration_bytes;
        }
        *ret_error = registration_quota_refusal(&u, extra);
        return !*ret_error;
}

/* Whether a descriptor may be registered; *ret_error says why not (in
 * error_buf when it needs figures). Any size that came in a frame is
 * taken, as long as QueryServiceState can list it whole in a frame. */
static bool descriptor_acceptable(const Perfetto__Protos__DataSourceDescriptor *d, uint16_t producer_id,
                                  const char **ret_error, char *error_buf, size_t error_size) {
        size_t max;
        if (!d || !d->name || !d->name[0])
                *ret_error = "Data source descriptor has no name";
        else if (strlen(d->name) > SERVICE_MAX_NAME_LENGTH)
                *ret_error = "Data source name longer than 1024 bytes";
        else if (!consumer_query_can_list(d, producer_id, &max)) {
                snprintf(error_buf, error_size,
                         "Data source descriptor of %zu bytes: QueryServiceState can list one of at most %zu bytes "
                         "in an IPC frame (128 KiB)",
                         protobuf_c_message_get_packed_size(&d->base), max);
                *ret_error = error_buf;
        } else
                return true;
        return false;
}

static int ds_reg_fill(struct data_source_reg *reg, const Perfetto__Protos__DataSourceDescriptor *d) {
        size_t n = protobuf_c_message_get_packed_size(&d->base);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(&d->base, buf);
        free(reg->descriptor);
        reg->descriptor = buf;
        reg->descriptor_size = n;
        reg->id = d->has_id ? d->id : 0;
        reg->will_notify_on_start = d->has_will_notify_on_start && d->will_notify_on_start;
        reg->will_notify_on_stop = d->has_will_notify_on_stop && d->will_notify_on_stop;
        reg->handles_incremental_state_clear =
                d->has_handles_incremental_state_clear && d->handles_incremental_state_clear;
        return 0;
}

/* Refuses a registration with its reason, logged once with who asked. */
static void refuse_registration(ipc_request *req, struct producer *p, const char *name, const char *why) {
        Perfetto__Protos__RegisterDataSourceResponse resp = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_RESPONSE__INIT;
        log_notice("Refusing data source \"%.64s\" of producer %u \"%.64s\" (uid %u, pid %d): %s", strna(name), p->id,
                   strna(p->name), (unsigned) p->uid, (int) p->pid, why);
        resp.error = (char *) why;
        reply_empty(req, &resp.base);
}

static void m_register_data_source(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__RegisterDataSourceRequest *a = (const void *) args;
        Perfetto__Protos__RegisterDataSourceResponse resp = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_RESPONSE__INIT;
        struct producer *p = req_producer(req);
        const Perfetto__Protos__DataSourceDescriptor *d = a->data_source_descriptor;
        const char *why = NULL;

        if (!p) {
                ipc_request_fail(req);
                return;
        }
        char why_buf[160];
        if (!descriptor_acceptable(d, p->id, &why, why_buf, sizeof(why_buf))) {
                refuse_registration(req, p, d ? d->name : NULL, why);
                return;
        }
        if (!service_producer_may_use_name(p->svc, p, d->name)) {
                refuse_registration(req, p, d->name,
                                    "This data source name is reserved for the tracing service's own plugins "
                                    "(trusted_data_sources in traced.conf)");
                return;
        }
        if (find_ds(p, d->name)) {
                resp.error = (char *) "Data source already registered by this producer";
                reply_empty(req, &resp.base);
                return;
        }
        if (p->n_data_sources >= SERVICE_MAX_DATA_SOURCES_PER_PRODUCER) {
                refuse_registration(req, p, d->name, "Too many data sources (the limit is 1024 per producer)");
                return;
        }
        size_t cost = ds_reg_cost(d->name, protobuf_c_message_get_packed_size(&d->base));
        if (!registration_fits(p, cost, &why)) {
                refuse_registration(req, p, d->name, why);
                return;
        }
        struct data_source_reg *arr = realloc(p->data_sources, (p->n_data_sources + 1) * sizeof(*arr));
        if (!arr) {
                ipc_request_fail(req);
                return;
        }
        p->data_sources = arr;
        struct data_source_reg *reg = &arr[p->n_data_sources];
        *reg = (struct data_source_reg) { .name = strdup(d->name) };
        if (!reg->name || ds_reg_fill(reg, d) < 0) {
                free(reg->name);
                ipc_request_fail(req);
                return;
        }
        p->n_data_sources++;
        p->registration_bytes += cost;
        log_debug("Producer %u \"%s\" registered data source \"%s\".", p->id, strna(p->name), reg->name);
        reply_empty(req, &resp.base);
        session_on_data_source_registered(p->svc, p, reg);
        sessions_state_changed(p->svc);
}

static void m_update_data_source(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__UpdateDataSourceRequest *a = (const void *) args;
        Perfetto__Protos__UpdateDataSourceResponse resp = PERFETTO__PROTOS__UPDATE_DATA_SOURCE_RESPONSE__INIT;
        struct producer *p = req_producer(req);
        const Perfetto__Protos__DataSourceDescriptor *d = a->data_source_descriptor;
        struct data_source_reg *reg = NULL;

        if (!p) {
                ipc_request_fail(req);
                return;
        }
        if (d && d->name) {
                reg = find_ds(p, d->name);
                /* Matched by id when the producer gave one. */
                for (size_t i = 0; !reg && d->has_id && d->id && i < p->n_data_sources; i++)
                        if (p->data_sources[i].id == d->id)
                                reg = &p->data_sources[i];
        }
        if (!reg) {
                ipc_request_fail(req);
                return;
        }
        const char *why = NULL;
        char why_buf[160];
        size_t packed = protobuf_c_message_get_packed_size(&d->base);
        size_t old_cost = ds_reg_cost(reg->name, reg->descriptor_size), new_cost = ds_reg_cost(reg->name, packed);
        if (!descriptor_acceptable(d, p->id, &why, why_buf, sizeof(why_buf)) ||
            (new_cost > old_cost && !registration_fits(p, new_cost - old_cost, &why))) {
                log_notice("Refusing an update of data source \"%.64s\" of producer %u \"%.64s\" (uid %u, pid %d): %s",
                           reg->name, p->id, strna(p->name), (unsigned) p->uid, (int) p->pid, why);
                ipc_request_fail(req);
                return;
        }
        if (ds_reg_fill(reg, d) < 0) {
                ipc_request_fail(req);
                return;
        }
        p->registration_bytes = p->registration_bytes - old_cost + new_cost;
        reply_empty(req, &resp.base);
}

static void m_unregister_data_source(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__UnregisterDataSourceRequest *a = (const void *) args;
        Perfetto__Protos__UnregisterDataSourceResponse resp = PERFETTO__PROTOS__UNREGISTER_DATA_SOURCE_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (!p || !a->data_source_name) {
                ipc_request_fail(req);
                return;
        }
        for (size_t i = 0; i < p->n_data_sources; i++) {
                if (strcmp(p->data_sources[i].name, a->data_source_name) != 0)
                        continue;
                p->registration_bytes -= ds_reg_cost(p->data_sources[i].name, p->data_sources[i].descriptor_size);
                free(p->data_sources[i].name);
                free(p->data_sources[i].descriptor);
                memmove(&p->data_sources[i], &p->data_sources[i + 1],
                        (p->n_data_sources - i - 1) * sizeof(p->data_sources[0]));
                p->n_data_sources--;
                reply_empty(req, &resp.base);
                sessions_state_changed(p->svc);
                return;
        }
        ipc_request_fail(req);
}

/* Sends a packed GetAsyncCommandResponse now, or queues it until the
 * producer asks for the next command. */
static int send_async(struct producer *p, const Perfetto__Protos__GetAsyncCommandResponse *cmd, int fd) {
        if (p->async_req && ipc_request_connected(p->async_req))
                return ipc_request_reply(p->async_req, &cmd->base, true, fd);

        if (p->n_queued >= PRODUCER_MAX_QUEUED_CMDS) {
                producer_kick(p, "it does not ask for its commands");
                return -ENOBUFS;
        }
        struct queued_cmd *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->size = protobuf_c_message_get_packed_size(&cmd->base);
        q->data = malloc(q->size ? q->size : 1);
        q->fd = -EBADF;
        if (!q->data) {
                free(q);
                return -ENOMEM;
        }
        protobuf_c_message_pack(&cmd->base, q->data);
        if (fd >= 0) {
                q->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (q->fd < 0) {
                        free(q->data);
                        free(q);
                        return negative_errno();
                }
        }
        if (p->cmd_tail)
                p->cmd_tail->next = q;
        else
                p->cmd_head = q;
        p->cmd_tail = q;
        p->n_queued++;
        return 0;
}

static void flush_queued(struct producer *p) {
        while (p->cmd_head && p->async_req) {
                struct queued_cmd *q = p->cmd_head;
                Perfetto__Protos__GetAsyncCommandResponse *cmd =
                        perfetto__protos__get_async_command_response__unpack(NULL, q->size, q->data);
                p->cmd_head = q->next;
                if (!p->cmd_head)
                        p->cmd_tail = NULL;
                p->n_queued--;
                if (cmd) {
                        (void) ipc_request_reply(p->async_req, &cmd->base, true, q->fd);
                        perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
                }
                safe_close(q->fd);
                free(q->data);
                free(q);
        }
}

static void m_get_async_command(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        struct producer *p = req_producer(req);

        if (!p) {
                ipc_request_fail(req);
                return;
        }
        if (p->async_req) {
                /* Only one command stream per producer: the newest wins. */
                ipc_request *old = p->async_req;
                p->async_req = NULL;
                ipc_request_fail(old);
        }
        p->async_req = req;
        flush_queued(p);
}

static size_t round_up_pages(size_t size, size_t page) {
        return (size + page - 1) / page * page;
}

static bool valid_page_size(size_t page_size) {
        return page_size >= SMB_MIN_PAGE_SIZE && page_size <= SMB_MAX_PAGE_SIZE && page_size % SMB_MIN_PAGE_SIZE == 0;
}

/* TraceConfig.producers first, then the producer's hint, the default. */
static size_t smb_page_size(const struct producer *p) {
        if (valid_page_size(p->smb_page_size_config))
                return p->smb_page_size_config;
        if (valid_page_size(p->smb_page_size_hint))
                return p->smb_page_size_hint;
        return SERVICE_DEFAULT_SMB_PAGE_SIZE;
}

int producer_setup_smb(struct producer *p) {
        _cleanup_close_ int fd = -EBADF;
        size_t page_size, size;
        int r;

        if (p->setup_tracing_sent)
                return 0;
        if (p->remote) {
                /* The producer makes its SMB itself; the page size is ours
                 * to give (it bounds the chunks CommitData carries). */
                Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
                Perfetto__Protos__GetAsyncCommandResponse__SetupTracing st =
                        PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_TRACING__INIT;
                page_size = smb_page_size(p);
                st.has_shared_buffer_page_size_kb = true;
                st.shared_buffer_page_size_kb = (uint32_t) (page_size / 1024);
                cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING;
                cmd.setup_tracing = &st;
                r = send_async(p, &cmd, -EBADF);
                if (r < 0)
                        return r;
                p->setup_tracing_sent = true;
                return 0;
        }

        page_size = smb_page_size(p);

        if (p->smb_provided_by_producer) {
                struct stat st;
                fd = TAKE_FD(p->producer_smb_fd);
                if (fstat(fd, &st) < 0)
                        return negative_errno();
                size = (size_t) st.st_size;
                if (size == 0 || size % page_size != 0 || size > SERVICE_MAX_SMB_SIZE) {
                        producer_kick(p, "its shared memory buffer has an invalid size");
                        return -EINVAL;
                }
                /* The producer must not be able to shrink it under us. */
                int seals = fcntl(fd, F_GET_SEALS);
                if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
                        producer_kick(p, "its shared memory buffer is not sealed against shrinking");
                        return -EPERM;
                }
        } else {
                size = p->smb_size_config > page_size ? p->smb_size_config
                       : p->smb_size_hint                 ? p->smb_size_hint
                                                          : SERVICE_DEFAULT_SMB_SIZE;
                if (size > SERVICE_MAX_SMB_SIZE)
                        size = SERVICE_MAX_SMB_SIZE;
                size = round_up_pages(size, page_size);
                if (size < page_size)
                        size = page_size;
                fd = memfd_create("traced-smb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
                if (fd < 0)
                        return log_error_errno(errno, "Failed to create shared memory buffer: %m");
                if (ftruncate(fd, (off_t) size) < 0)
                        return log_error_errno(errno, "Failed to size shared memory buffer: %m");
                if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
                        return log_error_errno(errno, "Failed to seal shared memory buffer: %m");
        }

        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
                return log_error_errno(errno, "Failed to map shared memory buffer of producer %u: %m", p->id);
        r = smb_abi_init(&p->abi, m, size, page_size);
        if (r < 0) {
                munmap(m, size);
                return r;
        }
        p->smb = m;
        p->smb_size = size;
        p->smb_fd = TAKE_FD(fd);

        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__SetupTracing st =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_TRACING__INIT;
        st.has_shared_buffer_page_size_kb = true;
        st.shared_buffer_page_size_kb = (uint32_t) (page_size / 1024);
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING;
        cmd.setup_tracing = &st;
        /* The fd goes with the command, unless the producer owns it. */
        r = send_async(p, &cmd, p->smb_provided_by_producer ? -EBADF : p->smb_fd);
        if (r < 0)
                return r;
        p->setup_tracing_sent = true;
        log_debug("Producer %u: SMB of %zu KiB, %zu KiB pages.", p->id, size / 1024, page_size / 1024);
        return 0;
}

static int send_ds_cmd(struct producer *p, struct ds_instance *inst, bool start) {
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource setup =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_DATA_SOURCE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__StartDataSource st =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;
        Perfetto__Protos__DataSourceConfig *cfg =
                perfetto__protos__data_source_config__unpack(NULL, inst->config_size, inst->config);
        int r;

        if (!cfg)
                return -EINVAL;
        if (start) {
                st.has_new_instance_id = true;
                st.new_instance_id = inst->id;
                st.config = cfg;
                cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
                cmd.start_data_source = &st;
        } else {
                setup.has_new_instance_id = true;
                setup.new_instance_id = inst->id;
                setup.config = cfg;
                cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
                cmd.setup_data_source = &setup;
        }
        r = send_async(p, &cmd, -EBADF);
        perfetto__protos__data_source_config__free_unpacked(cfg, NULL);
        return r;
}

static int port_setup_data_source(struct producer *p, struct ds_instance *inst) {
        int r = producer_setup_smb(p);
        if (r < 0)
                return r;
        return send_ds_cmd(p, inst, false);
}

static int port_start_data_source(struct producer *p, struct ds_instance *inst) {
        return send_ds_cmd(p, inst, true);
}

static int port_stop_data_source(struct producer *p, struct ds_instance *inst) {
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__StopDataSource st =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__STOP_DATA_SOURCE__INIT;

        st.has_instance_id = true;
        st.instance_id = inst->id;
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE;
        cmd.stop_data_source = &st;
        return send_async(p, &cmd, -EBADF);
}

static int port_flush(struct producer *p, uint64_t request_id, const uint64_t *ds_ids, size_t n) {
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__Flush fl = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__FLUSH__INIT;

        fl.n_data_source_ids = n;
        fl.data_source_ids = (uint64_t *) ds_ids;
        fl.has_request_id = true;
        fl.request_id = request_id;
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH;
        cmd.flush = &fl;
        return send_async(p, &cmd, -EBADF);
}

static int port_clear_incremental_state(struct producer *p, const uint64_t *ds_ids, size_t n) {
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState cl =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CLEAR_INCREMENTAL_STATE__INIT;

        cl.n_data_source_ids = n;
        cl.data_source_ids = (uint64_t *) ds_ids;
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE;
        cmd.clear_incremental_state = &cl;
        return send_async(p, &cmd, -EBADF);
}

static void m_notify_started(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__NotifyDataSourceStartedRequest *a = (const void *) args;
        Perfetto__Protos__NotifyDataSourceStartedResponse resp =
                PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (p && a->has_data_source_id)
                session_on_ds_started(p->svc, p, a->data_source_id);
        reply_empty(req, &resp.base);
}

static void m_notify_stopped(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__NotifyDataSourceStoppedRequest *a = (const void *) args;
        Perfetto__Protos__NotifyDataSourceStoppedResponse resp =
                PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (p && a->has_data_source_id)
                session_on_ds_stopped(p->svc, p, a->data_source_id);
        reply_empty(req, &resp.base);
}

static void m_activate_triggers(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__ActivateTriggersRequest *a = (const void *) args;
        Perfetto__Protos__ActivateTriggersResponse resp = PERFETTO__PROTOS__ACTIVATE_TRIGGERS_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (p && a->n_trigger_names > SERVICE_MAX_TRIGGERS_PER_REQUEST) {
                /* Every name is tried on every trigger of every session. */
                log_notice("Refusing %zu triggers at once from producer %u \"%.64s\" (uid %u, pid %d).",
                           a->n_trigger_names, p->id, strna(p->name), (unsigned) p->uid, (int) p->pid);
                ipc_request_fail(req);
                return;
        }
        if (p)
                session_on_triggers(p->svc, p, a->trigger_names, a->n_trigger_names);
        reply_empty(req, &resp.base);
}

static void m_report_ds_error(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__TracedReportDataSourceErrorRequest *a = (const void *) args;
        Perfetto__Protos__TracedReportDataSourceErrorResponse resp =
                PERFETTO__PROTOS__TRACED_REPORT_DATA_SOURCE_ERROR_RESPONSE__INIT;
        struct producer *p = req_producer(req);

        if (p && a->has_data_source_id)
                session_on_ds_error(p->svc, p, a->data_source_id, a->field, a->message);
        reply_empty(req, &resp.base);
}

static void m_sync(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        Perfetto__Protos__SyncResponse resp = PERFETTO__PROTOS__SYNC_RESPONSE__INIT;
        ipc_host_conn *conn = ipc_request_conn(req);
        /* Requests are handled in order, so everything sent before is
         * processed by now: a plugin host's registrations, when it is one
         * the service's start waits for. */
        if (conn)
                startup_hold_registered(userdata, ipc_host_conn_id(conn));
        reply_empty(req, &resp.base);
}

/* A trigger in the service's first moments may be for a session held
 * until the plugins are in (startup-hold.h): it waits behind it. */
static void m_activate_triggers_entry(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        if (!startup_hold_call(userdata, req, m_activate_triggers, true))
                m_activate_triggers(req, args, userdata);
}

#define M(name, req_t, resp_t, fn) { name, &req_t##__descriptor, &resp_t##__descriptor, fn }
static const struct ipc_method_desc producer_methods[] = {
        M("InitializeConnection", perfetto__protos__initialize_connection_request,
          perfetto__protos__initialize_connection_response, m_initialize_connection),
        M("RegisterDataSource", perfetto__protos__register_data_source_request,
          perfetto__protos__register_data_source_response, m_register_data_source),
        M("UnregisterDataSource", perfetto__protos__unregister_data_source_request,
          perfetto__protos__unregister_data_source_response, m_unregister_data_source),
        M("CommitData", perfetto__protos__commit_data_request, perfetto__protos__commit_data_response,
          m_commit_data),
        M("GetAsyncCommand", perfetto__protos__get_async_command_request,
          perfetto__protos__get_async_command_response, m_get_async_command),
        M("RegisterTraceWriter", perfetto__protos__register_trace_writer_request,
          perfetto__protos__register_trace_writer_response, m_register_trace_writer),
        M("UnregisterTraceWriter", perfetto__protos__unregister_trace_writer_request,
          perfetto__protos__unregister_trace_writer_response, m_unregister_trace_writer),
        M("NotifyDataSourceStarted", perfetto__protos__notify_data_source_started_request,
          perfetto__protos__notify_data_source_started_response, m_notify_started),
        M("NotifyDataSourceStopped", perfetto__protos__notify_data_source_stopped_request,
          perfetto__protos__notify_data_source_stopped_response, m_notify_stopped),
        M("ActivateTriggers", perfetto__protos__activate_triggers_request,
          perfetto__protos__activate_triggers_response, m_activate_triggers_entry),
        M("Sync", perfetto__protos__sync_request, perfetto__protos__sync_response, m_sync),
        M("UpdateDataSource", perfetto__protos__update_data_source_request,
          perfetto__protos__update_data_source_response, m_update_data_source),
        M("TracedReportDataSourceError", perfetto__protos__traced_report_data_source_error_request,
          perfetto__protos__traced_report_data_source_error_response, m_report_ds_error),
};

const struct ipc_service_desc producer_port_desc = {
        .name = "ProducerPort",
        .methods = producer_methods,
        .n_methods = ELEMENTSOF(producer_methods),
        .on_bind = on_bind,
        .on_disconnect = on_disconnect,
};
