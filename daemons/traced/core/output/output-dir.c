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

int output_dir_close(int dir_fd, int fd, const char *prefix, uint64_t index, bool sync_dir) {
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
        if (sync_dir)
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

static bool match_closed(const char *name, const void *prefix) {
        return is_closed_name(name, prefix);
}

int output_dir_list(int dir_fd, const char *prefix, struct dir_file **ret, size_t *ret_n) {
        return dir_files_list(dir_fd, 0, match_closed, prefix, ret, ret_n);
}

int output_dir_list_tree(int dir_fd, struct dir_file **ret, size_t *ret_n) {
        return dir_files_list(dir_fd, OUTPUT_DIR_TREE_DEPTH, match_closed, NULL, ret, ret_n);
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
