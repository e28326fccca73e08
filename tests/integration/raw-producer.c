/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "raw-producer.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

void raw_producer_payload(uint32_t seq, size_t payload_size, char *buf) {
        for (size_t i = 0; i < payload_size; i++)
                buf[i] = (char) ('a' + (seq + i) % 26);
        buf[payload_size] = '\0';
}

static void on_async(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud);

static void start_writing(struct raw_producer *p) {
        for (unsigned i = 0; i < p->packets_at_start; i++)
                if (raw_producer_write_packet(p, p->payload_size) < 0)
                        break;
        (void) raw_producer_commit(p, 0);
}

static void on_async(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct raw_producer *p = ud;
        const Perfetto__Protos__GetAsyncCommandResponse *cmd = (const void *) reply;

        if (error < 0 || !cmd) {
                if (fd >= 0)
                        close(fd);
                p->connection_lost = error < 0;
                return;
        }
        switch (cmd->cmd_case) {
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING: {
                p->n_setup_tracing++;
                size_t page = cmd->setup_tracing->shared_buffer_page_size_kb * 1024u;
                off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
                if (fd >= 0 && size > 0) {
                        void *m = mmap(NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                        if (m != MAP_FAILED) {
                                p->smb = m;
                                p->smb_size = (size_t) size;
                                p->smb_ready = smb_abi_init(&p->abi, m, (size_t) size, page) >= 0;
                        }
                }
                break;
        }
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE:
                p->n_setup++;
                p->instance_id = cmd->setup_data_source->new_instance_id;
                p->target_buffer = cmd->setup_data_source->config->target_buffer;
                break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
                p->n_start++;
                p->instance_id = cmd->start_data_source->new_instance_id;
                p->target_buffer = cmd->start_data_source->config->target_buffer;
                /* A slow starter writes once it says it started. */
                if (!p->notify_on_start)
                        start_writing(p);
                break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
                p->n_stop++;
                (void) raw_producer_commit(p, 0);
                if (p->notify_on_stop && !p->ignore_stop) {
                        Perfetto__Protos__NotifyDataSourceStoppedRequest rq =
                                PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
                        rq.has_data_source_id = true;
                        rq.data_source_id = cmd->stop_data_source->instance_id;
                        (void) ipc_client_invoke(p->client, "NotifyDataSourceStopped", &rq.base, NULL, -EBADF, NULL,
                                                 NULL);
                }
                break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
                p->n_flush++;
                for (unsigned i = 0; i < p->packets_at_flush && p->n_start > 0; i++)
                        if (raw_producer_write_packet(p, p->payload_size) < 0)
                                break;
                (void) raw_producer_commit(p, p->ignore_flush ? 0 : cmd->flush->request_id);
                break;
        default:
                break;
        }
        if (fd >= 0)
                close(fd);
}

static void on_registered(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct raw_producer *p = ud;
        const Perfetto__Protos__RegisterDataSourceResponse *r = (const void *) reply;
        p->registered = error == 0 && r && !r->error;
}

int raw_producer_connect(struct raw_producer *p, sd_event *event, const char *path, const char *name,
                         const char *ds_name, uint32_t smb_size_hint, uint32_t page_size_hint) {
        return raw_producer_connect_flags(p, event, path, name, ds_name, smb_size_hint, page_size_hint, 0);
}

int raw_producer_connect_flags(struct raw_producer *p, sd_event *event, const char *path, const char *name,
                               const char *ds_name, uint32_t smb_size_hint, uint32_t page_size_hint, unsigned flags) {
        int r;

        memset(p, 0, sizeof(*p));
        p->notify_on_stop = flags & RAW_PRODUCER_NOTIFY_ON_STOP;
        p->ignore_flush = flags & RAW_PRODUCER_IGNORE_FLUSH;
        p->ignore_stop = flags & RAW_PRODUCER_IGNORE_STOP;
        p->notify_on_start = flags & RAW_PRODUCER_NOTIFY_ON_START;
        p->event = event;
        p->ds_name = ds_name;
        p->writer_id = 1;
        p->next_chunk_id = 0;
        r = ipc_client_connect(event, path, &p->client);
        if (r < 0)
                return r;
        r = ipc_client_bind_sync(p->client, "ProducerPort", 5000000);
        if (r < 0)
                return r;

        Perfetto__Protos__InitializeConnectionRequest init = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        init.producer_name = (char *) name;
        if (smb_size_hint) {
                init.has_shared_memory_size_hint_bytes = true;
                init.shared_memory_size_hint_bytes = smb_size_hint;
        }
        if (page_size_hint) {
                init.has_shared_memory_page_size_hint_bytes = true;
                init.shared_memory_page_size_hint_bytes = page_size_hint;
        }
        r = (int) ipc_client_invoke(p->client, "InitializeConnection", &init.base, NULL, -EBADF, NULL, NULL);
        if (r < 0)
                return r;

        Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
        Perfetto__Protos__RegisterDataSourceRequest reg = PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
        d.name = (char *) ds_name;
        if (p->notify_on_stop) {
                d.has_will_notify_on_stop = true;
                d.will_notify_on_stop = true;
        }
        if (p->notify_on_start) {
                d.has_will_notify_on_start = true;
                d.will_notify_on_start = true;
        }
        reg.data_source_descriptor = &d;
        r = (int) ipc_client_invoke(p->client, "RegisterDataSource", &reg.base,
                                    &perfetto__protos__register_data_source_response__descriptor, -EBADF,
                                    on_registered, p);
        if (r < 0)
                return r;

        Perfetto__Protos__GetAsyncCommandRequest get = PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
        r = (int) ipc_client_invoke(p->client, "GetAsyncCommand", &get.base,
                                    &perfetto__protos__get_async_command_response__descriptor, -EBADF, on_async, p);
        if (r < 0)
                return r;
        return 0;
}

void raw_producer_free(struct raw_producer *p) {
        p->client = ipc_client_free(p->client);
        if (p->smb)
                munmap(p->smb, p->smb_size);
        p->smb = NULL;
}

static int complete_chunk(struct raw_producer *p) {
        if (!smb_chunk_is_valid(&p->cur))
                return 0;
        struct smb_chunk_header *h = smb_chunk_header(&p->cur);
        atomic_store_explicit(&h->packets, smb_packets_pack(p->cur_count, p->cur_flags), memory_order_release);
        size_t page, chunk;
        if (smb_chunk_location(&p->abi, &p->cur, &page, &chunk) < 0)
                return -EINVAL;
        if (smb_release_chunk_as_complete(&p->abi, &p->cur) < 0)
                return -EINVAL;
        if (p->n_pending < ELEMENTSOF(p->pending)) {
                p->pending[p->n_pending].page = (uint32_t) page;
                p->pending[p->n_pending].chunk = (uint32_t) chunk;
                p->n_pending++;
        }
        p->cur = (struct smb_chunk) {};
        return 0;
}

static int new_chunk(struct raw_producer *p) {
        for (size_t page = 0; page < p->abi.num_pages; page++) {
                uint32_t bitmap = smb_page_bitmap(&p->abi, page);
                if (smb_bitmap_layout(bitmap) == SMB_PAGE_NOT_PARTITIONED &&
                    !smb_try_partition_page(&p->abi, page, SMB_PAGE_DIV4))
                        continue;
                uint32_t n = smb_bitmap_num_chunks(smb_page_bitmap(&p->abi, page));
                for (uint32_t i = 0; i < n; i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_writing(&p->abi, page, i, p->writer_id,
                                                                               p->next_chunk_id);
                        if (smb_chunk_is_valid(&c)) {
                                p->next_chunk_id++;
                                p->cur = c;
                                p->cur_off = 0;
                                p->cur_count = 0;
                                p->cur_flags = 0;
                                return 0;
                        }
                }
        }
        return -ENOBUFS;
}

int raw_producer_write_packet(struct raw_producer *p, size_t payload_size) {
        _cleanup_(pb_buf_done) struct pb_buf b = {};
        _cleanup_free_ char *str = malloc(payload_size + 1);
        TracePacket tp;
        TestEvent ev;
        int r;

        if (!p->smb_ready || !str)
                return -ENOTCONN;
        raw_producer_payload(p->next_seq, payload_size, str);
        TracePacket_init(&tp, pb_buf_stream(&b));
        TracePacket_set_timestamp(&tp, boottime_ns());
        TracePacket_begin_for_testing(&tp, &ev);
        TestEvent_set_str(&ev, str);
        TestEvent_set_seq_value(&ev, p->next_seq);
        TracePacket_end_for_testing(&tp, &ev);
        r = traced_pb_msg_finish(&tp.msg);
        if (r < 0)
                return r;
        p->next_seq++;
        const uint8_t *data = pb_buf_data(&b);
        size_t len = pb_buf_len(&b);

        size_t off = 0;
        bool continuation = false;
        while (off < len || (off == 0 && len == 0)) {
                if (!smb_chunk_is_valid(&p->cur) ||
                    smb_chunk_payload_size(&p->cur) - p->cur_off < SMB_PACKET_HEADER_SIZE + 1 ||
                    p->cur_count >= SMB_MAX_PACKET_COUNT) {
                        r = complete_chunk(p);
                        if (r < 0)
                                return r;
                        r = new_chunk(p);
                        if (r < 0)
                                return r;
                        if (continuation)
                                p->cur_flags |= SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV;
                }
                size_t room = smb_chunk_payload_size(&p->cur) - p->cur_off - SMB_PACKET_HEADER_SIZE;
                size_t take = MIN(room, len - off);
                uint8_t *dst = smb_chunk_payload(&p->cur) + p->cur_off;
                traced_pb_put_size_field(dst, (uint32_t) take);
                memcpy(dst + SMB_PACKET_HEADER_SIZE, data + off, take);
                p->cur_off += SMB_PACKET_HEADER_SIZE + take;
                p->cur_count++;
                off += take;
                if (off < len) {
                        p->cur_flags |= SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT;
                        continuation = true;
                        p->cur_off = smb_chunk_payload_size(&p->cur); /* force a new chunk */
                }
                if (len == 0)
                        break;
        }
        return 0;
}

int raw_producer_commit(struct raw_producer *p, uint64_t flush_request_id) {
        Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
        Perfetto__Protos__CommitDataRequest__ChunksToMove moves[256];
        Perfetto__Protos__CommitDataRequest__ChunksToMove *ptrs[256];
        int r;

        r = complete_chunk(p);
        if (r < 0)
                return r;
        size_t done = 0;
        do {
                size_t n = MIN(p->n_pending - done, ELEMENTSOF(moves));
                for (size_t i = 0; i < n; i++) {
                        moves[i] = (Perfetto__Protos__CommitDataRequest__ChunksToMove)
                                PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
                        moves[i].has_page = moves[i].has_chunk = moves[i].has_target_buffer = true;
                        moves[i].page = p->pending[done + i].page;
                        moves[i].chunk = p->pending[done + i].chunk;
                        moves[i].target_buffer = p->target_buffer;
                        ptrs[i] = &moves[i];
                }
                req.n_chunks_to_move = n;
                req.chunks_to_move = ptrs;
                done += n;
                if (done == p->n_pending && flush_request_id) {
                        req.has_flush_request_id = true;
                        req.flush_request_id = flush_request_id;
                }
                r = (int) ipc_client_invoke(p->client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL);
                if (r < 0)
                        return r;
        } while (done < p->n_pending);
        p->n_pending = 0;
        return 0;
}

bool raw_producer_spin_until(struct raw_producer *p, bool (*cond)(struct raw_producer *), unsigned timeout_ms) {
        uint64_t deadline = now_usec() + (uint64_t) timeout_ms * 1000u;
        while (!cond(p)) {
                uint64_t now = now_usec();
                if (now >= deadline)
                        return false;
                sd_event_run(p->event, deadline - now);
        }
        return true;
}

int raw_producer_activate_triggers(struct raw_producer *p, const char *const *names, size_t n) {
        Perfetto__Protos__ActivateTriggersRequest req = PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
        req.n_trigger_names = n;
        req.trigger_names = (char **) names;
        int64_t r = ipc_client_invoke(p->client, "ActivateTriggers", &req.base, NULL, -EBADF, NULL, NULL);
        return r < 0 ? (int) r : 0;
}

int raw_producer_notify_started(struct raw_producer *p) {
        Perfetto__Protos__NotifyDataSourceStartedRequest rq = PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_REQUEST__INIT;
        rq.has_data_source_id = true;
        rq.data_source_id = p->instance_id;
        int r = (int) ipc_client_invoke(p->client, "NotifyDataSourceStarted", &rq.base, NULL, -EBADF, NULL, NULL);
        if (r >= 0)
                start_writing(p);
        return r < 0 ? r : 0;
}
