/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * libtraced-heap.so: the allocation family of glibc, wrapped. Each
 * allocation first compares the state page's generation with the quiet
 * one (a load and a branch) and, while no session targets the process,
 * goes straight to glibc's own entry points (__libc_malloc and the rest,
 * so no dlsym and no recursion). In a session, it counts its size off
 * the thread's credit, which runs to the sampler's next point; when that
 * runs out, the slow path samples and sets it again. Each allocation the
 * thread's sampler picks is written into the ring with the registers and
 * a copy of the stack, for the plugin to unwind; each free of a sampled
 * allocation is written too. The process never unwinds.
 *
 * A sampled block carries a mark: glibc allocates it 16 bytes (or its
 * alignment) longer, and the program gets the address past a header whose
 * last word, where glibc keeps an unsampled block's size, holds
 * HEAP_MARK. So a free knows a sampled block from the word glibc's free
 * reads next anyway: no table is looked up for the frees of a session,
 * and none at all while there is none (a block sampled in an ended
 * session still goes back to glibc from its header). Until the process
 * samples its first block, a free does not read that word either, only
 * a flag beside what malloc reads.
 *
 * Reentrancy: a thread-local flag sends every call made while the thread
 * is already inside a hook (from glibc, from a signal handler) straight
 * to glibc.
 */

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "heap-sampler.h"
#include "heap-session.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* Out of line, not cold: in a session it is the path every call takes. */
#define SLOW __attribute__((noinline))

static TLS int in_hook;
static TLS struct heap_sampler sampler;
static TLS uint64_t sampler_session;
/* In a session, the bytes the thread may allocate before its next slow
 * path, and what that was when last set: never past the sampler's next
 * point nor the interval (an allocation of at least the interval is
 * always sampled), nor LOOK_BYTES (within which the thread notices that
 * the session ended). An allocation within it needs nothing but glibc
 * and the count. 0: the next allocation takes the slow path. */
static TLS uint64_t credit, credit_set;
#define LOOK_BYTES (256u << 10)
static TLS uintptr_t stack_lo, stack_top;
static TLS uint32_t tid;

/* The last word before a sampled block: never the size field glibc keeps
 * there for any other block (no chunk's size reaches 2^63). The word
 * before it holds how far the block glibc allocated starts before the
 * program's address. */
#define HEAP_MARK 0xfa11b1ed5a3b1ed0ull
#define HEAP_HEADER 16u

static inline int marked(const void *p) {
        return __builtin_expect(p && ((const uint64_t *) p)[-1] == HEAP_MARK, 0);
}

static inline void *block_of(void *p) {
        return (char *) p - ((const uint64_t *) p)[-2];
}

/* glibc's malloc_usable_size (this library's takes its name). */
static size_t (*libc_usable_size)(void *);

static inline uint32_t generation(void) {
        return heap_state_generation(__ATOMIC_RELAXED);
}

static inline int quiet(void) {
        return __builtin_expect(generation() == __atomic_load_n(&heap_gate.quiet, __ATOMIC_RELAXED), 1);
}

/* An allocation of size bytes that needs no more than glibc: no session
 * (the page's generation is the quiet one, so a session that starts is
 * seen at the next call), or within the thread's credit (counted here).
 * Anything else takes the slow path, which counts what the credit let
 * through into the sampler. */
static inline int alloc_passes(size_t size) {
        if (quiet())
                return 1;
        uint64_t c = credit;
        if (__builtin_expect(size < c, 1)) {
                credit = c - size;
                return 1;
        }
        return 0;
}

/* A free (or the old block of a realloc) that needs no more than glibc:
 * a block never sampled. */
static inline int free_passes(void *p) {
        return __builtin_expect(!__atomic_load_n(&heap_gate.marked, __ATOMIC_RELAXED), 1) || !marked(p);
}

/* The thread's stack, [stack_lo, stack_top). */
static uintptr_t thread_stack_top(void) {
        if (stack_top)
                return stack_top;
        pthread_attr_t a;
        void *addr;
        size_t size;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
                if (pthread_attr_getstack(&a, &addr, &size) == 0) {
                        stack_lo = (uintptr_t) addr;
                        stack_top = (uintptr_t) addr + size;
                }
                pthread_attr_destroy(&a);
        }
        return stack_top;
}

