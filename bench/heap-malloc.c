/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A malloc-heavy program for bench/heap-cost.sh: THREADS threads, each
 * making ROUNDS rounds of 1000 allocations of 16 to 1024 bytes (a live set
 * of 4096 blocks per thread, replaced at random) and frees.
 *   heap-malloc THREADS ROUNDS */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long rounds;

static void *worker(void *arg) {
        uint64_t x = (uint64_t) (uintptr_t) arg * 0x9e3779b97f4a7c15ull + 1;
        void *live[4096] = { 0 };
        for (long r = 0; r < rounds; r++)
                for (int i = 0; i < 1000; i++) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        size_t slot = (size_t) (x % 4096), size = 16 + (size_t) ((x >> 20) % 1009);
                        free(live[slot]);
                        live[slot] = malloc(size);
                        if (live[slot])
                                ((char *) live[slot])[0] = 1;
                }
        for (int i = 0; i < 4096; i++)
                free(live[i]);
        return NULL;
}

int main(int argc, char **argv) {
        if (argc != 3)
                return 2;
        int threads = atoi(argv[1]);
        rounds = atol(argv[2]);
        if (threads < 1 || threads > 64 || rounds < 1)
                return 2;
        pthread_t t[64];
        for (int i = 0; i < threads; i++)
                if (pthread_create(&t[i], NULL, worker, (void *) (uintptr_t) (i + 1)) != 0)
                        return 1;
        for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
        return 0;
}
