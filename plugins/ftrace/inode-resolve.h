/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One linux.inode_file_map instance's work, without the plugin host: the
 * (device, inode) pairs linux.ftrace's events named are resolved to paths,
 * from the plugin's cache, else by a scan of the device's mount points
 * (InodeFileConfig decides which, and in which directories), a batch at a
 * time. What is resolved goes out through a callback as serialized
 * TracePackets { inode_file_map (4) }, one per device and emit. Each pair is
 * handled once per instance: a pair already resolved, waiting or given up
 * is not looked at again. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inode-cache.h"
#include "inode-config.h"

/* Pairs an instance keeps track of, at most: past this, new ones are
 * counted (dropped) and left alone. */
#define INODE_MAX_SEEN (1u << 20)

typedef void (*inode_packet_fn)(const uint8_t *packet, size_t size, void *userdata);

struct inode_resolver_stats {
        uint64_t seen;        /* distinct pairs noted */
        uint64_t from_cache;  /* of them, named from the cache */
        uint64_t found;       /* named by a scan */
        uint64_t not_found;   /* scanned for in vain */
        uint64_t not_scanned; /* do_not_scan, or a device scan_mount_points leaves out */
        uint64_t dropped;     /* past INODE_MAX_SEEN */
        uint64_t scans, entries_walked;
};

struct inode_resolver;

/* Takes cfg (left zeroed); mountinfo: the file the mount points are read
 * from (INODE_MOUNTINFO). */
int inode_resolver_new(struct inode_config *cfg, struct inode_cache *cache, const char *mountinfo, inode_packet_fn fn,
                       void *userdata, struct inode_resolver **ret);
void inode_resolver_free(struct inode_resolver *r);
const struct inode_config *inode_resolver_config(const struct inode_resolver *r);
const struct inode_resolver_stats *inode_resolver_stats(const struct inode_resolver *r);

/* A pair an event named (dev in user space's encoding). */
void inode_resolver_note(struct inode_resolver *r, uint64_t dev, uint64_t ino);
/* Writes out the entries resolved since the last emit. */
void inode_resolver_emit(struct inode_resolver *r);
/* Pairs wait for a scan and none runs: schedule one (scan_delay_ms). */
bool inode_resolver_scan_wanted(const struct inode_resolver *r);
/* One batch of the scan, which starts with the pairs waiting when none
 * runs; what it found is emitted. 1 while the scan goes on (next batch
 * after scan_interval_ms), 0 once it is over. */
int inode_resolver_scan_step(struct inode_resolver *r);
