/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where `tracectl snapshot` puts a snapshot without -o: the snapshot
 * directory (/var/lib/traced/snapshots, made by tmpfiles.d and by
 * traced-snapshot@.service's StateDirectory=), one file per snapshot,
 * STEM-YYYYmmddTHHMMSS.pftrace (-N appended when taken within the same
 * second). Every snapshot enters the directory through
 * snapshot_store_path() and snapshot_store_committed(): the latter keeps
 * the directory within traced.conf's retention caps, as rotation keeps
 * the trace directory (max_use=, keep_free=; the service tells them,
 * TracingServiceState.traced_max_use and traced_keep_free). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAPSHOT_STORE_DEFAULT_DIR "/var/lib/traced/snapshots"

/* A new file name in dir for stem (a session or unit name: '/' and
 * leading dots are replaced). 0, or -errno (-ENOENT: dir is missing). */
int snapshot_store_path(const char *dir, const char *stem, char **ret_path);

struct snapshot_store_pruned {
        size_t removed;  /* older snapshots removed */
        uint64_t freed;  /* their bytes */
        bool still_over; /* a cap still does not hold with none older left */
};

/* path, a file of dir, is complete: the oldest other snapshots of dir
 * (*.pftrace, not hidden) are removed until they and path take at most
 * max_use bytes and the file system has keep_free bytes free (0: no cap
 * of that kind). path itself stays. 0 or -errno (dir cannot be listed). */
int snapshot_store_committed(const char *dir, const char *path, uint64_t max_use, uint64_t keep_free,
                             struct snapshot_store_pruned *ret);
