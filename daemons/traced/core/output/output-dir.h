/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A directory that a rotating session writes numbered trace files into
 * (sessions/session-rotate.c says when), at the level of files: making
 * the next file, closing one whole, finding the closed ones and removing
 * the oldest. Every name is made here and is a plain name relative to the
 * directory's fd (openat with O_NOFOLLOW | O_EXCL), so nothing outside
 * the directory is ever opened, followed, or removed.
 *
 *   PREFIX-NNNNNN.pftrace        a closed file, whole (fsync'd, renamed
 *                                into place once complete)
 *   PREFIX-NNNNNN.pftrace.part   the file being written
 *
 * PREFIX is the session's: "trace-YYYYMMDDTHHMMSSZ" from its start time
 * (UTC), so that names sort in time order and two sessions sharing a
 * directory do not meet. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "basic/dir-files.h"

#define OUTPUT_DIR_NAME_MAX 64u
#define OUTPUT_DIR_SUFFIX ".pftrace"
#define OUTPUT_DIR_PART ".part"

/* Names below a tree's top (output_dir_list_tree) are paths of up to
 * OUTPUT_DIR_TREE_DEPTH directories and a file. Listed files are
 * basic/dir-files.h's, which removes them (dir_files_prune,
 * dir_files_remove) and tells the free space (dir_files_free_bytes). */
#define OUTPUT_DIR_TREE_DEPTH 3u

/* The session prefix for a start time (CLOCK_REALTIME, s). */
void output_dir_prefix(int64_t realtime_s, char ret[static OUTPUT_DIR_NAME_MAX]);

/* Creates PREFIX-NNNNNN.pftrace.part in dir_fd, new (never an existing
 * file or a symbolic link), mode 0640. The fd, or -errno. */
int output_dir_create(int dir_fd, const char *prefix, uint64_t index);

/* Removes PREFIX-NNNNNN.pftrace.part (a file given up before it held
 * anything of the producers'). */
void output_dir_remove_part(int dir_fd, const char *prefix, uint64_t index);

/* The file written into fd is complete: fsync'd, then renamed from its
 * ".part" name to its final one (never over an existing file). fd stays
 * the caller's. 0 or -errno (the file keeps its ".part" name then).
 *
 * The fsync makes the file's bytes and its ".part" entry durable. With
 * sync_dir the directory is fsync'd after the rename too, so that the
 * final name is as well (and every earlier rename in it); without, the
 * name reaches the disk with the directory's next sync or the file
 * system's next commit, and a power cut before that leaves the file whole
 * under its ".part" name. */
int output_dir_close(int dir_fd, int fd, const char *prefix, uint64_t index, bool sync_dir);

/* The closed files in dir_fd whose names start with prefix (NULL: every
 * PREFIX-NNNNNN.pftrace this module makes), oldest first (by time closed,
 * then name). *ret is malloc'd. -errno on failure. */
int output_dir_list(int dir_fd, const char *prefix, struct dir_file **ret, size_t *ret_n);

/* The same for every directory below dir_fd too, down to
 * OUTPUT_DIR_TREE_DEPTH levels (no symbolic link followed): the whole
 * trace directory, oldest first across it. */
int output_dir_list_tree(int dir_fd, struct dir_file **ret, size_t *ret_n);

/* Cuts the trace file fd after its last whole packet (a write that
 * failed halfway leaves a torn one). 0 or -errno. */
int output_dir_trim(int fd);
