/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "record-config.h"
#include "record-rotate.h"

/* A size is written with a unit ending in b: 1mb, 512kb, 2gb. */
static bool is_size(const char *s) {
        size_t n = strlen(s);
        return n > 1 && tolower((unsigned char) s[n - 1]) == 'b' && !isdigit((unsigned char) s[n - 2]);
}

static int parse_bytes(const char *s, uint64_t *ret) {
        uint32_t kb;
        int r = parse_size_kb(s, &kb);
        if (r < 0)
                return r;
        *ret = (uint64_t) kb * 1024u;
        return 0;
}

int record_rotate_parse(const char *spec, struct record_rotate *r) {
        _cleanup_free_ char *copy = strdup(spec);
        if (!copy)
                return -ENOMEM;
        bool any = false;
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (is_size(tok)) {
                        if (parse_bytes(tok, &r->file_size_bytes) < 0)
                                return -EINVAL;
                } else {
                        /* A bare number could be either: say which. */
                        if (isdigit((unsigned char) tok[strlen(tok) - 1]) || parse_duration_ms(tok, &r->period_ms) < 0 ||
                            r->period_ms == 0)
                                return -EINVAL;
                }
                any = true;
        }
        return any ? 0 : -EINVAL;
}

int record_keep_parse(const char *spec, struct record_rotate *r) {
        if (is_size(spec))
                return parse_bytes(spec, &r->keep_bytes) < 0 ? -EINVAL : 0;
        char *end;
        errno = 0;
        unsigned long n = strtoul(spec, &end, 10);
        if (errno || end == spec || *end || spec[0] == '-' || n == 0 || n > UINT32_MAX)
                return -EINVAL;
        r->keep_files = (uint32_t) n;
        return 0;
}

int record_rotate_apply(Perfetto__Protos__TraceConfig *cfg, const struct record_rotate *r) {
        Perfetto__Protos__TraceConfig__TracedRotation *rc = cfg->traced_rotation;
        if (!rc) {
                rc = calloc(1, sizeof(*rc));
                if (!rc)
                        return -ENOMEM;
                perfetto__protos__trace_config__traced_rotation__init(rc);
                cfg->traced_rotation = rc;
        }
#define PUT(f)                            \
        do {                              \
                if (r->f) {               \
                        rc->has_##f = true; \
                        rc->f = r->f;     \
                }                         \
        } while (0)
        PUT(file_size_bytes);
        PUT(period_ms);
        PUT(keep_files);
        PUT(keep_bytes);
#undef PUT
        return 0;
}

int record_rotate_open_dir(const char *path) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
                return fd < 0 ? -errno : fd;
        /* The service's core writes the files as its own user: a new
         * directory lets its group in (group traced, setgid so the files
         * keep the group the user reads them by). */
        if (mkdir(path, 0750) < 0)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct group *g = getgrnam("traced");
        if (g && fchown(fd, (uid_t) -1, g->gr_gid) == 0)
                (void) fchmod(fd, 02770);
        return fd;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

void record_rotate_list(int dir_fd, const char *path, FILE *f) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                safe_close(fd);
                return;
        }
        char **names = NULL;
        size_t n = 0;
        uint64_t total = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                struct stat st;
                if (len < 9 || strcmp(de->d_name + len - 8, ".pftrace") != 0 ||
                    fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                char **nn = realloc(names, (n + 1) * sizeof(*names));
                if (!nn)
                        break;
                names = nn;
                names[n] = strdup(de->d_name);
                if (!names[n])
                        break;
                n++;
                total += (uint64_t) st.st_size;
        }
        closedir(d);
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_names);
        fprintf(f, "Trace files in %s: %zu, %.1f MiB\n", path, n, (double) total / (1024.0 * 1024.0));
        for (size_t i = 0; i < n; i++) {
                if (n <= 8 || i < 3 || i >= n - 3)
                        fprintf(f, "  %s\n", names[i]);
                else if (i == 3)
                        fprintf(f, "  ...\n");
                free(names[i]);
        }
        free(names);
}
