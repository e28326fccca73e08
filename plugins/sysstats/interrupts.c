/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "interrupts.h"

/* The words of a line after the per-CPU counts: the chip, its details, the
 * trigger and the name. More than this many is not a line of the kernel's. */
#define MAX_TAIL_WORDS 32

struct span {
        const char *s;
        size_t n;
};

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

/* The next word of [*p, end), or false at the end. */
static bool next_word(const char **p, const char *end, struct span *w) {
        const char *q = *p;
        while (q < end && is_blank(*q))
                q++;
        if (q >= end) {
                *p = q;
                return false;
        }
        w->s = q;
        while (q < end && !is_blank(*q))
                q++;
        w->n = (size_t) (q - w->s);
        *p = q;
        return true;
}

static bool ends_with(const struct span *w, const char *suffix) {
        size_t n = strlen(suffix);
        return w->n >= n && memcmp(w->s + w->n - n, suffix, n) == 0;
}

static bool is_trigger(const struct span *w) {
        return (w->n == 5 && memcmp(w->s, "Level", 5) == 0) || (w->n == 4 && memcmp(w->s, "Edge", 4) == 0) ||
               ends_with(w, "-edge") || ends_with(w, "-fasteoi") || ends_with(w, "-level");
}

/* "N:" -> N; false when the word is anything else. */
static bool irq_number(const struct span *w, uint32_t *ret) {
        uint64_t v = 0;
        if (w->n < 2 || w->s[w->n - 1] != ':')
                return false;
        for (size_t i = 0; i + 1 < w->n; i++) {
                if (w->s[i] < '0' || w->s[i] > '9' || v > UINT32_MAX / 10)
                        return false;
                v = v * 10 + (uint64_t) (w->s[i] - '0');
        }
        if (v > UINT32_MAX)
                return false;
        *ret = (uint32_t) v;
        return true;
}

/* One line: its mapping appended to out (true), or nothing. */
static bool write_line(const char *p, const char *end, size_t n_cpus, InterruptInfo *out) {
        struct span w, tail[MAX_TAIL_WORDS];
        size_t n_tail = 0;
        uint32_t irq;
        if (!next_word(&p, end, &w) || !irq_number(&w, &irq))
                return false;
        for (size_t i = 0; i < n_cpus; i++)
                if (!next_word(&p, end, &w))
                        return false;
        while (next_word(&p, end, &w)) {
                if (n_tail == MAX_TAIL_WORDS)
                        return false;
                tail[n_tail++] = w;
        }
        /* tail[0] is the chip: a name starts after it at the earliest. */
        size_t first = n_tail ? n_tail - 1 : 0;
        for (size_t i = n_tail; i-- > 0;)
                if (is_trigger(&tail[i])) {
                        first = i + 1;
                        break;
                }
        if (first < 1 || first >= n_tail)
                return false;
        InterruptInfo_InterruptMapping m;
        InterruptInfo_begin_irq_mapping(out, &m);
        InterruptInfo_InterruptMapping_set_irq_id(&m, irq);
        /* The name: the words from first on, one space apart. */
        size_t len = 0;
        for (size_t i = first; i < n_tail; i++)
                len += tail[i].n + (i > first);
        traced_pb_msg_len_header(&m.msg, InterruptInfo_InterruptMapping_FIELD_name, len);
        for (size_t i = first; i < n_tail; i++) {
                if (i > first)
                        traced_pb_stream_write(m.msg.stream, " ", 1);
                traced_pb_stream_write(m.msg.stream, tail[i].s, tail[i].n);
        }
        InterruptInfo_end_irq_mapping(out, &m);
        return true;
}

int interrupts_write(const char *text, size_t len, InterruptInfo *out) {
        const char *p = text, *end = text + len;
        size_t n_cpus = 0;
        int n = 0;
        bool header = true;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *e = nl ? nl : end;
                if (header) {
                        /* "CPU0 CPU1 ...": the columns of counts. */
                        struct span w;
                        const char *q = p;
                        while (next_word(&q, e, &w))
                                n_cpus += w.n > 3 && memcmp(w.s, "CPU", 3) == 0;
                        header = false;
                } else if (n_cpus > 0 && write_line(p, e, n_cpus, out))
                        n++;
                p = nl ? nl + 1 : end;
        }
        int r = out->msg.stream->error;
        return r < 0 ? r : n;
}
