/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/pb-buf.h"

/* The stream's bytes are one block: the size fields of open messages are
 * found from their positions (traced_pb_msg_end_nested), so moving the
 * block moves them too. */
int32_t pb_buf_grow(struct traced_pb_stream *s, size_t need) {
        struct pb_buf *b = (struct pb_buf *) s;
        size_t len = (size_t) (s->wp - s->begin);
        uint8_t *p = s->begin;
        size_t cap = b->cap;

        if (need > SIZE_MAX / 2 - len)
                return -ENOMEM;
        if (GREEDY_REALLOC_MIN(p, cap, len + need, 64) < 0)
                return -ENOMEM;
        s->begin = p;
        s->wp = p + len;
        s->end = p + cap;
        b->cap = cap;
        return 0;
}

void pb_buf_done(struct pb_buf *b) {
        free(b->s.begin);
        *b = (struct pb_buf) {};
}

void pb_buf_reset(struct pb_buf *b) {
        b->s.wp = b->s.begin;
        b->s.end = b->s.begin ? b->s.begin + b->cap : NULL;
        b->s.before = 0;
        b->s.root = NULL;
        b->s.error = 0;
        b->s.grow = pb_buf_grow;
}

int pb_buf_drain(struct pb_buf *b) {
        if (b->s.root && b->s.root->nested)
                return -EBUSY;
        b->s.before += pb_buf_len(b);
        b->s.wp = b->s.begin;
        return 0;
}