/* The ring passed half full: the plugin reads it now, not at its next
 * period (a burst of allocations fills a ring in milliseconds). */
static void wake(struct heap_session *s) {
        if (heap_ring_wants_wake(&s->ring)) {
                const char b = HEAP_WAKE;
                (void) send(s->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
}

/* The copy of a stack into the ring: stores that go around the caches
 * for all but a few bytes (the plugin reads it from another CPU, and a
 * copy of tens of KiB through the caches evicted the program's own data
 * and first read every line of the ring it overwrote). */
static void copy_out(uint8_t *to, const uint8_t *from, size_t n) {
#if defined(__x86_64__)
        if (n >= 4096) {
                size_t head = (16u - ((uintptr_t) to & 15u)) & 15u;
                memcpy(to, from, head);
                to += head;
                from += head;
                n -= head;
                for (; n >= 64; n -= 64, to += 64, from += 64) {
                        __m128i a = _mm_loadu_si128((const __m128i *) from);
                        __m128i b = _mm_loadu_si128((const __m128i *) (from + 16));
                        __m128i c = _mm_loadu_si128((const __m128i *) (from + 32));
                        __m128i d = _mm_loadu_si128((const __m128i *) (from + 48));
                        _mm_stream_si128((__m128i *) to, a);
                        _mm_stream_si128((__m128i *) (to + 16), b);
                        _mm_stream_si128((__m128i *) (to + 32), c);
                        _mm_stream_si128((__m128i *) (to + 48), d);
                }
                /* Those stores are not ordered with the commit's: they
                 * are done before it. */
                _mm_sfence();
        }
#endif
        memcpy(to, from, n);
}

/* The registers here, and the stack from here up: what the plugin unwinds
 * from. Not inlined: its frame is one of the library's, which the plugin
 * takes off the stack. */
__attribute__((noinline)) static void send_alloc(struct heap_session *s, uint64_t addr, uint64_t size,
                                                 uint64_t weight) {
        struct heap_alloc_regs regs = { { 0 } };
#if defined(__x86_64__)
        /* UREG_* order: ax bx cx dx si di bp sp ip r8 .. r15. */
        __asm__ volatile("movq %%rax, 0(%0)\n\t"
                         "movq %%rbx, 8(%0)\n\t"
                         "movq %%rcx, 16(%0)\n\t"
                         "movq %%rdx, 24(%0)\n\t"
                         "movq %%rsi, 32(%0)\n\t"
                         "movq %%rdi, 40(%0)\n\t"
                         "movq %%rbp, 48(%0)\n\t"
                         "movq %%rsp, 56(%0)\n\t"
                         "leaq 0(%%rip), %%r11\n\t"
                         "movq %%r11, 64(%0)\n\t"
                         "movq %%r8, 72(%0)\n\t"
                         "movq %%r9, 80(%0)\n\t"
                         "movq %%r10, 88(%0)\n\t"
                         "movq %%r11, 96(%0)\n\t"
                         "movq %%r12, 104(%0)\n\t"
                         "movq %%r13, 112(%0)\n\t"
                         "movq %%r14, 120(%0)\n\t"
                         "movq %%r15, 128(%0)\n\t"
                         :
                         : "r"(regs.regs)
                         : "r11", "memory");
#else
        /* The plugin unwinds x86-64 only: elsewhere, no stack. */
        regs.regs[7] = (uint64_t) (uintptr_t) __builtin_frame_address(0);
#endif
        uintptr_t sp = (uintptr_t) regs.regs[7], top = thread_stack_top();
        /* On another stack (a signal handler's, sigaltstack(2)), nothing
         * is known of its extent: no copy, the plugin says so. */
        uint64_t depth = sp >= stack_lo && sp < top ? top - sp : 0, n = depth;
        if (n > s->stack_bytes)
                n = s->stack_bytes;
        /* A stack the plugin walked before, the same way: its words only. */
        const struct heap_template *t =
                depth <= UINT32_MAX ? heap_template_find(s->templates, (const uint8_t *) sp, (uint32_t) depth,
                                                         (uint32_t) n)
                                    : NULL;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        uint32_t payload = (uint32_t) (sizeof(struct heap_record) + sizeof(regs) +
                                       (t ? sizeof(struct heap_sparse_head) + t->nwords * 8u : n));
        uint8_t *at = heap_ring_begin_write(&s->ring, payload, s->block, s->block_timeout_us);
        if (!at) {
                heap_session_dropped(s);
                return;
        }
        struct heap_record rec = {
                .type = t ? HEAP_RECORD_ALLOC_SPARSE : HEAP_RECORD_ALLOC, .stack_size = (uint32_t) n,
                .addr = addr, .size = size, .weight = weight,
                .time = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec,
                .tid = tid ? tid : (tid = (uint32_t) gettid()),
                .depth = depth <= UINT32_MAX ? (uint32_t) depth : 0,
        };
        memcpy(at, &rec, sizeof(rec));
        memcpy(at + sizeof(rec), &regs, sizeof(regs));
        uint8_t *to = at + sizeof(rec) + sizeof(regs);
        if (t) {
                /* The template's words may change under it only to dead:
                 * its count and offsets are fixed once it is live. */
                struct heap_sparse_head head = { .slot = (uint32_t) (t - s->templates), .nwords = t->nwords };
                memcpy(to, &head, sizeof(head));
                to += sizeof(head);
                for (unsigned k = 0; k < head.nwords; k++)
                        memcpy(to + 8u * k, (const uint8_t *) sp + t->offs[k], 8);
        } else
                copy_out(to, (const uint8_t *) sp, n);
        heap_ring_end_write(&s->ring, at);
        wake(s);
}

static void send_free(struct heap_session *s, uint64_t addr) {
        uint8_t *at = heap_ring_begin_write(&s->ring, sizeof(struct heap_record), s->block, s->block_timeout_us);
        if (!at) {
                heap_session_dropped(s);
                return;
        }
        struct heap_record rec = { .type = HEAP_RECORD_FREE, .addr = addr };
        memcpy(at, &rec, sizeof(rec));
        heap_ring_end_write(&s->ring, at);
        wake(s);
}

/* In the slow path, before glibc allocates size bytes: the session (held,
 * until heap_session_put) when the thread's sampler picks this
 * allocation, with the bytes it stands for; NULL when it does not. Most
 * are not picked: the sampler decides before the session is held. */
static struct heap_session *pick(size_t size, uint64_t *ret_weight) {
        uint64_t id, interval;
        /* What the credit let through since it was set: all short of the
         * sampler's next point. */
        uint64_t passed = credit_set - credit;
        credit = credit_set = 0;
        uint32_t active = __atomic_load_n(&heap_gate.active, __ATOMIC_ACQUIRE);
        if (!heap_session_peek(&id, &interval))
                return NULL;
        if (sampler_session != id) {
                uint64_t seed = (uint64_t) gettid() * 0x9e3779b97f4a7c15ull ^ (uint64_t) (uintptr_t) &seed ^ id;
                heap_sampler_init(&sampler, interval, seed);
                sampler_session = id;
        } else {
                sampler.bytes_left -= (int64_t) passed;
        }
        uint64_t w = heap_sampler_weight(&sampler, size);
        /* A credit only for the session settled at `active`, when that did
         * not change around the peek (a change first makes it odd). */
        if (__atomic_load_n(&heap_gate.active, __ATOMIC_ACQUIRE) == active && active == generation() &&
            sampler.bytes_left > 0) {
                uint64_t c = (uint64_t) sampler.bytes_left;
                c = c < sampler.interval ? c : sampler.interval;
                credit = credit_set = c < LOOK_BYTES ? c : LOOK_BYTES;
        }
        if (!w)
                return NULL;
        struct heap_session *s = heap_session_get();
        /* (A session that changed since the sampler drew: not sampled.) */
        if (s && s->id != id) {
                heap_session_put();
                s = NULL;
        }
        *ret_weight = w;
        return s;
}

/* The block glibc allocated for a picked allocation of size bytes, `off`
 * bytes (HEAP_HEADER, or the alignment asked for) longer: marked, written
 * into the ring, and the session put. */
static void *sampled(struct heap_session *s, void *block, size_t off, size_t size, uint64_t weight) {
        if (!block) {
                heap_session_put();
                return NULL;
        }
        void *p = (char *) block + off;
        ((uint64_t *) p)[-2] = off;
        if (!__atomic_load_n(&heap_gate.marked, __ATOMIC_RELAXED))
                __atomic_store_n(&heap_gate.marked, 1u, __ATOMIC_RELEASE);
        ((uint64_t *) p)[-1] = HEAP_MARK;
        if (heap_addrset_insert(&s->set, (uint64_t) (uintptr_t) p))
                send_alloc(s, (uint64_t) (uintptr_t) p, size, weight);
        heap_session_put();
        return p;
}

/* A picked allocation whose size with the header does not fit. */
static void *too_large(void) {
        heap_session_put();
        errno = ENOMEM;
        return NULL;
}

/* size bytes from glibc: marked and written into the ring when s (the
 * session pick() held) is not NULL. */
static void *allocate(struct heap_session *s, size_t size, uint64_t weight) {
        if (!s)
                return __libc_malloc(size);
        if (size > SIZE_MAX - HEAP_HEADER)
                return too_large();
        return sampled(s, __libc_malloc(size + HEAP_HEADER), HEAP_HEADER, size, weight);
}

/* A sampled block's free, said before glibc has it back: once it is
 * freed, another thread may get the address back. Only the session that
 * sampled it holds it. */
static void forget(void *p) {
        struct heap_session *s = heap_session_get();
        if (!s)
                return;
        if (heap_addrset_remove(&s->set, (uint64_t) (uintptr_t) p))
                send_free(s, (uint64_t) (uintptr_t) p);
        heap_session_put();
}

static int enter(void) {
        if (in_hook)
                return 0;
        in_hook = 1;
        heap_session_refresh();
        return 1;
}

static void leave_hook(void) {
        in_hook = 0;
}

/* How many bytes of p the program may use. */
static size_t usable(void *p) {
        if (!libc_usable_size)
                libc_usable_size = (size_t(*)(void *)) dlsym(RTLD_NEXT, "malloc_usable_size");
        if (!p || !libc_usable_size)
                return 0;
        if (!marked(p))
                return libc_usable_size(p);
        size_t off = (size_t) ((const uint64_t *) p)[-2];
        return libc_usable_size(block_of(p)) - off;
}

/* Each wrapper is the quiet test (or, in a session, the credit's count;
 * for a free, the look at the word before its block) and a tail call
 * into glibc; the rest is out of line, so that the quiet path saves no
 * registers and builds no frame (a malloc and free of a small block take
 * some 20 ns in glibc: a frame more is a tenth of that). */

SLOW static void *malloc_slow(size_t size) {
        if (!enter())
                return __libc_malloc(size);
        uint64_t w = 0;
        struct heap_session *s = pick(size, &w);
        void *p = allocate(s, size, w);
        leave_hook();
        return p;
}

EXPORT void *malloc(size_t size) {
        if (alloc_passes(size))
                return __libc_malloc(size);
        return malloc_slow(size);
}

/* A sampled block: its free said (outside a hook), and its block back
 * to glibc. */
SLOW static void free_slow(void *p) {
        if (enter()) {
                forget(p);
                leave_hook();
        }
        __libc_free(block_of(p));
}

EXPORT void free(void *p) {
        /* (The flag first, alone: until the first sample, three
         * instructions.) */
        if (__builtin_expect(!__atomic_load_n(&heap_gate.marked, __ATOMIC_RELAXED), 1)) {
                __libc_free(p);
                return;
        }
        if (!marked(p)) {
                __libc_free(p);
                return;
        }
        free_slow(p);
}

SLOW static void *calloc_slow(size_t n, size_t size) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total) || !enter())
                return __libc_calloc(n, size);
        uint64_t w;
        struct heap_session *s = pick(total, &w);
        void *p;
        if (!s)
                p = __libc_calloc(n, size);
        else if (total > SIZE_MAX - HEAP_HEADER)
                p = too_large();
        else
                p = sampled(s, __libc_calloc(1, total + HEAP_HEADER), HEAP_HEADER, total, w);
        leave_hook();
        return p;
}

