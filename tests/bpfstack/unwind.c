/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The program tests/integration/test-bpfstack.c records to check user
 * stacks walked by unwind tables. Built -O2 -fomit-frame-pointer, so a
 * frame-pointer walk cannot follow it. Modes (MS: how long it runs):
 *   chain MS         main -> chain_outer -> chain_middle -> chain_leaf, spinning
 *   recurse MS       main -> recurse x 100 -> recurse_leaf, spinning
 *   qsort MS         main -> sort_outer -> qsort (libc) -> cmp_slow, which spins a while per call
 *   exec MS PROGRAM  chain for MS, then exec()s PROGRAM "chain" MS
 *   dlopen MS LIB    chain for MS, then dlopen()s LIB and runs its lib_outer(MS) ->
 *                    lib_middle -> lib_leaf, spinning */

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t unwind_sink;

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* Work between two looks at the clock, so that samples land here rather
 * than in the vDSO. */
__attribute__((noinline)) static void burn(void) {
        uint64_t x = unwind_sink;
        for (int k = 0; k < 2000000; k++)
                x = x * 2862933555777941757ull + 3037000493ull;
        unwind_sink = x;
}

__attribute__((noinline, noclone)) void chain_leaf(uint64_t until) {
        while (now_ms() < until)
                burn();
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) void chain_middle(uint64_t until) {
        chain_leaf(until);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) void chain_outer(uint64_t until) {
        chain_middle(until);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) void recurse_leaf(uint64_t until) {
        while (now_ms() < until)
                burn();
        __asm__ volatile("" ::: "memory");
}

/* Not a tail call: work after the call keeps each frame. */
__attribute__((noinline, noclone)) void recurse(int depth, uint64_t until) {
        if (depth <= 1)
                recurse_leaf(until);
        else
                recurse(depth - 1, until);
        unwind_sink++;
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) int cmp_slow(const void *a, const void *b) {
        uint64_t x = unwind_sink;
        for (int k = 0; k < 20000; k++)
                x = x * 2862933555777941757ull + 3037000493ull;
        unwind_sink = x;
        int l = *(const int *) a, r = *(const int *) b;
        return (l > r) - (l < r);
}

__attribute__((noinline, noclone)) void sort_outer(uint64_t until) {
        int v[512];
        while (now_ms() < until) {
                for (int k = 0; k < 512; k++)
                        v[k] = (int) ((unsigned) k * 2654435761u >> 7);
                qsort(v, 512, sizeof(v[0]), cmp_slow);
        }
        __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
        if (argc < 3) {
                fprintf(stderr, "usage: %s chain|recurse|qsort|exec|dlopen MS [PROGRAM|LIB]\n", argv[0]);
                return 2;
        }
        uint64_t ms = strtoull(argv[2], NULL, 10);
        const char *mode = argv[1];
        if (strcmp(mode, "chain") == 0)
                chain_outer(now_ms() + ms);
        else if (strcmp(mode, "recurse") == 0)
                recurse(100, now_ms() + ms);
        else if (strcmp(mode, "qsort") == 0)
                sort_outer(now_ms() + ms);
        else if (strcmp(mode, "exec") == 0 && argc > 3) {
                chain_outer(now_ms() + ms);
                execl(argv[3], argv[3], "chain", argv[2], (char *) NULL);
                perror(argv[3]);
                return 1;
        } else if (strcmp(mode, "dlopen") == 0 && argc > 3) {
                chain_outer(now_ms() + ms);
                void *h = dlopen(argv[3], RTLD_NOW);
                void (*lib_outer)(uint64_t) = h ? (void (*)(uint64_t)) dlsym(h, "lib_outer") : NULL;
                if (!lib_outer) {
                        fprintf(stderr, "%s\n", dlerror());
                        return 1;
                }
                lib_outer(ms);
        } else {
                fprintf(stderr, "unknown mode %s\n", mode);
                return 2;
        }
        unwind_sink++;
        __asm__ volatile("" ::: "memory");
        return 0;
}
