/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <string.h>

#include "basic/varint.h"

static size_t encode(uint8_t *b, uint64_t v) {
        size_t n = 0;
        for (; v >= 0x80; v >>= 7)
                b[n++] = (uint8_t) (v | 0x80);
        b[n++] = (uint8_t) v;
        return n;
}

/* The smallest value needing len bytes (len 1..10). */
static uint64_t smallest_of_len(unsigned len) {
        return len == 1 ? 0 : UINT64_C(1) << (7 * (len - 1));
}

Test(basic_varint, every_length_reads_back) {
        for (unsigned len = 1; len <= VARINT_MAX_LEN; len++) {
                uint64_t values[] = { smallest_of_len(len),
                                      len == VARINT_MAX_LEN ? UINT64_MAX : (UINT64_C(1) << (7 * len)) - 1 };
                for (size_t k = 0; k < 2; k++) {
                        uint8_t b[16];
                        uint64_t got = 12345;
                        cr_assert_eq(encode(b, values[k]), len);
                        cr_assert_eq(varint_read(b, len, &got), len, "len %u", len);
                        cr_assert_eq(got, values[k]);
                        got = 12345;
                        cr_assert_eq(varint_read_strict(b, sizeof(b), &got), len);
                        cr_assert_eq(got, values[k]);
                }
        }
}

Test(basic_varint, truncated_input_is_refused) {
        for (unsigned len = 1; len <= VARINT_MAX_LEN; len++) {
                uint8_t b[16];
                uint64_t got = 777;
                encode(b, len == VARINT_MAX_LEN ? UINT64_MAX : smallest_of_len(len));
                for (unsigned cut = 0; cut < len; cut++) {
                        cr_assert_eq(varint_read(b, cut, &got), 0, "len %u cut %u", len, cut);
                        cr_assert_eq(varint_read_strict(b, cut, &got), 0);
                }
                cr_assert_eq(got, 777, "nothing is written on failure");
        }
}

Test(basic_varint, eleven_bytes_are_refused) {
        uint8_t b[11];
        uint64_t got;
        memset(b, 0x80, 10);
        b[10] = 0;
        cr_assert_eq(varint_read(b, sizeof(b), &got), 0);
        cr_assert_eq(varint_read_strict(b, sizeof(b), &got), 0);
}

Test(basic_varint, tenth_byte_past_64_bits) {
        uint8_t b[10];
        uint64_t got = 0;
        memset(b, 0xff, 9);
        b[9] = 0x03; /* bit 64 set: the value does not fit */
        cr_assert_eq(varint_read_strict(b, sizeof(b), &got), 0);
        /* The lenient reader keeps bit 63 and drops the rest, as protobuf-c. */
        cr_assert_eq(varint_read(b, sizeof(b), &got), 10);
        cr_assert_eq(got, UINT64_MAX);
        b[9] = 0x01;
        cr_assert_eq(varint_read_strict(b, sizeof(b), &got), 10);
        cr_assert_eq(got, UINT64_MAX);
}

Test(basic_varint, push_byte_matches_read) {
        uint8_t b[16];
        for (uint64_t v = 1; v != 0 && v < UINT64_MAX / 3; v = v * 3 + 1) {
                size_t n = encode(b, v);
                uint64_t acc = 0;
                int r = 0;
                unsigned i;
                for (i = 0; i < n; i++) {
                        r = varint_push_byte(&acc, i, b[i], true);
                        if (r != 0)
                                break;
                }
                cr_assert_eq(r, 1);
                cr_assert_eq(i + 1, n);
                cr_assert_eq(acc, v);
        }
}

Test(basic_varint, reads_stop_at_the_varint) {
        uint8_t b[] = { 0x96, 0x01, 0x05, 0xff };
        uint64_t got;
        cr_assert_eq(varint_read(b, sizeof(b), &got), 2);
        cr_assert_eq(got, 150);
        cr_assert_eq(varint_read(b + 2, 2, &got), 1);
        cr_assert_eq(got, 5);
}
