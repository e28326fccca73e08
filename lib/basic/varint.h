/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading protobuf base-128 varints, once for the whole tree.
 *
 * A varint is at most VARINT_MAX_LEN bytes; one that runs longer, or that
 * the input cuts short, is malformed. Its tenth byte can only carry bit 63:
 * the strict readers refuse a tenth byte above 1 (the service, validating
 * what producers wrote), the lenient ones drop the extra bits as
 * protobuf-c does (readers that must accept what protobuf-c accepts).
 *
 * varint_push_byte() is the rule itself, for readers whose bytes do not
 * sit in one array (an iovec, a FILE); varint_read() and
 * varint_read_strict() read from memory, with a one-byte fast path. All
 * inline: packet validation in the service runs them per field. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/macro.h"

#define VARINT_MAX_LEN 10

/* Folds byte b, the i-th of a varint (i < VARINT_MAX_LEN, *v zero before
 * the first), into *v. Returns 1 when b ends the varint, 0 when another
 * byte must follow, -1 when the varint is malformed. */
static _always_inline_ int varint_push_byte(uint64_t *v, unsigned i, uint8_t b, bool strict) {
        if (strict && i == VARINT_MAX_LEN - 1 && b > 1)
                return -1;
        *v |= (uint64_t) (b & 0x7f) << (7 * i);
        if (!(b & 0x80))
                return 1;
        return i + 1 < VARINT_MAX_LEN ? 0 : -1;
}

static _always_inline_ size_t varint_read_internal(const uint8_t *p, size_t n, uint64_t *ret, bool strict) {
        uint64_t v = 0;
        if (n > 0 && p[0] < 0x80) {
                *ret = p[0];
                return 1;
        }
        for (unsigned i = 0; i < n && i < VARINT_MAX_LEN; i++) {
                int r = varint_push_byte(&v, i, p[i], strict);
                if (r < 0)
                        return 0;
                if (r > 0) {
                        *ret = v;
                        return i + 1;
                }
        }
        return 0;
}

/* Reads one varint from the n bytes at p. Returns how many bytes it took
 * (1..VARINT_MAX_LEN) with *ret set, or 0 when malformed or cut short. */
static _always_inline_ size_t varint_read(const uint8_t *p, size_t n, uint64_t *ret) {
        return varint_read_internal(p, n, ret, false);
}

/* The same, refusing a value past 64 bits. */
static _always_inline_ size_t varint_read_strict(const uint8_t *p, size_t n, uint64_t *ret) {
        return varint_read_internal(p, n, ret, true);
}
