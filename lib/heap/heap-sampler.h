/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Which allocations a thread samples: a Poisson process over the bytes
 * it allocates, with a mean of `interval` bytes between samples. The bytes
 * to the next sample are drawn from the exponential distribution; an
 * allocation that crosses that point is sampled and stands for the
 * interval times the number of points it crossed, so the sum of the
 * weights estimates the bytes allocated without bias. An allocation of
 * at least the interval is always sampled, and stands for its own size.
 *
 * One per thread, no locking, no allocation (it runs inside malloc).
 */

#include <stdint.h>

struct heap_sampler {
        uint64_t interval;
        int64_t bytes_left;
        uint64_t rng; /* xorshift64* state, never 0 */
};

void heap_sampler_init(struct heap_sampler *s, uint64_t interval, uint64_t seed);
/* The rest of heap_sampler_weight, bytes_left already counted down. */
uint64_t heap_sampler_weight_slow(struct heap_sampler *s, uint64_t size);
/* 0: not sampled; else the bytes the sample stands for. Inline: in a
 * session every allocation asks. */
static inline uint64_t heap_sampler_weight(struct heap_sampler *s, uint64_t size) {
        if (__builtin_expect(size < s->interval && s->interval > 1, 1)) {
                s->bytes_left -= (int64_t) size;
                if (s->bytes_left > 0)
                        return 0;
        }
        return heap_sampler_weight_slow(s, size);
}
/* One draw of the bytes to the next sample (at least 1). */
int64_t heap_sampler_draw(struct heap_sampler *s);
