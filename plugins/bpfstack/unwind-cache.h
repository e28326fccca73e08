/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Compiled unwind tables on disk, so that the next recording (of any
 * session, after a restart too) starts with them: one file per executable
 * file, named by its device and inode, holding the walker's rows after a
 * header that names the file it was compiled from (device, inode, size,
 * modification time). A table whose file changed since is not used (and is
 * replaced once compiled again). The directory is kept under max_bytes by
 * removing the least recently written tables. */

#include <stddef.h>
#include <stdint.h>

#include "bpfstack.h"

/* The rows compiled from the file open as fd, from the cache in dir (at
 * most max_rows), or none (*ret_n 0) and *ret_error, why compiling it
 * failed: -ENOENT when the cache has nothing for the file as it is now;
 * -EBADMSG when its entry is malformed. */
int unwind_cache_load(const char *dir, int fd, size_t max_rows, struct bpfstack_row **ret, size_t *ret_n,
                      int *ret_error);
/* Writes the rows of the file open as fd (or none, and error: why it has
 * no table) into dir (created if missing; not its parent), whole or not
 * at all. */
int unwind_cache_store(const char *dir, int fd, const struct bpfstack_row *rows, size_t n, int error,
                       uint64_t max_bytes);
