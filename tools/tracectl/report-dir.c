/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "report-dir.h"
#include "tracectl.h"

#define TRACE_SUFFIX ".pftrace"
#define PPROF_SUFFIX ".pb.gz"

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool is_trace_name(const char *name) {
        size_t n = strlen(name), k = strlen(TRACE_SUFFIX);
        return name[0] != '.' && n > k && strcmp(name + n - k, TRACE_SUFFIX) == 0;
}

/* The closed trace files of dir (regular files named *.pftrace), sorted. */
static int list_traces(const char *dir, char ***ret, size_t *ret_n) {
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        char **names = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        for (struct dirent *e; (errno = 0, e = readdir(d));) {
                if (!is_trace_name(e->d_name) || (e->d_type != DT_REG && e->d_type != DT_UNKNOWN))
                        continue;
                if (GREEDY_REALLOC(names, cap, n + 1) < 0 || !(names[n] = strdup(e->d_name))) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        closedir(d);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        free(names[i]);
                free(names);
                return r;
        }
        if (n)
                qsort(names, n, sizeof(*names), compare_names);
        *ret = names;
        *ret_n = n;
        return 0;
}

/* Whether pprof exists and is as new as trace (written from it already). */
static bool up_to_date(const char *trace, const char *pprof) {
        struct stat t, p;
        if (stat(trace, &t) < 0 || stat(pprof, &p) < 0 || !S_ISREG(p.st_mode))
                return false;
        return p.st_mtim.tv_sec > t.st_mtim.tv_sec ||
               (p.st_mtim.tv_sec == t.st_mtim.tv_sec && p.st_mtim.tv_nsec >= t.st_mtim.tv_nsec);
}

int report_dir(const char *dir, report_dir_fn fn, void *userdata) {
        char **names = NULL;
        size_t n = 0;
        int r = list_traces(dir, &names, &n);
        if (r < 0) {
                fprintf(stderr, "tracectl report: cannot read the directory %s: %s\n", dir, strerror(-r));
                return EXIT_OTHER;
        }
        if (n == 0) {
                fprintf(stderr, "tracectl report: %s holds no closed trace files (*%s)\n", dir, TRACE_SUFFIX);
                free(names);
                return EXIT_OTHER;
        }
        size_t written = 0, current = 0, empty = 0, failed = 0;
        int ret = EXIT_OK;
        for (size_t i = 0; i < n; i++) {
                size_t stem = strlen(names[i]) - strlen(TRACE_SUFFIX);
                char *trace = NULL, *pprof = NULL;
                if (asprintf(&trace, "%s%s", dir, names[i]) < 0)
                        trace = NULL;
                if (asprintf(&pprof, "%s%.*s%s", dir, (int) stem, names[i], PPROF_SUFFIX) < 0)
                        pprof = NULL;
                if (!trace || !pprof) {
                        fprintf(stderr, "tracectl report: out of memory\n");
                        free(trace);
                        free(pprof);
                        ret = EXIT_OTHER;
                        break;
                }
                int k;
                if (up_to_date(trace, pprof))
                        current++;
                else if ((k = fn(userdata, trace, pprof)) == EXIT_OK)
                        written++;
                else if (k == REPORT_DIR_NO_SAMPLES)
                        empty++;
                else {
                        failed++;
                        if (ret == EXIT_OK)
                                ret = k;
                }
                free(trace);
                free(pprof);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        fprintf(stderr,
                "tracectl report: %s: %zu profiles written, %zu already up to date, %zu traces without samples, "
                "%zu failed\n",
                dir, written, current, empty, failed);
        return ret;
}
