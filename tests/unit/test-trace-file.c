/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The files the service makes itself: a clone's copy of a session's file,
 * and SaveTraceForBugreport's file. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/output/trace-file.h"
#include "test-scratch.h"

static char dir[96];

static void setup(void) {
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "traced-test-trace-file-"), 0);
        cr_assert_eq(setenv("TMPDIR", dir, 1), 0);
}

static void teardown(void) {
        if (!test_keep_scratch())
                (void) rm_rf(dir);
}

TestSuite(trace_file, .init = setup, .fini = teardown);

Test(trace_file, copy_reads_from_the_start_and_appends) {
        int from = memfd_create("from", MFD_CLOEXEC), to = memfd_create("to", MFD_CLOEXEC);
        cr_assert_geq(from, 0);
        cr_assert_geq(to, 0);
        /* More than one read's worth, and the source's offset at its end. */
        size_t n = 100 * 1024 + 7;
        char *data = malloc(n);
        for (size_t i = 0; i < n; i++)
                data[i] = (char) (i * 31 + 1);
        cr_assert_eq(write(from, data, n), (ssize_t) n);
        cr_assert_eq(write(to, "head", 4), 4);
        cr_assert_eq(trace_file_copy(from, to), 0);

        char *back = malloc(n + 4);
        cr_assert_eq(pread(to, back, n + 4, 0), (ssize_t) (n + 4));
        cr_assert_eq(memcmp(back, "head", 4), 0);
        cr_assert_eq(memcmp(back + 4, data, n), 0);
        free(data);
        free(back);
        close(from);
        close(to);
}

Test(trace_file, copy_reports_a_write_error) {
        int from = memfd_create("from", MFD_CLOEXEC);
        cr_assert_eq(write(from, "x", 1), 1);
        int ro = open("/dev/null", O_RDONLY | O_CLOEXEC);
        cr_assert_eq(trace_file_copy(from, ro), -EBADF);
        close(ro);
        close(from);
}

Test(trace_file, bugreport_file_is_made_aside_and_moved_in_place) {
        char *path = NULL, *tmp = NULL, want[128];
        snprintf(want, sizeof(want), "%s/bugreport.pftrace", dir);

        /* A leftover temporary file does not stand in the way. */
        char left[160];
        snprintf(left, sizeof(left), "%s.tmp", want);
        int l = open(left, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_geq(l, 0);
        close(l);

        int fd = trace_file_bugreport_open(&path, &tmp);
        cr_assert_geq(fd, 0);
        cr_assert_str_eq(path, want);
        cr_assert_str_eq(tmp, left);
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0644);
        cr_assert_eq(write(fd, "trace", 5), 5);
        close(fd);
        cr_assert_eq(access(path, F_OK), -1);

        cr_assert_eq(trace_file_bugreport_commit(tmp, path), 0);
        cr_assert_eq(access(tmp, F_OK), -1);
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_size, 5);
        free(path);
        free(tmp);
}

Test(trace_file, bugreport_discard_and_failed_commit_leave_nothing) {
        char *path = NULL, *tmp = NULL;
        int fd = trace_file_bugreport_open(&path, &tmp);
        cr_assert_geq(fd, 0);
        close(fd);
        trace_file_bugreport_discard(tmp);
        cr_assert_eq(access(tmp, F_OK), -1);
        free(path);
        free(tmp);

        fd = trace_file_bugreport_open(&path, &tmp);
        cr_assert_geq(fd, 0);
        close(fd);
        char bad[160];
        snprintf(bad, sizeof(bad), "%s/missing/bugreport.pftrace", dir);
        cr_assert_eq(trace_file_bugreport_commit(tmp, bad), -ENOENT);
        cr_assert_eq(access(tmp, F_OK), -1);
        free(path);
        free(tmp);
}

Test(trace_file, bugreport_open_failure_names_the_file) {
        char *path = NULL, *tmp = NULL;
        cr_assert_eq(setenv("TMPDIR", "/nonexistent-traced-dir", 1), 0);
        int fd = trace_file_bugreport_open(&path, &tmp);
        cr_assert_eq(fd, -ENOENT);
        cr_assert_null(path);
        cr_assert_str_eq(tmp, "/nonexistent-traced-dir/bugreport.pftrace.tmp");
        free(tmp);
}
