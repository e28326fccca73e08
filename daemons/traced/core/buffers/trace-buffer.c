/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The trace buffer's store: chunks by sequence and arrival, the byte
 * budget and eviction, the pool of released chunks, patches, clones. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "core/buffers/trace-buffer-internal.h"

int trace_buffer_new(size_t size, enum trace_buffer_policy policy, struct trace_buffer **ret) {
        if (size < TRACE_BUFFER_MIN_SIZE)
                return -EINVAL;
        struct trace_buffer *tb = calloc(1, sizeof(*tb));
        if (!tb)
                return -ENOMEM;
        tb->policy = policy;
        tb->capacity = size;
        tb->stats.buffer_size = size;
        *ret = tb;
        return 0;
}

static void chunk_free(struct tb_chunk *c) {
        free(c->payload);
        free(c);
}

static void chunk_list_free(struct tb_chunk *c) {
        while (c) {
                struct tb_chunk *next = c->fifo_next;
                chunk_free(c);
                c = next;
        }
}

/* Held chunks own no payload. */
static void held_list_free(struct tb_chunk *c) {
        while (c) {
                struct tb_chunk *next = c->fifo_next;
                free(c);
                c = next;
        }
}

void trace_buffer_free(struct trace_buffer *tb) {
        if (!tb)
                return;
        chunk_list_free(tb->fifo_head);
        chunk_list_free(tb->pool);
        chunk_list_free(tb->retired);
        held_list_free(tb->held);
        held_list_free(tb->held_spare);
        while (tb->seqs) {
                struct tb_seq *s = tb->seqs;
                tb->seqs = s->next;
                free(s->chunks);
                free(s);
        }
        free(tb->iov);
        free(tb);
}

const struct trace_buffer_stats *trace_buffer_get_stats(const struct trace_buffer *tb) {
        return &tb->stats;
}

size_t trace_buffer_used_bytes(const struct trace_buffer *tb) {
        return tb->used;
}

void trace_buffer_set_final(struct trace_buffer *tb, bool final) {
        tb->final = final;
}

static unsigned bucket(uint16_t producer_id, uint16_t writer_id) {
        return (((unsigned) producer_id * 2654435761u) ^ writer_id) % SEQ_BUCKETS;
}

static struct tb_seq *seq_find(struct trace_buffer *tb, uint16_t producer_id, uint16_t writer_id) {
        for (struct tb_seq *s = tb->buckets[bucket(producer_id, writer_id)]; s; s = s->hnext)
                if (s->producer_id == producer_id && s->writer_id == writer_id)
                        return s;
        return NULL;
}

struct tb_seq *tb_seq_get(struct trace_buffer *tb, const struct trace_buffer_chunk *c) {
        struct tb_seq *s = seq_find(tb, c->producer_id, c->writer_id);
        if (s)
                return s;
        if (tb->n_seqs >= MAX_SEQUENCES)
                return NULL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->producer_id = c->producer_id;
        s->writer_id = c->writer_id;
        s->uid = c->producer_uid;
        s->machine_id = c->machine_id;
        s->pid = c->producer_pid;
        unsigned b = bucket(c->producer_id, c->writer_id);
        s->hnext = tb->buckets[b];
        tb->buckets[b] = s;
        if (tb->seqs_tail)
                tb->seqs_tail->next = s;
        else
                tb->seqs = s;
        tb->seqs_tail = s;
        tb->n_seqs++;
        return s;
}

