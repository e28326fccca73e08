/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A program whose hot functions carry mangled symbol names, as a C++ and a
 * Rust compiler would emit them, for the tests of tracectl's demangling:
 * main -> traced::demo::Burner::run(double) (Itanium C++ ABI) ->
 * traced::demo::rust_spin (Rust v0), spinning for the seconds given (3 by
 * default). Written in C with assembler labels, so that make check needs
 * no C++ or Rust compiler. Prints "ready <pid>" once started. */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long mangled_sink;

void burner_run(double until) __asm__("_ZN6traced4demo6Burner3runEd");
void rust_spin(double until) __asm__("_RNvNtCs5GcW0ZNbygE_6traced4demo9rust_spin");

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void rust_spin(double until) {
        unsigned long x = mangled_sink;
        while (now() < until)
                for (int k = 0; k < 100000; k++)
                        x = x * 2862933555777941757ul + 3037000493ul;
        mangled_sink = x;
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void burner_run(double until) {
        rust_spin(until);
        __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
        double seconds = argc > 1 ? atof(argv[1]) : 3.0;
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
        burner_run(now() + seconds);
        __asm__ volatile("" ::: "memory");
        return 0;
}
