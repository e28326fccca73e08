/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "smb/smb-abi.h"
#include "core/buffers/trace-buffer.h"

#define SEQ_BUCKETS 1024u
#define MAX_SEQUENCES 65536u
#define MAX_CHUNK_PAYLOAD (SMB_MAX_PAGE_SIZE - SMB_PAGE_HEADER_SIZE - SMB_CHUNK_HEADER_SIZE)
/* Largest packet reassembled from fragments; larger ones are dropped. */
#define MAX_PACKET_SIZE (64u * 1024u * 1024u)
/* Released chunks kept for reuse, so that a steady stream of commits does
 * not allocate: at most this many, and at most 1/8 of the buffer. */
#define POOL_MAX_CHUNKS 64u

struct tb_seq;

struct tb_chunk {
        struct tb_chunk *fifo_prev, *fifo_next;
        struct tb_seq *seq;
        uint32_t chunk_id;
        uint16_t num_fragments;
        uint16_t fragments_read;
        uint8_t flags;
        bool complete;
        /* Being taken (trace_buffer_take_chunk): the payload is the
         * producer's, the chunk is in its sequence only, for that call or
         * (payload_stays) until trace_buffer_settle. */
        bool external;
        size_t read_off;
        size_t size;
        size_t cost;
        size_t payload_cap;
        uint8_t *payload;
};

struct tb_seq {
        struct tb_seq *next, *hnext;
        uint16_t producer_id, writer_id;
        uid_t uid;
        uint32_t machine_id;
        pid_t pid;
        /* Chunks ordered by chunk id; live entries are [head, n). */
        struct tb_chunk **chunks;
        size_t head, n, cap;
        bool have_last;
        uint32_t last_chunk_id; /* last chunk consumed or given up on */
        bool data_lost;
};

struct trace_buffer {
        enum trace_buffer_policy policy;
        size_t capacity;
        size_t used;
        struct tb_chunk *fifo_head, *fifo_tail;
        struct tb_seq *buckets[SEQ_BUCKETS];
        struct tb_seq *seqs, *seqs_tail;
        size_t n_seqs;
        struct tb_seq *read_seq;
        bool final;
        /* Chunks to reuse (linked by fifo_next). */
        struct tb_chunk *pool;
        size_t pool_n, pool_bytes;
        /* Chunks that left the buffer while a packet handed out still
         * points into them: to the pool at the next call. */
        struct tb_chunk *retired;
        /* Taken chunks whose payload stays the caller's until
         * trace_buffer_settle, and spare ones (linked by fifo_next). */
        struct tb_chunk *held, *held_spare;
        /* The slices of the packet handed out last. */
        struct iovec *iov;
        size_t iov_cap;
        struct trace_buffer_stats stats;
};

static int32_t id_cmp(uint32_t a, uint32_t b) {
        return (int32_t) (a - b);
}

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

