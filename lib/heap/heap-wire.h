/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What libtraced-heap.so (the preload library, in the profiled process)
 * and the android.heapprofd plugin (plugins/heap/) say to each other.
 * Both sides are built from this header in one package, so the layout is
 * checked by a magic and a version, not negotiated.
 *
 *   DIR/state     a page the plugin owns (DIR: /run/traced-heap, or
 *                 $TRACED_HEAP_DIR): the library maps it read-only and
 *                 compares `generation` with the one it saw last on each
 *                 call; the plugin bumps it whenever the set of targeted
 *                 processes may have changed (a session started or
 *                 ended). That compare is all a process pays while no
 *                 session targets it.
 *   DIR/heap.sock a SOCK_SEQPACKET socket. On a new generation the library
 *                 connects and sends a heap_hello; the plugin answers a
 *                 heap_reply, with the memfd of a ring (heap-ring.h) as
 *                 SCM_RIGHTS when the process is targeted. The connection
 *                 stays open while the process is in a session: its end
 *                 tells the plugin the process is gone (or exec'd), and
 *                 tells the library the plugin is. The library sends one
 *                 byte on it (HEAP_WAKE) when its ring passes half full,
 *                 for the plugin to read it before its next period. On a
 *                 new generation, a process in a session sends its hello
 *                 again on the same connection, and keeps its ring when
 *                 the plugin answers HEAP_REPLY_KEEP.
 *   templates     the second memfd of a targeted reply: the process's stack
 *                 templates (struct heap_template), which the plugin writes
 *                 and seals against any other writer, and the library maps
 *                 read-only. A template says which words of the stack a
 *                 walk from a sampled call read last time: a sample whose
 *                 stack matches one (the same extent, the same return
 *                 addresses at the same places) carries those words only
 *                 (HEAP_RECORD_ALLOC_SPARSE), not the whole stack. A walk
 *                 that reads any other word fails and the template dies:
 *                 a sparse sample unwinds to what its whole stack would
 *                 have, or is counted an unwind error.
 */

#include <stdint.h>

#define HEAP_DIR_DEFAULT "/run/traced-heap"
#define HEAP_DIR_ENV "TRACED_HEAP_DIR"
#define HEAP_STATE_FILE "state"
#define HEAP_SOCKET_FILE "heap.sock"

#define HEAP_WIRE_MAGIC 0x50414548u /* "HEAP" */
#define HEAP_WAKE 'w'
#define HEAP_WIRE_VERSION 3u

/* The state page. */
struct heap_state {
        uint32_t magic;
        uint32_t version;
        uint32_t generation; /* read and written with __atomic builtins */
        uint32_t pad;
};
#define HEAP_STATE_SIZE 4096u

struct heap_hello {
        uint32_t magic;
        uint32_t version;
        int32_t pid; /* as the process sees itself; the plugin trusts SO_PEERCRED */
        uint32_t generation;
        /* The library's own code, [text_start, text_end): the frames of the
         * hooks, which the plugin takes off the top of each stack. */
        uint64_t text_start, text_end;
};

enum heap_reply_status {
        HEAP_REPLY_NOT_TARGETED = 0,
        HEAP_REPLY_TARGETED = 1,
        /* To a hello on a connection that has a ring: keep it (the
         * generation changed for another session's sake). */
        HEAP_REPLY_KEEP = 2,
};

struct heap_reply {
        uint32_t magic;
        uint32_t status; /* enum heap_reply_status */
        uint64_t interval;     /* mean bytes between samples */
        uint32_t stack_bytes;  /* at most this much stack is copied per sample */
        uint32_t block_client; /* 1: wait for room in the ring, up to block_timeout_us */
        uint32_t block_timeout_us;
        uint32_t pad;
};

/* The registers a sample carries: lib/profiling/unwind.h's UREG_* order. */
#define HEAP_REGS 17u

enum heap_record_type {
        HEAP_RECORD_ALLOC = 1,
        HEAP_RECORD_FREE = 2,
        HEAP_RECORD_ALLOC_SPARSE = 3,
};

/* A record in the ring: the header, then for an allocation the registers
 * and then
 *   ALLOC         stack_size bytes of stack from regs[SP] up;
 *   ALLOC_SPARSE  a heap_sparse_head and the template's words, each the 8
 *                 bytes at regs[SP] + offs[k] (stack_size is the extent
 *                 of the copy the template was made from). */
struct heap_record {
        uint32_t type; /* enum heap_record_type */
        uint32_t stack_size;
        uint64_t addr;
        uint64_t size;   /* the allocation's size (ALLOC) */
        uint64_t weight; /* the bytes the sample stands for (ALLOC) */
        uint64_t time;   /* CLOCK_MONOTONIC_COARSE, ns */
        uint32_t tid;
        uint32_t depth; /* the thread's stack above regs[SP], bytes (0: unknown) */
};

struct heap_sparse_head {
        uint32_t slot;   /* the template's */
        uint32_t nwords; /* its nwords: that many uint64_t follow */
};

/* Stack templates: HEAP_TEMPLATE_SLOTS of them, a slot found from the
 * depth's hash and up to HEAP_TEMPLATE_PROBES after it. A slot is filled
 * once (its state stored last), dies when a walk of its words missed,
 * and is never emptied. */
#define HEAP_TEMPLATE_SLOTS 512u
#define HEAP_TEMPLATE_PROBES 8u
#define HEAP_TEMPLATE_WORDS 48u
#define HEAP_TEMPLATE_GUARDS 4u

enum heap_template_state {
        HEAP_TEMPLATE_EMPTY = 0,
        HEAP_TEMPLATE_LIVE = 1,
        HEAP_TEMPLATE_DEAD = 2,
};

struct heap_template {
        uint32_t state; /* enum heap_template_state, with __atomic builtins */
        uint32_t depth; /* the stack above regs[SP] of the samples it is for */
        uint32_t copy;  /* the extent of their copy: depth, or less at stack_bytes */
        uint16_t nwords, nguards;
        /* Matched when the stack holds guard_vals at these offsets from
         * regs[SP]: the return addresses of the program's innermost
         * frames. */
        uint32_t guard_offs[HEAP_TEMPLATE_GUARDS];
        uint64_t guard_vals[HEAP_TEMPLATE_GUARDS];
        uint32_t offs[HEAP_TEMPLATE_WORDS]; /* ascending, each + 8 <= copy */
};
#define HEAP_TEMPLATES_SIZE (HEAP_TEMPLATE_SLOTS * sizeof(struct heap_template))

struct heap_alloc_regs {
        uint64_t regs[HEAP_REGS];
};
