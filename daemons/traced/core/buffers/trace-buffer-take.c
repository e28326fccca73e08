/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The trace buffer's take half: a committed chunk's sequence read at
 * once from the producer's memory, what is left of it kept. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "core/buffers/trace-buffer-internal.h"

/* Gives up on the rest of the chunk being taken: the sequence goes on
 * after it, marked as having lost data. */
static void drop_rest(struct tb_chunk *ext) {
        struct tb_seq *s = ext->seq;
        tb_seq_remove(s, ext);
        s->data_lost = true;
        if (tb_seq_count(s) == 0) {
                s->have_last = true;
                s->last_chunk_id = ext->chunk_id;
        }
}

/* Keeps what was not read of the chunk being taken (the start of a packet
 * that goes on in the next chunk, or fragments waiting for a patch): its
 * unread bytes are copied into a stored chunk that replaces it. */
static int keep_rest(struct trace_buffer *tb, struct tb_chunk *ext) {
        struct tb_seq *s = ext->seq;
        size_t cost = ext->size + TRACE_BUFFER_CHUNK_OVERHEAD;
        struct tb_chunk *c = NULL;
        if (cost <= tb->capacity && tb_make_room(tb, cost) == 0)
                c = tb_chunk_alloc(tb, ext->size);
        size_t pos = s->head;
        while (pos < s->n && s->chunks[pos] != ext)
                pos++;
        if (!c) {
                /* No room by the policy (or no memory): the rest is lost. */
                drop_rest(ext);
                tb->stats.chunks_discarded++;
                return 0;
        }
        uint8_t *payload = c->payload;
        size_t cap = c->payload_cap;
        *c = *ext;
        c->payload = payload;
        c->payload_cap = cap;
        c->external = false;
        c->cost = cost;
        memcpy(c->payload + c->read_off, ext->payload + ext->read_off, ext->size - ext->read_off);
        s->chunks[pos] = c;
        tb_fifo_append(tb, c);
        tb->used += cost;
        return 0;
}

/* Whether ext is still in its sequence (not read to its end). */
static bool ext_in_seq(const struct tb_chunk *ext) {
        bool found;
        size_t pos = tb_seq_search(ext->seq, ext->chunk_id, &found);
        return found && ext->seq->chunks[pos] == ext;
}

static void held_put_spare(struct trace_buffer *tb, struct tb_chunk *ext) {
        ext->fifo_next = tb->held_spare;
        tb->held_spare = ext;
}

int trace_buffer_take_chunk(struct trace_buffer *tb, const struct trace_buffer_chunk *in, trace_buffer_take_fn fn,
                            void *userdata) {
        tb_release_retired(tb);
        /* Anything else is for copy_chunk, which counts what it refuses. */
        if (!in->complete || (in->flags & SMB_CHUNK_NEEDS_PATCHING) || in->payload_size > MAX_CHUNK_PAYLOAD ||
            in->num_fragments > SMB_MAX_PACKET_COUNT)
                return 0;
        struct tb_seq *s = tb_seq_get(tb, in);
        if (!s)
                return 0;
        /* It must follow what the sequence holds (or was read up to): a
         * duplicate, a gap or an early chunk are the buffer's to sort out. */
        struct tb_chunk *last = tb_seq_count(s) > 0 ? s->chunks[s->n - 1] : NULL;
        if (last ? in->chunk_id != last->chunk_id + 1 : s->have_last && in->chunk_id != s->last_chunk_id + 1)
                return 0;

        /* On the stack unless it may outlive this call. */
        struct tb_chunk on_stack, *ext = &on_stack;
        bool hold = in->payload_stays;
        if (hold) {
                if (tb->held_spare) {
                        ext = tb->held_spare;
                        tb->held_spare = ext->fifo_next;
                } else if (!(ext = malloc(sizeof(*ext)))) {
                        ext = &on_stack;
                        hold = false;
                }
        }
        *ext = (struct tb_chunk) {
                .seq = s,
                .chunk_id = in->chunk_id,
                .num_fragments = in->num_fragments,
                .flags = in->flags,
                .complete = true,
                .external = true,
                .size = in->payload_size,
                .payload = (uint8_t *) in->payload,
        };
        if (tb_seq_insert(s, s->n, ext) < 0) {
                if (hold)
                        held_put_spare(tb, ext);
                return 0;
        }
        tb->stats.chunks_written++;
        tb->stats.bytes_written += in->payload_size;

        /* Read the sequence now, as a read pass would. */
        int r = 0;
        for (;;) {
                size_t n_slices, len;
                bool lost;
                r = tb_seq_next_packet(tb, s, &n_slices, &len, &lost);
                if (r <= 0)
                        break;
                tb->stats.bytes_read += len;
                struct trace_buffer_packet_info info = tb_seq_info(tb, s, lost);
                r = fn(tb->iov, n_slices, len, &info, userdata);
                if (r < 0)
                        break;
        }
        /* Nothing may point at an ext on the stack once this returns. */
        tb_release_retired(tb);
        if (ext_in_seq(ext)) {
                if (r < 0)
                        drop_rest(ext);
                else if (hold) {
                        ext->fifo_next = tb->held;
                        tb->held = ext;
                        return 2;
                } else
                        r = keep_rest(tb, ext);
        }
        if (hold)
                held_put_spare(tb, ext);
        return r < 0 ? r : 1;
}

void trace_buffer_settle(struct trace_buffer *tb) {
        tb_release_retired(tb);
        while (tb->held) {
                struct tb_chunk *ext = tb->held;
                tb->held = ext->fifo_next;
                if (ext_in_seq(ext))
                        (void) keep_rest(tb, ext);
                held_put_spare(tb, ext);
        }
}
