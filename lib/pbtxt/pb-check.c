/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "basic/varint.h"
#include "pbtxt/pb-check.h"
#include "pbtxt/pbtxt.h"

static bool fits(ProtobufCType type, uint64_t v) {
        switch (type) {
        case PROTOBUF_C_TYPE_UINT32:
                return v <= UINT32_MAX;
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_ENUM:
                return (int64_t) v >= INT32_MIN && (int64_t) v <= INT32_MAX;
        case PROTOBUF_C_TYPE_SINT32:
                return v <= UINT32_MAX;
        default:
                return true;
        }
}

static bool is_32bit_varint(ProtobufCType type) {
        return type == PROTOBUF_C_TYPE_UINT32 || type == PROTOBUF_C_TYPE_INT32 || type == PROTOBUF_C_TYPE_ENUM ||
               type == PROTOBUF_C_TYPE_SINT32;
}

static int out_of_range(const ProtobufCFieldDescriptor *f, uint64_t v, size_t offset, char **ret_error) {
        if (ret_error && asprintf(ret_error, "byte %zu: value %" PRIu64 " out of range for field \"%s\"", offset, v,
                                  f->name) < 0)
                *ret_error = NULL;
        return -ERANGE;
}

/* Reads one varint at *pos; false on malformed input. */
static bool read_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *ret) {
        size_t k = varint_read(buf + *pos, len - *pos, ret);
        *pos += k;
        return k > 0;
}

static int check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, size_t base, unsigned depth,
                 char **ret_error) {
        size_t pos = 0;
        int r;

        if (depth > PBTXT_MAX_DEPTH)
                return 0;
        while (pos < len) {
                size_t start = pos;
                uint64_t key, v = 0, n = 0;
                /* Malformed input is the unpacker's business. */
                if (!read_varint(data, len, &pos, &key))
                        return 0;
                switch (key & 7) {
                case 0:
                        if (!read_varint(data, len, &pos, &v))
                                return 0;
                        break;
                case 1:
                        n = 8;
                        break;
                case 2:
                        if (!read_varint(data, len, &pos, &n))
                                return 0;
                        break;
                case 5:
                        n = 4;
                        break;
                default:
                        return 0;
                }
                if (n > len - pos)
                        return 0;
                const uint8_t *sub = data + pos;
                size_t at = base + pos;
                pos += n;
                const ProtobufCFieldDescriptor *f =
                        key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned) (key >> 3)) : NULL;
                if (!f)
                        continue;
                if ((key & 7) == 0 && !fits(f->type, v))
                        return out_of_range(f, v, base + start, ret_error);
                if ((key & 7) != 2)
                        continue;
                if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                        r = check(f->descriptor, sub, n, at, depth + 1, ret_error);
                        if (r < 0)
                                return r;
                } else if (is_32bit_varint(f->type)) {
                        /* Packed repeated. */
                        size_t p = 0;
                        while (p < n) {
                                size_t s = p;
                                if (!read_varint(sub, n, &p, &v))
                                        break;
                                if (!fits(f->type, v))
                                        return out_of_range(f, v, at + s, ret_error);
                        }
                }
        }
        return 0;
}

int pb_check_ranges(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        return check(desc, data, len, 0, 0, ret_error);
}
