/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"
#include "core/output/output-path.h"

_printf_(3, 4) static int refuse(char **ret_error, int error, const char *fmt, ...) {
        if (ret_error) {
                va_list ap;
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return -error;
}

/* Each component of rel is a plain name: not empty, ".", or "..". */
static bool plain_components(const char *rel) {
        const char *p = rel;
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);
                if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (!slash)
                        return true;
                p = slash + 1;
        }
}

/* Opens rel below dir_fd for writing, with no symbolic link or mount on the
 * way (the last component included); extra: O_CREAT | O_EXCL or 0. */
static int open_beneath(int dir_fd, const char *rel, int extra) {
        struct open_how how = {
                .flags = (uint64_t) (O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | extra),
                .mode = extra & O_CREAT ? 0640 : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int) syscall(SYS_openat2, dir_fd, rel, &how, sizeof(how));
        if (fd < 0 && errno == ENOSYS) {
                /* Before Linux 5.6: one component, no symlink followed. */
                if (strchr(rel, '/'))
                        return -1; /* errno stays ENOSYS */
                fd = openat(dir_fd, rel, (int) how.flags, (mode_t) how.mode);
        }
        return fd;
}

int output_path_open(int dir_fd, const char *dir, const char *output_path, bool *ret_created, char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        if (dir_fd < 0 || !dir)
                return refuse(ret_error, ENOENT,
                              "The service has no trace directory (trace_directory in traced.conf), so it writes no "
                              "output_path; let the consumer open the file (tracectl record -o FILE)");
        if (output_path[0] != '/')
                return refuse(ret_error, EINVAL, "output_path \"%s\" is not an absolute path", output_path);
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (strncmp(output_path, dir, n) != 0 || output_path[n] != '/' || output_path[n + 1] == '\0')
                return refuse(ret_error, EPERM,
                              "output_path \"%s\" is outside the service's trace directory %.*s; let the consumer "
                              "open the file (tracectl record -o FILE)",
                              output_path, (int) n, dir);
        const char *rel = output_path + n + 1;
        if (!plain_components(rel))
                return refuse(ret_error, EPERM,
                              "output_path \"%s\" has an empty, \".\" or \"..\" component", output_path);

        /* A new file, or else an existing one: the caller learns which,
         * to remove what it created when the session is refused. */
        bool created = true;
        int fd = open_beneath(dir_fd, rel, O_CREAT | O_EXCL);
        if (fd < 0 && errno == EEXIST) {
                created = false;
                fd = open_beneath(dir_fd, rel, 0);
        }
        if (fd < 0 && errno == ENOSYS)
                return refuse(ret_error, EPERM,
                              "output_path \"%s\" is in a subdirectory, which this kernel cannot open safely",
                              output_path);
        if (fd < 0) {
                int e = errno;
                if (e == ELOOP || e == EXDEV)
                        return refuse(ret_error, EPERM, "output_path \"%s\" goes through a symbolic link or mount",
                                      output_path);
                return refuse(ret_error, e, "Cannot open output_path \"%s\": %s", output_path, strerror(e));
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int e = errno;
                safe_close(fd);
                return refuse(ret_error, e, "Cannot check output_path \"%s\": %s", output_path, strerror(e));
        }
        if (!S_ISREG(st.st_mode) || st.st_nlink > 1) {
                safe_close(fd);
                return refuse(ret_error, EPERM, "output_path \"%s\" is not a plain file of its own", output_path);
        }
        if (ret_created)
                *ret_created = created;
        return fd;
}

int output_path_claim(int fd) {
        return ftruncate(fd, 0) < 0 ? -errno : 0;
}

void output_path_unlink(int dir_fd, const char *dir, const char *output_path) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (dir_fd < 0 || strncmp(output_path, dir, n) != 0 || output_path[n] != '/' ||
            !plain_components(output_path + n + 1))
                return;
        (void) unlinkat(dir_fd, output_path + n + 1, 0);
}

int output_path_open_dir(int dir_fd, const char *dir, const char *output_path, char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        if (dir_fd < 0 || !dir)
                return refuse(ret_error, ENOENT,
                              "The service has no trace directory (trace_directory in traced.conf), so it rotates "
                              "into no output_path; let the consumer pass the directory (tracectl record -o DIR/)");
        size_t n = strlen(dir), len = strlen(output_path);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (output_path[0] != '/' || len < 2 || output_path[len - 1] != '/' || strncmp(output_path, dir, n) != 0 ||
            output_path[n] != '/' || len <= n + 1)
                return refuse(ret_error, EPERM,
                              "output_path \"%s\" is not a directory inside the service's trace directory %.*s",
                              output_path, (int) n, dir);
        _cleanup_free_ char *rel = strndup(output_path + n + 1, len - n - 2);
        if (!rel)
                return -ENOMEM;
        if (!plain_components(rel))
                return refuse(ret_error, EPERM, "output_path \"%s\" has an empty, \".\" or \"..\" component",
                              output_path);
        /* The last component is made when missing; what leads to it must
         * exist. */
        const char *last = strrchr(rel, '/');
        _cleanup_close_ int parent = -EBADF;
        if (last) {
                _cleanup_free_ char *up = strndup(rel, (size_t) (last - rel));
                struct open_how how = {
                        .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
                };
                parent = up ? (int) syscall(SYS_openat2, dir_fd, up, &how, sizeof(how)) : -1;
                if (parent < 0)
                        return refuse(ret_error, errno ? errno : ENOMEM, "Cannot open the directory of output_path "
                                      "\"%s\": %s", output_path, strerror(errno ? errno : ENOMEM));
        }
        int at = last ? parent : dir_fd;
        const char *name = last ? last + 1 : rel;
        if (mkdirat(at, name, 02770) < 0 && errno != EEXIST)
                return refuse(ret_error, errno, "Cannot make the directory output_path \"%s\": %s", output_path,
                              strerror(errno));
        int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return refuse(ret_error, errno, "Cannot open the directory output_path \"%s\": %s", output_path,
                              strerror(errno));
        return fd;
}

const char *output_path_check_dir(int fd, uid_t uid) {
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
                return "The output is not a directory";
        if (uid != 0 && st.st_uid != uid)
                return "The directory to rotate in is not yours: the service writes only into a directory of the "
                       "user who asks (or into its trace directory)";
        return NULL;
}
