/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where `tracectl snapshot` puts a snapshot without -o: the snapshot
 * directory (/var/lib/traced/snapshots, made by tmpfiles.d and by
 * traced-snapshot@.service's StateDirectory=), one file per snapshot,
 * STEM-YYYYmmddTHHMMSS.pftrace (-N appended when taken within the same
 * second). Every snapshot enters the directory through
 * snapshot_store_path() and snapshot_store_committed(): the latter is
 * where the directory's retention caps apply. */

#define SNAPSHOT_STORE_DEFAULT_DIR "/var/lib/traced/snapshots"

/* A new file name in dir for stem (a session or unit name: '/' and
 * leading dots are replaced). 0, or -errno (-ENOENT: dir is missing). */
int snapshot_store_path(const char *dir, const char *stem, char **ret_path);
/* path, in dir, is complete. Applies the directory's retention (none
 * yet: the service's max_use=/keep_free= retention connects here).
 * 0 or -errno. */
int snapshot_store_committed(const char *dir, const char *path);
