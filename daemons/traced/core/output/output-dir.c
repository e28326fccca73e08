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

#include "basic/macro.h"
#include "basic/varint.h"
#include "core/output/output-dir.h"

void output_dir_prefix(int64_t realtime_s, char ret[static OUTPUT_DIR_NAME_MAX]) {
        time_t t = (time_t) realtime_s;
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(ret, OUTPUT_DIR_NAME_MAX, "trace-%Y%m%dT%H%M%SZ", &tm) == 0)
                snprintf(ret, OUTPUT_DIR_NAME_MAX, "trace-%lld", (long long) realtime_s);
}

static void file_name(char buf[static OUTPUT_DIR_NAME_MAX], const char *prefix, uint64_t index, bool part) {
        snprintf(buf, OUTPUT_DIR_NAME_MAX, "%s-%06llu%s%s", prefix, (unsigned long long) index, OUTPUT_DIR_SUFFIX,
                 part ? OUTPUT_DIR_PART : "");
}

int output_dir_create(int dir_fd, const char *prefix, uint64_t index) {
        char name[OUTPUT_DIR_NAME_MAX];
        file_name(name, prefix, index, true);
        /* Read and write: a file cut short by a failed write is trimmed. */
        int fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0640);
        return fd < 0 ? -errno : fd;
}

void output_dir_remove_part(int dir_fd, const char *prefix, uint64_t index) {
        char name[OUTPUT_DIR_NAME_MAX];
        file_name(name, prefix, index, true);
        (void) unlinkat(dir_fd, name, 0);
}

int output_dir_close(int dir_fd, int fd, const char *prefix, uint64_t index) {
        char from[OUTPUT_DIR_NAME_MAX], to[OUTPUT_DIR_NAME_MAX];
        if (fsync(fd) < 0)
                return -errno;
        file_name(from, prefix, index, true);
        file_name(to, prefix, index, false);
        if (renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE) < 0) {
                /* File systems without RENAME_NOREPLACE: the name is ours
                 * (made from the session's start time), so a link that
                 * fails on an existing one does the same. */
                if (errno != EINVAL && errno != ENOSYS)
                        return -errno;
                if (linkat(dir_fd, from, dir_fd, to, 0) < 0)
                        return -errno;
                (void) unlinkat(dir_fd, from, 0);
        }
        /* The rename itself reaches the disk with the directory. */
        (void) fsync(dir_fd);
        return 0;
}

/* PREFIX-NNNNNN.pftrace with PREFIX "trace-" followed by anything but
 * '/', and N digits: the names this module makes, closed. */
static bool is_closed_name(const char *name, const char *prefix) {
        size_t n = strlen(name), sl = strlen(OUTPUT_DIR_SUFFIX);
        if (n >= OUTPUT_DIR_NAME_MAX || n < sl + 8 || strcmp(name + n - sl, OUTPUT_DIR_SUFFIX) != 0)
                return false;
        if (prefix ? strncmp(name, prefix, strlen(prefix)) != 0 || name[strlen(prefix)] != '-'
                   : strncmp(name, "trace-", 6) != 0)
                return false;
        const char *dash = name + n - sl;
        size_t digits = 0;
        while (dash > name && dash[-1] >= '0' && dash[-1] <= '9') {
                dash--;
                digits++;
        }
        return digits >= 6 && dash > name && dash[-1] == '-';
}

static int cmp_files(const void *a, const void *b) {
        const struct output_dir_file *x = a, *y = b;
        if (x->mtime_ns != y->mtime_ns)
                return x->mtime_ns < y->mtime_ns ? -1 : 1;
        return strcmp(x->name, y->name);
}

struct file_list {
        struct output_dir_file *files;
        size_t n, cap;
};

/* Adds the closed files of the directory fd (at path rel below the top,
 * "" for the top) to l, and those of its subdirectories while depth
 * allows. */
static int list_into(int fd, const char *rel, const char *prefix, unsigned depth, struct file_list *l) {
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
                char path[OUTPUT_DIR_PATH_MAX];
                if ((size_t) snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >=
                    sizeof(path))
                        continue;
                if (S_ISDIR(st.st_mode) && depth > 0) {
                        int sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                r = list_into(sub, path, prefix, depth - 1, l);
                                safe_close(sub);
                        }
                        continue;
                }
                if (!S_ISREG(st.st_mode) || !is_closed_name(de->d_name, prefix))
                        continue;
                if (l->n == l->cap) {
                        size_t nc = l->cap ? l->cap * 2 : 16;
                        struct output_dir_file *f = realloc(l->files, nc * sizeof(*f));
                        if (!f) {
                                r = -ENOMEM;
                                break;
                        }
                        l->files = f;
                        l->cap = nc;
                }
                struct output_dir_file *f = &l->files[l->n++];
                memcpy(f->name, path, sizeof(path));
                f->bytes = (uint64_t) st.st_size;
                f->mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        closedir(d);
        return r;
}

static int list(int dir_fd, const char *prefix, unsigned depth, struct output_dir_file **ret, size_t *ret_n) {
        struct file_list l = {};
        int r = list_into(dir_fd, "", prefix, depth, &l);
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

int output_dir_list(int dir_fd, const char *prefix, struct output_dir_file **ret, size_t *ret_n) {
        return list(dir_fd, prefix, 0, ret, ret_n);
}

int output_dir_list_tree(int dir_fd, struct output_dir_file **ret, size_t *ret_n) {
        return list(dir_fd, NULL, OUTPUT_DIR_TREE_DEPTH, ret, ret_n);
}

int output_dir_remove(int dir_fd, const char *name) {
        const char *slash = strchr(name, '/');
        if (!slash)
                return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
        char comp[OUTPUT_DIR_PATH_MAX];
        size_t n = (size_t) (slash - name);
        if (n == 0 || n >= sizeof(comp))
                return -EINVAL;
        memcpy(comp, name, n);
        comp[n] = '\0';
        int sub = openat(dir_fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
                return -errno;
        int r = output_dir_remove(sub, slash + 1);
        safe_close(sub);
        return r;
}

size_t output_dir_prune(int dir_fd, const struct output_dir_file *files, size_t n, uint64_t keep_files,
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
                int r = output_dir_remove(dir_fd, files[i].name);
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

int64_t output_dir_free_bytes(int dir_fd) {
        struct statvfs sv;
        if (fstatvfs(dir_fd, &sv) < 0)
                return -errno;
        return (int64_t) ((uint64_t) sv.f_bavail * sv.f_frsize);
}

int output_dir_trim(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        uint64_t size = (uint64_t) st.st_size, off = 0;
        /* Trace.packet fields one after the other: a key, a length, the
         * bytes. Only the key and length are read. */
        while (off < size) {
                uint8_t hdr[11];
                ssize_t k = pread(fd, hdr, sizeof(hdr), (off_t) off);
                if (k <= 0)
                        break;
                uint64_t len;
                size_t hn = k > 1 && hdr[0] == 0x0a ? varint_read_strict(hdr + 1, (size_t) k - 1, &len) : 0;
                if (hn == 0 || len > size - off - 1 - hn)
                        break;
                off += 1 + hn + len;
        }
        if (off < size && ftruncate(fd, (off_t) off) < 0)
                return -errno;
        return 0;
}
