/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>

#include "profiling/pyframes-walk.h"

static int read_u64(py_read_fn read, void *userdata, uint64_t addr, uint64_t *ret) {
        return read(userdata, addr, ret, sizeof(*ret));
}

/* Whether the thread state at ts is thread tid's. */
static int is_thread(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t ts, uint32_t tid) {
        uint64_t t;
        int r = read_u64(read, userdata, ts + l->tstate_native_tid, &t);
        if (r < 0)
                return r;
        return (uint32_t) t == tid;
}

int py_walk_thread_state(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t runtime, uint32_t tid,
                         uint64_t *ret) {
        uint64_t ts = 0, interp = 0;
        *ret = 0;
        if (read_u64(read, userdata, runtime + l->runtime_tstate_current, &ts) == 0 && ts &&
            is_thread(l, read, userdata, ts, tid) > 0) {
                *ret = ts;
                return 0;
        }
        if (read_u64(read, userdata, runtime + l->runtime_interp_head, &interp) < 0)
                return -EFAULT;
        unsigned seen = 0;
        for (unsigned i = 0; interp && i < PY_WALK_MAX_INTERPS; i++) {
                if (read_u64(read, userdata, interp + l->interp_threads_head, &ts) < 0)
                        return -EFAULT;
                for (; ts && seen < PY_WALK_MAX_THREADS; seen++) {
                        int r = is_thread(l, read, userdata, ts, tid);
                        if (r < 0)
                                return -EFAULT;
                        if (r > 0) {
                                *ret = ts;
                                return 0;
                        }
                        if (read_u64(read, userdata, ts + l->tstate_next, &ts) < 0)
                                return -EFAULT;
                }
                if (read_u64(read, userdata, interp + l->interp_next, &interp) < 0)
                        return -EFAULT;
        }
        return 0;
}

/* The 8 bytes of the copy at address addr, if it holds them. */
static bool copy_u64(const uint8_t *stack, size_t size, uint64_t sp, uint64_t addr, uint64_t *ret) {
        if (addr < sp || addr - sp > size || size - (addr - sp) < sizeof(*ret))
                return false;
        memcpy(ret, stack + (addr - sp), sizeof(*ret));
        return true;
}

/* The current_frame of each evaluation call whose _PyCFrame the copy
 * holds, innermost first, from cframe (the thread state's, now): their
 * number; 0 when cframe is not in the copy. */
static size_t calls_in_copy(const struct py_layout *l, const uint8_t *stack, size_t size, uint64_t sp, uint64_t cframe,
                            uint64_t *current, size_t cap) {
        size_t n = 0;
        while (n < cap) {
                uint64_t frame, previous;
                if (!copy_u64(stack, size, sp, cframe + l->cframe_current_frame, &frame) ||
                    !copy_u64(stack, size, sp, cframe + l->cframe_previous, &previous))
                        break;
                current[n++] = frame;
                /* The caller's is further up the stack, or not on it (the
                 * thread state's root_cframe), or past the copy. */
                if (previous <= cframe)
                        break;
                cframe = previous;
        }
        return n;
}

/* Frames further apart than this are in different chunks of the data
 * stack (or not on it), where nothing is said about their distance. */
#define CHUNK_SPAN (1u << 20)
#define FRAME_OWNED_BY_THREAD 0

static size_t slot_of(uint64_t process, uint64_t v, size_t slots) {
        return (size_t) (((v ^ (process << 32)) * 0x9e3779b97f4a7c15ull) >> 40) & (slots - 1);
}

/* The bytes a frame of code takes on the thread's data stack; 0 when not
 * known. Kept per code object (a code object's sizes never change). */
static uint64_t frame_bytes(const struct py_layout *l, py_read_fn read, void *userdata, struct py_walk *w,
                            uint64_t code) {
        if (!l->frame_specials)
                return 0;
        size_t k = slot_of(w->process, code, PY_WALK_CODES);
        if (w->codes[k].code == code && w->codes[k].process == w->process && w->codes[k].size)
                return w->codes[k].size;
        int32_t stacksize, nlocalsplus;
        if (read(userdata, code + l->code_stacksize, &stacksize, sizeof(stacksize)) < 0 ||
            read(userdata, code + l->code_nlocalsplus, &nlocalsplus, sizeof(nlocalsplus)) < 0 || stacksize < 0 ||
            nlocalsplus < 0)
                return 0;
        uint64_t size = ((uint64_t) stacksize + (uint64_t) nlocalsplus + l->frame_specials) * sizeof(uint64_t);
        w->codes[k].process = w->process;
        w->codes[k].code = code;
        w->codes[k].size = size;
        return size;
}

