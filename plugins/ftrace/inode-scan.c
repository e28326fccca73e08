/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The batched walk of inode-scan.h: a stack of directories still to read
 * and the one being read, kept open between batches. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "inode-scan.h"

#define ANY_DEV UINT64_MAX

struct pending_dir {
        char *path;
        uint64_t parent_dev; /* ANY_DEV for a root */
};

struct inode_scan {
        struct pending_dir *stack;
        size_t n_stack, cap_stack;
        DIR *dir; /* the directory being read, or NULL */
        char *dir_path;
        uint64_t dir_dev;
        uint64_t entries;
        bool over;
};

static int push(struct inode_scan *s, const char *path, uint64_t parent_dev) {
        if (GREEDY_REALLOC(s->stack, s->cap_stack, s->n_stack + 1) < 0)
                return -ENOMEM;
        char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        s->stack[s->n_stack++] = (struct pending_dir) { .path = p, .parent_dev = parent_dev };
        return 0;
}

int inode_scan_new(const char *const *roots, size_t n_roots, struct inode_scan **ret) {
        struct inode_scan *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        /* Pushed last first, so that the first root is walked first. */
        for (size_t i = n_roots; i > 0; i--)
                if (push(s, roots[i - 1], ANY_DEV) < 0) {
                        inode_scan_free(s);
                        return -ENOMEM;
                }
        *ret = s;
        return 0;
}

static void close_dir(struct inode_scan *s) {
        if (s->dir)
                closedir(s->dir);
        s->dir = NULL;
        free(s->dir_path);
        s->dir_path = NULL;
}

/* Opens the next directory of the stack that can be read and belongs to
 * the file system it was found on. false when the stack is empty. A root
 * is reported here (one entry of the batch); *stop when fn said so. */
static bool open_next(struct inode_scan *s, inode_scan_fn fn, void *userdata, bool *reported, bool *stop) {
        while (s->n_stack > 0) {
                struct pending_dir p = s->stack[--s->n_stack];
                int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (p.parent_dev == ANY_DEV ? 0 : O_NOFOLLOW);
                int fd = open(p.path, flags);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0 || (p.parent_dev != ANY_DEV && (uint64_t) st.st_dev != p.parent_dev)) {
                        if (fd >= 0)
                                close(fd);
                        free(p.path);
                        continue;
                }
                s->dir = fdopendir(fd);
                if (!s->dir) {
                        close(fd);
                        free(p.path);
                        continue;
                }
                s->dir_path = p.path;
                s->dir_dev = (uint64_t) st.st_dev;
                if (p.parent_dev == ANY_DEV) {
                        s->entries++;
                        *reported = true;
                        *stop = !fn(s->dir_dev, (uint64_t) st.st_ino, p.path, INODE_TYPE_DIRECTORY, userdata);
                }
                return true;
        }
        return false;
}

static unsigned entry_type(struct inode_scan *s, const struct dirent *de) {
        unsigned char t = de->d_type;
        if (t == DT_UNKNOWN) {
                struct stat st;
                if (fstatat(dirfd(s->dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return INODE_TYPE_UNKNOWN;
                t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
        }
        return t == DT_DIR ? INODE_TYPE_DIRECTORY : t == DT_REG ? INODE_TYPE_FILE : INODE_TYPE_UNKNOWN;
}

int inode_scan_step(struct inode_scan *s, size_t batch, inode_scan_fn fn, void *userdata) {
        size_t budget = batch ? batch : 1;
        char path[PATH_MAX];
        while (!s->over && budget > 0) {
                if (!s->dir) {
                        bool reported = false, stop = false;
                        if (!open_next(s, fn, userdata, &reported, &stop)) {
                                s->over = true;
                                break;
                        }
                        budget -= reported;
                        s->over = stop;
                        continue;
                }
                errno = 0;
                struct dirent *de = readdir(s->dir);
                if (!de) {
                        close_dir(s);
                        continue;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int n = snprintf(path, sizeof(path), "%s%s%s", s->dir_path,
                                 s->dir_path[strlen(s->dir_path) - 1] == '/' ? "" : "/", de->d_name);
                if (n < 0 || (size_t) n >= sizeof(path))
                        continue; /* deeper than a path can name */
                unsigned type = entry_type(s, de);
                budget--;
                s->entries++;
                if (!fn(s->dir_dev, (uint64_t) de->d_ino, path, type, userdata)) {
                        s->over = true;
                        break;
                }
                if (type == INODE_TYPE_DIRECTORY && push(s, path, s->dir_dev) < 0) {
                        s->over = true;
                        return -ENOMEM;
                }
        }
        if (s->over)
                close_dir(s);
        return s->over ? 0 : 1;
}

uint64_t inode_scan_entries(const struct inode_scan *s) {
        return s->entries;
}

void inode_scan_free(struct inode_scan *s) {
        if (!s)
                return;
        close_dir(s);
        for (size_t i = 0; i < s->n_stack; i++)
                free(s->stack[i].path);
        free(s->stack);
        free(s);
}
