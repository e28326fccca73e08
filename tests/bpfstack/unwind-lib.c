/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The library tests/bpfstack/unwind.c dlopen()s mid-run (built
 * -O2 -fomit-frame-pointer too): lib_outer -> lib_middle -> lib_leaf,
 * spinning for the milliseconds given. */

#include <stdint.h>
#include <time.h>

volatile uint64_t lib_sink;

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

__attribute__((noinline, noclone)) void lib_leaf(uint64_t until) {
        while (now_ms() < until) {
                uint64_t x = lib_sink;
                for (int k = 0; k < 2000000; k++)
                        x = x * 2862933555777941757ull + 3037000493ull;
                lib_sink = x;
        }
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) void lib_middle(uint64_t until) {
        lib_leaf(until);
        __asm__ volatile("" ::: "memory");
}

__attribute__((visibility("default"))) void lib_outer(uint64_t ms) {
        lib_middle(now_ms() + ms);
        __asm__ volatile("" ::: "memory");
}
