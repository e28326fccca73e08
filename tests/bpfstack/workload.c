/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The program tests/integration/test-bpfstack.c records: on CPU in
 * spin_inner (called by spin_outer, called by main) for SPIN_MS, then
 * off CPU in block_sleep (nanosleep) and block_read (read on an empty
 * pipe that a second thread writes to later). Built with frame pointers.
 * Prints "blocked_ns N": the time its main thread really spent in those
 * two calls, measured on CLOCK_MONOTONIC. */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static volatile uint64_t sink;

__attribute__((noinline)) void spin_inner(uint64_t until) {
        while (now_ns() < until)
                for (int k = 0; k < 100000; k++)
                        sink += (uint64_t) k * sink + 1;
}

__attribute__((noinline)) void spin_outer(uint64_t ms) {
        spin_inner(now_ns() + ms * 1000000u);
        sink++;
}

/* The libc wrappers keep no frame pointer: a walk from inside them goes
 * straight to the caller of the function calling them. These one-line
 * helpers are that function, so block_sleep and block_read stay in the
 * stacks. */
__attribute__((noinline)) void sleep_once(unsigned ms) {
        struct timespec ts = { .tv_sec = 0, .tv_nsec = (long) ms * 1000000L };
        nanosleep(&ts, NULL);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) ssize_t read_once(int fd, char *c) {
        ssize_t n = read(fd, c, 1);
        __asm__ volatile("" ::: "memory");
        return n;
}

__attribute__((noinline)) uint64_t block_sleep(unsigned times, unsigned ms) {
        uint64_t t0 = now_ns();
        for (unsigned k = 0; k < times; k++)
                sleep_once(ms);
        return now_ns() - t0;
}

static int pipe_fds[2];

static void *late_writer(void *arg) {
        usleep((useconds_t) (uintptr_t) arg * 1000);
        char c = 'x';
        if (write(pipe_fds[1], &c, 1) != 1)
                abort();
        return NULL;
}

__attribute__((noinline)) uint64_t block_read(unsigned ms) {
        pthread_t t;
        if (pipe(pipe_fds) < 0 || pthread_create(&t, NULL, late_writer, (void *) (uintptr_t) ms) != 0)
                abort();
        uint64_t t0 = now_ns();
        char c;
        if (read_once(pipe_fds[0], &c) != 1)
                abort();
        uint64_t d = now_ns() - t0;
        pthread_join(t, NULL);
        return d;
}

int main(int argc, char **argv) {
        unsigned spin_ms = argc > 1 ? (unsigned) atoi(argv[1]) : 1000;
        unsigned sleeps = argc > 2 ? (unsigned) atoi(argv[2]) : 4;
        unsigned sleep_ms = argc > 3 ? (unsigned) atoi(argv[3]) : 100;
        unsigned read_ms = argc > 4 ? (unsigned) atoi(argv[4]) : 300;
        spin_outer(spin_ms);
        uint64_t b = block_sleep(sleeps, sleep_ms);
        b += block_read(read_ms);
        printf("blocked_ns %llu\n", (unsigned long long) b);
        return 0;
}
