/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The kernel's notes on processes, on the real kernel: a child that forks,
 * execs a program and exits before anyone reads its /proc is known to the
 * table from the notes alone, with the program's mappings; the notes are
 * applied in time order, and only up to the time asked. */

#include <criterion/criterion.h>
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profiling/perf-notes.h"

extern char **environ;

static uint64_t boottime(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static bool mapped(const struct proc_info *p, const char *suffix) {
        for (size_t k = 0; k < p->maps.n; k++) {
                size_t n = strlen(p->maps.v[k].path), m = strlen(suffix);
                if (n >= m && strcmp(p->maps.v[k].path + n - m, suffix) == 0)
                        return true;
        }
        return false;
}

Test(perf_notes, a_process_gone_is_known_from_the_notes) {
        struct perf_notes *n;
        int r = perf_notes_new(CLOCK_BOOTTIME, 16, &n);
        if (r == -EACCES || r == -EPERM || r == -ENOENT || r == -ENODEV)
                cr_skip_test("dummy perf events are refused here: %s", strerror(-r));
        cr_assert_eq(r, 0, "%s", strerror(-r));
        struct proc_table *t;
        cr_assert_eq(proc_table_new("/nonexistent", &t), 0, "no /proc: the notes alone");

        uint64_t before = boottime();
        pid_t pid;
        const char *argv[] = { "true", NULL };
        cr_assert_eq(posix_spawnp(&pid, "true", NULL, NULL, (char *const *) argv, environ), 0);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        uint64_t after = boottime();

        /* Nothing past the time asked. */
        perf_notes_apply(n, t, before);
        cr_assert_null(proc_table_peek(t, pid));
        perf_notes_apply(n, t, after);
        struct proc_info *p = proc_table_peek(t, pid);
        cr_assert_not_null(p, "the child's fork was noted");
        cr_assert_str_eq(p->comm, "true", "its exec was noted");
        cr_assert(mapped(p, "/true"), "its program's mapping was noted");
        cr_assert(mapped(p, "/libc.so.6"), "so were the libraries ld.so mapped");
        cr_assert(p->exited, "and its exit");
        struct perf_notes_stats st_n;
        perf_notes_stats(n, &st_n);
        cr_assert_gt(st_n.applied, 3);
        cr_assert_gt(st_n.cpus, 0);
        cr_assert_geq(perf_notes_fd(n), 0);
        perf_notes_check_cpus(n);
        proc_table_free(t);
        perf_notes_free(n);
}

Test(perf_notes, refuses_ring_sizes_not_powers_of_two) {
        struct perf_notes *n;
        cr_assert_eq(perf_notes_new(CLOCK_BOOTTIME, 3, &n), -EINVAL);
        cr_assert_eq(perf_notes_new(CLOCK_BOOTTIME, 0, &n), -EINVAL);
}
