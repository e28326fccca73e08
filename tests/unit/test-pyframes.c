/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* lib/profiling/pyframes.c: CPython 3.11 line tables (vectors from
 * /usr/bin/python3.11's own co_linetable and co_positions()), code objects
 * read out of a fake process memory, and the merge of Python frames into
 * a native stack. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/pyframes.h"

/* def f(a, b):            line 1
 *     x = a + b
 *     if x > 10:
 *         y = [i for i in range(x)]
 *
 *         return len(y)
 *     return (x *
 *             2)
 * Code units 0..56. */
static const uint8_t table_f[] = {
        0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88, 0x32, 0x82, 0x76,
        0x80, 0x76, 0xd8, 0x0c, 0x21, 0xd0, 0x0c, 0x21, 0x9d, 0x05, 0x98, 0x61, 0x99, 0x08, 0x9c, 0x08, 0xd0, 0x0c,
        0x21, 0xd1, 0x0c, 0x21, 0xd4, 0x0c, 0x21, 0x88, 0x01, 0xe5, 0x0f, 0x12, 0x90, 0x31, 0x89, 0x76, 0x8c, 0x76,
        0x88, 0x0d, 0xd8, 0x0c, 0x0d, 0xd8, 0x0c, 0x0d, 0xf1, 0x03, 0x01, 0x0d, 0x0e, 0xf0, 0x00, 0x01, 0x05, 0x0f};
static const int lines_f[] = {1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                              4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 8, 7, 7, 7};

/* def g():                line 1
 *     try:
 *         yield 1
 *     except ValueError:
 *         pass
 * with "no location" entries (-1). */
static const uint8_t table_g[] = {0xe8, 0x00, 0xe8, 0x00, 0x80, 0x00, 0xf0, 0x02, 0x03, 0x05, 0x0d, 0xd8,
                                  0x0e, 0x0f, 0x88, 0x07, 0x88, 0x07, 0x88, 0x07, 0x88, 0x07, 0x88, 0x07,
                                  0xf8, 0xdd, 0x0b, 0x15, 0xf0, 0x00, 0x01, 0x05, 0x0d, 0xf0, 0x00, 0x01,
                                  0x05, 0x0d, 0xf0, 0x00, 0x01, 0x05, 0x0d, 0xd8, 0x08, 0x0c, 0x88, 0x04,
                                  0x88, 0x04, 0xf0, 0x03, 0x01, 0x05, 0x0d, 0xf8, 0xf8, 0xf8};
static const int lines_g[] = {1, 1, 1, 2, 3, 3, 3, 3, 3, 3, -1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 4, -1, -1, -1};

Test(pyframes, line_of_every_unit_of_real_tables) {
        for (uint32_t u = 0; u < sizeof(lines_f) / sizeof(lines_f[0]); u++)
                cr_expect_eq(py_line_of(table_f, sizeof(table_f), 1, u), lines_f[u], "f: unit %u", u);
        for (uint32_t u = 0; u < sizeof(lines_g) / sizeof(lines_g[0]); u++)
                cr_expect_eq(py_line_of(table_g, sizeof(table_g), 1, u), lines_g[u], "g: unit %u", u);
        /* Past the table: no line. */
        cr_expect_eq(py_line_of(table_f, sizeof(table_f), 1, 57), -1);
        cr_expect_eq(py_line_of(table_f, sizeof(table_f), 1, UINT32_MAX), -1);
        /* Lines count from co_firstlineno. */
        cr_expect_eq(py_line_of(table_f, sizeof(table_f), 100, 53), 107);
}

Test(pyframes, malformed_tables_are_refused) {
        /* An entry must start with bit 7 set. */
        static const uint8_t no_start[] = {0x08};
        cr_expect_eq(py_line_of(no_start, sizeof(no_start), 1, 0), -EBADMSG);
        /* A long form cut short. */
        static const uint8_t cut[] = {0xf0, 0x02};
        cr_expect_eq(py_line_of(cut, sizeof(cut), 1, 0), -EBADMSG);
        /* A one-line form whose columns run into the next entry. */
        static const uint8_t into_next[] = {0xd0, 0x80, 0x80};
        cr_expect_eq(py_line_of(into_next, sizeof(into_next), 1, 0), -EBADMSG);
        /* A varint that never ends. */
        static const uint8_t endless[] = {0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40};
        cr_expect_eq(py_line_of(endless, sizeof(endless), 1, 0), -EBADMSG);
        cr_expect_eq(py_line_of(NULL, 0, 1, 0), -1);
}

Test(pyframes, versions_from_paths) {
        unsigned major = 0, minor = 0;
        cr_expect(py_version_of_path("/usr/bin/python3.11", &major, &minor));
        cr_expect(major == 3 && minor == 11);
        cr_expect(py_version_of_path("/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", &major, &minor));
        cr_expect(major == 3 && minor == 12);
        cr_expect(py_version_of_path("/usr/bin/python3.11d", &major, &minor));
        cr_expect_not(py_version_of_path("/usr/bin/python3", &major, &minor));
        cr_expect_not(py_version_of_path("/usr/bin/python3.11-config", &major, &minor));
        cr_expect_not(py_version_of_path("/usr/lib/python3.11/lib-dynload/_ssl.cpython-311.so", &major, &minor));
        cr_expect_not(py_version_of_path("/usr/bin/perl5.36", &major, &minor));
        cr_expect_not_null(py_layout_find(3, 11));
        cr_expect_null(py_layout_find(3, 12));
        cr_expect_null(py_layout_find(2, 7));
}

/* --- a fake process memory ----------------------------------------------- */

#define BASE 0x10000u
#define CODE_TYPE 0x5555u /* where PyCode_Type would be */
static uint8_t mem[4096];

static int fake_read(void *userdata, uint64_t addr, void *buf, size_t len) {
        int *reads = userdata;
        (*reads)++;
        if (addr < BASE || addr - BASE > sizeof(mem) || len > sizeof(mem) - (addr - BASE))
                return -EFAULT;
        memcpy(buf, mem + (addr - BASE), len);
        return 0;
}

static void put64(size_t at, uint64_t v) {
        memcpy(mem + at, &v, 8);
}

static void put32(size_t at, uint32_t v) {
        memcpy(mem + at, &v, 4);
}

/* A compact str at offset at: ascii, or of kind 1, 2 or 4 (UCS). */
static void put_str(const struct py_layout *l, size_t at, const void *data, size_t length, unsigned kind, bool ascii) {
        put64(at + l->str_length, length);
        put32(at + l->str_state, (ascii ? 0x40u : 0) | 0x20u | kind << 2);
        memcpy(mem + at + (ascii ? l->str_ascii_data : l->str_compact_data), data, length * kind);
}

static void fake_code(const struct py_layout *l) {
        memset(mem, 0, sizeof(mem));
        size_t code = 0, name = 512, file = 1024, table = 1536;
        put64(code + l->code_qualname, BASE + name);
        put64(code + l->code_filename, BASE + file);
        put64(code + l->code_linetable, BASE + table);
        put32(code + l->code_firstlineno, 1);
        put64(code + l->object_type, CODE_TYPE);
        put_str(l, name, "Outer.f", 7, 1, true);
        /* "/tmp/é.py" as a kind-1 (latin-1) string. */
        put_str(l, file, "/tmp/\xe9.py", 9, 1, false);
        put64(table + l->bytes_size, sizeof(table_f));
        memcpy(mem + table + l->bytes_data, table_f, sizeof(table_f));
}

Test(pyframes, code_objects_read_from_memory) {
        const struct py_layout *l = py_layout_find(3, 11);
        cr_assert_not_null(l);
        fake_code(l);
        int reads = 0;
        struct py_code c;
        cr_assert_eq(py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c), 0);
        cr_expect_str_eq(c.qualname, "Outer.f");
        cr_expect_str_eq(c.filename, "/tmp/\xc3\xa9.py", "latin-1 turned into UTF-8: %s", c.filename);
        cr_expect_eq(c.firstlineno, 1);
        cr_expect_eq(c.linetable_len, sizeof(table_f));
        /* prev_instr at unit 53 (bytes from co_code_adaptive), and before the first. */
        cr_expect_eq(py_code_line(l, &c, BASE, BASE + l->code_code + 2 * 53), 8);
        cr_expect_eq(py_code_line(l, &c, BASE, BASE + l->code_code - 2), 1);
        py_code_done(&c);

        /* A UCS-2 name. */
        static const uint16_t ucs2[] = {'f', 0x3b1};
        put_str(l, 512, ucs2, 2, 2, false);
        cr_assert_eq(py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c), 0);
        cr_expect_str_eq(c.qualname, "f\xce\xb1");
        py_code_done(&c);
}

