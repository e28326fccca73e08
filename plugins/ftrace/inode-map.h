/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.inode_file_map inside the ftrace plugin: the inodes the same
 * session's linux.ftrace events name (a field of type ino_t, or i_ino,
 * with a dev_t field in the same event), resolved to paths and written as
 * InodeFileMap packets. The drain hands each pair over while it parses
 * (inode_map_note) and calls inode_map_drained at its end; the scans run
 * on timers of their own, a batch at a time. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftrace-ds.h"

struct inode_map;

int inode_map_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
/* False if instance_id is not an inode_file_map instance. */
bool inode_map_stop(struct plugin *pl, uint64_t instance_id);
void inode_map_flush(struct plugin *pl, uint64_t instance_id);
void inode_map_free_all(struct plugin *pl);

/* The inode_file_map instance of a tracing session, if there is one. */
struct inode_map *inode_map_for_session(struct plugin *pl, uint64_t tracing_session_id);
/* kernel_dev: a dev_t as the kernel has it (an event's field). */
void inode_map_note(struct inode_map *m, uint64_t kernel_dev, uint64_t ino);
/* End of a drain: what the cache named goes out, a scan is scheduled. */
void inode_map_drained(struct inode_map *m);
