/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A program whose hot functions carry mangled symbol names, as a C++ and a
 * Rust compiler would emit them, for the tests of tracectl's demangling:
 * main -> traced::demo::Burner::run(double) (Itanium C++ ABI) ->
 * traced::demo::rust_spin (Rust v0), spinning for the seconds given (3 by
 * default). Written in C with assembler labels, so that make check needs
 * no C++ or Rust compiler. Prints "ready <pid>" once started. */

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "spin.h"

volatile unsigned long mangled_sink;

void burner_run(double until) __asm__("_ZN6traced4demo6Burner3runEd");
void rust_spin(double until) __asm__("_RNvNtCs5GcW0ZNbygE_6traced4demo9rust_spin");

__attribute__((noinline)) void rust_spin(double until) {
        mangled_sink = spin_until(mangled_sink, until, 100000);
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
        burner_run(spin_now() + seconds);
        __asm__ volatile("" ::: "memory");
        return 0;
}