EXPORT void *calloc(size_t n, size_t size) {
        size_t total;
        if (!__builtin_mul_overflow(n, size, &total) && alloc_passes(total))
                return __libc_calloc(n, size);
        return calloc_slow(n, size);
}

/* A realloc of a sampled block, or one the sampler picks: the new block
 * is allocated (marked when picked), the bytes copied, and the old block
 * freed (its free said first), as glibc does when it moves a block. In
 * a hook (in_hook), nothing is sampled and nothing said. */
static void release(void *old, bool hooked) {
        if (!marked(old)) {
                __libc_free(old);
                return;
        }
        if (hooked)
                forget(old);
        __libc_free(block_of(old));
}

static void *realloc_moved(void *old, size_t size, bool hooked) {
        uint64_t w = 0;
        struct heap_session *s = hooked ? pick(size, &w) : NULL;
        if (!marked(old) && !s)
                return __libc_realloc(old, size);
        if (!size) {
                /* glibc frees old and gives NULL. */
                if (s)
                        heap_session_put();
                release(old, hooked);
                return NULL;
        }
        void *p = allocate(s, size, w);
        if (!p)
                return NULL; /* old stays, as glibc leaves it */
        size_t n = usable(old);
        memcpy(p, old, n < size ? n : size);
        release(old, hooked);
        return p;
}

