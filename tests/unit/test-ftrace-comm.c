/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* format_read_comm, the word-at-a-time reader of task names that compact
 * sched uses for every event, against format_read_str: names ending in
 * either word, filling all 16 bytes, followed by bytes that are not zero,
 * with high bytes, in records too short for the field, and fields that
 * are not a fixed 16-byte array. */

#include <criterion/criterion.h>
#include <string.h>

#include "format.h"

static const char *names[] = {
        "",         "a",          "abcdefg",         "abcdefgh",         "abcdefghi",
        "sched-pipe", "abcdefghijklmno", "abcdefghijklmnop", "\x80\xff\x01x", "a\x01\x01\x01\x01\x01\x01\x01\x01b",
};

static void check(const struct format_field *c, const char *what) {
        for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++)
                for (size_t cut = 0; cut <= 1; cut++) {
                        uint8_t rec[128];
                        size_t l = strnlen(names[n], 16);
                        memset(rec, 0xa5, sizeof(rec)); /* what follows a NUL is not zero */
                        memcpy(rec + c->offset, names[n], l);
                        if (l < 16)
                                rec[c->offset + l] = '\0';
                        size_t len = cut ? (size_t) c->offset + 9 : sizeof(rec);
                        char want[16] = {}, got[16];
                        memset(got, 0x5a, sizeof(got));
                        format_read_str(c, rec, len, want, sizeof(want));
                        format_read_comm(c, rec, len, got);
                        cr_assert_eq(memcmp(want, got, 16), 0, "%s, name %zu (cut %zu): \"%.16s\" != \"%.16s\"", what,
                                     n, cut, want, got);
                }
}

Test(ftrace_comm, fixed_array_as_read_str) {
        struct format_field c = { .name = "next_comm", .offset = 8, .size = 16, .is_string = true };
        check(&c, "char[16] at 8");
        c.offset = 13; /* unaligned */
        check(&c, "char[16] at 13");
}

Test(ftrace_comm, other_layouts_as_read_str) {
        struct format_field c = { .name = "comm", .offset = 8, .size = 12, .is_string = true };
        check(&c, "char[12]");
        c = (struct format_field) { .name = "comm", .offset = 8, .size = 0, .is_string = true, .is_dyn_tail = true };
        check(&c, "char[]");
}

Test(ftrace_comm, no_field) {
        char got[16];
        uint8_t rec[32] = {};
        memset(got, 0x5a, sizeof(got));
        format_read_comm(NULL, rec, sizeof(rec), got);
        cr_assert_eq(memcmp(got, (char[16]) {}, 16), 0);
}
