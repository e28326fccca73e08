/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/dir-files.h"
#include "basic/macro.h"
#include "snapshot-store.h"

int snapshot_store_path(const char *dir, const char *stem, char **ret_path) {
        struct stat st;
        if (stat(dir, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        _cleanup_free_ char *clean = strdup(stem);
        if (!clean)
                return -ENOMEM;
        for (char *p = clean; *p; p++)
                if (*p == '/' || (p == clean && *p == '.') || (unsigned char) *p < ' ')
                        *p = '_';
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm) == 0)
                return -EINVAL;
        for (unsigned n = 1; n < 1000; n++) {
                char *path = NULL;
                int r = n == 1 ? asprintf(&path, "%s/%s-%s.pftrace", dir, clean, when)
                               : asprintf(&path, "%s/%s-%s-%u.pftrace", dir, clean, when, n);
                if (r < 0)
                        return -ENOMEM;
                if (access(path, F_OK) < 0 && errno == ENOENT) {
                        *ret_path = path;
                        return 0;
                }
                free(path);
        }
        return -EEXIST;
}

/* The snapshots of the directory, but the one just written. */
static bool match_other_snapshot(const char *name, const void *newest) {
        size_t n = strlen(name), sl = strlen(".pftrace");
        return n > sl && strcmp(name + n - sl, ".pftrace") == 0 && strcmp(name, newest) != 0;
}

int snapshot_store_committed(const char *dir, const char *path, uint64_t max_use, uint64_t keep_free,
                             struct snapshot_store_pruned *ret) {
        *ret = (struct snapshot_store_pruned) {};
        if (!max_use && !keep_free)
                return 0;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        const char *slash = strrchr(path, '/');
        const char *newest = slash ? slash + 1 : path;
        struct stat st;
        if (fstatat(fd, newest, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        _cleanup_free_ struct dir_file *files = NULL;
        size_t n = 0;
        int r = dir_files_list(fd, 0, match_other_snapshot, newest, &files, &n);
        if (r < 0)
                return r;
        uint64_t total = (uint64_t) st.st_size;
        for (size_t i = 0; i < n; i++)
                total += files[i].bytes;
        /* Oldest first, while a cap does not hold. */
        for (size_t i = 0;; i++) {
                int64_t avail = keep_free ? dir_files_free_bytes(fd) : -1;
                bool over = (max_use && total > max_use) || (avail >= 0 && (uint64_t) avail < keep_free);
                if (!over)
                        break;
                if (i == n) {
                        ret->still_over = true;
                        break;
                }
                r = dir_files_remove(fd, files[i].name);
                if (r < 0 && r != -ENOENT)
                        continue;
                total -= files[i].bytes;
                ret->freed += files[i].bytes;
                ret->removed++;
        }
        return 0;
}
