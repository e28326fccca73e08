/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/output/output-fd.h"

const char *output_fd_check(int fd, bool *ret_pollable, bool *ret_regular) {
        struct stat st;

        *ret_pollable = *ret_regular = false;
        if (fstat(fd, &st) < 0)
                return "The output file descriptor cannot be examined";
        if (S_ISDIR(st.st_mode))
                return "The output file descriptor is a directory";
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0)
                return "The output file descriptor cannot be examined";
        if ((fl & O_ACCMODE) == O_RDONLY || (fl & O_PATH))
                return "The output file descriptor is not open for writing";
        if (S_ISREG(st.st_mode)) {
                *ret_regular = true;
                return NULL;
        }
        /* Ours from here on: the consumer handed it over. */
        *ret_pollable = true;
        if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return "The output file descriptor cannot be made non-blocking";
        return NULL;
}

int output_fd_write(int fd, bool pollable, const uint8_t *buf, size_t *off, size_t len, bool *ret_progress) {
        while (*off < len) {
                ssize_t n = write(fd, buf + *off, len - *off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN && pollable)
                                return 1;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                *off += (size_t) n;
                if (ret_progress)
                        *ret_progress = true;
        }
        return 0;
}

const char *output_error_message(int error) {
        static char buf[160];
        if (error == -ETIMEDOUT)
                return "The output file descriptor took no data for 30 s";
        if (error == -ENOSPC || error == -EDQUOT)
                snprintf(buf, sizeof(buf), "The disk the trace file is on is full: writing it failed with %s",
                         strerror(-error));
        else
                snprintf(buf, sizeof(buf), "Writing the trace file failed: %s", strerror(-error));
        return buf;
}