Test(pyframes, garbage_is_refused) {
        const struct py_layout *l = py_layout_find(3, 11);
        int reads = 0;
        struct py_code c;
        /* Out of the process's memory. */
        cr_expect_eq(py_code_read(l, fake_read, &reads, 0x100, CODE_TYPE, &c), -EFAULT);
        /* A name that is not a compact str. */
        fake_code(l);
        put32(512 + l->str_state, 0);
        cr_expect_eq(py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c), -EBADMSG);
        /* "ascii" with a byte past 127. */
        fake_code(l);
        mem[512 + l->str_ascii_data] = 0xff;
        cr_expect_eq(py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c), -EBADMSG);
        /* An object of another type. */
        fake_code(l);
        put64(l->object_type, CODE_TYPE + 8);
        cr_expect_eq(py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c), -EBADMSG);
        cr_expect_eq(py_code_read(l, fake_read, &reads, BASE, 0, &c), 0, "the type not checked");
        py_code_done(&c);
        /* A line table too long. */
        fake_code(l);
        put64(1536 + l->bytes_size, (uint64_t) PY_LINETABLE_MAX + 1);
        cr_expect_eq(py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c), -EBADMSG);
        /* A name far longer than kept: read up to PY_NAME_MAX only (then
         * the read goes past the fake memory: -EFAULT, not a crash). */
        fake_code(l);
        put64(512 + l->str_length, 1u << 19);
        int r = py_code_read(l, fake_read, &reads, BASE, CODE_TYPE, &c);
        cr_expect(r == 0 || r == -EFAULT);
        if (r == 0) {
                cr_expect_leq(strlen(c.qualname), PY_NAME_MAX);
                py_code_done(&c);
        }
}

