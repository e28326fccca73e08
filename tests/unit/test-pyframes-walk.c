/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A thread's CPython frames read after the sample, checked against the
 * sample's stack copy (lib/profiling/pyframes-walk.c), on a made-up
 * process: two evaluation calls, the outer running F0 (entry) and F1, the
 * inner F2 (entry) and F3; the thread's state is the second of its
 * interpreter's list. */

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "profiling/pyframes-walk.h"

#define HEAP 0x100000ull
#define SP 0x7ff000000ull
#define TID 42

static uint8_t heap[16384];
static uint8_t stack[4096]; /* the sample's copy, at SP */
static const struct py_layout *l;

/* Where things are in the heap. */
enum { RUNTIME = 0, INTERP = 0x1000, TS1 = 0x2000, TS2 = 0x2400, FRAMES = 0x3000, CODES = 0x3800 };
#define FRAME(k) (HEAP + FRAMES + 0x80u * (k))
#define CODE(k) (HEAP + CODES + 0x40u * (k))
#define CF0 0x100u /* the inner call's _PyCFrame, in the copy */
#define CF1 0x400u /* the outer call's */

static int fake_read(void *userdata, uint64_t addr, void *buf, size_t len) {
        int *reads = userdata;
        if (reads)
                (*reads)++;
        /* The process's stack is as the copy has it. */
        if (addr >= SP && addr - SP <= sizeof(stack) && len <= sizeof(stack) - (addr - SP)) {
                memcpy(buf, stack + (addr - SP), len);
                return 0;
        }
        if (addr < HEAP || addr - HEAP > sizeof(heap) || len > sizeof(heap) - (addr - HEAP))
                return -EFAULT;
        memcpy(buf, heap + (addr - HEAP), len);
        return 0;
}

static void put64(uint8_t *m, uint64_t at, uint64_t v) {
        memcpy(m + at, &v, 8);
}

/* A code object whose frames take words words of the data stack. */
static void code_size(unsigned k, unsigned words) {
        int32_t stacksize = 3, nlocalsplus = (int32_t) (words - l->frame_specials - 3);
        memcpy(heap + (CODE(k) - HEAP) + l->code_stacksize, &stacksize, 4);
        memcpy(heap + (CODE(k) - HEAP) + l->code_nlocalsplus, &nlocalsplus, 4);
}

static void frame(unsigned k, uint64_t previous, bool entry) {
        uint64_t at = FRAME(k) - HEAP;
        code_size(k, 0x80 / 8); /* each frame right after its caller's */
        put64(heap, at + l->frame_code, CODE(k));
        put64(heap, at + l->frame_previous, previous);
        put64(heap, at + l->frame_prev_instr, CODE(k) + 0x20);
        heap[at + l->frame_is_entry] = entry;
}

static void build(void) {
        l = py_layout_find(3, 11);
        cr_assert_not_null(l);
        memset(heap, 0, sizeof(heap));
        memset(stack, 0, sizeof(stack));
        put64(heap, RUNTIME + l->runtime_interp_head, HEAP + INTERP);
        put64(heap, RUNTIME + l->runtime_tstate_current, HEAP + TS1); /* another thread holds the GIL */
        put64(heap, INTERP + l->interp_threads_head, HEAP + TS1);
        put64(heap, TS1 + l->tstate_native_tid, 7);
        put64(heap, TS1 + l->tstate_next, HEAP + TS2);
        put64(heap, TS2 + l->tstate_native_tid, TID);
        put64(heap, TS2 + l->tstate_cframe, SP + CF0);
        /* The copy: the inner call ran F3, the outer F1; the outer's
         * caller is the thread state's root_cframe, off the stack. */
        put64(stack, CF0 + l->cframe_current_frame, FRAME(3));
        put64(stack, CF0 + l->cframe_previous, SP + CF1);
        put64(stack, CF1 + l->cframe_current_frame, FRAME(1));
        put64(stack, CF1 + l->cframe_previous, HEAP + TS2 + 0x100);
        frame(3, FRAME(2), false);
        frame(2, FRAME(1), true);
        frame(1, FRAME(0), false);
        frame(0, 0, true);
}

static enum py_walk_result walk(uint32_t tid, bool copy, struct py_walk *w) {
        return py_walk(l, fake_read, NULL, HEAP + RUNTIME, tid, copy ? stack : NULL, sizeof(stack), SP, w);
}

