/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A deep stack, for the tests of how far the profilers walk: main ->
 * deep_descend, DEPTH times (each frame holding about 1 KiB) -> deep_spin,
 * spinning for SECONDS. A C++ compiler or an interpreter runs as deep:
 * 40 frames are 41 KiB, past a 16 or 32 KiB copy of the stack; 100 are
 * past the 64 KiB the kernel copies at most.
 *
 *   deep DEPTH SECONDS
 *
 * Prints "ready <pid>" once started. */

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "spin.h"

#define FRAME_BYTES 1024

volatile unsigned long deep_sink;

__attribute__((noinline)) unsigned long deep_spin(double until) {
        unsigned long x = spin_until(deep_sink, until, 100000);
        __asm__ volatile("" ::: "memory");
        return x;
}

__attribute__((noinline)) unsigned long deep_descend(int depth, double until) {
        volatile char pad[FRAME_BYTES];
        pad[0] = (char) depth;
        pad[FRAME_BYTES - 1] = (char) depth;
        unsigned long r = depth > 0 ? deep_descend(depth - 1, until) : deep_spin(until);
        /* Used after the call: no tail call, the frame stays. */
        return r + (unsigned long) pad[0] + (unsigned long) pad[FRAME_BYTES - 1];
}

int main(int argc, char **argv) {
        if (argc < 3) {
                fprintf(stderr, "usage: deep DEPTH SECONDS\n");
                return 2;
        }
        int depth = atoi(argv[1]);
        double seconds = atof(argv[2]);
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
        deep_sink = deep_descend(depth, spin_now() + seconds);
        return 0;
}
