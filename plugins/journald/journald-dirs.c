/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "basic/macro.h"
#include "journald/journald-dirs.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

static bool dir_has_entries(const char *path) {
        _cleanup_(closedirp) DIR *d = opendir(path);
        if (!d)
                return errno != ENOENT && errno != ENOTDIR;
        struct dirent *e;
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        return true;
        return false;
}

bool journald_dirs_have_entries(const char *const *dirs, size_t n) {
        for (size_t k = 0; k < n; k++)
                if (dir_has_entries(dirs[k]))
                        return true;
        return false;
}
