/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The least a sys_stats poller can cost: every PERIOD ms, wake on a timer
 * and pread /proc/meminfo, /proc/vmstat and /proc/stat whole, on
 * descriptors kept open, and do nothing with the text. Prints its own CPU
 * (getrusage) in ms per second of running. For bench/sys-stats.sh.
 *
 *   sys-stats-floor PERIOD_MS SECONDS */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

int main(int argc, char **argv) {
        static const char *const paths[] = { "/proc/meminfo", "/proc/vmstat", "/proc/stat" };
        static char buf[1 << 16];
        int fds[3];

        if (argc != 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0) {
                fprintf(stderr, "usage: %s PERIOD_MS SECONDS\n", argv[0]);
                return 2;
        }
        long period_ms = atol(argv[1]), seconds = atol(argv[2]);
        for (int i = 0; i < 3; i++)
                if ((fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC)) < 0) {
                        fprintf(stderr, "%s: %s\n", paths[i], strerror(errno));
                        return 1;
                }
        int tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC);
        struct itimerspec its = {
                .it_interval = { period_ms / 1000, (period_ms % 1000) * 1000000 },
                .it_value = { period_ms / 1000, (period_ms % 1000) * 1000000 },
        };
        if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0) {
                fprintf(stderr, "timerfd: %s\n", strerror(errno));
                return 1;
        }
        for (long polls = seconds * 1000 / period_ms; polls > 0;) {
                uint64_t expired;
                if (read(tfd, &expired, sizeof(expired)) != (ssize_t) sizeof(expired))
                        continue;
                for (int i = 0; i < 3; i++)
                        if (pread(fds[i], buf, sizeof(buf), 0) < 0) {
                                fprintf(stderr, "%s: %s\n", paths[i], strerror(errno));
                                return 1;
                        }
                polls -= (long) expired;
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double ms = (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                    (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
        printf("%.3f\n", ms / (double) seconds);
        return 0;
}