/* The thread state of tid, from where it was last time if it is still
 * tid's there, else looked up and kept. */
static int thread_state(const struct py_layout *l, py_read_fn read, void *userdata, uint64_t runtime, uint32_t tid,
                        struct py_walk *w, uint64_t *ret) {
        size_t k = slot_of(w->process, tid, PY_WALK_THREADS);
        if (w->threads[k].process == w->process && w->threads[k].tid == tid && w->threads[k].ts &&
            is_thread(l, read, userdata, w->threads[k].ts, tid) > 0) {
                *ret = w->threads[k].ts;
                return 0;
        }
        int r = py_walk_thread_state(l, read, userdata, runtime, tid, ret);
        if (r >= 0 && *ret) {
                w->threads[k].process = w->process;
                w->threads[k].tid = tid;
                w->threads[k].ts = *ret;
        }
        return r;
}

/* A py_read_fn through the walk's pages: each page read once. */
struct paged {
        py_read_fn read;
        void *userdata;
        struct py_walk *w;
};

static const uint8_t *page_of(struct paged *p, uint64_t page) {
        struct py_walk *w = p->w;
        for (uint32_t k = 0; k < w->n_pages; k++)
                if (w->page_addr[k] == page)
                        return w->pages[k];
        uint32_t k = w->n_pages < PY_WALK_PAGES ? w->n_pages++ : w->next_page++ % PY_WALK_PAGES;
        w->reads++;
        if (p->read(p->userdata, page, w->pages[k], PY_WALK_PAGE) < 0) {
                /* Not kept: the slot is the next one taken. */
                w->page_addr[k] = 0;
                return NULL;
        }
        w->page_addr[k] = page;
        return w->pages[k];
}

/* The two pages at a and b (a != b) read in one call of the caller's
 * readv, into free slots of the walk: those it read are kept. */
static void paged_prefetch(struct paged *p, uint64_t a, uint64_t b) {
        struct py_walk *w = p->w;
        if (!w->readv || !a || !b || a == b || w->n_pages + 2 > PY_WALK_PAGES)
                return;
        uint64_t addrs[2] = {a, b};
        void *bufs[2] = {w->pages[w->n_pages], w->pages[w->n_pages + 1]};
        w->reads++;
        int n = w->readv(p->userdata, addrs, bufs, PY_WALK_PAGE, 2);
        for (int k = 0; k < n && k < 2; k++)
                w->page_addr[w->n_pages++] = addrs[k];
}

static int paged_read(void *userdata, uint64_t addr, void *buf, size_t len) {
        struct paged *p = userdata;
        uint8_t *out = buf;
        if (addr + len < addr)
                return -EFAULT;
        while (len > 0) {
                uint64_t page = addr & ~(uint64_t) (PY_WALK_PAGE - 1), off = addr - page;
                size_t n = PY_WALK_PAGE - off < len ? PY_WALK_PAGE - off : len;
                const uint8_t *data = page ? page_of(p, page) : NULL;
                if (!data)
                        return -EFAULT;
                memcpy(out, data + off, n);
                out += n;
                addr += n;
                len -= n;
        }
        return 0;
}

