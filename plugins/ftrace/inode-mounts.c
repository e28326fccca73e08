/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "inode-mounts.h"

/* Undoes mountinfo's \ooo escapes in place. */
static void unescape(char *s) {
        char *w = s;
        for (const char *r = s; *r;) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
                    r[3] <= '7') {
                        *w++ = (char) ((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                        r += 4;
                } else
                        *w++ = *r++;
        }
        *w = '\0';
}

void inode_mounts_free(char **list, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(list[i]);
        free(list);
}

static void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

int inode_mounts_of(const char *path, uint64_t dev, char ***ret, size_t *ret_n) {
        _cleanup_(fclosep) FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        _cleanup_free_ char *line = NULL;
        size_t line_size = 0, n = 0, cap = 0;
        char **list = NULL;
        while (getline(&line, &line_size, f) > 0) {
                /* id parent major:minor root mount-point options ... */
                unsigned major, minor;
                int at = 0;
                if (sscanf(line, "%*u %*u %u:%u %*s %n", &major, &minor, &at) != 2 || at == 0 ||
                    (uint64_t) makedev(major, minor) != dev)
                        continue;
                char *mp = line + at;
                mp[strcspn(mp, " \n")] = '\0';
                unescape(mp);
                bool seen = false;
                for (size_t i = 0; i < n && !seen; i++)
                        seen = strcmp(list[i], mp) == 0;
                if (seen)
                        continue;
                char *copy = strdup(mp);
                if (!copy || GREEDY_REALLOC(list, cap, n + 1) < 0) {
                        free(copy);
                        inode_mounts_free(list, n);
                        return -ENOMEM;
                }
                list[n++] = copy;
        }
        *ret = list;
        *ret_n = n;
        return 0;
}
