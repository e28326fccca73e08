/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "snapshot-store.h"

int snapshot_store_path(const char *dir, const char *stem, char **ret_path) {
        struct stat st;
        if (stat(dir, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        _cleanup_free_ char *clean = strdup(stem);
        if (!clean)
                return -ENOMEM;
        for (char *p = clean; *p; p++)
                if (*p == '/' || (p == clean && *p == '.') || (unsigned char) *p < ' ')
                        *p = '_';
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm) == 0)
                return -EINVAL;
        for (unsigned n = 1; n < 1000; n++) {
                char *path = NULL;
                int r = n == 1 ? asprintf(&path, "%s/%s-%s.pftrace", dir, clean, when)
                               : asprintf(&path, "%s/%s-%s-%u.pftrace", dir, clean, when, n);
                if (r < 0)
                        return -ENOMEM;
                if (access(path, F_OK) < 0 && errno == ENOENT) {
                        *ret_path = path;
                        return 0;
                }
                free(path);
        }
        return -EEXIST;
}

int snapshot_store_committed(const char *dir, const char *path) {
        /* The retention caps of the snapshot directory apply here, once
         * the service's retention (traced.conf max_use=, keep_free=) is
         * there to call; until then snapshots are kept. */
        (void) dir;
        (void) path;
        return 0;
}
