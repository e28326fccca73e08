/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reads a trace file (a Trace: field-1 length-delimited TracePackets one
 * after another) packet by packet, without loading it whole. */

#include <stdint.h>
#include <stdio.h>

struct trace_reader {
        FILE *f;
        uint8_t *buf;
        size_t cap;
        uint64_t offset;
        uint64_t n_packets;
        const uint8_t *map; /* trace_reader_open_mapped: the whole file */
        size_t map_len;
};

/* Largest packet accepted; a larger length means a damaged file. */
#define TRACE_READER_MAX_PACKET (256u * 1024u * 1024u)

int trace_reader_open(struct trace_reader *r, const char *path);
/* The same over a memory mapping of the file: packets are handed out where
 * they lie, and only the pages a caller looks at are read. For a file that
 * nothing truncates meanwhile (a trace this program just finished), as a
 * mapping cut short faults. -errno where the file cannot be mapped. */
int trace_reader_open_mapped(struct trace_reader *r, const char *path);
void trace_reader_close(struct trace_reader *r);
/* 1 with the next packet's bytes (valid until the next call), 0 at the
 * end, -EBADMSG for a damaged file, -errno. */
int trace_reader_next(struct trace_reader *r, const uint8_t **ret_data, size_t *ret_len);
