/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Rotation (sessions layer, seen by the session files only): a
 * write_into_file session whose output is a directory writes numbered
 * files in it (core/output/output-dir.h names them), closing the one
 * being written at a size and/or a period (TraceConfig.traced_rotation)
 * and going on in the next, so that each file opens alone.
 *
 * A cut runs in two steps. It begins (session_rotate_begin) by opening
 * the next file and writing the service's own packets at its head, then
 * asks every data source to clear its incremental state and flushes them.
 * From then on, each producer sequence goes on in the next file from the
 * first packet that says its incremental state was cleared
 * (TracePacket.sequence_flags): what a producer wrote before it clearing
 * belongs with the interned data of the old file, what it wrote after
 * with the new. Once the flush is over, everything written before the
 * clear has been committed: what is left for the old file is written,
 * its TraceStats (the counts of that file alone) closes it, and its
 * writer's thread, once it has written the rest, fsyncs it and renames it
 * into place while the loop goes on (session_rotate_finish). Sequences that
 * never clear (no incremental state) move over at that point. Each packet
 * goes into exactly one file.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <systemd/sd-event.h>

#include "core/output/output-dir.h"
#include "core/buffers/trace-buffer.h"

struct session;
struct output_writer;
struct rotate_closing;

struct session_rotation {
        int dir_fd;
        char prefix[OUTPUT_DIR_NAME_MAX];
        uint64_t index; /* of the file being written */
        uint64_t size_limit;
        uint32_t period_ms;
        uint64_t keep_files, keep_bytes;
        bool in_trace_dir; /* the directory is (below) the service's trace directory: max_use counts it */
        sd_event_source *period_timer;
        sd_event_source *begin_defer;
        uint64_t files_closed;
        /* Files cut from the session whose writers still write their end
         * and make them whole, oldest first. */
        struct rotate_closing *closing;

        /* During a cut: the next file, what its writer could not take yet
         * (next_over), and the sequences already going into it (a bit per
         * trusted sequence id). */
        bool cutting;
        int next_fd;
        struct output_writer *next_writer;
        uint8_t *next_over;
        size_t next_len, next_cap;
        uint64_t next_bytes;
        uint8_t *crossed;
        size_t crossed_bytes;

        /* The session's counts when the file being written was opened:
         * its TraceStats counts from there. */
        struct trace_buffer_stats *base;
        size_t n_base;
        uint64_t base_invalid, base_discarded, base_patches, base_flushes_requested, base_flushes_succeeded,
                base_flushes_failed;
};

/* session_create: fd (taken) is a directory: the session rotates in it
 * as cfg->traced_rotation asks. Opens the first file and hands it to the
 * session's output. -errno with *ret_error. */
int session_rotate_open(struct session *s, int dir_fd, char **ret_error);
/* The session started: the period counts from now. */
void session_rotate_started(struct session *s);
/* Bytes went into the file: a cut begins at the next turn of the loop
 * once it holds the size asked for. */
void session_rotate_check_size(struct session *s);
/* Whether the packet the read pass hands over (s->read_seq) goes into
 * the next file, during a cut. */
bool session_rotate_to_next(struct session *s, const struct iovec *iov, size_t n_iov, size_t total);
/* Puts bytes into the next file. 0 or -ENOMEM. */
int session_rotate_put_next(struct session *s, const uint8_t *p, size_t n);
/* Ends a cut now (the session ends during one). */
void session_rotate_finish(struct session *s);
/* The session's last file is complete (or its output failed, err < 0:
 * then cut after its last whole packet): renamed into place. */
void session_rotate_close_last(struct session *s, int err);
void session_rotate_free(struct session *s);
/* The counts of the file being written start here (for TraceStats). */
void session_rotate_stats_base(const struct session *s, size_t buffer, const struct trace_buffer_stats **ret);
