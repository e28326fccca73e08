/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The heap tests' program, run with libtraced-heap.so preloaded.
 *
 *   heap-workload callsites DONE   waits for SIGUSR1, then allocates known
 *                                  amounts at known callsites, writes DONE
 *                                  and waits to be killed:
 *       small_kept    200000 x 64 B, all kept       (12 800 000 B)
 *       large_freed   8 x 512 KiB, all freed        (4 194 304 B)
 *       medium_half   4000 x 4000 B, half freed     (16 000 000 B, 8 000 000 freed)
 * (enough bytes at each callsite for a few thousand samples at 4096 B:
 * the sampling's own error, one over the root of the samples, is then
 * under a quarter of the tests' 10 %)
 *   heap-workload forks DONE       four threads and four forked children
 *                                  (one of which execs /bin/true) allocate
 *                                  and free; DONE when all went well
 *   heap-workload loop COUNT       allocates and frees forever, writing
 *                                  how many rounds it made into COUNT
 *   heap-workload blocks DONE      waits for SIGUSR1, allocates through every
 *                                  call of the family, fills, reallocs and
 *                                  frees part of it, checking alignment,
 *                                  malloc_usable_size and contents; writes
 *                                  DONE, waits for SIGUSR1 again (the
 *                                  session over), checks, reallocs and frees
 *                                  the rest; exits 0 when all held
 */

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SMALL 200000
#define MEDIUM 4000

static void *volatile sink;

__attribute__((noinline)) static void small_kept(void **keep) {
        for (int i = 0; i < SMALL; i++)
                keep[i] = malloc(64);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void large_freed(void) {
        for (int i = 0; i < 8; i++) {
                char *p = malloc(512 * 1024);
                p[0] = 1;
                sink = p;
                free(p);
        }
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void medium_half(void **keep) {
        for (int i = 0; i < MEDIUM; i++)
                keep[i] = malloc(4000);
        for (int i = 0; i < MEDIUM; i += 2) {
                free(keep[i]);
                keep[i] = NULL;
        }
        __asm__ volatile("" ::: "memory");
}

static void touch(const char *path, const char *text) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f)
                exit(3);
        fputs(text, f);
        if (fclose(f) != 0 || rename(tmp, path) != 0)
                exit(3);
}

static void wait_usr1(void) {
        sigset_t s;
        int sig;
        sigemptyset(&s);
        sigaddset(&s, SIGUSR1);
        sigprocmask(SIG_BLOCK, &s, NULL);
        sigwait(&s, &sig);
}

static int callsites(const char *done) {
        wait_usr1();
        /* Allocated up front, outside the callsites measured. */
        void **small = calloc(SMALL, sizeof(void *)), **medium = calloc(MEDIUM, sizeof(void *));
        if (!small || !medium)
                return 2;
        small_kept(small);
        large_freed();
        medium_half(medium);
        touch(done, "done\n");
        for (;;)
                pause();
}

static void churn(int rounds) {
        for (int r = 0; r < rounds; r++) {
                void *v[64];
                for (int i = 0; i < 64; i++)
                        v[i] = malloc((size_t) (16 + i * 97));
                for (int i = 0; i < 64; i++)
                        v[i] = realloc(v[i], (size_t) (32 + i * 131));
                void *a = NULL;
                if (posix_memalign(&a, 64, 1000) == 0)
                        free(a);
                free(calloc(10, 100));
                for (int i = 0; i < 64; i++)
                        free(v[i]);
        }
}

static void *thread_main(void *arg) {
        (void) arg;
        churn(2000);
        return NULL;
}

static int forks(const char *done) {
        wait_usr1();
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
                if (pthread_create(&t[i], NULL, thread_main, NULL) != 0)
                        return 2;
        int failed = 0;
        for (int i = 0; i < 4; i++) {
                /* Forked while the threads allocate: a lock held by one of
                 * them must not hang the child. */
                pid_t pid = fork();
                if (pid < 0)
                        return 2;
                if (pid == 0) {
                        churn(500);
                        if (i == 3)
                                execl("/bin/true", "true", (char *) NULL);
                        _exit(0);
                }
                int status;
                if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        failed++;
        }
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        if (failed)
                return 4;
        touch(done, "done\n");
        return 0;
}

static int loop(const char *count) {
        char text[32];
        for (unsigned long n = 1;; n++) {
                churn(20);
                snprintf(text, sizeof(text), "%lu\n", n);
                touch(count, text);
                struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
}

/* ---- blocks ---- */

#define BLOCKS 3000

struct block {
        unsigned char *p;
        size_t size, align;
};

static unsigned char fill_byte(size_t i, size_t k) {
        return (unsigned char) (i * 31u + k * 7u + 1u);
}

static int fail(const char *what, size_t i) {
        fprintf(stderr, "heap-workload blocks: block %zu: %s\n", i, what);
        return 5;
}

/* Alignment, usable size, and the pattern in the first `filled` bytes. */
static int check(const struct block *b, size_t i, size_t filled) {
        if (!b->p)
                return fail("not allocated", i);
        if ((uintptr_t) b->p % (b->align ? b->align : 16) != 0)
                return fail("misaligned", i);
        size_t usable = malloc_usable_size(b->p);
        if (usable < b->size)
                return fail("malloc_usable_size short of the size asked", i);
        /* (glibc's would read the library's mark as a size.) */
        if (usable > b->size + 4096 + 64)
                return fail("malloc_usable_size far past the size asked", i);
        for (size_t k = 0; k < filled && k < b->size; k++)
                if (b->p[k] != fill_byte(i, k))
                        return fail("contents changed", i);
        return 0;
}

static void fill(struct block *b, size_t i) {
        for (size_t k = 0; k < b->size; k++)
                b->p[k] = fill_byte(i, k);
}

/* Block i's size and the call that allocates it. */
static void allocate(struct block *b, size_t i) {
        size_t size = 1 + (i * 977u) % 6000u, align = (size_t) 16 << (i % 9); /* 16 .. 4096 */
        void *p = NULL;
        switch (i % 9) {
        case 0: b->p = malloc(size); align = 0; break;
        case 1: b->p = calloc(1, size); align = 0; break;
        case 2: b->p = realloc(NULL, size); align = 0; break;
        case 3: b->p = reallocarray(NULL, size, 1); align = 0; break;
        case 4: b->p = posix_memalign(&p, align, size) == 0 ? p : NULL; break;
        case 5: b->p = aligned_alloc(align, (size + align - 1) / align * align); break;
        case 6: b->p = memalign(align, size); break;
        case 7: b->p = valloc(size); align = (size_t) sysconf(_SC_PAGESIZE); break;
        default: b->p = pvalloc(size); align = (size_t) sysconf(_SC_PAGESIZE); break;
        }
        b->size = size;
        b->align = align;
        if (i % 9 == 1 && b->p)
                for (size_t k = 0; k < size; k++)
                        if (b->p[k])
                                b->p = NULL; /* calloc's block not zeroed: check() says so */
}

/* Grows or shrinks block i by realloc: its first bytes stay. */
static int resize(struct block *b, size_t i, size_t size) {
        unsigned char *p = realloc(b->p, size);
        if (!p)
                return fail("realloc failed", i);
        size_t kept = size < b->size ? size : b->size;
        b->p = p;
        b->size = size;
        b->align = 0;
        if (check(b, i, kept))
                return 5;
        fill(b, i);
        return 0;
}

static int blocks(const char *done) {
        wait_usr1();
        static struct block b[BLOCKS];
        for (size_t i = 0; i < BLOCKS; i++) {
                allocate(&b[i], i);
                if (check(&b[i], i, 0))
                        return 5;
                fill(&b[i], i);
        }
        for (size_t i = 0; i < BLOCKS; i += 2)
                if (resize(&b[i], i, b[i].size * 2 + 100) || resize(&b[i], i, b[i].size / 3 + 1))
                        return 5;
        for (size_t i = 0; i < BLOCKS; i += 3) {
                free(b[i].p);
                b[i].p = NULL;
        }
        /* realloc to 0 frees, as glibc does. */
        errno = 0;
        if (realloc(malloc(5000), 0) != NULL)
                return fail("realloc(p, 0) kept a block", 0);
        touch(done, "done\n");
        wait_usr1();
        /* The session is over: its sampled blocks go back all the same. */
        for (size_t i = 0; i < BLOCKS; i++) {
                if (i % 3 == 0)
                        continue;
                if (check(&b[i], i, b[i].size) || resize(&b[i], i, b[i].size + 4000))
                        return 5;
                free(b[i].p);
        }
        free(NULL);
        return 0;
}

int main(int argc, char **argv) {
        if (argc != 3) {
                fprintf(stderr, "usage: heap-workload callsites|forks|loop|blocks FILE\n");
                return 2;
        }
        if (strcmp(argv[1], "callsites") == 0)
                return callsites(argv[2]);
        if (strcmp(argv[1], "forks") == 0)
                return forks(argv[2]);
        if (strcmp(argv[1], "loop") == 0)
                return loop(argv[2]);
        if (strcmp(argv[1], "blocks") == 0)
                return blocks(argv[2]);
        return 2;
}
