/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

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

void trace_reader_close(struct trace_reader *r) {
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

int trace_reader_next(struct trace_reader *r, const uint8_t **ret_data, size_t *ret_len) {
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
