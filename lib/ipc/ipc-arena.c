/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>

#include "basic/macro.h"
#include "ipc/ipc-arena.h"

/* Pieces are aligned for any field of an unpacked message. */
#define ARENA_ALIGN 16u

struct ipc_arena_spill {
        struct ipc_arena_spill *next;
        max_align_t data[];
};

static size_t align_up(size_t n) {
        return (n + ARENA_ALIGN - 1) & ~(size_t) (ARENA_ALIGN - 1);
}

static void *arena_alloc(void *userdata, size_t size) {
        struct ipc_arena *a = userdata;
        size_t n = align_up(MAX(size, (size_t) 1));
        if (n < size)
                return NULL;
        if (a->block && n <= a->cap - a->used) {
                void *p = a->block + a->used;
                a->used += n;
                return p;
        }
        if (n > SIZE_MAX - sizeof(struct ipc_arena_spill))
                return NULL;
        struct ipc_arena_spill *s = malloc(sizeof(*s) + n);
        if (!s)
                return NULL;
        a->mallocs++;
        s->next = a->spills;
        a->spills = s;
        a->spilled += n;
        return s->data;
}

/* Everything goes at the reset. */
static void arena_free(void *userdata, void *p) {
}

void ipc_arena_init(struct ipc_arena *a) {
        *a = (struct ipc_arena) {
                .allocator = { .alloc = arena_alloc, .free = arena_free, .allocator_data = a },
        };
}

static void free_spills(struct ipc_arena *a) {
        while (a->spills) {
                struct ipc_arena_spill *s = a->spills;
                a->spills = s->next;
                free(s);
        }
}

void ipc_arena_reset(struct ipc_arena *a) {
        size_t need = a->used + a->spilled;
        free_spills(a);
        a->used = 0;
        a->spilled = 0;
        if (need <= a->cap || need > IPC_ARENA_KEEP_MAX)
                return;
        /* Room for the whole of this frame next time (its content need not
         * be kept). */
        size_t cap = MIN(MAX(need, a->cap * 2), (size_t) IPC_ARENA_KEEP_MAX);
        uint8_t *b = malloc(cap);
        if (!b)
                return;
        a->mallocs++;
        free(a->block);
        a->block = b;
        a->cap = cap;
}

void ipc_arena_done(struct ipc_arena *a) {
        free_spills(a);
        free(a->block);
        ipc_arena_init(a);
}
