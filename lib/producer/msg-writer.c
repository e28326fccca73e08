/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Streaming packets straight into chunks. Each fragment starts with a
 * 4-byte size field; each nested message reserves a 4-byte redundant varint
 * for its length. When a chunk fills up mid-packet the fragment is closed,
 * the chunk is handed over (flagged as needing patches if a size field in
 * it is still open), and writing continues in a new chunk. Sizes that end
 * up in chunks already handed over travel as CommitData patches. */

#include <errno.h>
#include <string.h>

#include "basic/macro.h"
#include "producer-internal.h"

#define SIZE_FIELD 4u

static uint8_t *cur_payload(traced_trace_writer *w) {
        return smb_chunk_payload(&w->cur);
}

static size_t room(traced_trace_writer *w) {
        return smb_chunk_is_valid(&w->cur) ? smb_chunk_payload_size(&w->cur) - w->cur_off : 0;
}

static uint32_t cur_chunk_id(traced_trace_writer *w) {
        return atomic_load_explicit(&smb_chunk_header(&w->cur)->chunk_id, memory_order_relaxed);
}

/* Size fields of open messages in the chunk being handed over will be
 * delivered as patches: the chunk waits for them in the service. */
static void hand_over_open_sizes(traced_trace_writer *w) {
        uint32_t id = cur_chunk_id(w);
        unsigned open_here = 0;

        for (unsigned i = 1; i < w->depth; i++)
                if (!w->stack[i].remote && w->stack[i].chunk_id == id) {
                        w->stack[i].remote = true;
                        open_here++;
                }
        if (open_here) {
                w->cur_flags |= SMB_CHUNK_NEEDS_PATCHING;
                if (w->n_waiting < ELEMENTSOF(w->waiting)) {
                        w->waiting[w->n_waiting].chunk_id = id;
                        w->waiting[w->n_waiting].outstanding = open_here;
                        w->n_waiting++;
                }
        }
}

/* Hands the full chunk over and continues the packet in a new one. When
 * there is no new one, the chunk goes with its fragment marked dropped
 * and its open size fields are never written: the packet is lost. */
static int switch_chunk(traced_trace_writer *w) {
        int r = writer_continue_in_next_chunk(w, w->frag_off, hand_over_open_sizes);
        if (r < 0)
                return r;
        w->cur_count = 1;
        writer_publish_count(w);
        w->frag_off = 0;
        w->cur_off = SIZE_FIELD;
        return 0;
}

/* Appends bytes to the packet, spilling into new chunks. */
static int put(traced_trace_writer *w, const void *data, size_t n) {
        const uint8_t *d = data;
        if (w->dropping)
                return -ENOBUFS;
        while (n > 0) {
                if (room(w) == 0) {
                        int r = switch_chunk(w);
                        if (r < 0) {
                                w->dropping = true;
                                return r;
                        }
                }
                size_t k = MIN(room(w), n);
                memcpy(cur_payload(w) + w->cur_off, d, k);
                w->cur_off += k;
                for (unsigned i = 0; i < w->depth; i++)
                        w->stack[i].size += (uint32_t) k;
                d += k;
                n -= k;
        }
        return 0;
}

static int put_varint(traced_trace_writer *w, uint64_t v) {
        uint8_t b[10];
        size_t n = 0;
        do {
                b[n] = (uint8_t) (v & 0x7f);
                v >>= 7;
                if (v)
                        b[n] |= 0x80;
                n++;
        } while (v);
        return put(w, b, n);
}

/* Reserves a size field; it must not straddle chunks. */
static int reserve_size(traced_trace_writer *w, uint32_t *ret_chunk, size_t *ret_off) {
        if (w->dropping)
                return -ENOBUFS;
        if (room(w) < SIZE_FIELD) {
                /* Pad with nothing: start the field in the next chunk. */
                int r = switch_chunk(w);
                if (r < 0) {
                        w->dropping = true;
                        return r;
                }
        }
        *ret_chunk = cur_chunk_id(w);
        *ret_off = w->cur_off;
        static const uint8_t zero[SIZE_FIELD] = { 0x80, 0x80, 0x80, 0x00 };
        return put(w, zero, SIZE_FIELD);
}

_public_ int traced_trace_writer_begin_packet(traced_trace_writer *w, traced_msg **ret_root) {
        if (!w || !ret_root)
                return -EINVAL;
        writer_note_thread(w);
        if (w->in_packet)
                return -EINVAL;
        if (!writer_alive(w)) {
                writer_note_loss(w);
                return -ENOTCONN;
        }
        /* A new packet needs room for its header and one byte. */
        if (!writer_new_packet_fits(w)) {
                int r = writer_start_chunk(w);
                if (r < 0) {
                        writer_note_loss(w);
                        return r;
                }
        }
        w->in_packet = true;
        w->dropping = false;
        w->frag_off = w->cur_off;
        writer_put_size(cur_payload(w) + w->frag_off, 0);
        w->cur_off += SIZE_FIELD;
        w->cur_count++;
        writer_publish_count(w);
        w->depth = 1;
        w->stack[0] = (struct traced_msg) { .w = w, .depth = 0 };
        w->packet_marks_loss = false;
        if (w->signal_loss) {
                /* Packets before this one were lost: say so in it. */
                uint8_t marker[WRITER_LOSS_MARKER_MAX];
                size_t n = writer_loss_marker(marker);
                (void) put(w, marker, n); /* a failure drops the packet */
                w->packet_marks_loss = true;
        }
        *ret_root = &w->stack[0];
        return 0;
}