SLOW static void *realloc_slow(void *old, size_t size) {
        if (!old)
                return malloc(size);
        if (!enter())
                return realloc_moved(old, size, false);
        void *p = realloc_moved(old, size, true);
        leave_hook();
        return p;
}

EXPORT void *realloc(void *old, size_t size) {
        if (free_passes(old) && alloc_passes(size))
                return __libc_realloc(old, size);
        return realloc_slow(old, size);
}

EXPORT void *reallocarray(void *old, size_t n, size_t size) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total)) {
                errno = ENOMEM;
                return NULL;
        }
        return realloc(old, total);
}

/* The memalign family's slow path: a picked block is allocated with its
 * alignment (at least the header's) before the program's address. */
static void *aligned(size_t alignment, size_t size) {
        if (quiet() || !enter())
                return __libc_memalign(alignment, size);
        uint64_t w;
        struct heap_session *s = pick(size, &w);
        void *p;
        /* glibc takes an alignment that is not a power of two up to one. */
        size_t off = HEAP_HEADER;
        while (off < alignment && off <= SIZE_MAX / 2)
                off *= 2;
        if (!s)
                p = __libc_memalign(alignment, size);
        else if (size > SIZE_MAX - off)
                p = too_large();
        else
                p = sampled(s, __libc_memalign(off, size + off), off, size, w);
        leave_hook();
        return p;
}

