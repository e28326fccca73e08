/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Packets into chunks: each fragment is preceded by a 4-byte redundant
 * varint with its size; a packet that does not fit continues in the next
 * chunk of the same writer (chunk flags mark both ends). Packets are handed
 * over whole, so every size is known when written and no chunk ever needs
 * patching afterwards.
 *
 * A packet that cannot get the chunk it continues in is given up: its last
 * fragment is marked with the drop-packet size and the chunk does not say
 * that the packet continues; the next packet written carries
 * previous_packet_dropped. Chunk ids have no gaps: a service waits for the
 * chunk with the next id when a fragment continues, and reads a sequence
 * in chunk id order. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "producer-internal.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

size_t writer_loss_marker(uint8_t buf[static WRITER_LOSS_MARKER_MAX]) {
        struct traced_pb_stream s;
        TracePacket pkt;
        traced_pb_stream_init_buffer(&s, buf, WRITER_LOSS_MARKER_MAX);
        TracePacket_init(&pkt, &s);
        TracePacket_set_previous_packet_dropped(&pkt, WRITER_LOSS_SMB_FULL);
        return (size_t) traced_pb_msg_size(&pkt.msg);
}

int writer_complete_chunk(traced_trace_writer *w) {
        size_t page, idx;

        if (!smb_chunk_is_valid(&w->cur))
                return 0;
        atomic_store_explicit(&smb_chunk_header(&w->cur)->packets, smb_packets_pack(w->cur_count, w->cur_flags),
                              memory_order_release);
        struct smb_chunk c = w->cur;
        w->cur = (struct smb_chunk) {};
        if (smb_chunk_location(&w->abi, &c, &page, &idx) < 0)
                return -EINVAL;
        if (smb_release_chunk_as_complete(&w->abi, &c) < 0)
                return -EBUSY;
        return writer_queue_commit(w, page, idx);
}

void writer_publish_count(traced_trace_writer *w) {
        atomic_store_explicit(&smb_chunk_header(&w->cur)->packets, smb_packets_pack(w->cur_count, w->cur_flags),
                              memory_order_release);
}

bool writer_new_packet_fits(const traced_trace_writer *w) {
        return smb_chunk_is_valid(&w->cur) &&
               smb_chunk_payload_size(&w->cur) - w->cur_off >= SMB_PACKET_HEADER_SIZE + 1 &&
               w->cur_count < SMB_MAX_PACKET_COUNT;
}

size_t writer_max_packet_size(const traced_trace_writer *w) {
        size_t max = TRACED_MAX_PACKET_SIZE;
        /* A writer that does not wait for room has the buffer's chunks
         * and no more: at best every page one chunk, each holding one
         * fragment. Its chunks go to the service only once the packet is
         * written (the loop that sends commits is the caller's, or waits
         * behind it). */
        if (w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_DROP && w->abi.page_size > SMB_PAGE_HEADER_SIZE +
                                                                                        SMB_CHUNK_HEADER_SIZE +
                                                                                        SMB_PACKET_HEADER_SIZE) {
                size_t per_page =
                        w->abi.page_size - SMB_PAGE_HEADER_SIZE - SMB_CHUNK_HEADER_SIZE - SMB_PACKET_HEADER_SIZE;
                max = MIN(max, w->abi.num_pages * per_page);
        }
        return max;
}

void writer_note_loss(traced_trace_writer *w) {
        w->dropped++;
        w->signal_loss = true;
}

int writer_start_chunk(traced_trace_writer *w) {
        /* Ask for the next chunk before handing the current one over, as
         * for a fragment; either way the current one goes to the service.
         * Chunk ids only advance with chunks actually taken: a gap in them
         * is a chunk the service would wait for. */
        struct smb_chunk c = writer_acquire_chunk(w, w->next_chunk_id);
        (void) writer_complete_chunk(w);
        if (!smb_chunk_is_valid(&c))
                return -ENOBUFS;
        w->next_chunk_id++;
        w->cur = c;
        w->cur_off = 0;
        w->cur_count = 0;
        w->cur_flags = 0;
        return 0;
}

int writer_continue_in_next_chunk(traced_trace_writer *w, size_t frag_off, void (*before_release)(traced_trace_writer *w)) {
        struct smb_chunk c = writer_acquire_chunk(w, w->next_chunk_id);
        if (!smb_chunk_is_valid(&c)) {
                /* The rest of the packet has nowhere to go. The fragment
                 * already in the chunk is marked for the service to drop,
                 * and the chunk does not say the packet continues: a
                 * service would wait forever for a chunk that never
                 * comes. */
                traced_pb_put_size_field(smb_chunk_payload(&w->cur) + frag_off, SMB_PACKET_SIZE_DROP_PACKET);
                w->cur_flags &= (uint8_t) ~SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT;
                (void) writer_complete_chunk(w);
                return -ENOBUFS;
        }
        traced_pb_put_size_field(smb_chunk_payload(&w->cur) + frag_off,
                        (uint32_t) (w->cur_off - frag_off - SMB_PACKET_HEADER_SIZE));
        w->cur_flags |= SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT;
        if (before_release)
                before_release(w);
        (void) writer_complete_chunk(w);
        w->next_chunk_id++;
        w->cur = c;
        w->cur_off = 0;
        w->cur_count = 0;
        w->cur_flags = SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV;
        return 0;
}

