/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A producer as the service keeps it. The producer port (ports/) creates
 * it on BindService, fills in its identity and registrations and owns its
 * connection and shared memory buffer; the sessions layer reads its
 * identity and registered data sources to match them with trace configs,
 * and asks anything of the producer only through its producer_ops
 * (session.h). Nothing below the ports writes to it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/ipc.h"
#include "smb/smb-abi.h"

struct producer_ops;
struct traced_service;
struct queued_cmd;

struct data_source_reg {
        uint64_t id; /* descriptor id if the producer gave one */
        char *name;
        bool will_notify_on_start;
        bool will_notify_on_stop;
        bool handles_incremental_state_clear;
        /* The descriptor as the producer sent it, for QueryServiceState. */
        uint8_t *descriptor;
        size_t descriptor_size;
};

/* A chunk a scrape of the producer's SMB found (producer_scrape). */
struct scraped_chunk {
        struct smb_chunk chunk;
        uint32_t chunk_id;
        uint16_t writer_id;
        bool complete;
};

struct producer {
        const struct producer_ops *ops;
        struct producer *next;
        struct traced_service *svc;
        ipc_host_conn *conn;
        uint16_t id;
        uid_t uid;
        pid_t pid;
        char *name;
        char *sdk_version;
        bool initialized;
        bool plugin_host; /* a connection traced made for its plugins */
        /* Relayed from another machine (a TCP or vsock listener): its uid
         * and pid are what the relay claims, and it has no SMB of ours
         * (shared memory emulation: chunks arrive inside CommitData). */
        bool remote;
        uint32_t machine_id; /* 0: this machine */
        char *machine_name;

        /* Shared memory buffer. */
        size_t smb_size_hint;
        size_t smb_page_size_hint;
        /* From the first session's TraceConfig.producers entry naming this
         * producer (0: none); they win over the producer's own hints. */
        size_t smb_size_config;
        size_t smb_page_size_config;
        int producer_smb_fd; /* producer-provided SMB, until set up */
        bool smb_provided_by_producer;
        int smb_fd;
        uint8_t *smb;
        size_t smb_size;
        struct smb_abi abi;
        bool setup_tracing_sent;

        ipc_request *async_req; /* the GetAsyncCommand stream */
        /* Commands queued while no GetAsyncCommand is outstanding. */
        struct queued_cmd *cmd_head, *cmd_tail;
        size_t n_queued;

        struct data_source_reg *data_sources;
        size_t n_data_sources;
        size_t registration_bytes; /* charged against the quotas */

        /* writer id -> target buffer, from RegisterTraceWriter or the
         * first commit; used to route scraped chunks. */
        uint32_t *writer_targets; /* SMB_MAX_WRITER_ID + 1 entries, lazily */

        uint64_t chunks_committed;
        uint64_t commit_requests;
        /* Chunks of the CommitData being handled that are still read from
         * (CHUNK_SINK_MAY_HOLD): given back after chunk_sink_settle. */
        struct smb_chunk *held;
        size_t n_held, cap_held;
        /* What a scrape found, copied in each writer's order after. */
        struct scraped_chunk *scraped;
        size_t n_scraped, cap_scraped;
        uint64_t abi_violations;
};