EXPORT void *memalign(size_t alignment, size_t size) {
        return aligned(alignment, size);
}

EXPORT void *aligned_alloc(size_t alignment, size_t size) {
        /* As glibc 2.36: a power of two, else EINVAL. */
        if (alignment == 0 || (alignment & (alignment - 1))) {
                errno = EINVAL;
                return NULL;
        }
        return aligned(alignment, size);
}

EXPORT int posix_memalign(void **ret, size_t alignment, size_t size) {
        if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) || alignment == 0)
                return EINVAL;
        int saved = errno;
        void *p = aligned(alignment, size);
        if (!p && size) {
                errno = saved;
                return ENOMEM;
        }
        *ret = p;
        errno = saved;
        return 0;
}

EXPORT void *valloc(size_t size) {
        return aligned((size_t) sysconf(_SC_PAGESIZE), size);
}

EXPORT void *pvalloc(size_t size) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        if (size > SIZE_MAX - page) {
                errno = ENOMEM;
                return NULL;
        }
        /* At least a page, as glibc. */
        return aligned(page, size ? (size + page - 1) & ~(page - 1) : page);
}

/* glibc's would read a sampled block's mark as its size. */
EXPORT size_t malloc_usable_size(void *p) {
        return usable(p);
}

static void fork_prepare(void) {
        in_hook++;
        heap_session_fork_prepare();
}

static void fork_parent(void) {
        heap_session_fork_parent();
        in_hook--;
}

static void fork_child(void) {
        heap_session_forked_child();
        sampler_session = 0;
        credit = credit_set = 0;
        tid = 0;
        in_hook--;
}

__attribute__((constructor)) static void heap_preload_init(void) {
        in_hook++;
        heap_session_setup();
        libc_usable_size = (size_t(*)(void *)) dlsym(RTLD_NEXT, "malloc_usable_size");
        (void) pthread_atfork(fork_prepare, fork_parent, fork_child);
        in_hook--;
}
