/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "ipc/ipc.h"
#include "smb/smb-abi.h"
#include "traced/producer.h"

#define PRODUCER_MAX_PENDING_COMMITS 4096u

struct producer_instance {
        struct producer_instance *next;
        uint64_t id;
        uint32_t target_buffer;
        char *data_source;
        bool notify_on_stop;
        bool stopped;
};

struct traced_producer {
        sd_event *event;
        ipc_client *client;
        struct traced_producer_ops ops;
        void *userdata;
        char *name;

        uint8_t *smb;
        size_t smb_size;
        struct smb_abi abi;
        bool ready;

        struct producer_instance *instances;
        struct {
                char *name;
                uint32_t flags;
        } ds[64];
        size_t n_ds;

        /* Completed chunks not yet reported with CommitData. */
        struct {
                uint32_t page, chunk, target_buffer;
        } pending[PRODUCER_MAX_PENDING_COMMITS];
        size_t n_pending;
        sd_event_source *commit_defer;

        struct pending_patch *patches;
        size_t n_patches, cap_patches;

        traced_trace_writer *writers;
        uint16_t last_writer_id;
        size_t next_page_hint;
};

/* An open nested message of the packet being streamed. */
struct traced_msg {
        traced_trace_writer *w;
        unsigned depth;     /* 0: the packet itself */
        uint32_t chunk_id;  /* chunk holding the size field */
        size_t size_off;    /* payload offset of the size field */
        bool remote;        /* that chunk was handed over: patch it */
        uint32_t size;      /* bytes written inside so far */
};

struct pending_patch {
        uint16_t writer_id;
        uint32_t chunk_id;
        uint32_t target_buffer;
        uint32_t offset;
        uint8_t data[4];
        bool more; /* more patches of this chunk will follow */
};

struct traced_trace_writer {
        traced_trace_writer *next;
        traced_producer *producer;
        uint64_t instance_id;
        uint32_t target_buffer;
        uint16_t writer_id;
        uint32_t next_chunk_id;
        struct smb_chunk cur;
        size_t cur_off;
        uint16_t cur_count;
        uint8_t cur_flags;
        uint64_t dropped;
        bool lost_since_last_chunk;
        /* streaming */
        bool in_packet;
        bool dropping;          /* the packet being streamed is lost */
        size_t frag_off;        /* payload offset of the fragment's size field */
        struct traced_msg stack[TRACED_MSG_MAX_DEPTH];
        unsigned depth;         /* open messages, including the packet */
        /* chunks handed over with size fields still to come */
        struct {
                uint32_t chunk_id;
                unsigned outstanding;
        } waiting[TRACED_MSG_MAX_DEPTH];
        unsigned n_waiting;
};

struct producer_instance *producer_find_instance(traced_producer *p, uint64_t id);
/* Queues a completed chunk for the next CommitData. */
int producer_queue_commit(traced_producer *p, size_t page, size_t chunk, uint32_t target_buffer);
/* Sends CommitData for everything queued (flush_request_id 0: none). */
int producer_commit(traced_producer *p, uint64_t flush_request_id);
int producer_queue_patch(traced_producer *p, const struct pending_patch *patch);
/* A free chunk for writer w, or an invalid chunk when the SMB is full. */
struct smb_chunk producer_acquire_chunk(traced_producer *p, uint16_t writer_id, uint32_t chunk_id);
