/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/hashmap.h"
#include "basic/io-util.h"
#include "basic/pb-buf.h"
#include "pprof-writer.h"
#include "record-output.h"

#define OUT_CHUNK (64 * 1024)

struct pprof_writer {
        struct record_output out;
        z_stream z;
        bool z_ready, committed;
        uint8_t *chunk;
        struct pb_buf buf;                  /* the profile's fields not yet deflated */
        perftools_profiles_Profile profile; /* the root message, on buf */
        char **strings;
        size_t n_strings, cap_strings;
        struct hashmap string_index; /* salted hash of the string -> index */
        int error;
};

/* Keeps the first error; what is written on the profile after it is
 * dropped. */
static int fail(struct pprof_writer *w, int r) {
        if (!w->error) {
                w->error = r;
                traced_pb_stream_fail(&w->buf.s, r);
        }
        return w->error;
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
                        return fail(w, -EIO);
                size_t have = OUT_CHUNK - w->z.avail_out;
                int r = write_full(w->out.fd, w->chunk, have);
                if (r < 0)
                        return fail(w, r);
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
        perftools_profiles_Profile_init(&w->profile, pb_buf_stream(&w->buf));
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
        pb_buf_done(&w->buf);
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
                (void) fail(w, -ENOMEM);
                return 0;
        }
        w->strings[w->n_strings] = copy;
        return (int64_t) w->n_strings++;
}

perftools_profiles_Profile *pprof_writer_profile(struct pprof_writer *w) {
        return &w->profile;
}

/* Deflates what the profile holds: its fields, all ended. */
static void drain(struct pprof_writer *w) {
        if (w->buf.s.error)
                (void) fail(w, w->buf.s.error);
        if (w->error)
                return;
        if (w->profile.msg.nested) {
                (void) fail(w, -EBUSY); /* a field still open: the caller's bug */
                return;
        }
        if (deflate_out(w, pb_buf_data(&w->buf), pb_buf_len(&w->buf), Z_NO_FLUSH) >= 0)
                (void) pb_buf_drain(&w->buf);
}

void pprof_writer_flush(struct pprof_writer *w) {
        if (pb_buf_len(&w->buf) >= OUT_CHUNK)
                drain(w);
}

uint64_t pprof_writer_size(const struct pprof_writer *w) {
        return traced_pb_msg_size(&w->profile.msg);
}

int pprof_writer_commit(struct pprof_writer *w) {
        drain(w); /* and nothing left open */
        for (size_t i = 0; i < w->n_strings && !w->error; i++) {
                perftools_profiles_Profile_add_string_table(&w->profile, w->strings[i]);
                pprof_writer_flush(w);
        }
        drain(w);
        if (w->error || deflate_out(w, NULL, 0, Z_FINISH) < 0)
                return w->error;
        int r = w->out.tmp_path && fsync(w->out.fd) < 0 ? -errno : 0;
        if (r == 0)
                r = record_output_commit(&w->out);
        if (r < 0)
                return fail(w, r);
        w->committed = true;
        return 0;
}
