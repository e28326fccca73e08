/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* packet_is_valid: what a producer may put in a TracePacket. A packet in one
 * range takes a fast path; split over ranges, the general one: both must
 * give the same verdict on every input, well-formed or not. */

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "core/sessions/session-read.h"

struct pkt_case {
        const char *what;
        uint8_t bytes[16];
        size_t len;
        bool valid;
};

static const struct pkt_case cases[] = {
        { "empty", {}, 0, true },
        { "timestamp (8) varint", { 0x40, 0x01 }, 2, true },
        { "for_testing (900) bytes", { 0xa2, 0x38, 0x03, 'a', 'b', 'c' }, 6, true },
        { "fixed64 field", { 0x09, 1, 2, 3, 4, 5, 6, 7, 8 }, 9, true },
        { "fixed32 field", { 0x0d, 1, 2, 3, 4 }, 5, true },
        { "10-byte varint value", { 0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 11, true },
        { "trusted_uid (3)", { 0x18, 0x01 }, 2, false },
        { "trusted_packet_sequence_id (10)", { 0x40, 0x01, 0x50, 0x07 }, 4, false },
        { "trusted_pid (79)", { 0xf8, 0x04, 0x01 }, 3, false },
        { "machine_id (98)", { 0x90, 0x06, 0x05 }, 3, false },
        { "trusted_uid as bytes", { 0x1a, 0x01, 0x00 }, 3, false },
        { "field number 0", { 0x00, 0x01 }, 2, false },
        { "start group", { 0x43 }, 1, false },
        { "end group", { 0x44 }, 1, false },
        { "wire type 6", { 0x46, 0x00 }, 2, false },
        { "wire type 7", { 0x47, 0x00 }, 2, false },
        { "truncated key", { 0xa2 }, 1, false },
        { "truncated varint value", { 0x40, 0x81 }, 2, false },
        { "length past the end", { 0x0a, 0x05, 'a' }, 3, false },
        { "truncated fixed64", { 0x09, 1, 2, 3 }, 4, false },
        { "truncated fixed32", { 0x0d, 1, 2 }, 3, false },
        { "11-byte varint", { 0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 12, false },
        { "varint over 64 bits", { 0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 }, 11, false },
        { "field number over 2^29-1", { 0xf8, 0xff, 0xff, 0xff, 0x1f, 0x00 }, 6, false },
};

Test(packet_validation, every_case_in_one_range) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct iovec v = { (void *) cases[i].bytes, cases[i].len };
                cr_expect_eq(packet_is_valid(&v, 1, cases[i].len), cases[i].valid, "%s: expected %s", cases[i].what,
                             cases[i].valid ? "valid" : "refused");
        }
}

/* Split at every position, and byte by byte: the same verdicts. */
Test(packet_validation, every_split_gives_the_same_verdict) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct pkt_case *c = &cases[i];
                for (size_t at = 0; at <= c->len; at++) {
                        struct iovec v[2] = { { (void *) c->bytes, at }, { (void *) (c->bytes + at), c->len - at } };
                        cr_expect_eq(packet_is_valid(v, 2, c->len), c->valid, "%s split at %zu", c->what, at);
                }
                struct iovec bytes[16];
                for (size_t k = 0; k < c->len; k++)
                        bytes[k] = (struct iovec) { (void *) (c->bytes + k), 1 };
                if (c->len > 1)
                        cr_expect_eq(packet_is_valid(bytes, c->len, c->len), c->valid, "%s byte by byte", c->what);
        }
}
