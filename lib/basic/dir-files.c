/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "basic/dir-files.h"
#include "basic/macro.h"

static int cmp_files(const void *a, const void *b) {
        const struct dir_file *x = a, *y = b;
        if (x->mtime_ns != y->mtime_ns)
                return x->mtime_ns < y->mtime_ns ? -1 : 1;
        return strcmp(x->name, y->name);
}

struct file_list {
        struct dir_file *files;
        size_t n, cap;
};

/* Adds the matching files of the directory fd (at path rel below the
 * top, "" for the top) to l, and those of its subdirectories while depth
 * allows. */
static int list_into(int fd, const char *rel, unsigned depth, dir_files_match_fn match, const void *userdata,
                     struct file_list *l) {
        /* Read through a descriptor of its own (fd may be O_PATH). */
        int dup = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup < 0)
                return -errno;
        DIR *d = fdopendir(dup);
        if (!d) {
                int e = errno;
                safe_close(dup);
                return -e;
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' || fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                char path[DIR_FILES_PATH_MAX];
                if ((size_t) snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >=
                    sizeof(path))
                        continue;
                if (S_ISDIR(st.st_mode) && depth > 0) {
                        int sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                r = list_into(sub, path, depth - 1, match, userdata, l);
                                safe_close(sub);
                        }
                        continue;
                }
                if (!S_ISREG(st.st_mode) || !match(de->d_name, userdata))
                        continue;
                if (l->n == l->cap) {
                        size_t nc = l->cap ? l->cap * 2 : 16;
                        struct dir_file *f = realloc(l->files, nc * sizeof(*f));
                        if (!f) {
                                r = -ENOMEM;
                                break;
                        }
                        l->files = f;
                        l->cap = nc;
                }
                struct dir_file *f = &l->files[l->n++];
                memcpy(f->name, path, sizeof(path));
                f->bytes = (uint64_t) st.st_size;
                f->mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        closedir(d);
        return r;
}

int dir_files_list(int dir_fd, unsigned depth, dir_files_match_fn match, const void *userdata,
                   struct dir_file **ret, size_t *ret_n) {
        struct file_list l = {};
        int r = list_into(dir_fd, "", depth, match, userdata, &l);
        if (r < 0) {
                free(l.files);
                return r;
        }
        if (l.n > 1)
                qsort(l.files, l.n, sizeof(*l.files), cmp_files);
        *ret = l.files;
        *ret_n = l.n;
        return 0;
}

int dir_files_remove(int dir_fd, const char *name) {
        const char *slash = strchr(name, '/');
        if (!slash)
                return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
        char comp[DIR_FILES_PATH_MAX];
        size_t n = (size_t) (slash - name);
        if (n == 0 || n >= sizeof(comp))
                return -EINVAL;
        memcpy(comp, name, n);
        comp[n] = '\0';
        int sub = openat(dir_fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
                return -errno;
        int r = dir_files_remove(sub, slash + 1);
        safe_close(sub);
        return r;
}

size_t dir_files_prune(int dir_fd, const struct dir_file *files, size_t n, uint64_t keep_files,
                        uint64_t keep_bytes, uint64_t *ret_freed) {
        uint64_t total = 0, freed = 0;
        size_t removed = 0;
        for (size_t i = 0; i < n; i++)
                total += files[i].bytes;
        for (size_t i = 0; i < n; i++) {
                bool over_count = keep_files && n - i > keep_files;
                bool over_bytes = keep_bytes && total > keep_bytes;
                if (!over_count && !over_bytes)
                        break;
                int r = dir_files_remove(dir_fd, files[i].name);
                if (r < 0 && r != -ENOENT)
                        continue;
                total -= files[i].bytes;
                freed += files[i].bytes;
                removed++;
        }
        if (ret_freed)
                *ret_freed = freed;
        return removed;
}

int64_t dir_files_free_bytes(int dir_fd) {
        struct statvfs sv;
        if (fstatvfs(dir_fd, &sv) < 0)
                return -errno;
        return (int64_t) ((uint64_t) sv.f_bavail * sv.f_frsize);
}