static struct tb_seq *seq_get(struct trace_buffer *tb, const struct trace_buffer_chunk *c) {
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

static size_t seq_count(const struct tb_seq *s) {
        return s->n - s->head;
}

static struct tb_chunk *seq_first(const struct tb_seq *s) {
        return s->n > s->head ? s->chunks[s->head] : NULL;
}

/* Index of chunk_id among live entries, or where it would go. */
static size_t seq_search(const struct tb_seq *s, uint32_t chunk_id, bool *ret_found) {
        size_t lo = s->head, hi = s->n;
        /* Fast path: appending. */
        if (hi > lo && id_cmp(chunk_id, s->chunks[hi - 1]->chunk_id) > 0) {
                *ret_found = false;
                return hi;
        }
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int32_t c = id_cmp(s->chunks[mid]->chunk_id, chunk_id);
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

static int seq_insert(struct tb_seq *s, size_t pos, struct tb_chunk *c) {
        if (s->n == s->cap) {
                if (s->head > 0) {
                        memmove(s->chunks, s->chunks + s->head, seq_count(s) * sizeof(*s->chunks));
                        pos -= s->head;
                        s->n -= s->head;
                        s->head = 0;
                } else {
                        size_t cap = s->cap ? s->cap * 2 : 16;
                        struct tb_chunk **a = realloc(s->chunks, cap * sizeof(*a));
                        if (!a)
                                return -ENOMEM;
                        s->chunks = a;
                        s->cap = cap;
                }
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
        size_t live = seq_count(s);
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

static void seq_remove(struct tb_seq *s, struct tb_chunk *c) {
        if (seq_first(s) == c)
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
static void chunk_recycle(struct trace_buffer *tb, struct tb_chunk *c) {
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
static struct tb_chunk *chunk_alloc(struct trace_buffer *tb, size_t size) {
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
        seq_remove(c->seq, c);
        if (c->external)
                return;
        fifo_unlink(tb, c);
        tb->used -= c->cost;
        chunk_recycle(tb, c);
}

/* Consumes the first chunk of its sequence after reading it (a packet
 * handed out in place from it was taken by the previous call). */
static void mark_consumed(struct trace_buffer *tb, struct tb_chunk *c) {
        c->seq->have_last = true;
        c->seq->last_chunk_id = c->chunk_id;
        tb->stats.chunks_read++;
}

static void chunk_consumed(struct trace_buffer *tb, struct tb_chunk *c) {
        mark_consumed(tb, c);
        chunk_delete(tb, c);
}

/* The same for a chunk the packet being handed out still points into: it
 * leaves the buffer now, its memory at the next call (release_retired). */
static void chunk_consumed_retired(struct trace_buffer *tb, struct tb_chunk *c) {
        mark_consumed(tb, c);
        seq_remove(c->seq, c);
        if (c->external)
                return; /* the caller's: it outlives the packet */
        fifo_unlink(tb, c);
        tb->used -= c->cost;
        c->fifo_next = tb->retired;
        tb->retired = c;
}

static void release_retired(struct trace_buffer *tb) {
        while (tb->retired) {
                struct tb_chunk *c = tb->retired;
                tb->retired = c->fifo_next;
                chunk_recycle(tb, c);
        }
}

static void evict_chunk(struct trace_buffer *tb, struct tb_chunk *c) {
        struct tb_seq *s = c->seq;
        if (c->fragments_read < c->num_fragments || !c->complete)
                s->data_lost = true;
        /* Reading resumes after it: everything up to it is gone. */
        if (!s->have_last || id_cmp(c->chunk_id, s->last_chunk_id) > 0) {
                if (seq_first(s) == c) {
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
static int make_room(struct trace_buffer *tb, size_t cost) {
        while (tb->used + cost > tb->capacity) {
                if (tb->policy == TRACE_BUFFER_DISCARD || !tb->fifo_head)
                        return -ENOSPC;
                evict_oldest(tb);
                tb->stats.write_wrap_count++;
        }
        return 0;
}

/* Appends a stored chunk to the arrival order. */
static void fifo_append(struct trace_buffer *tb, struct tb_chunk *c) {
        c->fifo_prev = tb->fifo_tail;
        c->fifo_next = NULL;
        if (tb->fifo_tail)
                tb->fifo_tail->fifo_next = c;
        else
                tb->fifo_head = c;
        tb->fifo_tail = c;
}

int trace_buffer_copy_chunk(struct trace_buffer *tb, const struct trace_buffer_chunk *in) {
        release_retired(tb);
        if (in->payload_size > MAX_CHUNK_PAYLOAD || in->num_fragments > SMB_MAX_PACKET_COUNT) {
                tb->stats.abi_violations++;
                return -EINVAL;
        }
        struct tb_seq *s = seq_get(tb, in);
        if (!s) {
                tb->stats.chunks_discarded++;
                return 0;
        }
        /* Already read past it (e.g. a duplicate commit). */
        if (s->have_last && id_cmp(in->chunk_id, s->last_chunk_id) <= 0) {
                tb->stats.chunks_discarded++;
                return 0;
        }

        bool found;
        size_t pos = seq_search(s, in->chunk_id, &found);
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
        if (cost > tb->capacity || make_room(tb, cost) < 0) {
                tb->stats.chunks_discarded++;
                return 0;
        }
        /* Eviction may have changed the sequence. */
        if (s->have_last && id_cmp(in->chunk_id, s->last_chunk_id) <= 0) {
                tb->stats.chunks_discarded++;
                return 0;
        }
        pos = seq_search(s, in->chunk_id, &found);

        struct tb_chunk *c = chunk_alloc(tb, in->payload_size);
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
        if (seq_insert(s, pos, c) < 0) {
                chunk_recycle(tb, c);
                return -ENOMEM;
        }
        fifo_append(tb, c);
        tb->used += cost;
        tb->stats.chunks_written++;
        tb->stats.bytes_written += in->payload_size;
        return 0;
}

int trace_buffer_try_patch(struct trace_buffer *tb, uint16_t producer_id, uint16_t writer_id, uint32_t chunk_id,
                           const struct trace_buffer_patch *patches, size_t n, bool other_patches_pending) {
        release_retired(tb);
        struct tb_seq *s = seq_find(tb, producer_id, writer_id);
        bool found = false;
        size_t pos = s ? seq_search(s, chunk_id, &found) : 0;
        if (!found) {
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

void trace_buffer_begin_read(struct trace_buffer *tb) {
        release_retired(tb);
        tb->read_seq = tb->seqs;
}

/* Reads the fragment header at off of a payload of size bytes. Every
 * byte is loaded once (the payload may be shared memory its producer is
 * still writing). 0 ok, -EBADMSG. */
static int fragment_header(const uint8_t *payload, size_t size, size_t off, size_t *ret_data_off,
                           uint32_t *ret_size) {
        uint64_t v = 0;
        size_t p = off;
        for (unsigned shift = 0;; shift += 7) {
                if (p >= size || shift > 28)
                        return -EBADMSG;
                uint8_t b = __atomic_load_n(&payload[p++], __ATOMIC_RELAXED);
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80))
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
        return fragment_header(c->payload, c->size, off, ret_data_off, ret_size);
}

/* Room for n slices in tb->iov. */
static int iov_reserve(struct trace_buffer *tb, size_t n) {
        if (n <= tb->iov_cap)
                return 0;
        size_t cap = MAX(n, MAX(tb->iov_cap * 2, (size_t) 16));
        struct iovec *a = realloc(tb->iov, cap * sizeof(*a));
        if (!a)
                return -ENOMEM;
        tb->iov = a;
        tb->iov_cap = cap;
        return 0;
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

enum readahead_result {
        RA_DONE,       /* packet assembled */
        RA_WAIT,       /* the rest has not arrived yet */
        RA_BROKEN,     /* the chain is broken: drop the start */
        RA_DROPPED,    /* the writer gave the packet up: drop the start */
};

/* Finds the fragments of a packet that starts with the last fragment of
 * chunk at index start_idx of s and continues in the following chunks, as
 * slices in tb->iov (nothing is copied). */
static enum readahead_result readahead(struct trace_buffer *tb, struct tb_seq *s, size_t start_idx, size_t data_off,
                                       uint32_t size, size_t *ret_len, size_t *ret_n_slices, size_t *ret_end_idx,
                                       size_t *ret_end_off) {
        struct tb_chunk *c = s->chunks[start_idx];
        size_t len = size, n_slices = 0;

        if (iov_reserve(tb, 1) < 0)
                return RA_BROKEN;
        if (size > 0)
                tb->iov[n_slices++] = (struct iovec) { .iov_base = c->payload + data_off, .iov_len = size };
        uint32_t expect = c->chunk_id + 1;
        for (size_t i = start_idx + 1;; i++) {
                if (i >= s->n)
                        return RA_WAIT;
                struct tb_chunk *n = s->chunks[i];
                /* A gap: the rest of the packet was lost (chunks of one
                 * writer are committed in order). */
                if (n->chunk_id != expect)
                        return RA_BROKEN;
                if (!(n->flags & SMB_CHUNK_FIRST_PACKET_CONTINUES_FROM_PREV) || n->num_fragments == 0)
                        return RA_BROKEN;
                if ((n->flags & SMB_CHUNK_NEEDS_PATCHING) && !tb->final)
                        return RA_WAIT;
                bool only = n->num_fragments == 1;
                bool cont = only && (n->flags & SMB_CHUNK_LAST_PACKET_CONTINUES_ON_NEXT);
                if (only && !n->complete && !tb->final)
                        return RA_WAIT;
                size_t doff;
                uint32_t fsize;
                if (fragment_at(n, 0, &doff, &fsize) < 0)
                        return RA_BROKEN;
                /* The chain ends as the ABI allows: the packet is lost, the
                 * sequence goes on (the loss is counted when that chunk is
                 * read). */
                if (fsize == SMB_PACKET_SIZE_DROP_PACKET)
                        return RA_DROPPED;
                if (len + fsize > MAX_PACKET_SIZE || iov_reserve(tb, n_slices + 1) < 0)
                        return RA_BROKEN;
                if (fsize > 0)
                        tb->iov[n_slices++] = (struct iovec) { .iov_base = n->payload + doff, .iov_len = fsize };
                len += fsize;
                if (!cont) {
                        *ret_len = len;
                        *ret_n_slices = n_slices;
                        *ret_end_idx = i;
                        *ret_end_off = doff + fsize;
                        return RA_DONE;
                }
                expect++;
        }
}

/* 1: a packet from s, as *ret_n_slices slices in tb->iov (pointing into
 * the chunks); 0: nothing ready in s; -ENOMEM. */
static int seq_next_packet(struct trace_buffer *tb, struct tb_seq *s, size_t *ret_n_slices, size_t *ret_len,
                           bool *ret_lost) {
        for (;;) {
                struct tb_chunk *c = seq_first(s);
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
                        chunk_consumed(tb, c);
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
                        *ret_n_slices = 1;
                        *ret_len = size;
                        *ret_lost = s->data_lost;
                        s->data_lost = false;
                        return 1;
                }

                size_t len, n_slices, end_idx, end_off;
                switch (readahead(tb, s, s->head, doff, size, &len, &n_slices, &end_idx, &end_off)) {
                case RA_WAIT:
                        if (!tb->final)
                                return 0;
                        _fallthrough_;
                case RA_BROKEN:
                        tb->stats.readaheads_failed++;
                        skip_fragment(c, next_off);
                        continue;
                case RA_DROPPED:
                        skip_fragment(c, next_off);
                        continue;
                case RA_DONE:
                        break;
                }
                tb->stats.readaheads_succeeded++;
                /* Consume: the start chunk, every chunk in between (their
                 * memory kept until the next call: the slices point into
                 * it), and the first fragment of the end chunk. */
                c->read_off = next_off;
                c->fragments_read++;
                struct tb_chunk *end = s->chunks[end_idx];
                while (seq_first(s) != end)
                        chunk_consumed_retired(tb, seq_first(s));
                end->read_off = end_off;
                end->fragments_read = 1;
                *ret_n_slices = n_slices;
                *ret_len = len;
                *ret_lost = s->data_lost;
                s->data_lost = false;
                return 1;
        }
}

static struct trace_buffer_packet_info seq_info(const struct tb_seq *s, bool lost) {
        return (struct trace_buffer_packet_info) {
                .producer_id = s->producer_id,
                .writer_id = s->writer_id,
                .producer_uid = s->uid,
                .machine_id = s->machine_id,
                .producer_pid = s->pid,
                .previous_packet_dropped = lost,
        };
}

int trace_buffer_read_next_packet(struct trace_buffer *tb, struct trace_buffer_packet *ret,
                                  struct trace_buffer_packet_info *ret_info) {
        release_retired(tb);
        while (tb->read_seq) {
                struct tb_seq *s = tb->read_seq;
                size_t n_slices, len;
                bool lost;
                int r = seq_next_packet(tb, s, &n_slices, &len, &lost);
                if (r < 0)
                        return r;
                if (r > 0) {
                        ret->slices = tb->iov;
                        ret->n_slices = n_slices;
                        ret->size = len;
                        *ret_info = seq_info(s, lost);
                        tb->stats.bytes_read += len;
                        return 1;
                }
                tb->read_seq = s->next;
        }
        return 0;
}

/* Gives up on the rest of the chunk being taken: the sequence goes on
 * after it, marked as having lost data. */
static void drop_rest(struct tb_chunk *ext) {
        struct tb_seq *s = ext->seq;
        seq_remove(s, ext);
        s->data_lost = true;
        if (seq_count(s) == 0) {
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
        if (cost <= tb->capacity && make_room(tb, cost) == 0)
                c = chunk_alloc(tb, ext->size);
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
        fifo_append(tb, c);
        tb->used += cost;
        return 0;
}

/* Whether ext is still in its sequence (not read to its end). */
static bool ext_in_seq(const struct tb_chunk *ext) {
        bool found;
        size_t pos = seq_search(ext->seq, ext->chunk_id, &found);
        return found && ext->seq->chunks[pos] == ext;
}

static void held_put_spare(struct trace_buffer *tb, struct tb_chunk *ext) {
        ext->fifo_next = tb->held_spare;
        tb->held_spare = ext;
}

int trace_buffer_take_chunk(struct trace_buffer *tb, const struct trace_buffer_chunk *in, trace_buffer_take_fn fn,
                            void *userdata) {
        release_retired(tb);
        /* Anything else is for copy_chunk, which counts what it refuses. */
        if (!in->complete || (in->flags & SMB_CHUNK_NEEDS_PATCHING) || in->payload_size > MAX_CHUNK_PAYLOAD ||
            in->num_fragments > SMB_MAX_PACKET_COUNT)
                return 0;
        struct tb_seq *s = seq_get(tb, in);
        if (!s)
                return 0;
        /* It must follow what the sequence holds (or was read up to): a
         * duplicate, a gap or an early chunk are the buffer's to sort out. */
        struct tb_chunk *last = seq_count(s) > 0 ? s->chunks[s->n - 1] : NULL;
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
        if (seq_insert(s, s->n, ext) < 0) {
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
                r = seq_next_packet(tb, s, &n_slices, &len, &lost);
                if (r <= 0)
                        break;
                tb->stats.bytes_read += len;
                struct trace_buffer_packet_info info = seq_info(s, lost);
                r = fn(tb->iov, n_slices, len, &info, userdata);
                if (r < 0)
                        break;
        }
        /* Nothing may point at an ext on the stack once this returns. */
        release_retired(tb);
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
        release_retired(tb);
        while (tb->held) {
                struct tb_chunk *ext = tb->held;
                tb->held = ext->fifo_next;
                if (ext_in_seq(ext))
                        (void) keep_rest(tb, ext);
                held_put_spare(tb, ext);
        }
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
                struct tb_seq *d = seq_get(n, &key);
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
                size_t pos = seq_search(k->seq, k->chunk_id, &found);
                if (seq_insert(k->seq, pos, k) < 0) {
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
