/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Whole writes on a blocking fd. */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* Writes all n bytes (again after a short write or EINTR). 0 or -errno. */
static inline int write_full(int fd, const void *data, size_t n) {
        const uint8_t *p = data;
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}
