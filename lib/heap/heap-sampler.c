/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <math.h>

#include "heap-sampler.h"

static uint64_t next(struct heap_sampler *s) {
        uint64_t x = s->rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s->rng = x;
        return x * 0x2545f4914f6cdd1dull;
}

int64_t heap_sampler_draw(struct heap_sampler *s) {
        /* u in (0, 1]: never log(0). */
        double u = (double) ((next(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
        double d = -log(u) * (double) s->interval;
        if (d < 1.0)
                return 1;
        if (d > 9.0e18)
                return INT64_MAX / 2;
        return (int64_t) d;
}

void heap_sampler_init(struct heap_sampler *s, uint64_t interval, uint64_t seed) {
        s->interval = interval ? interval : 1;
        s->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
        s->bytes_left = s->interval > 1 ? heap_sampler_draw(s) : 0;
}

uint64_t heap_sampler_weight_slow(struct heap_sampler *s, uint64_t size) {
        if (s->interval <= 1 || size >= s->interval)
                return size;
        uint64_t count = 0;
        while (s->bytes_left <= 0) {
                s->bytes_left += heap_sampler_draw(s);
                count++;
        }
        return count * s->interval;
}
