/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/varint.h"
#include "trace-reader.h"

int trace_reader_open(struct trace_reader *r, const char *path) {
        *r = (struct trace_reader) {};
        r->f = fopen(path, "re");
        if (!r->f)
                return -errno;
        (void) setvbuf(r->f, NULL, _IOFBF, 1 << 20);
        return 0;
}

int trace_reader_open_mapped(struct trace_reader *r, const char *path) {
        *r = (struct trace_reader) {};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        int e = fstat(fd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -ENODEV : 0;
        if (e == 0 && st.st_size > 0) {
                void *p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
                if (p == MAP_FAILED)
                        e = -errno;
                else {
                        r->map = p;
                        r->map_len = (size_t) st.st_size;
                }
        } else if (e == 0)
                r->map = (const uint8_t *) ""; /* empty: no packets */
        (void) close(fd);
        return e;
}

void trace_reader_close(struct trace_reader *r) {
        if (r->map && r->map_len)
                (void) munmap((void *) r->map, r->map_len);
        if (r->f)
                fclose(r->f);
        free(r->buf);
        *r = (struct trace_reader) {};
}

static int read_varint(struct trace_reader *r, uint64_t *ret, bool *eof) {
        uint64_t v = 0;
        for (unsigned i = 0;; i++) {
                int c = getc_unlocked(r->f);
                if (c == EOF) {
                        *eof = i == 0;
                        return -EBADMSG;
                }
                r->offset++;
                int k = varint_push_byte(&v, i, (uint8_t) c, /* strict= */ false);
                if (k < 0)
                        return -EBADMSG;
                if (k > 0) {
                        *ret = v;
                        return 0;
                }
        }
}

static int next_mapped(struct trace_reader *r, const uint8_t **ret_data, size_t *ret_len) {
        while (r->offset < r->map_len) {
                uint64_t key, len;
                size_t avail = r->map_len - (size_t) r->offset;
                size_t k = varint_read(r->map + r->offset, avail, &key);
                if (k == 0)
                        return -EBADMSG;
                unsigned wt = key & 7;
                if (wt != 0 && wt != 2)
                        return -EBADMSG;
                size_t m = varint_read(r->map + r->offset + k, avail - k, &len);
                if (m == 0)
                        return -EBADMSG;
                r->offset += k + m;
                if (wt == 0)
                        continue; /* not a packet; skip */
                if (len > TRACE_READER_MAX_PACKET || len > r->map_len - r->offset)
                        return -EBADMSG;
                const uint8_t *data = r->map + r->offset;
                r->offset += len;
                if ((key >> 3) != 1)
                        continue; /* only Trace.packet matters */
                r->n_packets++;
                *ret_data = data;
                *ret_len = (size_t) len;
                return 1;
        }
        return 0;
}

int trace_reader_next(struct trace_reader *r, const uint8_t **ret_data, size_t *ret_len) {
        if (r->map)
                return next_mapped(r, ret_data, ret_len);
        for (;;) {
                uint64_t key, len;
                bool eof = false;
                if (read_varint(r, &key, &eof) < 0)
                        return eof ? 0 : -EBADMSG;
                unsigned wt = key & 7;
                if (wt == 0) {
                        if (read_varint(r, &len, &eof) < 0)
                                return -EBADMSG;
                        continue; /* not a packet; skip */
                }
                if (wt != 2)
                        return -EBADMSG;
                if (read_varint(r, &len, &eof) < 0 || len > TRACE_READER_MAX_PACKET)
                        return -EBADMSG;
                if (len > r->cap) {
                        uint8_t *b = realloc(r->buf, len);
                        if (!b)
                                return -ENOMEM;
                        r->buf = b;
                        r->cap = len;
                }
                if (len && fread(r->buf, 1, len, r->f) != len)
                        return -EBADMSG;
                r->offset += len;
                if ((key >> 3) != 1)
                        continue; /* only Trace.packet matters */
                r->n_packets++;
                *ret_data = r->buf;
                *ret_len = len;
                return 1;
        }
}
