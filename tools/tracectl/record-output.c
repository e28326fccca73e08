/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "record-output.h"
#include "trace-reader.h"

static mode_t current_umask(void) {
        mode_t m = umask(0022);
        umask(m);
        return m;
}

int record_output_open(struct record_output *o, const char *path) {
        struct stat st;
        bool exists = stat(path, &st) == 0;

        *o = (struct record_output) RECORD_OUTPUT_INIT;
        if (strcmp(path, "-") == 0) {
                /* Standard output, as perf's -o - : a trace is no text
                 * for a terminal. */
                if (isatty(STDOUT_FILENO))
                        return -ENOTTY;
                o->path = strdup(path);
                if (!o->path)
                        return -ENOMEM;
                o->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
                if (o->fd < 0) {
                        int r = -errno;
                        record_output_free(o);
                        return r;
                }
                return 0;
        }
        if (exists && !S_ISREG(st.st_mode)) {
                /* A pipe or a device: written as it comes, nothing to keep. */
                o->path = strdup(path);
                if (!o->path)
                        return -ENOMEM;
                o->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
                if (o->fd < 0) {
                        int r = -errno;
                        record_output_free(o);
                        return r;
                }
                return 0;
        }

        /* A symbolic link keeps pointing where it did: the file it names is
         * the one replaced. */
        o->path = exists ? realpath(path, NULL) : strdup(path);
        if (!o->path)
                return -errno ?: -ENOMEM;
        _cleanup_free_ char *dir_copy = strdup(o->path), *base_copy = strdup(o->path);
        if (!dir_copy || !base_copy) {
                record_output_free(o);
                return -ENOMEM;
        }
        if (asprintf(&o->tmp_path, "%s/.%s.tracectl-XXXXXX", dirname(dir_copy), basename(base_copy)) < 0) {
                o->tmp_path = NULL;
                record_output_free(o);
                return -ENOMEM;
        }
        o->fd = mkostemp(o->tmp_path, O_CLOEXEC);
        if (o->fd < 0) {
                int r = -errno;
                free(o->tmp_path);
                o->tmp_path = NULL;
                record_output_free(o);
                return r;
        }
        /* The mode a new file would get, or the one the old file had. */
        (void) fchmod(o->fd, exists ? st.st_mode & 07777 : 0666 & ~current_umask());
        return 0;
}

int record_output_trim(struct record_output *o, uint64_t *ret_packets, uint64_t *ret_cut) {
        struct trace_reader rd;
        const uint8_t *data;
        size_t len;
        uint64_t whole = 0;
        int r;

        *ret_packets = *ret_cut = 0;
        if (!o->tmp_path)
                return 0;
        r = trace_reader_open_mapped(&rd, o->tmp_path);
        if (r < 0)
                return r;
        /* Up to the end of the last packet read whole: what follows it is
         * torn (or is not a packet). */
        while ((r = trace_reader_next(&rd, &data, &len)) > 0)
                whole = rd.offset;
        uint64_t size = rd.map_len, packets = rd.n_packets;
        trace_reader_close(&rd);
        if (r < 0 && r != -EBADMSG)
                return r;
        if (whole < size && ftruncate(o->fd, (off_t) whole) < 0)
                return -errno;
        *ret_packets = packets;
        *ret_cut = size - whole;
        return 0;
}

int record_output_commit(struct record_output *o) {
        if (!o->tmp_path)
                return 0;
        if (rename(o->tmp_path, o->path) < 0) {
                int r = -errno;
                record_output_free(o);
                return r;
        }
        free(o->tmp_path);
        o->tmp_path = NULL;
        return 0;
}

void record_output_free(struct record_output *o) {
        if (o->tmp_path)
                (void) unlink(o->tmp_path);
        o->fd = safe_close(o->fd);
        free(o->tmp_path);
        free(o->path);
        *o = (struct record_output) RECORD_OUTPUT_INIT;
}
