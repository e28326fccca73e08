/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "basic/pbr.h"
#include "basic/varint.h"

static int rd_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *ret) {
        size_t k = varint_read(buf + *pos, len - *pos, ret);
        *pos += k;
        return k > 0 ? 0 : -1;
}

int pbr_next(const uint8_t *buf, size_t len, size_t *pos, struct pbr_field *ret) {
        uint64_t key;
        if (*pos >= len)
                return 0;
        if (rd_varint(buf, len, pos, &key) < 0)
                return -1;
        *ret = (struct pbr_field) { .number = (uint32_t) (key >> 3), .wire_type = (unsigned) (key & 7) };
        switch (ret->wire_type) {
        case 0:
                return rd_varint(buf, len, pos, &ret->varint) < 0 ? -1 : 1;
        case 1:
        case 5: {
                size_t n = ret->wire_type == 1 ? 8 : 4;
                if (len - *pos < n)
                        return -1;
                for (size_t i = 0; i < n; i++)
                        ret->varint |= (uint64_t) buf[*pos + i] << (8 * i);
                *pos += n;
                return 1;
        }
        case 2: {
                uint64_t n;
                if (rd_varint(buf, len, pos, &n) < 0 || n > len - *pos)
                        return -1;
                ret->data = buf + *pos;
                ret->len = (size_t) n;
                *pos += (size_t) n;
                return 1;
        }
        default:
                return -1;
        }
}

bool pbr_get(const uint8_t *buf, size_t len, uint32_t number, bool last, struct pbr_field *ret) {
        size_t pos = 0;
        struct pbr_field f;
        bool found = false;
        while (pbr_next(buf, len, &pos, &f) > 0)
                if (f.number == number) {
                        *ret = f;
                        found = true;
                        if (!last)
                                return true;
                }
        return found;
}

size_t pbr_count(const uint8_t *buf, size_t len, uint32_t number) {
        size_t pos = 0, n = 0;
        struct pbr_field f;
        while (pbr_next(buf, len, &pos, &f) > 0)
                if (f.number == number)
                        n++;
        return n;
}

int pbr_split_trace(const uint8_t *buf, size_t len, struct pbr_field *ret, size_t max) {
        size_t pos = 0, n = 0;
        struct pbr_field f;
        int r;
        while ((r = pbr_next(buf, len, &pos, &f)) > 0) {
                if (f.number != 1 || f.wire_type != 2)
                        return -1;
                if (n < max)
                        ret[n] = f;
                n++;
        }
        return r < 0 ? -1 : (int) n;
}
