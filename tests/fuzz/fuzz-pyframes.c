/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Bytes as the memory of a process that claims to run CPython 3.11 (a
 * process being profiled is anyone's): the input is mapped at a base
 * address, its first two bytes say where in it the code object is, and
 * the code object, its strings and its line table are read from there.
 * What is read must be bounded (names at most PY_NAME_MAX characters as
 * UTF-8, tables at most PY_LINETABLE_MAX bytes), and the input itself is
 * also decoded as a line table. The same memory, as a process's and as
 * the copy of a thread's stack, is walked for a thread's frames: the
 * walk must end, within its bounds, whatever the frames and threads
 * point to. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/pyframes-walk.h"
#include "profiling/pyframes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE 0x7f0000000000ull

struct image {
        const uint8_t *data;
        size_t size;
};

static int image_read(void *userdata, uint64_t addr, void *buf, size_t len) {
        const struct image *m = userdata;
        if (addr < BASE || addr - BASE > m->size || len > m->size - (addr - BASE))
                return -EFAULT;
        memcpy(buf, m->data + (addr - BASE), len);
        return 0;
}

/* The image and zeros after it, up to 64 KiB: whole pages to read. */
static int zero_padded_read(void *userdata, uint64_t addr, void *buf, size_t len) {
        const struct image *m = userdata;
        if (addr < BASE || addr - BASE > 65536 || len > 65536 - (addr - BASE))
                return -EFAULT;
        memset(buf, 0, len);
        if (addr - BASE < m->size) {
                size_t n = m->size - (addr - BASE) < len ? m->size - (addr - BASE) : len;
                memcpy(buf, m->data + (addr - BASE), n);
        }
        return 0;
}

static void walk(const struct py_layout *l, const struct image *m, uint64_t runtime, uint32_t tid) {
        static struct py_walk w;
        for (int copy = 0; copy < 2; copy++) {
                enum py_walk_result r = py_walk(l, zero_padded_read, (void *) m, runtime, tid, copy ? m->data : NULL,
                                                m->size, BASE, &w);
                if ((unsigned) r >= _PY_WALK_RESULT_MAX || w.n > PY_WALK_MAX_FRAMES || w.entries > w.n ||
                    w.reads > 4 * PY_WALK_MAX_FRAMES + 4 * PY_WALK_MAX_THREADS + 64)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        for (uint32_t u = 0; u < 64; u += 7) {
                int line = py_line_of(data, size, 1, u);
                if (line < -1 && line != -EBADMSG)
                        abort();
        }
        if (size < 2)
                return 0;
        const struct py_layout *l = py_layout_find(3, 11);
        struct image m = {.data = data, .size = size};
        uint64_t at = BASE + ((uint64_t) data[0] | (uint64_t) data[1] << 8);
        walk(l, &m, at, size > 2 ? data[2] : 0);
        struct py_code c;
        if (py_code_read(l, image_read, &m, at, 0, &c) < 0)
                return 0;
        if (!c.qualname || !c.filename || strlen(c.qualname) >= 4 * PY_NAME_MAX ||
            strlen(c.filename) >= 4 * PY_NAME_MAX || c.linetable_len > PY_LINETABLE_MAX)
                abort();
        for (uint64_t off = 0; off < 4 * c.linetable_len + 4; off += 2)
                (void) py_code_line(l, &c, at, at + l->code_code + off - 2);
        py_code_done(&c);
        return 0;
}
