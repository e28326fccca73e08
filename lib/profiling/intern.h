/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Interning of callstacks for one packet sequence, written as upstream's
 * profilers do (TracePacket.interned_data, InternedData fields build_ids,
 * mapping_paths, function_names, mappings, frames, callstacks).
 *
 * Every value gets an id (iid, from 1) the first time it is met on the
 * sequence; what is new is kept pending and goes out with the next packet
 * (intern_write_pending), before or in the packet that refers to it. After
 * intern_clear (an incremental state clear, or a memory bound), ids start
 * again and everything is emitted anew; the next packet must then carry
 * TracePacket_SEQ_INCREMENTAL_STATE_CLEARED (intern_packet_flags says so).
 *
 * Ownership: the writer copies what it is given. One thread at a time. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct TracePacket; /* traced/pbzero/perfetto/trace/trace_packet.pbw.h */

struct intern_writer;

struct intern_mapping {
        const uint8_t *build_id; /* raw bytes, may be NULL */
        size_t build_id_len;
        const char *path; /* split at '/' into mapping_paths; NULL or "" for none */
        uint64_t start, end;
        uint64_t exact_offset; /* the mapping's file offset */
        uint64_t start_offset; /* file offset of the ELF image (0 unless embedded) */
        uint64_t load_bias;
};

int intern_writer_new(struct intern_writer **ret);
void intern_writer_free(struct intern_writer *w);

/* Each returns the value's iid (> 0), or 0 when out of memory (the sticky
 * error is then in intern_error). */
uint64_t intern_function_name(struct intern_writer *w, const char *name);
uint64_t intern_build_id(struct intern_writer *w, const uint8_t *id, size_t len);
uint64_t intern_mapping_path(struct intern_writer *w, const char *component);
uint64_t intern_mapping(struct intern_writer *w, const struct intern_mapping *m);
/* function_name_iid 0: not symbolized. rel_pc: the pc as a virtual address
 * of the mapped file (see Frame.rel_pc). */
uint64_t intern_frame(struct intern_writer *w, uint64_t function_name_iid, uint64_t mapping_iid, uint64_t rel_pc);
/* frames: root (outermost) first, as Callstack.frame_ids. */
uint64_t intern_callstack(struct intern_writer *w, const uint64_t *frame_iids, size_t n);

int intern_error(const struct intern_writer *w);
bool intern_has_pending(const struct intern_writer *w);
/* Appends the pending entries to packet as its interned_data field and
 * forgets them (they are on the sequence now). Nothing when none. */
void intern_write_pending(struct intern_writer *w, struct TracePacket *packet);
/* The sequence_flags for the next packet referring to interned data:
 * TracePacket_SEQ_NEEDS_INCREMENTAL_STATE, plus
 * TracePacket_SEQ_INCREMENTAL_STATE_CLEARED once after
 * creation and after each intern_clear. The caller writes its
 * TracePacketDefaults in the packet that gets the CLEARED bit. */
uint32_t intern_packet_flags(struct intern_writer *w);
/* Forgets every id; the next packet restarts the sequence's state. */
void intern_clear(struct intern_writer *w);
/* Bytes held by the tables (to clear when it grows past a bound). */
size_t intern_memory(const struct intern_writer *w);
/* Ids handed out since the last clear, all tables together. */
size_t intern_count(const struct intern_writer *w);
