/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profiling/intern.h"

/* InternedData field numbers. */
#define ID_FUNCTION_NAMES 5u
#define ID_FRAMES 6u
#define ID_CALLSTACKS 7u
#define ID_BUILD_IDS 16u
#define ID_MAPPING_PATHS 17u
#define ID_MAPPINGS 19u

/* One table: byte strings to iids (iid = index + 1), open addressing. */
struct itab {
        uint32_t *slots; /* iid, 0: free */
        size_t n_slots;  /* a power of two, > 2 x n */
        struct ient {
                uint64_t hash;
                uint32_t off, len;
        } *ents;
        size_t n, cap;
        uint8_t *arena;
        size_t arena_len, arena_cap;
        struct pbw pending; /* new entries, each a tagged InternedData field */
};

enum { T_FUNC, T_BUILD_ID, T_PATH, T_MAPPING, T_FRAME, T_CALLSTACK, N_TABLES };

static const uint32_t table_field[N_TABLES] = {
        [T_FUNC] = ID_FUNCTION_NAMES, [T_BUILD_ID] = ID_BUILD_IDS, [T_PATH] = ID_MAPPING_PATHS,
        [T_MAPPING] = ID_MAPPINGS,    [T_FRAME] = ID_FRAMES,       [T_CALLSTACK] = ID_CALLSTACKS,
};

struct intern_writer {
        struct itab t[N_TABLES];
        struct pbw msg; /* scratch for one entry */
        bool cleared;   /* the next packet carries SEQ_INCREMENTAL_STATE_CLEARED */
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
        pbw_done(&t->pending);
        *t = (struct itab) {};
}

static void itab_clear(struct itab *t) {
        if (t->slots)
                memset(t->slots, 0, t->n_slots * sizeof(*t->slots));
        t->n = 0;
        t->arena_len = 0;
        pbw_reset(&t->pending);
}

static int itab_grow(struct itab *t) {
        size_t n_slots = t->n_slots ? t->n_slots * 2 : 256;
        uint32_t *slots = calloc(n_slots, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        for (size_t k = 0; k < t->n; k++) {
                size_t i = t->ents[k].hash & (n_slots - 1);
                while (slots[i])
                        i = (i + 1) & (n_slots - 1);
                slots[i] = (uint32_t) (k + 1);
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
                uint32_t iid = t->slots[i];
                if (!iid)
                        break;
                const struct ient *e = &t->ents[iid - 1];
                if (e->hash == h && e->len == len && (len == 0 || memcmp(t->arena + e->off, key, len) == 0))
                        return iid;
        }
        if (GREEDY_REALLOC_MIN(t->ents, t->cap, t->n + 1, 256) < 0)
                return 0;
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
        }
        if (len)
                memcpy(t->arena + t->arena_len, key, len);
        t->ents[t->n] = (struct ient) { .hash = h, .off = (uint32_t) t->arena_len, .len = (uint32_t) len };
        t->arena_len += len;
        t->slots[i] = (uint32_t) ++t->n;
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
        pbw_done(&w->msg);
        free(w);
}

static uint64_t fail(struct intern_writer *w) {
        w->error = -ENOMEM;
        return 0;
}

/* Appends w->msg to the table's pending entries. */
static uint64_t emit(struct intern_writer *w, unsigned table, uint64_t iid) {
        pbw_message(&w->t[table].pending, table_field[table], &w->msg);
        if (w->msg.error || w->t[table].pending.error)
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
        pbw_reset(&w->msg);
        pbw_varint(&w->msg, 1, iid);
        pbw_bytes(&w->msg, 2, s, len);
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

uint64_t intern_mapping(struct intern_writer *w, const struct intern_mapping *m) {
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
        pbw_reset(&w->msg);
        pbw_varint(&w->msg, 1, iid);
        pbw_varint(&w->msg, 2, key[0]);
        pbw_varint(&w->msg, 3, m->start_offset);
        pbw_varint(&w->msg, 4, m->start);
        pbw_varint(&w->msg, 5, m->end);
        pbw_varint(&w->msg, 6, m->load_bias);
        for (size_t k = 6; k < n; k++)
                pbw_varint(&w->msg, 7, key[k]);
        pbw_varint(&w->msg, 8, m->exact_offset);
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
        pbw_reset(&w->msg);
        pbw_varint(&w->msg, 1, iid);
        if (function_name_iid)
                pbw_varint(&w->msg, 2, function_name_iid);
        pbw_varint(&w->msg, 3, mapping_iid);
        pbw_varint(&w->msg, 4, rel_pc);
        return emit(w, T_FRAME, iid);
}

uint64_t intern_callstack(struct intern_writer *w, const uint64_t *frame_iids, size_t n) {
        bool added;
        uint64_t iid = itab_intern(&w->t[T_CALLSTACK], frame_iids, n * sizeof(*frame_iids), &added);
        if (!iid)
                return fail(w);
        if (!added)
                return iid;
        pbw_reset(&w->msg);
        pbw_varint(&w->msg, 1, iid);
        for (size_t k = 0; k < n; k++)
                pbw_varint(&w->msg, 2, frame_iids[k]);
        return emit(w, T_CALLSTACK, iid);
}

int intern_error(const struct intern_writer *w) {
        return w->error;
}

bool intern_has_pending(const struct intern_writer *w) {
        for (size_t k = 0; k < N_TABLES; k++)
                if (w->t[k].pending.len)
                        return true;
        return false;
}

void intern_write_pending(struct intern_writer *w, struct pbw *packet) {
        size_t len = 0;
        for (size_t k = 0; k < N_TABLES; k++)
                len += w->t[k].pending.len;
        if (!len)
                return;
        pbw_tag(packet, TRACE_PACKET_INTERNED_DATA, 2);
        pbw_raw_varint(packet, len);
        /* Strings first: a reader meets ids before the entries using them. */
        for (size_t k = 0; k < N_TABLES; k++) {
                pbw_raw(packet, w->t[k].pending.buf, w->t[k].pending.len);
                pbw_reset(&w->t[k].pending);
        }
}

uint32_t intern_packet_flags(struct intern_writer *w) {
        if (w->cleared) {
                w->cleared = false;
                return SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE;
        }
        return SEQ_NEEDS_INCREMENTAL_STATE;
}

void intern_clear(struct intern_writer *w) {
        for (size_t k = 0; k < N_TABLES; k++)
                itab_clear(&w->t[k]);
        w->cleared = true;
        w->error = 0;
}

size_t intern_memory(const struct intern_writer *w) {
        size_t n = 0;
        for (size_t k = 0; k < N_TABLES; k++)
                n += w->t[k].n_slots * sizeof(uint32_t) + w->t[k].cap * sizeof(struct ient) + w->t[k].arena_cap +
                     w->t[k].pending.cap;
        return n;
}

size_t intern_count(const struct intern_writer *w) {
        size_t n = 0;
        for (size_t k = 0; k < N_TABLES; k++)
                n += w->t[k].n;
        return n;
}
