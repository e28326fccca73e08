/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Bytes as a JIT map file that a process being profiled wrote (anyone's
 * to write): the first byte picks the format (even: a perf map, odd: a
 * jitdump) and where the file is cut in two reads, as a file still being
 * written is read. Every entry must lie inside the input, no name may be
 * longer than JIT_NAME_MAX, and reading in two parts must give what one
 * read gives. */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/jit-map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct check {
        const uint8_t *lo, *hi;
        uint64_t sum;
        size_t n;
};

static int on_entry(const struct jit_entry_in *e, void *userdata) {
        struct check *c = userdata;
        if (e->name) {
                const uint8_t *p = (const uint8_t *) e->name;
                if (p < c->lo || p + e->name_len > c->hi || e->name_len > JIT_NAME_MAX || e->name_len == 0)
                        abort();
                for (size_t k = 0; k < e->name_len; k++)
                        c->sum = c->sum * 31 + p[k];
        }
        if (e->size == 0 || e->start + e->size < e->start)
                abort();
        c->sum = c->sum * 31 + e->start + e->size + e->moved_from;
        c->n++;
        return 0;
}

static long parse(bool dump, const uint8_t *buf, size_t size, int *header, struct check *c) {
        c->lo = buf;
        c->hi = buf + size;
        return dump ? jit_parse_jitdump(buf, size, header, on_entry, c)
                    : jit_parse_perf_map((const char *) buf, size, on_entry, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        bool dump = data[0] & 1;
        data++;
        size--;
        /* Copies, so that a read past the input is caught. */
        uint8_t *whole = malloc(size ? size : 1);
        if (!whole)
                return 0;
        memcpy(whole, data, size);
        struct check one = {}, two = {};
        int h1 = 0, h2 = 0;
        long all = parse(dump, whole, size, &h1, &one);
        if (all > (long) size)
                abort();

        /* The same bytes in two reads: the first up to the cut, the second
         * from where the first stopped to the end. */
        size_t cut = size ? (size_t) (((uint64_t) data[0] * 2654435761u) % (size + 1)) : 0;
        uint8_t *first = malloc(cut ? cut : 1);
        if (!first) {
                free(whole);
                return 0;
        }
        memcpy(first, data, cut);
        long used = parse(dump, first, cut, &h2, &two);
        free(first);
        if (used >= 0) {
                if (used > (long) cut)
                        abort();
                size_t rest = size - (size_t) used;
                uint8_t *second = malloc(rest ? rest : 1);
                if (second) {
                        memcpy(second, data + used, rest);
                        long more = parse(dump, second, rest, &h2, &two);
                        free(second);
                        if (more > (long) rest)
                                abort();
                        if (all >= 0 && more >= 0 && (one.n != two.n || one.sum != two.sum))
                                abort();
                }
        }
        free(whole);
        return 0;
}
