/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "files.h"
#include "parse.h"

#define READ_BUF_FIRST (64u * 1024u)
#define READ_BUF_MAX (4u * 1024u * 1024u)

void read_buf_done(struct read_buf *b) {
        free(b->p);
        *b = (struct read_buf) {};
}

int file_open(const char *root, const char *path) {
        char full[4096];
        if ((size_t) snprintf(full, sizeof(full), "%s%s", root, path) >= sizeof(full))
                return -ENAMETOOLONG;
        int fd = open(full, O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

ssize_t file_pread(int fd, struct read_buf *b) {
        for (;;) {
                if (b->cap == 0) {
                        b->p = malloc(READ_BUF_FIRST);
                        if (!b->p)
                                return -ENOMEM;
                        b->cap = READ_BUF_FIRST;
                }
                ssize_t n = pread(fd, b->p, b->cap - 1, 0);
                if (n < 0)
                        return errno == EINTR ? -EAGAIN : -errno;
                if ((size_t) n < b->cap - 1) {
                        b->p[n] = '\0';
                        return n;
                }
                /* Filled: the file may be longer. Read it again, whole. */
                if (b->cap >= READ_BUF_MAX)
                        return -EFBIG;
                char *p = realloc(b->p, b->cap * 2);
                if (!p)
                        return -ENOMEM;
                b->p = p;
                b->cap *= 2;
        }
}

int file_pread_u64(int fd, uint64_t *ret) {
        char buf[32];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n < 0)
                return -errno;
        if (n == 0 || buf[0] < '0' || buf[0] > '9')
                return -EINVAL;
        *ret = parse_u64(buf, (size_t) n);
        return 0;
}

int file_read_line(const char *root, const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = file_open(root, path);
        if (fd < 0)
                return fd;
        ssize_t n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
}