/* Copies len bytes from offset off of the concatenation of two pieces. */
static void copy_pieces(uint8_t *dst, const uint8_t *a, size_t na, const uint8_t *b, size_t off, size_t len) {
        if (off < na) {
                size_t k = MIN(na - off, len);
                memcpy(dst, a + off, k);
                dst += k;
                len -= k;
                off = na;
        }
        if (len)
                memcpy(dst, b + (off - na), len);
}

_public_ int traced_trace_writer_write_packet(traced_trace_writer *w, const void *packet, size_t size) {
        uint8_t marker[WRITER_LOSS_MARKER_MAX];
        size_t off = 0, n_marker = 0;
        int r;

        if (!w || (!packet && size))
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
        /* After a loss, the packet tells the service (and the trace) that
         * packets before it on this sequence were lost. */
        if (w->signal_loss)
                n_marker = writer_loss_marker(marker);
        size_t total = size + n_marker;
        if (total > writer_max_packet_size(w)) {
                /* Refused whole: no fragment of it takes room, the loss
                 * shows in the next packet. */
                writer_note_loss(w);
                return -EMSGSIZE;
        }

        if (!writer_new_packet_fits(w)) {
                r = writer_start_chunk(w);
                if (r < 0)
                        return writer_fail(w, r);
        }
        for (;;) {
                size_t frag_off = w->cur_off;
                size_t room = smb_chunk_payload_size(&w->cur) - frag_off - SMB_PACKET_HEADER_SIZE;
                size_t take = MIN(room, total - off);
                uint8_t *dst = smb_chunk_payload(&w->cur) + frag_off;
                traced_pb_put_size_field(dst, (uint32_t) take);
                copy_pieces(dst + SMB_PACKET_HEADER_SIZE, packet, size, marker, off, take);
                w->cur_off += SMB_PACKET_HEADER_SIZE + take;
                w->cur_count++;
                writer_publish_count(w);
                off += take;
                if (off == total)
                        break;
                r = writer_continue_in_next_chunk(w, frag_off, NULL);
                if (r < 0)
                        return writer_fail(w, r);
        }
        /* Written, but its instance ended meanwhile (a writer of
         * another thread): the session may not have it. */
        if (writer_ended_meanwhile(w))
                return writer_fail(w, -ESHUTDOWN);
        if (n_marker)
                w->signal_loss = false;
        return 0;
}

_public_ int traced_trace_writer_flush(traced_trace_writer *w) {
        if (!w)
                return -EINVAL;
        writer_note_thread(w);
        /* A packet being written cannot be handed over half done. */
        if (w->in_packet)
                return -EBUSY;
        int r = writer_complete_chunk(w);
        if (r < 0)
                return r;
        return producer_commit(w->producer, 0);
}

_public_ uint64_t traced_trace_writer_dropped(const traced_trace_writer *w) {
        return w ? w->dropped : 0;
}

_public_ int traced_producer_new_writer(traced_producer *p, uint64_t instance_id, traced_trace_writer **ret) {
        if (!p || !ret)
                return -EINVAL;
        traced_trace_writer *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;

        pthread_mutex_lock(&p->lock);
        struct producer_instance *inst = producer_find_instance(p, instance_id);
        if (!inst || !atomic_load(&p->ready)) {
                pthread_mutex_unlock(&p->lock);
                free(w);
                return inst ? -ENOTCONN : -ENOENT;
        }
        uint16_t id = 0;
        for (unsigned tries = 0; tries < SMB_MAX_WRITER_ID && !id; tries++) {
                uint16_t cand = (uint16_t) (p->last_writer_id % SMB_MAX_WRITER_ID + 1);
                p->last_writer_id = cand;
                bool used = false;
                for (traced_trace_writer *o = p->writers; o && !used; o = o->next)
                        used = o->writer_id == cand;
                if (!used)
                        id = cand;
        }
        if (!id) {
                pthread_mutex_unlock(&p->lock);
                free(w);
                return -EMFILE;
        }
        *w = (traced_trace_writer) {
                .producer = p,
                .abi = p->abi,
                .generation = atomic_load(&p->generation),
                .exhausted_policy = inst->exhausted_policy,
                .ends_at_stop = !inst->notify_on_stop,
                .instance_id = instance_id,
                .target_buffer = inst->target_buffer,
                .writer_id = id,
        };
        w->next = p->writers;
        p->writers = w;
        pthread_mutex_unlock(&p->lock);
        *ret = w;
        return 0;
}

_public_ traced_trace_writer *traced_trace_writer_free(traced_trace_writer *w) {
        if (!w)
                return NULL;
        traced_producer *p = w->producer;
        /* Freed in the middle of a packet: the packet is lost, and the
         * service is told so rather than left waiting for its end. */
        if (w->in_packet)
                writer_abandon_packet(w);
        (void) traced_trace_writer_flush(w);
        pthread_mutex_lock(&p->lock);
        for (traced_trace_writer **pp = &p->writers; *pp; pp = &(*pp)->next)
                if (*pp == w) {
                        *pp = w->next;
                        break;
                }
        free(w);
        producer_release_retired(p);
        pthread_mutex_unlock(&p->lock);
        return NULL;
}
