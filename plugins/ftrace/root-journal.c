/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* File format: pairs of lines, a tracefs file relative to the root and the
 * value to write back, in the order they were first changed. Values come
 * from restore_value() (one line each). */

#include "root-journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracefs.h"

static int mkdir_parent(const char *path) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int root_journal_save(const char *path, const struct saved_file *files, size_t n) {
        char tmp[4096];
        int r = mkdir_parent(path);
        if (r < 0)
                return r;
        if ((size_t) snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
                return -ENAMETOOLONG;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        FILE *f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                close(fd);
                (void) unlink(tmp);
                return r;
        }
        for (size_t i = 0; i < n; i++) {
                if (strchr(files[i].rel, '\n') || strchr(files[i].value, '\n'))
                        continue; /* cannot be one line: never produced, skipped */
                fprintf(f, "%s\n%s\n", files[i].rel, files[i].value);
        }
        r = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

int root_journal_replay(const char *path, const char *root) {
        FILE *f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;
        char **lines = NULL;
        size_t n = 0;
        int r = 0;
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, f)) >= 0) {
                if (len > 0 && line[len - 1] == '\n')
                        line[len - 1] = '\0';
                char **a = realloc(lines, (n + 1) * sizeof(*a));
                char *copy = a ? strdup(line) : NULL;
                if (a)
                        lines = a;
                if (!copy) {
                        r = -ENOMEM;
                        break;
                }
                lines[n++] = copy;
        }
        free(line);
        fclose(f);
        int written = 0;
        if (r == 0) {
                /* Newest first, so tracing_on (changed first) comes last.
                 * An odd last line is a torn write: that change was not
                 * made yet, so it is ignored. */
                for (size_t i = n / 2; i > 0; i--)
                        if (tracefs_write(root, lines[2 * i - 2], lines[2 * i - 1]) >= 0)
                                written++;
                if (unlink(path) < 0 && errno != ENOENT)
                        r = -errno;
        }
        for (size_t i = 0; i < n; i++)
                free(lines[i]);
        free(lines);
        return r < 0 ? r : written;
}
