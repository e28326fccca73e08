/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "basic/prefault.h"
#include "profiling/intern.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

/* One table: byte strings to iids (iid = index + 1), open addressing. */
struct itab {
        /* iid in the low half (0: free), the top half of its hash in the
         * high one: a probe that does not match reads no entry (each is a
         * cache miss in a table of a busy machine's callstacks) */
        uint64_t *slots;
        size_t n_slots;  /* a power of two, > 2 x n */
        struct ient {
                uint64_t hash;
                uint32_t off, len;
        } *ents;
        size_t n, cap;
        uint8_t *arena;
        size_t arena_len, arena_cap;
        /* New entries: fields of an InternedData message. */
        struct pb_buf pending;
        InternedData pending_msg;
};

/* Strings first: a reader meets ids before the entries using them. */
enum { T_FUNC, T_BUILD_ID, T_PATH, T_MAPPING, T_FRAME, T_CALLSTACK, N_TABLES };

struct intern_writer {
        struct itab t[N_TABLES];
        /* Mappings as callers describe them (the path whole, the build id's
         * bytes) to their iids, never written out: a mapping met again costs
         * one look-up, not one per path component and the build id's. */
        struct itab described;
        uint64_t *described_iids; /* by the description's index; 0: none yet */
        size_t described_cap;
        bool cleared; /* the next packet carries SEQ_INCREMENTAL_STATE_CLEARED */
        int error;
};

static uint64_t hash_bytes(const void *p, size_t n) {
        const uint8_t *b = p;
        uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
        while (n >= 8) {
                uint64_t v;
                memcpy(&v, b, 8);
                h = (h ^ v) * 0xff51afd7ed558ccdull;
                h ^= h >> 32;
                b += 8;
                n -= 8;
        }
        uint64_t v = 0;
        if (n)
                memcpy(&v, b, n);
        h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
        return h ^ (h >> 29);
}

static void itab_done(struct itab *t) {
        free(t->slots);
        free(t->ents);
        free(t->arena);
        pb_buf_done(&t->pending);
        *t = (struct itab) {};
}

static void itab_clear(struct itab *t) {
        if (t->slots)
                memset(t->slots, 0, t->n_slots * sizeof(*t->slots));
        t->n = 0;
        t->arena_len = 0;
        pb_buf_reset(&t->pending);
}

/* The message pending entries of table t are written into. */
static InternedData *pending(struct intern_writer *w, unsigned table) {
        struct itab *t = &w->t[table];
        if (pb_buf_len(&t->pending) == 0)
                InternedData_init(&t->pending_msg, pb_buf_stream(&t->pending));
        return &t->pending_msg;
}

static uint64_t slot_of(uint64_t hash, uint64_t iid) {
        return (hash & 0xffffffff00000000ull) | iid;
}

