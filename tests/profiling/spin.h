/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the programs of tests/profiling share: the monotonic clock in
 * seconds, and a loop of arithmetic that keeps a CPU busy until then. */

#include <time.h>

static inline double spin_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* x, stirred until the clock reads until (checked every rounds). */
__attribute__((always_inline)) static inline unsigned long spin_until(unsigned long x, double until, int rounds) {
        while (spin_now() < until)
                for (int k = 0; k < rounds; k++)
                        x = x * 2862933555777941757ul + 3037000493ul;
        return x;
}
