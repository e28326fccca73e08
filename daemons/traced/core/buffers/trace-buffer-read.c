/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The trace buffer's read half: packets handed out in place, fragment
 * chains reassembled across chunks. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "basic/varint.h"
#include "core/buffers/trace-buffer-internal.h"

void trace_buffer_begin_read(struct trace_buffer *tb) {
        tb_release_retired(tb);
        tb->read_seq = tb->seqs;
}

int tb_fragment_header(const uint8_t *payload, size_t size, size_t off, size_t *ret_data_off, uint32_t *ret_size) {
        uint64_t v = 0;
        size_t p = off;
        /* At most 5 bytes: a fragment's size fits 32 bits. */
        for (unsigned i = 0;; i++) {
                if (p >= size || i > 4)
                        return -EBADMSG;
                int r = varint_push_byte(&v, i, __atomic_load_n(&payload[p++], __ATOMIC_RELAXED), true);
                if (r < 0)
                        return -EBADMSG;
                if (r > 0)
                        break;
        }
        if (v > UINT32_MAX)
                return -EBADMSG;
        if (v != SMB_PACKET_SIZE_DROP_PACKET && v > size - p)
                return -EBADMSG;
        *ret_data_off = p;
        *ret_size = (uint32_t) v;
        return 0;
}

/* The same at the read offset of a stored chunk. */
static int fragment_at(const struct tb_chunk *c, size_t off, size_t *ret_data_off, uint32_t *ret_size) {
        return tb_fragment_header(c->payload, c->size, off, ret_data_off, ret_size);
}

/* Room for n slices in tb->iov. */
static int iov_reserve(struct trace_buffer *tb, size_t n) {
        return GREEDY_REALLOC(tb->iov, tb->iov_cap, n);
}

/* Skips the fragment being read in c and marks the loss. */
static void skip_fragment(struct tb_chunk *c, size_t next_off) {
        c->read_off = next_off;
        c->fragments_read++;
        c->seq->data_lost = true;
}

static void abandon_chunk(struct trace_buffer *tb, struct tb_chunk *c) {
        c->fragments_read = c->num_fragments;
        c->read_off = c->size;
        c->seq->data_lost = true;
        tb->stats.abi_violations++;
}

enum chain_result {
        CHAIN_DONE,    /* packet assembled */
        CHAIN_WAIT,    /* the rest has not arrived yet */
        CHAIN_BROKEN,  /* the chain is broken: drop the start */
        CHAIN_DROPPED, /* the writer gave the packet up: drop the start */
};

/* A packet written across chunks: where it starts (its first fragment,
 * the last one of a chunk) and, once reassembled, where it ends. */
struct fragment_chain {
        size_t start_idx; /* the starting chunk, as an index into its sequence */
        size_t data_off;  /* the first fragment's data in that chunk */
        uint32_t size;    /* and its size */
        size_t len;       /* out: the packet's size */
        size_t n_slices;  /* out: its slices in tb->iov */
        size_t end_idx;   /* out: the chunk holding its last fragment */
        size_t end_off;   /* out: where that fragment ends in it */
};

/* Finds the rest of the packet chain starts in the chunks that follow in
 * s, as slices in tb->iov (nothing is copied); fills the out fields on
 * CHAIN_DONE. */
static enum chain_result reassemble_fragment_chain(struct trace_buffer *tb, struct tb_seq *s,
                                                   struct fragment_chain *chain) {
        struct tb_chunk *c = s->chunks[chain->start_idx];
        size_t len = chain->size, n_slices = 0;

        if (iov_reserve(tb, 1) < 0)
                return CHAIN_BROKEN;
        if (chain->size > 0)
                tb->iov[n_slices++] = (struct iovec) { .iov_base = c->payload + chain->data_off,
                                                       .iov_len = chain->size };
        uint32_t expect = c->chunk_id + 1;
        for (size_t i = chain->start_idx + 1;; i++) {
                if (i >= s->n)
                        return CHAIN_WAIT;
                struct tb_chunk *n = s->chunks[i];
                /* A gap: the rest of the packet was lost (chunks of one
                 * writer are committed in order). */
                if (n->chunk_id != expect)
                        return CHAIN_BROKEN;
                if (!(n->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV) || n->num_fragments == 0)
                        return CHAIN_BROKEN;
                if ((n->flags & SMB_CHUNK_NEEDS_PATCHING) && !tb->final)
                        return CHAIN_WAIT;
                bool only = n->num_fragments == 1;
                bool cont = only && (n->flags & SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT);
                /* The final read: the patches this chunk waited for never
                 * came. They were for the packet going on into the next
                 * chunk, ours when it is the chunk's only fragment: it is
                 * lost rather than read with sizes never written. */
                if (cont && (n->flags & SMB_CHUNK_NEEDS_PATCHING))
                        return CHAIN_BROKEN;
                if (only && !n->complete && !tb->final)
                        return CHAIN_WAIT;
                size_t doff;
                uint32_t fsize;
                if (fragment_at(n, 0, &doff, &fsize) < 0)
                        return CHAIN_BROKEN;
                /* The chain ends as the ABI allows: the packet is lost, the
                 * sequence goes on (the loss is counted when that chunk is
                 * read). */
                if (fsize == SMB_PACKET_SIZE_DROP_PACKET)
                        return CHAIN_DROPPED;
                if (len + fsize > MAX_PACKET_SIZE || iov_reserve(tb, n_slices + 1) < 0)
                        return CHAIN_BROKEN;
                if (fsize > 0)
                        tb->iov[n_slices++] = (struct iovec) { .iov_base = n->payload + doff, .iov_len = fsize };
                len += fsize;
                if (!cont) {
                        chain->len = len;
                        chain->n_slices = n_slices;
                        chain->end_idx = i;
                        chain->end_off = doff + fsize;
                        return CHAIN_DONE;
                }
                expect++;
        }
}

