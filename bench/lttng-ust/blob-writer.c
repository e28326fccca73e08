/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes N events of SIZE bytes through LTTng-UST, the same payloads
 * example-producer writes, and prints how long it took. */
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "blob-tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
        if (argc != 3) {
                fprintf(stderr, "usage: blob-writer PACKETS SIZE\n");
                return 2;
        }
        unsigned long n = strtoul(argv[1], NULL, 0);
        size_t size = strtoul(argv[2], NULL, 0);
        /* Filled once: event i's payload ('a' + (i + k) % 26 at byte k)
         * starts at byte i % 26, so the timed loop only writes events. */
        char *payload = malloc(size + 26);
        if (!payload)
                return 1;
        for (size_t k = 0; k < size + 26; k++)
                payload[k] = (char) ('a' + k % 26);
        /* LTTng-UST registers with the session daemon in the background. */
        sleep(1);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (unsigned long i = 0; i < n; i++)
                lttng_ust_tracepoint(traced_bench, blob, payload + i % 26, (unsigned) size, i);
        clock_gettime(CLOCK_MONOTONIC, &b);
        fprintf(stderr, "blob-writer: wrote %lu events of %zu bytes in %.6f s\n", n, size,
                (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9);
        free(payload);
        return 0;
}
