/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "test-scratch.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

const char *test_tmp_dir(void) {
        const char *d = getenv("TRACED_TEST_TMPDIR");
        return d && d[0] == '/' ? d : "/tmp";
}

int test_mkdtemp(char *buf, size_t size, const char *prefix) {
        int n = snprintf(buf, size, "%s/%sXXXXXX", test_tmp_dir(), prefix);
        if (n < 0 || (size_t) n >= size)
                return -ENAMETOOLONG;
        return mkdtemp(buf) ? 0 : negative_errno();
}

int test_tmpfile(void) {
        int fd = open(test_tmp_dir(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0)
                return fd;
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
                return negative_errno();
        /* No O_TMPFILE here: a named file, unnamed at once. */
        char path[4096];
        int n = snprintf(path, sizeof(path), "%s/traced-tmpfile-XXXXXX", test_tmp_dir());
        if (n < 0 || (size_t) n >= sizeof(path))
                return -ENAMETOOLONG;
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        (void) unlink(path);
        return fd;
}

static int remove_at(int dir_fd, const char *name, dev_t dev);

/* Empties the directory open at fd (of file system dev). */
static int remove_children(int fd, dev_t dev) {
        _cleanup_close_ int owned = fd;
        _cleanup_(closedirp) DIR *d = fdopendir(owned);
        if (!d)
                return negative_errno();
        owned = -EBADF; /* the DIR has it now */
        int r = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno != 0 && r == 0)
                                r = -errno;
                        break;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = remove_at(dirfd(d), de->d_name, dev);
                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

static int remove_at(int dir_fd, const char *name, dev_t dev) {
        struct stat st;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
                        return negative_errno();
                return 0;
        }
        if (st.st_dev != dev)
                return -EXDEV;
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        int r = remove_children(fd, dev);
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = negative_errno();
        return r;
}

int rm_rf(const char *path) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return remove_at(AT_FDCWD, path, st.st_dev);
}

bool test_keep_scratch(void) {
        const char *k = getenv("TRACED_TEST_KEEP");
        return k && strcmp(k, "1") == 0;
}

int test_scratch_remove(const char *path) {
        if (!path || !path[0])
                return 0;
        if (test_keep_scratch()) {
                fprintf(stderr, "TRACED_TEST_KEEP=1: keeping %s\n", path);
                return 0;
        }
        return rm_rf(path);
}
