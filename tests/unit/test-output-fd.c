/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The write_into_file fd at the level of bytes: which fds may take a
 * trace, and writing a pipe without blocking. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/output/output-fd.h"

Test(output_fd, regular_files_pipes_and_refusals) {
        bool pollable, regular;
        int f = memfd_create("trace", MFD_CLOEXEC);
        cr_assert_null(output_fd_check(f, &pollable, &regular));
        cr_assert(regular);
        cr_assert_not(pollable);
        cr_assert_eq(fcntl(f, F_GETFL) & O_NONBLOCK, 0);
        close(f);

        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        cr_assert_null(output_fd_check(p[1], &pollable, &regular));
        cr_assert(pollable);
        cr_assert_not(regular);
        cr_assert_neq(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0, "a pipe is written without blocking");
        cr_assert_str_eq(output_fd_check(p[0], &pollable, &regular),
                         "The output file descriptor is not open for writing");
        close(p[0]);
        close(p[1]);

        int d = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_str_eq(output_fd_check(d, &pollable, &regular), "The output file descriptor is a directory");
        close(d);
        cr_assert_str_eq(output_fd_check(-1, &pollable, &regular),
                         "The output file descriptor cannot be examined");
}

Test(output_fd, a_full_pipe_would_block_and_resumes_where_it_stopped) {
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        size_t n = 1024u * 1024u, off = 0;
        uint8_t *buf = malloc(n);
        for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t) (i * 13);
        bool progress = false;
        cr_assert_eq(output_fd_write(p[1], true, buf, &off, n, &progress), 1);
        cr_assert(progress);
        cr_assert_gt(off, 0);
        cr_assert_lt(off, n);

        /* Read it all back while writing the rest. */
        uint8_t *back = malloc(n);
        size_t got = 0;
        while (got < n) {
                ssize_t r = read(p[0], back + got, n - got);
                if (r > 0)
                        got += (size_t) r;
                if (off < n)
                        cr_assert_geq(output_fd_write(p[1], true, buf, &off, n, NULL), 0);
        }
        cr_assert_eq(off, n);
        cr_assert_eq(memcmp(buf, back, n), 0);
        free(buf);
        free(back);
        close(p[0]);
        close(p[1]);
}

Test(output_fd, write_errors_and_their_words) {
        signal(SIGPIPE, SIG_IGN);
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[0]);
        size_t off = 0;
        cr_assert_eq(output_fd_write(p[1], true, (const uint8_t *) "x", &off, 1, NULL), -EPIPE);
        cr_assert_eq(off, 0);
        close(p[1]);
        cr_assert_str_eq(output_error_message(-ETIMEDOUT), "The output file descriptor took no data for 30 s");
        cr_assert_str_eq(output_error_message(-ENOSPC),
                         "The disk the trace file is on is full: writing it failed with No space left on device");
        cr_assert_str_eq(output_error_message(-EIO), "Writing the trace file failed: Input/output error");
}
