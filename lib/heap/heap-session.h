/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libtraced-heap.so's side of a session (heap-wire.h): the state page it
 * watches, joining and leaving, and the session the hooks sample into.
 * Internal to the library.
 */

#include <stdbool.h>
#include <stdint.h>

#include "heap-addrset.h"
#include "heap-ring.h"
#include "heap-template.h"
#include "heap-wire.h"

struct heap_session {
        uint64_t id; /* a new one per join: threads reset their sampler on a change */
        struct heap_ring ring;
        void *ring_mem;
        size_t ring_size;
        struct heap_addrset set;
        void *set_mem;
        /* The plugin's stack templates for this process (read-only), or
         * NULL. */
        const struct heap_template *templates;
        size_t set_size;
        int sock;
        uint64_t interval;
        uint32_t stack_bytes;
        bool block;
        uint32_t block_timeout_us;
        uint32_t drops_seen; /* drops since the plugin's liveness was last checked */
};

/* What the allocation hooks read on every call (frees only `marked`: a
 * sampled block carries its own mark, heap-preload.c), in one cache
 * line. Changed only when the process joins or leaves a session, and
 * once when it first samples. */
struct heap_gate {
        /* The page's generation when the process is settled and in no
         * session; an odd value (generations are even) while a session
         * runs or a look is due. */
        uint32_t quiet;
        /* The page's generation when the process is settled in a session
         * (a thread that set up its sampler at it gets a credit up to the
         * sampler's next point); an odd value otherwise. */
        uint32_t active;
        /* Set (to 1) before the first block the process samples is marked,
         * never cleared: until then a free need not read the word before
         * its block. (A program hands a block to another thread after it
         * was allocated, so that thread sees this set with it.) */
        uint32_t marked;
} __attribute__((aligned(64)));
extern struct heap_gate heap_gate __attribute__((visibility("hidden")));

/* Where the state page is mapped: zeros (generation 0) until the state
 * file is, then the file's first page, mapped over it (MAP_FIXED). It is
 * part of the library's own image, aligned for pages of up to 64 KiB, so
 * a hook reads the generation at an offset from its own code in one
 * load, not through a pointer to a mapping made at run time. */
#define HEAP_STATE_AREA 65536u
union heap_state_area {
        struct heap_state st;
        uint8_t bytes[HEAP_STATE_AREA];
};
extern union heap_state_area heap_state_area __attribute__((visibility("hidden")));

static inline uint32_t heap_state_generation(int memorder) {
        return __atomic_load_n(&heap_state_area.st.generation, memorder);
}

/* Maps the state page (or a page of zeros when there is none yet: the
 * library then looks again now and then). Called once, at load. */
void heap_session_setup(void);
/* The generation the process last acted on (UINT32_MAX: look again). */
extern uint32_t heap_seen_generation;
void heap_session_refresh_slow(void);
/* The slow path's first step: joins or leaves as the generation says
 * (a load and a compare while it is the one acted on). */
static inline void heap_session_refresh(void) {
        if (__builtin_expect(heap_state_generation(__ATOMIC_ACQUIRE) ==
                                     __atomic_load_n(&heap_seen_generation, __ATOMIC_ACQUIRE),
                             1))
                return;
        heap_session_refresh_slow();
}
/* The current session's id and sampling interval, without holding it:
 * false when there is none. */
bool heap_session_peek(uint64_t *ret_id, uint64_t *ret_interval);
/* The current session, held until heap_session_put; NULL when none. */
struct heap_session *heap_session_get(void);
void heap_session_put(void);
/* The ring dropped an entry: every so often, is the plugin still there?
 * (When it is not, the session is left.) */
void heap_session_dropped(struct heap_session *s);
/* The child of a fork: whatever the parent had is not the child's. */
void heap_session_forked_child(void);
void heap_session_fork_prepare(void);
void heap_session_fork_parent(void);