/* Index of chunk_id among live entries, or where it would go. */
size_t tb_seq_search(const struct tb_seq *s, uint32_t chunk_id, bool *ret_found) {
        size_t lo = s->head, hi = s->n;
        /* Fast path: appending. */
        if (hi > lo && tb_id_cmp(chunk_id, s->chunks[hi - 1]->chunk_id) > 0) {
                *ret_found = false;
                return hi;
        }
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int32_t c = tb_id_cmp(s->chunks[mid]->chunk_id, chunk_id);
                if (c == 0) {
                        *ret_found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = false;
        return lo;
}

int tb_seq_insert(struct tb_seq *s, size_t pos, struct tb_chunk *c) {
        if (s->n == s->cap) {
                if (s->head > 0) {
                        memmove(s->chunks, s->chunks + s->head, tb_seq_count(s) * sizeof(*s->chunks));
                        pos -= s->head;
                        s->n -= s->head;
                        s->head = 0;
                } else if (GREEDY_REALLOC(s->chunks, s->cap, s->n + 1) < 0)
                        return -ENOMEM;
        }
        memmove(s->chunks + pos + 1, s->chunks + pos, (s->n - pos) * sizeof(*s->chunks));
        s->chunks[pos] = c;
        s->n++;
        return 0;
}

/* Keeps the index proportional to the chunks it holds: an array that grew
 * for a burst is given back once most of its entries are gone. The first
 * 16 entries stay: a sequence whose chunks are taken as they arrive holds
 * one at a time, and must not allocate for each. */
static void seq_shrink(struct tb_seq *s) {
        size_t live = tb_seq_count(s);
        if (live == 0) {
                if (s->cap > 16) {
                        free(s->chunks);
                        s->chunks = NULL;
                        s->cap = 0;
                }
                s->head = s->n = 0;
                return;
        }
        if (s->cap <= 16 || live > s->cap / 4)
                return;
        memmove(s->chunks, s->chunks + s->head, live * sizeof(*s->chunks));
        s->head = 0;
        s->n = live;
        struct tb_chunk **a = realloc(s->chunks, (s->cap / 2) * sizeof(*a));
        if (a) { /* on failure the larger array simply stays */
                s->chunks = a;
                s->cap /= 2;
        }
}

void tb_seq_remove(struct tb_seq *s, struct tb_chunk *c) {
        if (tb_seq_first(s) == c)
                s->head++;
        else
                for (size_t i = s->head; i < s->n; i++)
                        if (s->chunks[i] == c) {
                                memmove(s->chunks + i, s->chunks + i + 1, (s->n - i - 1) * sizeof(*s->chunks));
                                s->n--;
                                break;
                        }
        seq_shrink(s);
}

static void fifo_unlink(struct trace_buffer *tb, struct tb_chunk *c) {
        if (c->fifo_prev)
                c->fifo_prev->fifo_next = c->fifo_next;
        else
                tb->fifo_head = c->fifo_next;
        if (c->fifo_next)
                c->fifo_next->fifo_prev = c->fifo_prev;
        else
                tb->fifo_tail = c->fifo_prev;
}

/* Keeps a chunk that left the buffer for reuse, or frees it. */
void tb_chunk_recycle(struct trace_buffer *tb, struct tb_chunk *c) {
        if (tb->pool_n >= POOL_MAX_CHUNKS || tb->pool_bytes + c->payload_cap > tb->capacity / 8) {
                chunk_free(c);
                return;
        }
        c->fifo_next = tb->pool;
        tb->pool = c;
        tb->pool_n++;
        tb->pool_bytes += c->payload_cap;
}

/* A chunk with room for size payload bytes, from the pool if it has one
 * (its payload contents are stale), NULL on ENOMEM. */
struct tb_chunk *tb_chunk_alloc(struct trace_buffer *tb, size_t size) {
        while (tb->pool) {
                struct tb_chunk *c = tb->pool;
                tb->pool = c->fifo_next;
                tb->pool_n--;
                tb->pool_bytes -= c->payload_cap;
                if (c->payload_cap >= size) {
                        uint8_t *payload = c->payload;
                        size_t cap = c->payload_cap;
                        *c = (struct tb_chunk) { .payload = payload, .payload_cap = cap };
                        return c;
                }
                chunk_free(c); /* sizes changed: let the pool refill */
        }
        struct tb_chunk *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->payload_cap = size ? size : 1;
        c->payload = malloc(c->payload_cap);
        if (!c->payload) {
                free(c);
                return NULL;
        }
        return c;
}

/* Drops a chunk from the buffer (into the pool). */
static void chunk_delete(struct trace_buffer *tb, struct tb_chunk *c) {
        tb_seq_remove(c->seq, c);
        if (c->external)
                return;
        fifo_unlink(tb, c);
        tb->used -= c->cost;
        tb_chunk_recycle(tb, c);
}

/* Consumes the first chunk of its sequence after reading it (a packet
 * handed out in place from it was taken by the previous call). */
static void mark_consumed(struct trace_buffer *tb, struct tb_chunk *c) {
        c->seq->have_last = true;
        c->seq->last_chunk_id = c->chunk_id;
        tb->stats.chunks_read++;
}

void tb_chunk_consumed(struct trace_buffer *tb, struct tb_chunk *c) {
        mark_consumed(tb, c);
        chunk_delete(tb, c);
}

/* The same for a chunk the packet being handed out still points into: it
 * leaves the buffer now, its memory at the next call (tb_release_retired). */
void tb_chunk_consumed_retired(struct trace_buffer *tb, struct tb_chunk *c) {
        mark_consumed(tb, c);
        tb_seq_remove(c->seq, c);
        if (c->external)
                return; /* the caller's: it outlives the packet */
        fifo_unlink(tb, c);
        tb->used -= c->cost;
        c->fifo_next = tb->retired;
        tb->retired = c;
}

static void evict_chunk(struct trace_buffer *tb, struct tb_chunk *c) {
        struct tb_seq *s = c->seq;
        if (c->fragments_read < c->num_fragments || !c->complete)
                s->data_lost = true;
        /* Reading resumes after it: everything up to it is gone. */
        if (!s->have_last || tb_id_cmp(c->chunk_id, s->last_chunk_id) > 0) {
                if (tb_seq_first(s) == c) {
                        s->have_last = true;
                        s->last_chunk_id = c->chunk_id;
                }
        }
        tb->stats.chunks_overwritten++;
        tb->stats.bytes_overwritten += c->size;
        chunk_delete(tb, c);
}

static void evict_oldest(struct trace_buffer *tb) {
        evict_chunk(tb, tb->fifo_head);
}

/* Makes room for cost more bytes: 0, or -ENOSPC when the policy keeps
 * what is there (discard, or nothing left to overwrite). */
int tb_make_room(struct trace_buffer *tb, size_t cost) {
        while (tb->used + cost > tb->capacity) {
                if (tb->policy == TRACE_BUFFER_DISCARD || !tb->fifo_head)
                        return -ENOSPC;
                evict_oldest(tb);
                tb->stats.write_wrap_count++;
        }
        return 0;
}

/* Appends a stored chunk to the arrival order. */
void tb_fifo_append(struct trace_buffer *tb, struct tb_chunk *c) {
        c->fifo_prev = tb->fifo_tail;
        c->fifo_next = NULL;
        if (tb->fifo_tail)
                tb->fifo_tail->fifo_next = c;
        else
                tb->fifo_head = c;
        tb->fifo_tail = c;
}

/* Whether in's first fragment gives up the packet the chunks before it
 * carry. */
static bool ends_torn_chain(const struct trace_buffer_chunk *in) {
        size_t doff;
        uint32_t size;
        return (in->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV) && in->num_fragments > 0 &&
               tb_fragment_header(in->payload, in->payload_size, 0, &doff, &size) == 0 &&
               size == SMB_PACKET_SIZE_DROP_PACKET;
}

void tb_drop_torn_chain(struct trace_buffer *tb, const struct trace_buffer_chunk *in) {
        if (!ends_torn_chain(in))
                return;
        struct tb_seq *s = seq_find(tb, in->producer_id, in->writer_id);
        if (!s)
                return;
        bool found;
        size_t pos = tb_seq_search(s, in->chunk_id, &found);
        if (found)
                return; /* a copy of it is there: this was done then */
        /* Backwards from the chunk before it: each chunk holding only a
         * middle fragment goes (those the buffer had no room for left a
         * gap: the ones before it are of the same packet all the same),
         * and the one the packet starts in keeps the packets before it. */
        bool first = true;
        while (pos > s->head) {
                struct tb_chunk *c = s->chunks[pos - 1];
                if (c->external || !(c->flags & SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT) ||
                    c->fragments_read >= c->num_fragments)
                        break;
                if (c->num_fragments == 1 && (c->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV) &&
                    c->fragments_read == 0) {
                        /* The patches its writer still sends for it are
                         * let go quietly (trace_buffer_try_patch). */
                        if (first)
                                s->torn_last = c->chunk_id;
                        first = false;
                        s->torn_first = c->chunk_id;
                        s->have_torn = true;
                        chunk_delete(tb, c);
                        pos--;
                        continue;
                }
                c->last_torn = true;
                break;
        }
        /* The chunk that ends the packet is then read after a gap (the
         * loss is marked on the next packet) and counts it as its
         * writer's loss. */
}

int trace_buffer_copy_chunk(struct trace_buffer *tb, const struct trace_buffer_chunk *in) {
        tb_release_retired(tb);
        if (in->payload_size > MAX_CHUNK_PAYLOAD || in->num_fragments > SMB_MAX_PACKET_COUNT) {
                tb->stats.abi_violations++;
                return -EINVAL;
        }
        /* Before it takes room: what a torn packet left goes first. */
        tb_drop_torn_chain(tb, in);
        struct tb_seq *s = tb_seq_get(tb, in);
        if (!s) {
                tb->stats.chunks_discarded++;
                return 0;
        }
        /* Already read past it (e.g. a duplicate commit). */
        if (s->have_last && tb_id_cmp(in->chunk_id, s->last_chunk_id) <= 0) {
                tb->stats.chunks_discarded++;
                return 0;
        }

        bool found;
        size_t pos = tb_seq_search(s, in->chunk_id, &found);
        if (found) {
                struct tb_chunk *old = s->chunks[pos];
                /* The same chunk again (a scraped copy, then the committed
                 * one): its size never changes, its fragments and flags only
                 * grow. Anything else breaks the ABI, and upstream's buffer
                 * counts it as a violation and keeps the old copy. Flags of
                 * the last fragment of a scraped copy do not count yet. */
                uint8_t kept = old->complete ? old->flags :
                                               (uint8_t) (old->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV);
                if (in->payload_size != old->size || in->num_fragments < old->num_fragments ||
                    (in->flags & kept) != kept) {
                        tb->stats.abi_violations++;
                        return 0;
                }
                /* A complete copy never changes again. */
                if (old->complete || in->num_fragments < old->fragments_read) {
                        tb->stats.chunks_discarded++;
                        return 0;
                }
                /* The grown copy must fit the budget too. */
                size_t delta = in->payload_size - old->size;
                while (tb->used + delta > tb->capacity) {
                        struct tb_chunk *victim = tb->fifo_head == old ? old->fifo_next : tb->fifo_head;
                        if (tb->policy == TRACE_BUFFER_DISCARD || !victim) {
                                tb->stats.chunks_discarded++;
                                return 0;
                        }
                        if (victim == tb->fifo_head)
                                evict_oldest(tb);
                        else
                                evict_chunk(tb, victim);
                        tb->stats.write_wrap_count++;
                }
                if (in->payload_size > old->payload_cap) {
                        uint8_t *p = malloc(in->payload_size);
                        if (!p)
                                return -ENOMEM;
                        free(old->payload);
                        old->payload = p;
                        old->payload_cap = in->payload_size;
                }
                memcpy(old->payload, in->payload, in->payload_size);
                tb->used += in->payload_size - old->size;
                old->cost += in->payload_size - old->size;
                old->size = in->payload_size;
                old->num_fragments = in->num_fragments;
                old->flags = in->flags;
                old->complete = in->complete;
                tb->stats.chunks_rewritten++;
                tb->stats.bytes_written += in->payload_size;
                return 0;
        }

        size_t cost = in->payload_size + TRACE_BUFFER_CHUNK_OVERHEAD;
        if (cost > tb->capacity || tb_make_room(tb, cost) < 0) {
                tb->stats.chunks_discarded++;
                return 0;
        }
        /* Eviction may have changed the sequence. */
        if (s->have_last && tb_id_cmp(in->chunk_id, s->last_chunk_id) <= 0) {
                tb->stats.chunks_discarded++;
                return 0;
        }
        pos = tb_seq_search(s, in->chunk_id, &found);

        struct tb_chunk *c = tb_chunk_alloc(tb, in->payload_size);
        if (!c)
                return -ENOMEM;
        memcpy(c->payload, in->payload, in->payload_size);
        c->seq = s;
        c->chunk_id = in->chunk_id;
        c->num_fragments = in->num_fragments;
        c->flags = in->flags;
        c->complete = in->complete;
        c->size = in->payload_size;
        c->cost = cost;
        if (pos != s->n)
                tb->stats.chunks_committed_out_of_order++;
        if (tb_seq_insert(s, pos, c) < 0) {
                tb_chunk_recycle(tb, c);
                return -ENOMEM;
        }
        tb_fifo_append(tb, c);
        tb->used += cost;
        tb->stats.chunks_written++;
        tb->stats.bytes_written += in->payload_size;
        return 0;
}

int trace_buffer_try_patch(struct trace_buffer *tb, uint16_t producer_id, uint16_t writer_id, uint32_t chunk_id,
                           const struct trace_buffer_patch *patches, size_t n, bool other_patches_pending) {
        tb_release_retired(tb);
        struct tb_seq *s = seq_find(tb, producer_id, writer_id);
        bool found = false;
        size_t pos = s ? tb_seq_search(s, chunk_id, &found) : 0;
        if (!found) {
                /* A chunk of a packet given up, dropped on arrival of its
                 * end: nothing to patch, nothing failed. */
                if (s && s->have_torn && tb_id_cmp(chunk_id, s->torn_first) >= 0 &&
                    tb_id_cmp(chunk_id, s->torn_last) <= 0)
                        return 0;
                tb->stats.patches_failed++;
                return -ENOENT;
        }
        struct tb_chunk *c = s->chunks[pos];
        /* A chunk taken and not settled yet is in its producer's memory. */
        if (c->external) {
                tb->stats.patches_failed++;
                return -ENOENT;
        }
        for (size_t i = 0; i < n; i++)
                if (c->size < TRACE_BUFFER_PATCH_SIZE || patches[i].offset > c->size - TRACE_BUFFER_PATCH_SIZE) {
                        tb->stats.patches_failed++;
                        return -ERANGE;
                }
        for (size_t i = 0; i < n; i++)
                memcpy(c->payload + patches[i].offset, patches[i].data, TRACE_BUFFER_PATCH_SIZE);
        tb->stats.patches_succeeded += n;
        if (!other_patches_pending)
                c->flags &= (uint8_t) ~SMB_CHUNK_NEEDS_PATCHING;
        return 0;
}

int trace_buffer_clone(const struct trace_buffer *tb, struct trace_buffer **ret) {
        struct trace_buffer *n;
        int r = trace_buffer_new(tb->capacity, tb->policy, &n);
        if (r < 0)
                return r;
        /* Sequences first, keeping their read state. */
        for (const struct tb_seq *s = tb->seqs; s; s = s->next) {
                struct trace_buffer_chunk key = {
                        .producer_id = s->producer_id,
                        .producer_uid = s->uid,
                        .machine_id = s->machine_id,
                        .producer_pid = s->pid,
                        .writer_id = s->writer_id,
                };
                struct tb_seq *d = tb_seq_get(n, &key);
                if (!d) {
                        trace_buffer_free(n);
                        return -ENOMEM;
                }
                d->have_last = s->have_last;
                d->last_chunk_id = s->last_chunk_id;
                d->data_lost = s->data_lost;
        }
        /* Chunks in their arrival order, so eviction order is kept too. */
        for (const struct tb_chunk *c = tb->fifo_head; c; c = c->fifo_next) {
                struct tb_chunk *k = calloc(1, sizeof(*k));
                if (!k) {
                        trace_buffer_free(n);
                        return -ENOMEM;
                }
                *k = *c;
                k->fifo_prev = k->fifo_next = NULL;
                k->seq = seq_find(n, c->seq->producer_id, c->seq->writer_id);
                k->payload_cap = c->size ? c->size : 1;
                k->payload = malloc(k->payload_cap);
                if (!k->payload || !k->seq) {
                        free(k->payload);
                        free(k);
                        trace_buffer_free(n);
                        return -ENOMEM;
                }
                memcpy(k->payload, c->payload, c->size);
                bool found;
                size_t pos = tb_seq_search(k->seq, k->chunk_id, &found);
                if (tb_seq_insert(k->seq, pos, k) < 0) {
                        chunk_free(k);
                        trace_buffer_free(n);
                        return -ENOMEM;
                }
                k->fifo_prev = n->fifo_tail;
                if (n->fifo_tail)
                        n->fifo_tail->fifo_next = k;
                else
                        n->fifo_head = k;
                n->fifo_tail = k;
                n->used += k->cost;
        }
        n->stats = tb->stats;
        *ret = n;
        return 0;
}
