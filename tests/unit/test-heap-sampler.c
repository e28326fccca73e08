/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <math.h>

#include "heap/heap-sampler.h"

/* Draws average the interval (an exponential's mean), within 2 %. */
Test(heap_sampler, draws_average_the_interval) {
        struct heap_sampler s;
        heap_sampler_init(&s, 4096, 12345);
        double sum = 0;
        const int n = 200000;
        for (int i = 0; i < n; i++) {
                int64_t d = heap_sampler_draw(&s);
                cr_assert_geq(d, 1);
                sum += (double) d;
        }
        double mean = sum / n;
        cr_assert(fabs(mean - 4096.0) < 4096.0 * 0.02, "mean draw %.1f", mean);
}

/* The weights of the samples add up to the bytes allocated (unbiased),
 * for sizes under and around the interval: over enough allocations for
 * 40000 samples, where 2 % is four standard deviations. */
static void check_unbiased(uint64_t interval, uint64_t size, uint64_t seed) {
        struct heap_sampler s;
        heap_sampler_init(&s, interval, seed);
        uint64_t total = 0, weights = 0, samples = 0;
        uint64_t n = 40000 * interval / size;
        if (n < 500000)
                n = 500000;
        for (uint64_t i = 0; i < n; i++) {
                uint64_t w = heap_sampler_weight(&s, size);
                total += size;
                weights += w;
                samples += w != 0;
                if (w)
                        cr_assert_eq(w % interval, 0, "a weight of %llu", (unsigned long long) w);
        }
        double err = ((double) weights - (double) total) / (double) total;
        cr_assert(fabs(err) < 0.02, "interval %llu size %llu: weights %llu for %llu bytes (%.3f)",
                  (unsigned long long) interval, (unsigned long long) size, (unsigned long long) weights,
                  (unsigned long long) total, err);
        cr_assert_lt(samples, n, "not every allocation is sampled");
}

Test(heap_sampler, weights_add_up_to_the_bytes) {
        check_unbiased(4096, 64, 1);
        check_unbiased(4096, 4000, 2);
        check_unbiased(512 * 1024, 1000, 3);
        check_unbiased(100, 33, 4);
}

Test(heap_sampler, a_block_of_the_interval_or_more_is_always_sampled_for_its_size) {
        struct heap_sampler s;
        heap_sampler_init(&s, 4096, 7);
        for (uint64_t size = 4096; size < 1000000; size = size * 3 + 1)
                cr_assert_eq(heap_sampler_weight(&s, size), size);
}

Test(heap_sampler, interval_one_samples_everything) {
        struct heap_sampler s;
        heap_sampler_init(&s, 1, 9);
        for (uint64_t size = 1; size < 100; size++)
                cr_assert_eq(heap_sampler_weight(&s, size), size);
}

Test(heap_sampler, threads_with_other_seeds_draw_otherwise) {
        struct heap_sampler a, b;
        heap_sampler_init(&a, 4096, 1);
        heap_sampler_init(&b, 4096, 2);
        int same = 0;
        for (int i = 0; i < 100; i++)
                same += heap_sampler_draw(&a) == heap_sampler_draw(&b);
        cr_assert_lt(same, 5);
}
