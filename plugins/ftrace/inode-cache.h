/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The paths inodes were resolved to, shared by every linux.inode_file_map
 * instance of the plugin: a later session names a file an earlier one
 * scanned for without scanning again. Keyed by (device, inode number),
 * devices in user space's encoding. Bounded: when it holds max entries, a
 * new one makes it forget all the others first. */

#include <stddef.h>
#include <stdint.h>

struct inode_cache;

int inode_cache_new(size_t max, struct inode_cache **ret);
void inode_cache_free(struct inode_cache *c);
/* The path of (dev, ino) and its InodeFileMap.Entry.Type, or NULL. */
const char *inode_cache_get(const struct inode_cache *c, uint64_t dev, uint64_t ino, unsigned *ret_type);
/* Adds or replaces (dev, ino). 0 or -ENOMEM. */
int inode_cache_put(struct inode_cache *c, uint64_t dev, uint64_t ino, const char *path, unsigned type);
size_t inode_cache_size(const struct inode_cache *c);