static int itab_grow(struct itab *t) {
        size_t n_slots = t->n_slots ? t->n_slots * 2 : 256;
        /* Probed (read) before written, at random: its pages are mapped
         * for writing first (basic/prefault.h). */
        uint64_t *slots = calloc_prefaulted(n_slots, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        for (size_t k = 0; k < t->n; k++) {
                size_t i = t->ents[k].hash & (n_slots - 1);
                while (slots[i])
                        i = (i + 1) & (n_slots - 1);
                slots[i] = slot_of(t->ents[k].hash, k + 1);
        }
        free(t->slots);
        t->slots = slots;
        t->n_slots = n_slots;
        return 0;
}

/* The iid of key; *ret_new says whether it was added. 0 on failure. */
static uint64_t itab_intern(struct itab *t, const void *key, size_t len, bool *ret_new) {
        *ret_new = false;
        if (len > UINT32_MAX || t->n >= UINT32_MAX - 1)
                return 0;
        if ((t->n + 1) * 2 > t->n_slots && itab_grow(t) < 0)
                return 0;
        uint64_t h = hash_bytes(key, len);
        size_t i = h & (t->n_slots - 1);
        for (;; i = (i + 1) & (t->n_slots - 1)) {
                uint64_t v = t->slots[i];
                if (!v)
                        break;
                if ((v ^ h) >> 32)
                        continue;
                uint32_t iid = (uint32_t) v;
                const struct ient *e = &t->ents[iid - 1];
                if (e->hash == h && e->len == len && (len == 0 || memcmp(t->arena + e->off, key, len) == 0))
                        return iid;
        }
        /* Both grow as entries are appended, one by one: their new room
         * is mapped for writing at once, not a page fault at a time
         * (basic/prefault.h; a fault costs ten times more on a virtual
         * machine, and a busy machine's callstacks take megabytes). */
        size_t ents_cap = t->cap;
        if (GREEDY_REALLOC_MIN(t->ents, t->cap, t->n + 1, 256) < 0)
                return 0;
        if (t->cap != ents_cap)
                (void) prefault_write(t->ents + t->n, (t->cap - t->n) * sizeof(*t->ents));
        if (t->arena_len + len > t->arena_cap) {
                size_t cap = t->arena_cap ? t->arena_cap * 2 : 4096;
                while (cap < t->arena_len + len)
                        cap *= 2;
                if (cap > UINT32_MAX)
                        return 0;
                uint8_t *p = realloc(t->arena, cap);
                if (!p)
                        return 0;
                t->arena = p;
                t->arena_cap = cap;
                (void) prefault_write(p + t->arena_len, cap - t->arena_len);
        }
        if (len)
                memcpy(t->arena + t->arena_len, key, len);
        t->ents[t->n] = (struct ient) { .hash = h, .off = (uint32_t) t->arena_len, .len = (uint32_t) len };
        t->arena_len += len;
        t->slots[i] = slot_of(h, ++t->n);
        *ret_new = true;
        return t->n;
}

int intern_writer_new(struct intern_writer **ret) {
        struct intern_writer *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->cleared = true;
        *ret = w;
        return 0;
}

void intern_writer_free(struct intern_writer *w) {
        if (!w)
                return;
        for (size_t k = 0; k < N_TABLES; k++)
                itab_done(&w->t[k]);
        itab_done(&w->described);
        free(w->described_iids);
        free(w);
}

static uint64_t fail(struct intern_writer *w) {
        w->error = -ENOMEM;
        return 0;
}

/* The entry just written for iid, or a failure. */
static uint64_t emit(struct intern_writer *w, unsigned table, uint64_t iid) {
        if (pb_buf_error(&w->t[table].pending))
                return fail(w);
        return iid;
}

static uint64_t intern_string(struct intern_writer *w, unsigned table, const void *s, size_t len) {
        bool added;
        uint64_t iid = itab_intern(&w->t[table], s, len, &added);
        if (!iid)
                return fail(w);
        if (!added)
                return iid;
        InternedData *d = pending(w, table);
        InternedString str;
        switch (table) {
        case T_FUNC:
                InternedData_begin_function_names(d, &str);
                break;
        case T_BUILD_ID:
                InternedData_begin_build_ids(d, &str);
                break;
        default:
                InternedData_begin_mapping_paths(d, &str);
        }
        InternedString_set_iid(&str, iid);
        InternedString_set_str(&str, s, len);
        traced_pb_msg_end_nested(&d->msg, &str.msg);
        return emit(w, table, iid);
}

uint64_t intern_function_name(struct intern_writer *w, const char *name) {
        return intern_string(w, T_FUNC, name, strlen(name));
}

uint64_t intern_build_id(struct intern_writer *w, const uint8_t *id, size_t len) {
        return intern_string(w, T_BUILD_ID, id, id ? len : 0);
}

uint64_t intern_mapping_path(struct intern_writer *w, const char *component) {
        return intern_string(w, T_PATH, component, strlen(component));
}

#define MAX_PATH_COMPONENTS 64

static uint64_t intern_mapping_parts(struct intern_writer *w, const struct intern_mapping *m);

/* The description of m the described table keys: its numbers, the build
 * id's length and bytes, the path. 0 when it does not fit in buf. */
static size_t describe(const struct intern_mapping *m, uint8_t *buf, size_t size) {
        const uint64_t v[5] = { m->start, m->end, m->exact_offset, m->start_offset, m->load_bias };
        size_t blen = m->build_id ? m->build_id_len : 0, plen = m->path ? strlen(m->path) : 0;
        uint32_t bl = (uint32_t) blen;
        if (blen > UINT32_MAX || sizeof(v) + sizeof(bl) + blen + plen > size)
                return 0;
        memcpy(buf, v, sizeof(v));
        memcpy(buf + sizeof(v), &bl, sizeof(bl));
        if (blen)
                memcpy(buf + sizeof(v) + sizeof(bl), m->build_id, blen);
        if (plen)
                memcpy(buf + sizeof(v) + sizeof(bl) + blen, m->path, plen);
        return sizeof(v) + sizeof(bl) + blen + plen;
}

uint64_t intern_mapping(struct intern_writer *w, const struct intern_mapping *m) {
        uint8_t buf[1024];
        size_t len = describe(m, buf, sizeof(buf));
        uint64_t d = 0;
        if (len) {
                bool added;
                d = itab_intern(&w->described, buf, len, &added);
                if (d && !added && d <= w->described_cap && w->described_iids[d - 1])
                        return w->described_iids[d - 1];
        }
        uint64_t iid = intern_mapping_parts(w, m);
        if (iid && d) {
                if (d > w->described_cap) {
                        size_t cap = MAX(w->described_cap * 2, (size_t) 256);
                        while (cap < d)
                                cap *= 2;
                        uint64_t *a = realloc(w->described_iids, cap * sizeof(*a));
                        if (!a)
                                return iid; /* looked up the long way next time */
                        memset(a + w->described_cap, 0, (cap - w->described_cap) * sizeof(*a));
                        w->described_iids = a;
                        w->described_cap = cap;
                }
                w->described_iids[d - 1] = iid;
        }
        return iid;
}

static uint64_t intern_mapping_parts(struct intern_writer *w, const struct intern_mapping *m) {
        uint64_t key[6 + MAX_PATH_COMPONENTS];
        size_t n = 0;
        key[n++] = intern_build_id(w, m->build_id, m->build_id_len);
        if (!key[0])
                return 0;
        key[n++] = m->start;
        key[n++] = m->end;
        key[n++] = m->exact_offset;
        key[n++] = m->start_offset;
        key[n++] = m->load_bias;
        for (const char *p = m->path ? m->path : ""; *p && n < ELEMENTSOF(key);) {
                size_t len = strcspn(p, "/");
                if (len > 0) {
                        char comp[256];
                        snprintf(comp, sizeof(comp), "%.*s", (int) MIN(len, sizeof(comp) - 1), p);
                        uint64_t iid = intern_mapping_path(w, comp);
                        if (!iid)
                                return 0;
                        key[n++] = iid;
                }
                p += len;
                if (*p == '/')
                        p++;
        }
        bool added;
        uint64_t iid = itab_intern(&w->t[T_MAPPING], key, n * sizeof(key[0]), &added);
        if (!iid)
                return fail(w);
        if (!added)
                return iid;
        InternedData *d = pending(w, T_MAPPING);
        Mapping mp;
        InternedData_begin_mappings(d, &mp);
        Mapping_set_iid(&mp, iid);
        Mapping_set_build_id(&mp, key[0]);
        Mapping_set_start_offset(&mp, m->start_offset);
        Mapping_set_start(&mp, m->start);
        Mapping_set_end(&mp, m->end);
        Mapping_set_load_bias(&mp, m->load_bias);
        for (size_t k = 6; k < n; k++)
                Mapping_add_path_string_ids(&mp, key[k]);
        Mapping_set_exact_offset(&mp, m->exact_offset);
        InternedData_end_mappings(d, &mp);
        return emit(w, T_MAPPING, iid);
}

uint64_t intern_frame(struct intern_writer *w, uint64_t function_name_iid, uint64_t mapping_iid, uint64_t rel_pc) {
        uint64_t key[3] = { function_name_iid, mapping_iid, rel_pc };
        bool added;
        uint64_t iid = itab_intern(&w->t[T_FRAME], key, sizeof(key), &added);
        if (!iid)
                return fail(w);
        if (!added)
                return iid;
        InternedData *d = pending(w, T_FRAME);
        Frame f;
        InternedData_begin_frames(d, &f);
        Frame_set_iid(&f, iid);
        if (function_name_iid)
                Frame_set_function_name_id(&f, function_name_iid);
        Frame_set_mapping_id(&f, mapping_iid);
        Frame_set_rel_pc(&f, rel_pc);
        InternedData_end_frames(d, &f);
        return emit(w, T_FRAME, iid);
}

uint64_t intern_callstack(struct intern_writer *w, const uint64_t *frame_iids, size_t n) {
        bool added;
        uint64_t iid = itab_intern(&w->t[T_CALLSTACK], frame_iids, n * sizeof(*frame_iids), &added);
        if (!iid)
                return fail(w);
        if (!added)
                return iid;
        InternedData *d = pending(w, T_CALLSTACK);
        Callstack cs;
        InternedData_begin_callstacks(d, &cs);
        Callstack_set_iid(&cs, iid);
        for (size_t k = 0; k < n; k++)
                Callstack_add_frame_ids(&cs, frame_iids[k]);
        InternedData_end_callstacks(d, &cs);
        return emit(w, T_CALLSTACK, iid);
}

int intern_error(const struct intern_writer *w) {
        return w->error;
}

bool intern_has_pending(const struct intern_writer *w) {
        for (size_t k = 0; k < N_TABLES; k++)
                if (pb_buf_len(&w->t[k].pending))
                        return true;
        return false;
}

void intern_write_pending(struct intern_writer *w, struct TracePacket *packet) {
        if (!intern_has_pending(w))
                return;
        InternedData d;
        TracePacket_begin_interned_data(packet, &d);
        for (size_t k = 0; k < N_TABLES; k++) {
                traced_pb_msg_append_raw(&d.msg, pb_buf_data(&w->t[k].pending), pb_buf_len(&w->t[k].pending));
                pb_buf_reset(&w->t[k].pending);
        }
        TracePacket_end_interned_data(packet, &d);
}

uint32_t intern_packet_flags(struct intern_writer *w) {
        if (w->cleared) {
                w->cleared = false;
                return TracePacket_SEQ_INCREMENTAL_STATE_CLEARED | TracePacket_SEQ_NEEDS_INCREMENTAL_STATE;
        }
        return TracePacket_SEQ_NEEDS_INCREMENTAL_STATE;
}

void intern_clear(struct intern_writer *w) {
        for (size_t k = 0; k < N_TABLES; k++)
                itab_clear(&w->t[k]);
        itab_clear(&w->described);
        if (w->described_iids)
                memset(w->described_iids, 0, w->described_cap * sizeof(*w->described_iids));
        w->cleared = true;
        w->error = 0;
}

size_t intern_memory(const struct intern_writer *w) {
        size_t n = 0;
        for (size_t k = 0; k < N_TABLES; k++)
                n += w->t[k].n_slots * sizeof(uint64_t) + w->t[k].cap * sizeof(struct ient) + w->t[k].arena_cap +
                     w->t[k].pending.cap;
        n += w->described.n_slots * sizeof(uint64_t) + w->described.cap * sizeof(struct ient) +
             w->described.arena_cap + w->described_cap * sizeof(uint64_t);
        return n;
}

size_t intern_count(const struct intern_writer *w) {
        size_t n = 0;
        for (size_t k = 0; k < N_TABLES; k++)
                n += w->t[k].n;
        return n;
}
