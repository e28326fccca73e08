/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The files of a directory (and of the directories below it) as
 * retention sees them: listed oldest first with their sizes, the oldest
 * removed until caps hold, the free space of their file system. Used for
 * the trace directory's rotated files (the service) and the snapshot
 * directory (tracectl). Every name is a path below the directory's fd,
 * each directory on the way opened without following a symbolic link, so
 * nothing outside it is ever listed or removed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DIR_FILES_PATH_MAX 1024u

struct dir_file {
        char name[DIR_FILES_PATH_MAX]; /* below the directory listed */
        uint64_t bytes;                /* its size */
        int64_t mtime_ns;              /* when it was last written */
};

/* Whether a regular file's name (its last component) is listed. */
typedef bool (*dir_files_match_fn)(const char *name, const void *userdata);

/* The regular files of dir_fd that match, and those of the directories
 * below it down to depth levels (0: dir_fd alone), oldest first (by
 * mtime, then name); names starting with a dot are skipped. *ret is
 * malloc'd. 0 or -errno. */
int dir_files_list(int dir_fd, unsigned depth, dir_files_match_fn match, const void *userdata,
                   struct dir_file **ret, size_t *ret_n);

/* Removes one file as listed. 0 or -errno. */
int dir_files_remove(int dir_fd, const char *name);

/* Removes the oldest of files (as listed) until at most keep_files remain
 * and they hold at most keep_bytes (0: no cap of that kind). Returns how
 * many were removed, their bytes in *ret_freed (may be NULL). */
size_t dir_files_prune(int dir_fd, const struct dir_file *files, size_t n, uint64_t keep_files, uint64_t keep_bytes,
                       uint64_t *ret_freed);

/* Free bytes for unprivileged users on dir_fd's file system, or -errno. */
int64_t dir_files_free_bytes(int dir_fd);