enum py_walk_result py_walk(const struct py_layout *l, py_read_fn read_fn, void *userdata_fn, uint64_t runtime,
                            uint32_t tid, const uint8_t *stack, size_t stack_size, uint64_t sp, struct py_walk *ret) {
        struct paged paged = {.read = read_fn, .userdata = userdata_fn, .w = ret};
        py_read_fn read = paged_read;
        void *userdata = &paged;
        ret->n_pages = ret->next_page = ret->reads = 0;
        ret->n = ret->entries = ret->checked = 0;
        ret->has_copy = stack != NULL;
        ret->truncated = false;
        if (l->frame_size == 0 || l->frame_size > 256)
                return PY_WALK_FAULT;
        uint64_t ts, cframe, frame;
        size_t slot = slot_of(ret->process, tid, PY_WALK_THREADS);
        if (ret->threads[slot].process == ret->process && ret->threads[slot].tid == tid && ret->threads[slot].ts)
                paged_prefetch(&paged, ret->threads[slot].ts & ~(uint64_t) (PY_WALK_PAGE - 1),
                               ret->threads[slot].frame_page);
        if (thread_state(l, read, userdata, runtime, tid, ret, &ts) < 0)
                return PY_WALK_FAULT;
        if (!ts)
                return PY_WALK_NO_THREAD;
        if (read_u64(read, userdata, ts + l->tstate_cframe, &cframe) < 0 || !cframe)
                return PY_WALK_FAULT;
        uint64_t current[PY_WALK_MAX_FRAMES];
        size_t n_calls = 0;
        if (stack) {
                n_calls = calls_in_copy(l, stack, stack_size, sp, cframe, current, PY_WALK_MAX_FRAMES);
                if (n_calls == 0)
                        return PY_WALK_MOVED;
                frame = current[0];
        } else if (read_u64(read, userdata, cframe + l->cframe_current_frame, &frame) < 0)
                return PY_WALK_FAULT;
        if (!frame)
                return PY_WALK_NO_THREAD;
        /* Where the next walk of the thread will likely find its frames. */
        if (ret->threads[slot].process == ret->process && ret->threads[slot].tid == tid)
                ret->threads[slot].frame_page = frame & ~(uint64_t) (PY_WALK_PAGE - 1);
        uint8_t buf[256];
        uint64_t inner = 0;
        bool inner_on_stack = false;
        while (frame) {
                if (ret->n >= PY_WALK_MAX_FRAMES) {
                        ret->truncated = true;
                        break;
                }
                if (read(userdata, frame, buf, l->frame_size) < 0)
                        return PY_WALK_FAULT;
                uint64_t code, previous, instr;
                memcpy(&code, buf + l->frame_code, sizeof(code));
                memcpy(&previous, buf + l->frame_previous, sizeof(previous));
                memcpy(&instr, buf + l->frame_prev_instr, sizeof(instr));
                bool entry = buf[l->frame_is_entry] != 0;
                bool on_stack = buf[l->frame_owner] == FRAME_OWNED_BY_THREAD;
                if (!code || (code & PY_WALK_ENTRY))
                        return PY_WALK_MOVED;
                /* The frame it called (the one before in the walk) starts
                 * right after it on the data stack: when not, that one was
                 * popped and this slot taken by another call since. */
                if (inner_on_stack && on_stack && inner > frame && inner - frame < CHUNK_SPAN) {
                        uint64_t size = frame_bytes(l, read, userdata, ret, code);
                        if (size && inner != frame + size)
                                return PY_WALK_MOVED;
                }
                inner = frame;
                inner_on_stack = on_stack;
                ret->frames[2 * ret->n] = code | (entry ? PY_WALK_ENTRY : 0);
                ret->frames[2 * ret->n + 1] = instr;
                ret->n++;
                if (entry) {
                        ret->entries++;
                        /* The call outside this one ran previous at the
                         * sample, as its _PyCFrame in the copy says. */
                        if (ret->entries < n_calls && previous != current[ret->entries])
                                return PY_WALK_MOVED;
                }
                frame = previous;
        }
        if (!ret->truncated && ret->entries < n_calls)
                return PY_WALK_MOVED;
        ret->checked = (uint32_t) n_calls;
        return PY_WALK_OK;
}

bool py_walk_matches(const struct py_walk *w, size_t n_eval) {
        return py_walk_counts_match(w->has_copy, w->entries, w->checked, n_eval);
}

const char *py_walk_result_name(enum py_walk_result r) {
        static const char *const names[_PY_WALK_RESULT_MAX] = {
                [PY_WALK_OK] = "ok",
                [PY_WALK_NO_THREAD] = "no thread state",
                [PY_WALK_MOVED] = "moved on",
                [PY_WALK_FAULT] = "unreadable",
        };
        return (unsigned) r < _PY_WALK_RESULT_MAX ? names[r] : "?";
}
