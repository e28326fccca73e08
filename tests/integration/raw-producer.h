/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A minimal producer written directly on the IPC layer and the SMB ABI, so
 * the service's tests do not depend on the client library: it registers
 * one data source, follows the service's commands and writes TracePackets
 * carrying for_testing { str, seq_value } into chunks by hand. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "ipc/ipc.h"
#include "smb/smb-abi.h"

struct raw_producer {
        sd_event *event;
        ipc_client *client;
        const char *ds_name;
        bool notify_on_stop;
        /* Registered with will_notify_on_start: the start is acknowledged
         * (and the packets at start written) by raw_producer_notify_started. */
        bool notify_on_start;
        /* Misbehaviours for fault tests: never acknowledge a Flush or a
         * StopDataSource. */
        bool ignore_flush, ignore_stop;

        uint8_t *smb;
        size_t smb_size;
        struct smb_abi abi;
        bool smb_ready;

        uint64_t instance_id;
        uint32_t target_buffer;
        int n_setup, n_start, n_stop, n_flush, n_setup_tracing;
        bool registered;
        bool connection_lost;

        uint16_t writer_id;
        uint32_t next_chunk_id;
        uint32_t next_seq;
        /* The chunk being written. */
        struct smb_chunk cur;
        size_t cur_off;
        uint16_t cur_count;
        uint8_t cur_flags;
        /* Completed chunks waiting for CommitData. */
        struct {
                uint32_t page, chunk;
        } pending[4096];
        size_t n_pending;

        /* What to write at start, and at each Flush before committing (as
         * a data source whose data waits elsewhere, in the kernel's ring
         * buffer, until it is flushed). */
        unsigned packets_at_start;
        unsigned packets_at_flush;
        size_t payload_size;
};

int raw_producer_connect(struct raw_producer *p, sd_event *event, const char *path, const char *name,
                         const char *ds_name, uint32_t smb_size_hint, uint32_t page_size_hint);
enum {
        RAW_PRODUCER_NOTIFY_ON_STOP = 1 << 0,
        RAW_PRODUCER_IGNORE_FLUSH = 1 << 1,
        RAW_PRODUCER_IGNORE_STOP = 1 << 2,
        RAW_PRODUCER_NOTIFY_ON_START = 1 << 3,
};
/* Same, with RAW_PRODUCER_* flags. */
int raw_producer_connect_flags(struct raw_producer *p, sd_event *event, const char *path, const char *name,
                               const char *ds_name, uint32_t smb_size_hint, uint32_t page_size_hint, unsigned flags);
void raw_producer_free(struct raw_producer *p);
/* Appends one packet (TracePacket{timestamp, for_testing{str, seq_value}})
 * whose str is payload_size bytes; fragments across chunks as needed. */
int raw_producer_write_packet(struct raw_producer *p, size_t payload_size);
/* Completes the current chunk (if any) and sends CommitData. */
int raw_producer_commit(struct raw_producer *p, uint64_t flush_request_id);
/* Runs the loop until cond(p) or timeout; returns true when cond held. */
bool raw_producer_spin_until(struct raw_producer *p, bool (*cond)(struct raw_producer *), unsigned timeout_ms);
/* The expected str of packet seq with payload_size bytes. */
void raw_producer_payload(uint32_t seq, size_t payload_size, char *buf);
/* Acknowledges the start of the last instance started, then writes its
 * packets at start (RAW_PRODUCER_NOTIFY_ON_START). */
int raw_producer_notify_started(struct raw_producer *p);
/* Sends ActivateTriggers with these names. */
int raw_producer_activate_triggers(struct raw_producer *p, const char *const *names, size_t n);
