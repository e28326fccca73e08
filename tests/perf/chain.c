/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A program with a known call chain for the perf plugin's tests:
 * main -> chain_outer -> chain_middle -> chain_leaf, the leaf spinning (or,
 * with "syscalls", calling getppid() in a loop) for the seconds given.
 * Built four ways (-O0/-O2, with and without frame pointers). Prints
 * "ready <pid>" once started. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static int use_syscalls;
volatile unsigned long chain_sink;

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void chain_leaf(double until);
__attribute__((noinline)) void chain_middle(double until);
__attribute__((noinline)) void chain_outer(double until);

__attribute__((noinline)) void chain_leaf(double until) {
        unsigned long x = chain_sink;
        while (now() < until) {
                for (int k = 0; k < 100000; k++) {
                        if (use_syscalls)
                                x += (unsigned long) syscall(SYS_getppid);
                        else
                                x = x * 2862933555777941757ul + 3037000493ul;
                }
        }
        chain_sink = x;
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void chain_middle(double until) {
        chain_leaf(until);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void chain_outer(double until) {
        chain_middle(until);
        __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
        seconds = argc > 1 ? atof(argv[1]) : 3.0;
        use_syscalls = argc > 2 && strcmp(argv[2], "syscalls") == 0;
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
        chain_outer(now() + seconds);
        __asm__ volatile("" ::: "memory");
        return 0;
}
