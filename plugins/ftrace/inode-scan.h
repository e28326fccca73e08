/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A walk over directory trees, a bounded number of entries at a time, so
 * that the event loop it runs on gets control back between batches. Each
 * entry is reported with the device of the directory holding it (st_dev,
 * the user-space encoding), its inode number (from readdir) and its path
 * (the root it was found under, then the names down to it). A root is
 * reported too, as a directory. The walk stays on the file system of the
 * directory it descends from (like find -xdev): a directory that is the
 * mount point of another is not entered. Symbolic links are reported,
 * never followed. Directories that cannot be opened are skipped. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* InodeFileMap.Entry.Type */
enum {
        INODE_TYPE_UNKNOWN = 0,
        INODE_TYPE_FILE = 1,
        INODE_TYPE_DIRECTORY = 2,
};

/* One entry; false ends the walk (nothing is left to look for). */
typedef bool (*inode_scan_fn)(uint64_t dev, uint64_t ino, const char *path, unsigned type, void *userdata);

struct inode_scan;

/* A walk of roots (copied), in their order. 0 or -ENOMEM. */
int inode_scan_new(const char *const *roots, size_t n_roots, struct inode_scan **ret);
/* Reports up to batch entries (at least 1). Returns 1 while entries remain,
 * 0 once the walk is over (every tree walked, or fn returned false), or
 * -ENOMEM (the walk is then over too). */
int inode_scan_step(struct inode_scan *s, size_t batch, inode_scan_fn fn, void *userdata);
/* Entries reported so far. */
uint64_t inode_scan_entries(const struct inode_scan *s);
void inode_scan_free(struct inode_scan *s);
