/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "unwind-cache.h"

#define MAGIC "TRCUWT02"

struct header {
        char magic[8];
        uint64_t dev, inode, size, mtime_sec, mtime_nsec, n;
        int64_t error; /* n 0: why the file has no table (a negative errno) */
};

static void header_of(const struct stat *st, uint64_t n, int error, struct header *ret) {
        *ret = (struct header) { .dev = st->st_dev, .inode = st->st_ino, .size = (uint64_t) st->st_size,
                                 .mtime_sec = (uint64_t) st->st_mtim.tv_sec,
                                 .mtime_nsec = (uint64_t) st->st_mtim.tv_nsec, .n = n, .error = error };
        memcpy(ret->magic, MAGIC, sizeof(ret->magic));
}

static void name_of(const struct stat *st, char *buf, size_t size) {
        snprintf(buf, size, "%llx-%llx.rows", (unsigned long long) st->st_dev, (unsigned long long) st->st_ino);
}

static int read_all(int fd, void *buf, size_t n) {
        for (size_t done = 0; done < n;) {
                ssize_t r = read(fd, (uint8_t *) buf + done, n - done);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -EBADMSG;
                done += (size_t) r;
        }
        return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
        for (size_t done = 0; done < n;) {
                ssize_t r = write(fd, (const uint8_t *) buf + done, n - done);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                done += (size_t) r;
        }
        return 0;
}

int unwind_cache_load(const char *dir, int fd, size_t max_rows, struct bpfstack_row **ret, size_t *ret_n,
                      int *ret_error) {
        struct stat st, cst;
        if (fstat(fd, &st) < 0)
                return -errno;
        char name[64];
        name_of(&st, name, sizeof(name));
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        _cleanup_close_ int cfd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (cfd < 0)
                return -errno;
        struct header h, want;
        header_of(&st, 0, 0, &want);
        int r = read_all(cfd, &h, sizeof(h));
        if (r < 0)
                return r == -EBADMSG ? -ENOENT : r;
        want.n = h.n;
        want.error = h.error;
        if (memcmp(&h, &want, sizeof(h)) != 0)
                return -ENOENT; /* another file now, or changed since */
        if (fstat(cfd, &cst) < 0)
                return -errno;
        if (h.n > max_rows || (uint64_t) cst.st_size != sizeof(h) + h.n * sizeof(struct bpfstack_row) ||
            (h.n == 0 && (h.error >= 0 || h.error < -4095)))
                return -EBADMSG;
        if (h.n == 0) {
                *ret = NULL;
                *ret_n = 0;
                *ret_error = (int) h.error;
                return 0;
        }
        struct bpfstack_row *rows = malloc(h.n * sizeof(*rows));
        if (!rows)
                return -ENOMEM;
        r = read_all(cfd, rows, h.n * sizeof(*rows));
        for (size_t k = 1; r == 0 && k < h.n; k++)
                if (rows[k].pc < rows[k - 1].pc)
                        r = -EBADMSG; /* the walker's binary search needs them sorted */
        if (r < 0) {
                free(rows);
                return r;
        }
        *ret = rows;
        *ret_n = h.n;
        *ret_error = 0;
        return 0;
}

/* Removes the oldest tables of dfd until they hold at most max_bytes
 * (with need bytes more). */
static void trim(int dfd, uint64_t max_bytes, uint64_t need) {
        for (int round = 0; round < 64; round++) {
                _cleanup_close_ int fd = dup(dfd);
                DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
                if (!d)
                        return;
                fd = -EBADF; /* the DIR's now */
                rewinddir(d);
                uint64_t total = need;
                char oldest[256] = "";
                struct timespec at = {};
                for (struct dirent *e; (e = readdir(d));) {
                        struct stat st;
                        size_t len = strlen(e->d_name);
                        if (len < 5 || strcmp(e->d_name + len - 5, ".rows") != 0 ||
                            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                                continue;
                        total += (uint64_t) st.st_size;
                        if (!oldest[0] || st.st_mtim.tv_sec < at.tv_sec ||
                            (st.st_mtim.tv_sec == at.tv_sec && st.st_mtim.tv_nsec < at.tv_nsec)) {
                                snprintf(oldest, sizeof(oldest), "%s", e->d_name);
                                at = st.st_mtim;
                        }
                }
                closedir(d);
                if (total <= max_bytes || !oldest[0] || unlinkat(dfd, oldest, 0) < 0)
                        return;
        }
}

int unwind_cache_store(const char *dir, int fd, const struct bpfstack_row *rows, size_t n, int error,
                       uint64_t max_bytes) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        struct header h;
        header_of(&st, n, error, &h);
        uint64_t bytes = sizeof(h) + n * sizeof(*rows);
        if (bytes > max_bytes)
                return -E2BIG;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno; /* the service's cache directory itself is not ours to make */
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        trim(dfd, max_bytes, bytes);
        char name[64], tmp[80];
        name_of(&st, name, sizeof(name));
        snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int) getpid());
        _cleanup_close_ int out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                return -errno;
        int r = write_all(out, &h, sizeof(h));
        if (r == 0 && n > 0)
                r = write_all(out, rows, n * sizeof(*rows));
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dfd, tmp, 0);
        return r;
}
