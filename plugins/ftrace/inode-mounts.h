/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Devices and where they are mounted, from a mountinfo file
 * (/proc/self/mountinfo, proc(5)). Devices are in user space's encoding
 * (st_dev, makedev()); the kernel's own dev_t, which trace events carry,
 * converts with inode_dev_from_kernel. */

#include <stddef.h>
#include <stdint.h>
#include <sys/sysmacros.h>

#define INODE_MOUNTINFO "/proc/self/mountinfo"

/* The kernel's dev_t: major in the bits above 20, minor below. */
static inline uint64_t inode_dev_from_kernel(uint64_t kdev) {
        return (uint64_t) makedev((unsigned) (kdev >> 20), (unsigned) (kdev & 0xfffff));
}

/* The mount points of dev listed in the file at path, in its order, each
 * once, with mountinfo's octal escapes (\040 for a space) undone. 0 (and
 * an empty list when dev is not mounted), or a negative errno (the file
 * cannot be read, -ENOMEM). Free the list with inode_mounts_free. */
int inode_mounts_of(const char *path, uint64_t dev, char ***ret, size_t *ret_n);
void inode_mounts_free(char **list, size_t n);
