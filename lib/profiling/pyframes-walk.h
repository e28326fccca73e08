/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A thread's CPython frames read out of its process's memory after a
 * sample of it was taken (linux.perf has no program running at the
 * sample, as linux.bpf_stack has), and checked against what the sample
 * itself holds: its copy of the thread's user stack.
 *
 * CPython 3.11 keeps one _PyCFrame per call of its evaluation function on
 * the C stack, each with the interpreter frame that call runs
 * (current_frame) and the _PyCFrame of the call outside it (previous);
 * the thread state points to the innermost. When that one lies in the
 * sample's stack copy, the copy tells the current_frame of every
 * evaluation call whose _PyCFrame it holds, as they were at the sample.
 * The frames are then walked in memory from the innermost one, and the
 * run of each call must end in an entry frame whose previous is the next
 * call's current_frame as the copy has it. Frames on the thread's data
 * stack follow one another, each right after its caller (whose size its
 * code object gives): a frame that does not was returned from, and its
 * caller's place taken by another call. Whatever does not agree means the
 * thread moved on since the sample and the walk is refused.
 *
 * What this cannot tell: the instruction of the innermost frame of each
 * run is the one the frame is at now (its line may be past the sample's),
 * and a frame returned from whose place a call of the same size took (a
 * recursion's next call).
 *
 * Library code: memory is read through a py_read_fn, and what it returns
 * is untrusted (bounded walks, addresses checked against the copy).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profiling/pyframes.h"

#define PY_WALK_MAX_FRAMES 128 /* Python frames kept per sample (the innermost) */
#define PY_WALK_MAX_THREADS 256 /* thread states looked at to find a thread's */
#define PY_WALK_MAX_INTERPS 16
/* Bit 0 of a frame's code in struct py_walk: the frame is the first its
 * evaluation call ran (code objects are aligned). */
#define PY_WALK_ENTRY 1ull /* PY_FRAME_ENTRY */

enum py_walk_result {
        PY_WALK_OK = 0,        /* frames read, and checked against the copy when there was one */
        PY_WALK_NO_THREAD = 1, /* the thread has no thread state, or runs no evaluation call */
        PY_WALK_MOVED = 2,     /* what memory holds now is not what the sample's stack held */
        PY_WALK_FAULT = 3,     /* the interpreter's memory could not be read */
        _PY_WALK_RESULT_MAX,
};

/* Memory is read a page at a time, and kept for the rest of the walk:
 * most of a thread's frames lie in a page or two of its data stack. */
#define PY_WALK_PAGE 4096u
#define PY_WALK_PAGES 8u

#define PY_WALK_CODES 256  /* code objects whose frame size is kept */
#define PY_WALK_THREADS 64 /* threads whose thread state is kept */

struct py_walk {
        /* The caller's name for the process walked (its pid), set before
         * each walk: what is kept from one walk to the next (the frame
         * size of code objects, where threads' states are) is kept per
         * process, and checked again where it can be. Zero the struct
         * before the first walk. */
        uint64_t process;
        /* Optional, set by the caller with the walk's reader: the page of
         * a kept thread state and the page its innermost frame was in
         * last time are read in one call (most walks need no other). */
        py_readv_fn readv;
        struct {
                uint64_t process, code, size;
        } codes[PY_WALK_CODES];
        struct {
                uint64_t process, ts, frame_page;
                uint32_t tid;
        } threads[PY_WALK_THREADS];

        /* the pages read (scratch: filled and used by py_walk) */
        uint64_t page_addr[PY_WALK_PAGES];
        uint32_t n_pages, next_page;
        uint8_t pages[PY_WALK_PAGES][PY_WALK_PAGE];
        uint32_t reads; /* reads of the process the last walk made */

        /* innermost first: code object (| PY_WALK_ENTRY), last instruction */
        uint64_t frames[2 * PY_WALK_MAX_FRAMES];
        uint32_t n;        /* frames */
        uint32_t entries;  /* entry frames among them */
        uint32_t checked;  /* evaluation calls found in the stack copy and checked (0 without a copy) */
        bool has_copy;     /* a stack copy was given: checked is what a native stack must match */
        bool truncated;    /* more frames than PY_WALK_MAX_FRAMES */
};

/* The thread state of thread tid (its native id) in the CPython whose
 * _PyRuntime is at runtime: the GIL holder's first, else by a walk of
 * every interpreter's threads. 0 when there is none; -EFAULT. */
int py_walk_thread_state(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t runtime, uint32_t tid,
                         uint64_t *ret);

/* Thread tid's Python frames into *ret (some 40 KiB: the caller's, kept
 * from one walk to the next). stack: the sample's copy of the thread's
 * user stack, stack_size bytes from address sp (NULL: none, the frames
 * are read unchecked). */
enum py_walk_result py_walk(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t runtime, uint32_t tid,
                            const uint8_t *stack, size_t stack_size, uint64_t sp, struct py_walk *ret);

/* Whether a native stack with n_eval evaluation frames of the interpreter
 * is the one the walk w was checked against: with a copy, its checked
 * calls; without, its entry frames. */
bool py_walk_matches(const struct py_walk *w, size_t n_eval);
/* The same from a walk's counts alone (a walk handed over without its
 * struct, whose scratch is tens of KiB). */
static inline bool py_walk_counts_match(bool has_copy, uint32_t entries, uint32_t checked, size_t n_eval) {
        return has_copy ? checked == n_eval : entries == n_eval;
}

/* The names of the results, for logs: "ok", "no thread state", ... */
const char *py_walk_result_name(enum py_walk_result r);
