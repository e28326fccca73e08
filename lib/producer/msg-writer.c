/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Streaming packets straight into chunks: the writer's chunk is the
 * window of a traced_pb_stream (traced/pbzero.h), which the typed writers
 * and the traced_msg calls fill inline. Each fragment starts with a 4-byte
 * size field; each nested message reserves a 4-byte redundant varint for
 * its length, filled in place when it ends. When a chunk fills up
 * mid-packet (the stream's grow function) the fragment is closed, the size
 * fields of messages still open in the chunk are moved to patch slots and
 * the chunk is handed over flagged as needing patches, and writing goes on
 * in a new chunk. A slot's size, once written, travels to the service as
 * a CommitData patch of the earlier chunk. */

#include <errno.h>
#include <string.h>

#include "basic/macro.h"
#include "producer-internal.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

static uint8_t *cur_payload(traced_trace_writer *w) {
        return smb_chunk_payload(&w->cur);
}

static uint32_t cur_chunk_id(traced_trace_writer *w) {
        return atomic_load_explicit(&smb_chunk_header(&w->cur)->chunk_id, memory_order_relaxed);
}

/* A stream that writes nowhere (no chunk, or the packet is lost). */
static void stream_detach(traced_trace_writer *w) {
        struct traced_pb_stream *s = &w->stream;
        s->begin = s->wp = s->end = w->sink;
}

/* Whether the stream position pos lies in the chunk being written. */
static bool in_cur_chunk(const struct traced_pb_stream *s, uint64_t pos) {
        return pos >= s->before;
}

/* The size fields of the messages still open in the chunk being handed
 * over move to patch slots: the chunk waits in the service for them. */
static void hand_over_open_sizes(traced_trace_writer *w) {
        struct traced_pb_stream *s = &w->stream;
        uint32_t id = cur_chunk_id(w);
        for (struct traced_pb_msg *m = s->root ? s->root->nested : NULL; m; m = m->nested) {
                if (!in_cur_chunk(s, m->start - TRACED_PB_SIZE_FIELD_BYTES))
                        continue; /* an earlier chunk's: already in a slot */
                uint8_t *field = s->begin + (m->start - TRACED_PB_SIZE_FIELD_BYTES - s->before);
                struct patch_slot *slot = NULL;
                for (size_t i = 0; i < ELEMENTSOF(w->slots) && !slot; i++)
                        if (!w->slots[i].used)
                                slot = &w->slots[i];
                if (!slot) {
                        /* Deeper than any packet of ours: lost. */
                        w->slots_overflow = true;
                        m->size_field = w->sink;
                        continue;
                }
                *slot = (struct patch_slot) {
                        .used = true,
                        .chunk_id = id,
                        .offset = (uint32_t) (field - cur_payload(w)),
                };
                m->size_field = slot->data;
                w->cur_flags |= SMB_CHUNK_NEEDS_PATCHING;
        }
}

/* Sends the sizes written into slots (all of them with force: the packet
 * is over, whatever they hold), each saying whether more patches of its
 * chunk follow. */
static void send_patches(traced_trace_writer *w, bool force) {
        for (size_t i = 0; i < ELEMENTSOF(w->slots); i++) {
                struct patch_slot *slot = &w->slots[i];
                if (!slot->used || (!force && slot->data[0] == 0))
                        continue;
                slot->used = false;
                struct pending_patch pt = {
                        .writer_id = w->writer_id,
                        .chunk_id = slot->chunk_id,
                        .target_buffer = w->target_buffer,
                        .offset = slot->offset,
                };
                if (slot->data[0] == 0)
                        traced_pb_put_size_field(slot->data, 0); /* a lost packet's: discarded when read */
                memcpy(pt.data, slot->data, sizeof(pt.data));
                for (size_t k = 0; k < ELEMENTSOF(w->slots); k++)
                        if (w->slots[k].used && w->slots[k].chunk_id == slot->chunk_id)
                                pt.more = true;
                (void) writer_queue_patch(w, &pt);
        }
}

/* The stream's grow function: the packet goes on in the next chunk. When
 * there is none, the chunk goes with its fragment marked dropped: the
 * packet is lost. */
static int32_t chunk_grow(struct traced_pb_stream *s, size_t need) {
        traced_trace_writer *w = s->opaque;
        uint8_t *payload = cur_payload(w);
        uint64_t written = (uint64_t) (s->wp - s->begin);

        w->cur_off = (size_t) (s->wp - payload);
        /* Past the most a writer can carry: given up before it takes the
         * rest of the buffer (its fragments so far are dropped). */
        if (s->before + written + need > writer_max_packet_size(w))
                return -EMSGSIZE;
        int r = writer_continue_in_next_chunk(w, w->frag_off, hand_over_open_sizes);
        if (r < 0) {
                stream_detach(w);
                return r;
        }
        w->cur_count = 1;
        writer_publish_count(w);
        w->frag_off = 0;
        w->cur_off = SMB_PACKET_HEADER_SIZE;
        s->before += written;
        s->begin = s->wp = cur_payload(w) + SMB_PACKET_HEADER_SIZE;
        s->end = cur_payload(w) + smb_chunk_payload_size(&w->cur);
        send_patches(w, false);
        if (w->slots_overflow)
                return -E2BIG;
        return (size_t) (s->end - s->wp) >= MIN(need, (size_t) TRACED_PB_SIZE_FIELD_BYTES) ? 0 : -EMSGSIZE;
}

_public_ int traced_trace_writer_begin_pb_packet(traced_trace_writer *w, struct traced_pb_msg *root) {
        if (!w || !root)
                return -EINVAL;
        writer_note_thread(w);
        if (w->in_packet)
                return -EBUSY;
        if (!writer_alive(w)) {
                writer_note_loss(w);
                return -ENOTCONN;
        }
        writer_begin_write(w);
        if (atomic_load(&w->ended) || w->stop_seen)
                return writer_fail(w, -ESHUTDOWN);
        /* A new packet needs room for its header and one byte. */
        if (!writer_new_packet_fits(w)) {
                int r = writer_start_chunk(w);
                if (r < 0)
                        return writer_fail(w, r);
        }
        w->in_packet = true;
        w->slots_overflow = false;
        w->frag_off = w->cur_off;
        traced_pb_put_size_field(cur_payload(w) + w->frag_off, 0);
        w->cur_off += SMB_PACKET_HEADER_SIZE;
        w->cur_count++;
        writer_publish_count(w);
        w->stream = (struct traced_pb_stream) {
                .begin = cur_payload(w) + w->cur_off,
                .wp = cur_payload(w) + w->cur_off,
                .end = cur_payload(w) + smb_chunk_payload_size(&w->cur),
                .grow = chunk_grow,
                .opaque = w,
        };
        traced_pb_msg_init(root, &w->stream);
        w->packet_marks_loss = false;
        if (w->signal_loss) {
                /* Packets before this one were lost: say so in it. */
                TracePacket_set_previous_packet_dropped((TracePacket *) root, WRITER_LOSS_SMB_FULL);
                w->packet_marks_loss = true;
        }
        return 0;
}

/* The packet ends, written (r 0) or lost (r < 0). */
static int end_packet(traced_trace_writer *w, int r) {
        if (r >= 0) {
                w->cur_off = (size_t) (w->stream.wp - cur_payload(w));
                traced_pb_put_size_field(cur_payload(w) + w->frag_off,
                                         (uint32_t) (w->cur_off - w->frag_off - SMB_PACKET_HEADER_SIZE));
                if (w->packet_marks_loss)
                        w->signal_loss = false;
        } else {
                /* The fragment in a chunk still held says the packet is
                 * lost, and the chunk goes (a reader skips what follows
                 * such a fragment in its chunk); one whose chunk went (no
                 * next chunk) said so then. */
                if (w->stream.begin != w->sink && smb_chunk_is_valid(&w->cur)) {
                        w->cur_off = (size_t) (w->stream.wp - cur_payload(w));
                        traced_pb_put_size_field(cur_payload(w) + w->frag_off, SMB_PACKET_SIZE_DROP_PACKET);
                        (void) writer_complete_chunk(w);
                }
                writer_note_loss(w);
        }
        /* Chunks handed over wait for these, lost packet or not. */
        send_patches(w, true);
        w->stream.root = NULL;
        stream_detach(w);
        w->in_packet = false;
        w->depth = 0;
        return r < 0 ? r : 0;
}

_public_ int traced_trace_writer_end_pb_packet(traced_trace_writer *w, struct traced_pb_msg *root) {
        if (!w || !w->in_packet || !root || root != w->stream.root)
                return -EINVAL;
        int r = end_packet(w, traced_pb_msg_finish(root));
        /* Lost because its instance ended, or written whole while it
         * ended (see traced_trace_writer_write_packet). */
        if (r < 0 ? writer_instance_over(w) : writer_ended_meanwhile(w)) {
                if (r >= 0)
                        writer_note_loss(w);
                return -ESHUTDOWN;
        }
        return r;
}

/* ---- the traced_msg calls, over the same stream ---- */

_public_ int traced_trace_writer_begin_packet(traced_trace_writer *w, traced_msg **ret_root) {
        if (!w || !ret_root || w->in_packet)
                return -EINVAL;
        w->stack[0] = (struct traced_msg) { .w = w, .depth = 0 };
        int r = traced_trace_writer_begin_pb_packet(w, &w->stack[0].pb);
        if (r < 0)
                return r == -EBUSY ? -EINVAL : r;
        w->depth = 1;
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
        traced_pb_msg_varint(&m->pb, field, value);
        return m->w->stream.error;
}

_public_ int traced_msg_append_bytes(traced_msg *m, uint32_t field, const void *data, size_t size) {
        int r = check(m);
        if (r < 0)
                return r;
        traced_pb_msg_bytes(&m->pb, field, data, size);
        return m->w->stream.error;
}

_public_ int traced_msg_begin_nested(traced_msg *m, uint32_t field, traced_msg **ret_child) {
        int r = check(m);
        if (r < 0)
                return r;
        traced_trace_writer *w = m->w;
        if (w->depth >= TRACED_MSG_MAX_DEPTH)
                return -E2BIG;
        struct traced_msg *c = &w->stack[w->depth];
        *c = (struct traced_msg) { .w = w, .depth = w->depth };
        traced_pb_msg_begin_nested(&m->pb, field, &c->pb);
        w->depth++;
        *ret_child = c;
        return w->stream.error;
}

_public_ int traced_msg_end_nested(traced_msg *c) {
        int r = check(c);
        if (r < 0)
                return r;
        if (c->depth == 0)
                return -EINVAL;
        traced_trace_writer *w = c->w;
        traced_pb_msg_end_nested(&w->stack[c->depth - 1].pb, &c->pb);
        w->depth--;
        return w->stream.error;
}

_public_ int traced_trace_writer_end_packet(traced_trace_writer *w) {
        if (!w || !w->in_packet || w->depth == 0)
                return -EINVAL;
        return traced_trace_writer_end_pb_packet(w, &w->stack[0].pb);
}

void writer_abandon_packet(traced_trace_writer *w) {
        if (!w->in_packet)
                return;
        /* Its messages are not touched: a caller that frees the writer
         * mid-packet may have let them go. */
        (void) end_packet(w, -ECANCELED);
}