static int check(traced_msg *m) {
        if (!m || !m->w || !m->w->in_packet || m->depth + 1 != m->w->depth)
                return -EINVAL; /* only the innermost open message can be written */
        return 0;
}

_public_ int traced_msg_append_varint(traced_msg *m, uint32_t field, uint64_t value) {
        int r = check(m);
        if (r < 0)
                return r;
        r = put_varint(m->w, (uint64_t) field << 3);
        return r < 0 ? r : put_varint(m->w, value);
}

_public_ int traced_msg_append_bytes(traced_msg *m, uint32_t field, const void *data, size_t size) {
        int r = check(m);
        if (r < 0)
                return r;
        r = put_varint(m->w, ((uint64_t) field << 3) | 2);
        if (r >= 0)
                r = put_varint(m->w, size);
        return r < 0 ? r : put(m->w, data, size);
}

_public_ int traced_msg_begin_nested(traced_msg *m, uint32_t field, traced_msg **ret_child) {
        int r = check(m);
        if (r < 0)
                return r;
        traced_trace_writer *w = m->w;
        if (w->depth >= TRACED_MSG_MAX_DEPTH)
                return -E2BIG;
        r = put_varint(w, ((uint64_t) field << 3) | 2);
        if (r < 0)
                return r;
        struct traced_msg *c = &w->stack[w->depth];
        *c = (struct traced_msg) { .w = w, .depth = w->depth };
        r = reserve_size(w, &c->chunk_id, &c->size_off);
        if (r < 0)
                return r;
        c->size = 0; /* the size field itself does not count */
        w->depth++;
        *ret_child = c;
        return 0;
}

static void chunk_patched(traced_trace_writer *w, uint32_t chunk_id, bool *ret_more) {
        *ret_more = false;
        for (unsigned i = 0; i < w->n_waiting; i++)
                if (w->waiting[i].chunk_id == chunk_id) {
                        if (--w->waiting[i].outstanding > 0)
                                *ret_more = true;
                        else
                                w->waiting[i] = w->waiting[--w->n_waiting];
                        return;
                }
}

_public_ int traced_msg_end_nested(traced_msg *c) {
        int r = check(c);
        if (r < 0)
                return r;
        if (c->depth == 0)
                return -EINVAL;
        traced_trace_writer *w = c->w;
        w->depth--;
        if (!c->remote) {
                if (w->dropping || !smb_chunk_is_valid(&w->cur))
                        return -ENOBUFS;
                if (c->size >= (1u << 28))
                        return -EMSGSIZE;
                writer_put_size(cur_payload(w) + c->size_off, c->size);
                return 0;
        }
        /* Its chunk waits in the service for this size: send it even for a
         * dropped packet, so the chunk is released (the broken packet is
         * then discarded when read). */
        struct pending_patch pt = {
                .writer_id = w->writer_id,
                .chunk_id = c->chunk_id,
                .target_buffer = w->target_buffer,
                .offset = (uint32_t) c->size_off,
        };
        writer_put_size(pt.data, c->size);
        chunk_patched(w, c->chunk_id, &pt.more);
        return writer_queue_patch(w, &pt);
}

_public_ int traced_trace_writer_end_packet(traced_trace_writer *w) {
        if (!w || !w->in_packet)
                return -EINVAL;
        int r = 0;
        while (w->depth > 1) {
                int k = traced_msg_end_nested(&w->stack[w->depth - 1]);
                if (k < 0 && r == 0)
                        r = k;
        }
        w->depth = 0;
        w->in_packet = false;
        if (w->dropping) {
                w->dropping = false;
                writer_note_loss(w);
                return -ENOBUFS;
        }
        writer_put_size(cur_payload(w) + w->frag_off, (uint32_t) (w->cur_off - w->frag_off - SIZE_FIELD));
        if (w->packet_marks_loss)
                w->signal_loss = false;
        return r;
}

void writer_abandon_packet(traced_trace_writer *w) {
        if (!w->in_packet)
                return;
        /* Chunks handed over with a size field still open wait for its
         * patch: send them (what they say no longer matters). */
        while (w->depth > 1)
                (void) traced_msg_end_nested(&w->stack[w->depth - 1]);
        if (!w->dropping && smb_chunk_is_valid(&w->cur))
                writer_put_size(cur_payload(w) + w->frag_off, SMB_PACKET_SIZE_DROP_PACKET);
        w->depth = 0;
        w->in_packet = false;
        w->dropping = false;
        writer_note_loss(w);
}