Test(pyframes_walk, frames_checked_against_the_stack_copy) {
        build();
        static struct py_walk w;
        cr_assert_eq(walk(TID, true, &w), PY_WALK_OK);
        cr_assert_eq(w.n, 4);
        cr_assert_eq(w.entries, 2);
        cr_assert_eq(w.checked, 2, "both calls' _PyCFrames are in the copy");
        cr_assert_not(w.truncated);
        for (unsigned k = 0; k < 4; k++) {
                unsigned f = 3 - k; /* innermost first */
                cr_assert_eq(w.frames[2 * k] & ~PY_WALK_ENTRY, CODE(f));
                cr_assert_eq(w.frames[2 * k + 1], CODE(f) + 0x20, "the frame's last instruction");
                cr_assert_eq((w.frames[2 * k] & PY_WALK_ENTRY) != 0, f == 2 || f == 0, "entry frames marked");
        }
        cr_assert(py_walk_matches(&w, 2), "a native stack with two evaluation frames");
        cr_assert_not(py_walk_matches(&w, 1), "one evaluation frame: not the sample the walk was checked against");
        cr_assert_not(py_walk_matches(&w, 3));
}

Test(pyframes_walk, the_gil_holder_is_found_first) {
        build();
        put64(heap, RUNTIME + l->runtime_tstate_current, HEAP + TS2);
        put64(heap, INTERP + l->interp_threads_head, 0); /* the list would not find it */
        int reads = 0;
        uint64_t ts;
        cr_assert_eq(py_walk_thread_state(l, fake_read, &reads, HEAP + RUNTIME, TID, &ts), 0);
        cr_assert_eq(ts, HEAP + TS2);
        cr_assert_eq(reads, 2);
        cr_assert_eq(py_walk_thread_state(l, fake_read, NULL, HEAP + RUNTIME, 99, &ts), 0);
        cr_assert_eq(ts, 0, "no thread 99");
}

Test(pyframes_walk, a_thread_without_state_or_frames) {
        build();
        static struct py_walk w;
        cr_assert_eq(walk(99, true, &w), PY_WALK_NO_THREAD);
        cr_assert_eq(w.n, 0);
        /* Between evaluation calls (its cframe the root one, with no frame). */
        put64(heap, TS2 + l->tstate_cframe, HEAP + TS2 + 0x100);
        cr_assert_eq(walk(TID, false, &w), PY_WALK_NO_THREAD);
}

/* The thread's current call is not in the copy: it entered a deeper
 * one since the sample (below the copied stack), or is off the stack. */
Test(pyframes_walk, a_call_not_in_the_copy_is_refused) {
        build();
        static struct py_walk w;
        put64(heap, TS2 + l->tstate_cframe, SP - 0x200);
        cr_assert_eq(walk(TID, true, &w), PY_WALK_MOVED);
        put64(heap, TS2 + l->tstate_cframe, SP + sizeof(stack) - 8); /* its fields past the copy's end */
        cr_assert_eq(walk(TID, true, &w), PY_WALK_MOVED);
}

/* The inner call's entry frame no longer leads to what the outer call
 * ran at the sample: the program moved on. */
Test(pyframes_walk, a_chain_that_left_the_sample_is_refused) {
        build();
        static struct py_walk w;
        frame(2, FRAME(0), true);
        code_size(0, 0x100 / 8); /* F2 right after F0 */
        cr_assert_eq(walk(TID, true, &w), PY_WALK_MOVED);
        /* Without a copy nothing says so: read as it is. */
        cr_assert_eq(walk(TID, false, &w), PY_WALK_OK);
        cr_assert_eq(w.n, 3);
        cr_assert_not(w.has_copy);
        cr_assert(py_walk_matches(&w, 2), "without a copy: the entry frames are what a native stack must match");
}

/* A frame's caller slot taken by another call since (the frame was
 * popped, its caller returned, another function called in its place):
 * the frame no longer starts where its caller's ends. */
Test(pyframes_walk, a_frame_not_right_after_its_caller_is_refused) {
        build();
        static struct py_walk w;
        code_size(1, 0x60 / 8);
        cr_assert_eq(walk(TID, true, &w), PY_WALK_MOVED);
        cr_assert_eq(walk(TID, false, &w), PY_WALK_MOVED, "with or without a copy");
        /* A frame that is not on the data stack (a generator's) says
         * nothing about it. */
        heap[FRAME(1) - HEAP + l->frame_owner] = 1;
        cr_assert_eq(walk(TID, true, &w), PY_WALK_OK);
        cr_assert_eq(w.n, 4);
}

/* Fewer entry frames than calls in the copy: the outer call returned. */
Test(pyframes_walk, calls_without_their_entry_frame_are_refused) {
        build();
        static struct py_walk w;
        frame(1, 0, false);
        frame(2, FRAME(1), false);
        put64(stack, CF1 + l->cframe_current_frame, 0);
        cr_assert_eq(walk(TID, true, &w), PY_WALK_MOVED);
}

