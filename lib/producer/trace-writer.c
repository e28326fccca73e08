/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Packets into chunks: each fragment is preceded by a 4-byte redundant
 * varint with its size; a packet that does not fit continues in the next
 * chunk of the same writer (chunk flags mark both ends). Packets are handed
 * over whole, so every size is known when written and no chunk ever needs
 * patching afterwards. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "producer-internal.h"

static void put_size(uint8_t *dst, uint32_t v) {
        dst[0] = (uint8_t) ((v & 0x7f) | 0x80);
        dst[1] = (uint8_t) (((v >> 7) & 0x7f) | 0x80);
        dst[2] = (uint8_t) (((v >> 14) & 0x7f) | 0x80);
        dst[3] = (uint8_t) ((v >> 21) & 0x7f);
}

static int complete_chunk(traced_trace_writer *w) {
        size_t page, idx;

        if (!smb_chunk_is_valid(&w->cur))
                return 0;
        atomic_store_explicit(&smb_chunk_header(&w->cur)->packets, smb_packets_pack(w->cur_count, w->cur_flags),
                              memory_order_release);
        if (smb_chunk_location(&w->abi, &w->cur, &page, &idx) < 0)
                return -EINVAL;
        if (smb_release_chunk_as_complete(&w->abi, &w->cur) < 0)
                return -EBUSY;
        w->cur = (struct smb_chunk) {};
        return writer_queue_commit(w, page, idx);
}

static int next_chunk(traced_trace_writer *w) {
        int r = complete_chunk(w);
        if (r < 0)
                return r;
        /* A chunk id gap tells the service (and the trace) that packets
         * were lost on this sequence. */
        if (w->lost_since_last_chunk) {
                w->next_chunk_id++;
                w->lost_since_last_chunk = false;
        }
        struct smb_chunk c = writer_acquire_chunk(w, w->next_chunk_id);
        if (!smb_chunk_is_valid(&c))
                return -ENOBUFS;
        w->next_chunk_id++;
        w->cur = c;
        w->cur_off = 0;
        w->cur_count = 0;
        w->cur_flags = 0;
        return 0;
}

_public_ int traced_trace_writer_write_packet(traced_trace_writer *w, const void *packet, size_t size) {
        const uint8_t *data = packet;
        size_t off = 0;
        bool continuing = false;
        int r;

        if (!w || (!packet && size))
                return -EINVAL;
        writer_note_thread(w);
        if (!writer_alive(w)) {
                w->dropped++;
                return -ENOTCONN;
        }
        if (size >= SMB_PACKET_SIZE_DROP_PACKET)
                return -EMSGSIZE;

        do {
                bool full = !smb_chunk_is_valid(&w->cur) ||
                            smb_chunk_payload_size(&w->cur) - w->cur_off < SMB_PACKET_HEADER_SIZE + 1 ||
                            w->cur_count >= SMB_MAX_PACKET_COUNT;
                if (full) {
                        r = next_chunk(w);
                        if (r < 0) {
                                /* Give up on the packet (no free chunk, or
                                 * the service is gone). Fragments already
                                 * written end a chain the service drops as
                                 * incomplete. */
                                w->dropped++;
                                w->lost_since_last_chunk = true;
                                return r;
                        }
                        if (continuing)
                                w->cur_flags |= SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV;
                }
                size_t room = smb_chunk_payload_size(&w->cur) - w->cur_off - SMB_PACKET_HEADER_SIZE;
                size_t take = MIN(room, size - off);
                uint8_t *dst = smb_chunk_payload(&w->cur) + w->cur_off;
                put_size(dst, (uint32_t) take);
                memcpy(dst + SMB_PACKET_HEADER_SIZE, data + off, take);
                w->cur_off += SMB_PACKET_HEADER_SIZE + take;
                w->cur_count++;
                off += take;
                if (off < size) {
                        w->cur_flags |= SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT;
                        w->cur_off = smb_chunk_payload_size(&w->cur); /* the next fragment starts a new chunk */
                        continuing = true;
                }
        } while (off < size);
        return 0;
}

_public_ int traced_trace_writer_flush(traced_trace_writer *w) {
        if (!w)
                return -EINVAL;
        writer_note_thread(w);
        int r = complete_chunk(w);
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
