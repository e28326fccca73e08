/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Reading /proc and sysfs files kept open: each poll preads from offset 0,
 * which makes the kernel generate the text afresh. Paths are under a root
 * ("" for the real system; tests pass a fixture tree).
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A read buffer that grows (to at most 4 MiB) when a file fills it. */
struct read_buf {
        char *p;
        size_t cap;
};

void read_buf_done(struct read_buf *b);

/* root + path, opened read-only; -errno. */
int file_open(const char *root, const char *path);
/* The whole of fd from offset 0 into b: its length, or -errno (-EFBIG past
 * the 4 MiB bound). The text is NUL-terminated. */
ssize_t file_pread(int fd, struct read_buf *b);
/* The unsigned decimal fd holds (a sysfs attribute); -errno, -EINVAL when
 * there is no number. */
int file_pread_u64(int fd, uint64_t *ret);
/* The first line of root + path (a sysfs attribute such as a name), without
 * its newline, into buf; -errno. */
int file_read_line(const char *root, const char *path, char *buf, size_t size);
