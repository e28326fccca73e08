/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "core/output/trace-file.h"

int trace_file_copy(int from_fd, int to_fd) {
        uint8_t buf[32 * 1024];
        off_t off = 0;

        for (;;) {
                ssize_t n = pread(from_fd, buf, sizeof(buf), off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                off += n;
                for (ssize_t done = 0; done < n;) {
                        ssize_t w = write(to_fd, buf + done, (size_t) (n - done));
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        done += w;
                }
        }
}

/* As upstream off Android: bugreport.pftrace in the temporary directory. */
static int bugreport_path(char **ret_path) {
        const char *dir = secure_getenv("TMPDIR");
        if (!dir || dir[0] != '/')
                dir = "/tmp";
        return asprintf(ret_path, "%s/bugreport.pftrace", dir) < 0 ? -ENOMEM : 0;
}

int trace_file_bugreport_open(char **ret_path, char **ret_tmp) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;

        *ret_path = *ret_tmp = NULL;
        if (bugreport_path(&path) < 0 || asprintf(&tmp, "%s.tmp", path) < 0) {
                tmp = NULL;
                return -ENOMEM;
        }
        (void) unlink(tmp);
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
                int r = -errno;
                *ret_tmp = TAKE_PTR(tmp);
                return r;
        }
        (void) fchmod(fd, 0644);
        *ret_path = TAKE_PTR(path);
        *ret_tmp = TAKE_PTR(tmp);
        return fd;
}

int trace_file_bugreport_commit(const char *tmp, const char *path) {
        if (rename(tmp, path) < 0) {
                int r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

void trace_file_bugreport_discard(const char *tmp) {
        (void) unlink(tmp);
}
