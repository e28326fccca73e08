/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Short-lived processes, for the tests of the profilers' process maps:
 * forks COUNT children, two at a time, each of which spins in
 * shortlived_spin for MS milliseconds and exits, long before a profiler
 * that reads /proc/PID/maps lazily gets to it. With "exec", each child
 * first execs this program again (its maps are then new, known only from
 * the kernel's notes), as a build's compilers do.
 *
 *   shortlived COUNT MS [fork|exec]
 *   shortlived --child MS          (what an exec'd child runs)
 *
 * Prints "ready <pid>" once started and "done" when every child is reaped. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spin.h"

volatile unsigned long shortlived_sink;

__attribute__((noinline)) void shortlived_spin(double until) {
        shortlived_sink = spin_until(shortlived_sink, until, 20000);
        __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void shortlived_child(double ms) {
        shortlived_spin(spin_now() + ms / 1000.0);
        __asm__ volatile("" ::: "memory");
}

static void reap(void) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "shortlived: a child failed\n");
                exit(1);
        }
}

int main(int argc, char **argv) {
        if (argc == 3 && strcmp(argv[1], "--child") == 0) {
                shortlived_child(atof(argv[2]));
                return 0;
        }
        if (argc < 3) {
                fprintf(stderr, "usage: shortlived COUNT MS [fork|exec]\n");
                return 2;
        }
        int count = atoi(argv[1]);
        const char *ms = argv[2];
        int exec = argc > 3 && strcmp(argv[3], "exec") == 0;
        /* This program by its own path: the children keep its name. */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0) {
                perror("shortlived: /proc/self/exe");
                return 1;
        }
        self[n] = '\0';
        printf("ready %d\n", (int) getpid());
        fflush(stdout);
        int running = 0;
        for (int i = 0; i < count; i++) {
                if (running == 2) {
                        reap();
                        running--;
                }
                pid_t pid = fork();
                if (pid < 0) {
                        perror("shortlived: fork");
                        return 1;
                }
                if (pid == 0) {
                        if (exec) {
                                execl(self, argv[0], "--child", ms, (char *) NULL);
                                perror("shortlived: exec");
                                _exit(1);
                        }
                        shortlived_child(atof(ms));
                        _exit(0);
                }
                running++;
        }
        while (running-- > 0)
                reap();
        printf("done\n");
        return 0;
}