/* --- the merge ------------------------------------------------------------ */

/* The merged stack as a string, innermost first: native frames by index
 * ("n2"), Python ones by index ("p0"). */
static void merged(const bool *is_eval, size_t nn, const bool *is_entry, size_t np, char *out, size_t size) {
        struct py_merged m[64];
        size_t n = py_merge(is_eval, nn, is_entry, np, m, 64);
        out[0] = 0;
        for (size_t k = 0; k < n; k++) {
                size_t len = strlen(out);
                snprintf(out + len, size - len, "%s%c%u", k ? " " : "", m[k].python ? 'p' : 'n', m[k].index);
        }
}

Test(pyframes, python_frames_replace_the_evaluation_frames) {
        char s[256];
        /* libc, a C extension, eval, PyRun..., main: fib fib work main <module>. */
        bool eval1[] = {false, false, true, false, false};
        bool entry1[] = {false, false, false, false, true};
        merged(eval1, 5, entry1, 5, s, sizeof(s));
        cr_expect_str_eq(s, "n0 n1 p0 p1 p2 p3 p4 n3 n4");

        /* Two evaluation calls (Python called back from C): the inner one
         * ran p0 p1 (entry p1), the outer p2 p3 (entry p3). */
        bool eval2[] = {true, false, true, false};
        bool entry2[] = {false, true, false, true};
        merged(eval2, 4, entry2, 4, s, sizeof(s));
        cr_expect_str_eq(s, "p0 p1 n1 p2 p3 n3");

        /* More evaluation frames than runs: the outer ones stay. */
        bool eval3[] = {true, true, false};
        bool entry3[] = {true};
        merged(eval3, 3, entry3, 1, s, sizeof(s));
        cr_expect_str_eq(s, "p0 n1 n2");

        /* No evaluation frame in the native stack (cut short): the Python
         * frames go outermost. */
        bool eval4[] = {false, false};
        bool entry4[] = {false, true};
        merged(eval4, 2, entry4, 2, s, sizeof(s));
        cr_expect_str_eq(s, "n0 n1 p0 p1");

        /* No entry flag at all: every Python frame to the first call. */
        bool eval5[] = {true, true};
        bool entry5[] = {false, false, false};
        merged(eval5, 2, entry5, 3, s, sizeof(s));
        cr_expect_str_eq(s, "p0 p1 p2 n1");

        /* No Python frames: the native stack. */
        merged(eval5, 2, NULL, 0, s, sizeof(s));
        cr_expect_str_eq(s, "n0 n1");

        /* Bounded by cap. */
        struct py_merged m[3];
        cr_expect_eq(py_merge(eval1, 5, entry1, 5, m, 3), 3);
}
