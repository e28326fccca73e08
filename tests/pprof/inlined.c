/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A program for the pprof tests, built -O2 -g: main -> pp_outer -> pp_hot,
 * pp_hot spinning in pp_mix, which is always inlined into it, so that
 * nearly every sample's leaf location is one address with two lines
 * (pp_mix, then pp_hot at the call). Reads the clock rarely: samples in
 * the vDSO would have no lines. Also built stripped, its debug
 * information in a separate file, for the debuginfod test. Prints
 * "ready <pid>" once started; runs for the seconds given, with "sleep"
 * sleeping 10 ms after each 10 ms of spinning (off-CPU samples). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long pp_sink;

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) unsigned long pp_mix(unsigned long x, unsigned long k) {
        for (unsigned long i = 0; i < k; i++)
                x = (x ^ (x >> 13)) * 2862933555777941757ul + 3037000493ul;
        return x;
}

__attribute__((noinline)) void pp_hot(double until);
__attribute__((noinline)) void pp_outer(double until);

__attribute__((noinline)) void pp_hot(double until) {
        unsigned long x = pp_sink;
        while (now() < until)
                x = pp_mix(x, 2000000);
        pp_sink = x;
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void pp_outer(double until) {
        pp_hot(until);
        __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
        double seconds = argc > 1 ? atof(argv[1]) : 2.0;
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
        if (argc > 2 && strcmp(argv[2], "sleep") == 0)
                for (double end = now() + seconds; now() < end;) {
                        pp_outer(now() + 0.01);
                        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
                }
        else
                pp_outer(now() + seconds);
        __asm__ volatile("" ::: "memory");
        return 0;
}
