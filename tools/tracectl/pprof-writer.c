/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/hashmap.h"
#include "pprof-fields.h"
#include "pprof-writer.h"
#include "record-output.h"

#define OUT_CHUNK (64 * 1024)

struct pprof_writer {
        struct record_output out;
        z_stream z;
        bool z_ready, committed;
        uint8_t *chunk;
        struct pbw field; /* one tagged field, handed to deflate */
        char **strings;
        size_t n_strings, cap_strings;
        struct hashmap string_index; /* salted hash of the string -> index */
        uint64_t size;
        int error;
};

static int write_all(int fd, const uint8_t *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* Deflates n bytes (flush: Z_NO_FLUSH or Z_FINISH) into the file. */
static int deflate_out(struct pprof_writer *w, const uint8_t *p, size_t n, int flush) {
        if (w->error)
                return w->error;
        w->z.next_in = (Bytef *) p;
        w->z.avail_in = (uInt) n;
        for (;;) {
                w->z.next_out = w->chunk;
                w->z.avail_out = OUT_CHUNK;
                int zr = deflate(&w->z, flush);
                if (zr == Z_STREAM_ERROR)
                        return (w->error = -EIO);
                size_t have = OUT_CHUNK - w->z.avail_out;
                int r = write_all(w->out.fd, w->chunk, have);
                if (r < 0)
                        return (w->error = r);
                if (flush == Z_FINISH ? zr == Z_STREAM_END : (w->z.avail_in == 0 && w->z.avail_out != 0))
                        return 0;
        }
}

int pprof_writer_open(const char *path, struct pprof_writer **ret) {
        struct pprof_writer *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->out = (struct record_output) RECORD_OUTPUT_INIT;
        w->chunk = malloc(OUT_CHUNK);
        if (!w->chunk) {
                pprof_writer_free(w);
                return -ENOMEM;
        }
        /* 15 + 16: a gzip header and trailer around the deflate stream. */
        if (deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
                pprof_writer_free(w);
                return -ENOMEM;
        }
        w->z_ready = true;
        int r = record_output_open(&w->out, strcmp(path, "-") == 0 ? "/dev/stdout" : path);
        if (r < 0) {
                pprof_writer_free(w);
                return r;
        }
        /* The table's first string is the empty one. */
        if (GREEDY_REALLOC_MIN(w->strings, w->cap_strings, 1, 256) < 0 || !(w->strings[0] = strdup(""))) {
                pprof_writer_free(w);
                return -ENOMEM;
        }
        w->n_strings = 1;
        *ret = w;
        return 0;
}

void pprof_writer_free(struct pprof_writer *w) {
        if (!w)
                return;
        if (w->z_ready)
                deflateEnd(&w->z);
        record_output_free(&w->out);
        for (size_t i = 0; i < w->n_strings; i++)
                free(w->strings[i]);
        free(w->strings);
        hashmap_clear(&w->string_index);
        pbw_done(&w->field);
        free(w->chunk);
        free(w);
}

static uint64_t string_key(const char *s, uint64_t salt) {
        return fnv1a64(s, strlen(s)) + salt * 0x9e3779b97f4a7c15ULL;
}

int64_t pprof_string(struct pprof_writer *w, const char *s) {
        if (w->error)
                return 0;
        if (!s || !s[0])
                return 0;
        uint64_t salt = 0, i;
        for (;; salt++) {
                if (!hashmap_get(&w->string_index, string_key(s, salt), &i))
                        break;
                if (strcmp(w->strings[i], s) == 0)
                        return (int64_t) i;
        }
        char *copy = strdup(s);
        if (!copy || GREEDY_REALLOC_MIN(w->strings, w->cap_strings, w->n_strings + 1, 256) < 0 ||
            hashmap_put(&w->string_index, string_key(s, salt), w->n_strings) < 0) {
                free(copy);
                w->error = -ENOMEM;
                return 0;
        }
        w->strings[w->n_strings] = copy;
        return (int64_t) w->n_strings++;
}

static void write_field(struct pprof_writer *w) {
        if (w->field.error && !w->error)
                w->error = w->field.error;
        w->size += w->field.len;
        (void) deflate_out(w, w->field.buf, w->field.len, Z_NO_FLUSH);
        pbw_reset(&w->field);
}

void pprof_write_message(struct pprof_writer *w, uint32_t field, const struct pbw *m) {
        if (w->error)
                return;
        pbw_message(&w->field, field, m);
        write_field(w);
}

void pprof_write_varint(struct pprof_writer *w, uint32_t field, uint64_t v) {
        if (w->error)
                return;
        pbw_varint(&w->field, field, v);
        write_field(w);
}

uint64_t pprof_writer_size(const struct pprof_writer *w) {
        return w->size;
}

int pprof_writer_commit(struct pprof_writer *w) {
        for (size_t i = 0; i < w->n_strings && !w->error; i++) {
                pbw_string(&w->field, PPROF_PROFILE_STRING_TABLE, w->strings[i]);
                write_field(w);
        }
        if (deflate_out(w, NULL, 0, Z_FINISH) < 0)
                return w->error;
        int r = w->out.tmp_path && fsync(w->out.fd) < 0 ? -errno : 0;
        if (r == 0)
                r = record_output_commit(&w->out);
        if (r < 0)
                return (w->error = r);
        w->committed = true;
        return 0;
}