Test(pyframes_walk, unreadable_memory) {
        build();
        static struct py_walk w;
        frame(1, 0xdead0000, false);
        cr_assert_eq(walk(TID, true, &w), PY_WALK_FAULT);
        build();
        memset(&w, 0, sizeof(w)); /* the thread state not kept from the walk before */
        put64(heap, RUNTIME + l->runtime_tstate_current, 0);
        put64(heap, RUNTIME + l->runtime_interp_head, 0xdead0000);
        cr_assert_eq(walk(TID, true, &w), PY_WALK_FAULT);
}

/* A frame list that loops (memory changing under the walk) ends at the
 * bound. */
Test(pyframes_walk, a_looping_list_ends) {
        build();
        static struct py_walk w;
        frame(3, FRAME(3), false);
        cr_assert_eq(walk(TID, false, &w), PY_WALK_OK);
        cr_assert(w.truncated);
        cr_assert_eq(w.n, PY_WALK_MAX_FRAMES);
        /* The thread list too. */
        build();
        put64(heap, TS1 + l->tstate_next, HEAP + TS1);
        uint64_t ts;
        cr_assert_eq(py_walk_thread_state(l, fake_read, NULL, HEAP + RUNTIME, TID, &ts), 0);
        cr_assert_eq(ts, 0);
}

Test(pyframes_walk, result_names) {
        cr_assert_str_eq(py_walk_result_name(PY_WALK_MOVED), "moved on");
        cr_assert_str_eq(py_walk_result_name(_PY_WALK_RESULT_MAX), "?");
}

/* The process is read a page at a time: the whole walk here (thread
 * list, thread state, four frames, their code objects) in four reads; a
 * walk reads afresh what the one before read, but for where the thread
 * state is and the code objects' sizes (not read again), and all of it
 * is kept per process. */
Test(pyframes_walk, memory_is_read_a_page_at_a_time) {
        build();
        static struct py_walk w;
        int reads = 0;
        cr_assert_eq(py_walk(l, fake_read, &reads, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(w.reads, 4, "pages read: %u", w.reads);
        cr_assert_eq(reads, 4);
        frame(1, FRAME(0), true);
        cr_assert_eq(py_walk(l, fake_read, &reads, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(w.entries, 3, "the change made since the last walk is seen");
        cr_assert_eq(reads, 6, "the thread state's page and the frames' page");
        /* Another process (its memory the same here): nothing kept. */
        w.process = 1;
        cr_assert_eq(py_walk(l, fake_read, &reads, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(reads, 10);
        /* A thread state kept that is no longer the thread's is looked up again. */
        put64(heap, TS2 + l->tstate_native_tid, 43);
        put64(heap, TS1 + l->tstate_native_tid, TID);
        put64(heap, TS1 + l->tstate_cframe, SP + CF0);
        cr_assert_eq(py_walk(l, fake_read, &reads, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(w.n, 4);
}

static int fake_readv(void *userdata, const uint64_t *addrs, void *const *bufs, size_t len, size_t n) {
        int *calls = userdata;
        size_t k = 0;
        /* One call, however many pages: counted once, as one read. */
        if (calls)
                (*calls)++;
        for (; k < n; k++)
                if (fake_read(NULL, addrs[k], bufs[k], len) < 0)
                        break;
        return (int) k;
}

/* With a readv, a thread walked before has its thread state's page and
 * the page its frames were in read in one call: the second walk makes
 * that one read and no other, and still sees what changed in memory. */
Test(pyframes_walk, a_known_thread_takes_one_read) {
        build();
        static struct py_walk w;
        int calls = 0;
        w.readv = fake_readv;
        cr_assert_eq(py_walk(l, fake_read, &calls, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(calls, 4, "first walk: %d reads", calls);
        frame(1, FRAME(0), true);
        calls = 0;
        cr_assert_eq(py_walk(l, fake_read, &calls, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(w.entries, 3, "the change made since the last walk is seen");
        cr_assert_eq(calls, 1, "second walk: %d reads", calls);
        cr_assert_eq(w.reads, 1);
        cr_assert_eq(w.n, 4);
        /* The frames' page unreadable now: the walk reads on its own. */
        for (size_t k = 0; k < PY_WALK_THREADS; k++)
                if (w.threads[k].tid == TID)
                        w.threads[k].frame_page = 0x10;
        calls = 0;
        cr_assert_eq(py_walk(l, fake_read, &calls, HEAP + RUNTIME, TID, stack, sizeof(stack), SP, &w), PY_WALK_OK);
        cr_assert_eq(w.n, 4);
}