/* 1: a packet from s, as *ret_n_slices slices in tb->iov (pointing into
 * the chunks); 0: nothing ready in s; -ENOMEM. */
int tb_seq_next_packet(struct trace_buffer *tb, struct tb_seq *s, size_t *ret_n_slices, size_t *ret_len,
                       bool *ret_lost) {
        for (;;) {
                struct tb_chunk *c = tb_seq_first(s);
                if (!c)
                        return 0;
                if (c->fragments_read == 0 && c->read_off == 0 && s->have_last &&
                    c->chunk_id != s->last_chunk_id + 1) {
                        /* A chunk id gap: data was lost on this sequence. */
                        s->data_lost = true;
                        s->last_chunk_id = c->chunk_id - 1;
                }
                if ((c->flags & SMB_CHUNK_NEEDS_PATCHING) && !tb->final)
                        return 0;
                if (c->fragments_read >= c->num_fragments) {
                        if (!c->complete && !tb->final)
                                return 0; /* scraped: more fragments may come */
                        tb_chunk_consumed(tb, c);
                        continue;
                }
                bool last = c->fragments_read + 1 == c->num_fragments;
                if (last && !c->complete && !tb->final)
                        return 0; /* the writer may still be filling it */

                size_t doff;
                uint32_t size;
                if (fragment_at(c, c->read_off, &doff, &size) < 0) {
                        abandon_chunk(tb, c);
                        continue;
                }
                if (size == SMB_PACKET_SIZE_DROP_PACKET) {
                        skip_fragment(c, c->size);
                        tb->stats.trace_writer_packet_loss++;
                        c->fragments_read = c->num_fragments;
                        continue;
                }
                size_t next_off = doff + size;
                bool from_prev = c->fragments_read == 0 && (c->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV);
                bool to_next = last && (c->flags & SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT);
                if (last && c->last_torn) {
                        /* The start of a packet its writer gave up
                         * (tb_drop_torn_chain): counted then. */
                        skip_fragment(c, next_off);
                        continue;
                }
                if (from_prev) {
                        /* The rest of a packet whose start we never saw. */
                        skip_fragment(c, next_off);
                        continue;
                }
                if (!to_next) {
                        c->read_off = next_off;
                        c->fragments_read++;
                        if (size == 0)
                                continue;
                        /* Whole in this chunk: handed out in place. */
                        if (iov_reserve(tb, 1) < 0)
                                return -ENOMEM;
                        tb->iov[0] = (struct iovec) { .iov_base = c->payload + doff, .iov_len = size };
                        tb->unfinished = last && !c->complete;
                        *ret_n_slices = 1;
                        *ret_len = size;
                        *ret_lost = s->data_lost;
                        s->data_lost = false;
                        return 1;
                }

                if (c->flags & SMB_CHUNK_NEEDS_PATCHING) {
                        /* The final read, and the patches of the packet
                         * this chunk ends with never came: lost, as in
                         * the chain above. */
                        tb->stats.readaheads_failed++;
                        skip_fragment(c, next_off);
                        continue;
                }
                struct fragment_chain chain = { .start_idx = s->head, .data_off = doff, .size = size };
                switch (reassemble_fragment_chain(tb, s, &chain)) {
                case CHAIN_WAIT:
                        if (!tb->final)
                                return 0;
                        _fallthrough_;
                case CHAIN_BROKEN:
                        tb->stats.readaheads_failed++;
                        skip_fragment(c, next_off);
                        continue;
                case CHAIN_DROPPED:
                        skip_fragment(c, next_off);
                        continue;
                case CHAIN_DONE:
                        break;
                }
                tb->stats.readaheads_succeeded++;
                /* Consume: the start chunk, every chunk in between (their
                 * memory kept until the next call: the slices point into
                 * it), and the first fragment of the end chunk. */
                c->read_off = next_off;
                c->fragments_read++;
                struct tb_chunk *end = s->chunks[chain.end_idx];
                while (tb_seq_first(s) != end)
                        tb_chunk_consumed_retired(tb, tb_seq_first(s));
                end->read_off = chain.end_off;
                end->fragments_read = 1;
                tb->unfinished = end->num_fragments == 1 && !end->complete;
                *ret_n_slices = chain.n_slices;
                *ret_len = chain.len;
                *ret_lost = s->data_lost;
                s->data_lost = false;
                return 1;
        }
}

int trace_buffer_read_next_packet(struct trace_buffer *tb, struct trace_buffer_packet *ret,
                                  struct trace_buffer_packet_info *ret_info) {
        tb_release_retired(tb);
        while (tb->read_seq) {
                struct tb_seq *s = tb->read_seq;
                size_t n_slices, len;
                bool lost;
                int r = tb_seq_next_packet(tb, s, &n_slices, &len, &lost);
                if (r < 0)
                        return r;
                if (r > 0) {
                        ret->slices = tb->iov;
                        ret->n_slices = n_slices;
                        ret->size = len;
                        *ret_info = tb_seq_info(tb, s, lost);
                        tb->stats.bytes_read += len;
                        return 1;
                }
                tb->read_seq = s->next;
        }
        return 0;
}

size_t trace_buffer_packet_gather(const struct trace_buffer_packet *p, uint8_t *dst, size_t cap) {
        size_t n = 0;
        for (size_t i = 0; i < p->n_slices && n < cap; i++) {
                size_t k = MIN(p->slices[i].iov_len, cap - n);
                memcpy(dst + n, p->slices[i].iov_base, k);
                n += k;
        }
        return n;
}
