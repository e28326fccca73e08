/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>

#include "parse.h"

/* A cursor over the text of a file, line by line and word by word. */
struct cursor {
        const char *p, *end;
};

struct word {
        const char *s;
        size_t n;
};

/* The next line (without its newline) into *line; false at the end. */
static bool next_line(struct cursor *c, struct cursor *line) {
        if (c->p >= c->end)
                return false;
        const char *nl = memchr(c->p, '\n', (size_t) (c->end - c->p));
        const char *e = nl ? nl : c->end;
        *line = (struct cursor) { c->p, e };
        c->p = nl ? nl + 1 : c->end;
        return true;
}

static bool is_space(char ch) {
        return ch == ' ' || ch == '\t' || ch == '\0';
}

/* The next word of a line; false at its end. */
static bool next_word(struct cursor *line, struct word *w) {
        const char *p = line->p;
        while (p < line->end && is_space(*p))
                p++;
        if (p >= line->end) {
                line->p = p;
                return false;
        }
        const char *s = p;
        while (p < line->end && !is_space(*p))
                p++;
        *w = (struct word) { s, (size_t) (p - s) };
        line->p = p;
        return true;
}

uint64_t parse_u64(const char *s, size_t n) {
        size_t i = 0;
        uint64_t v = 0;
        while (i < n && is_space(s[i]))
                i++;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                v = v * 10 + (uint64_t) (s[i] - '0');
        return v;
}

static uint64_t word_u64(const struct word *w) {
        return parse_u64(w->s, w->n);
}

static bool word_is(const struct word *w, const char *lit) {
        size_t n = strlen(lit);
        return w->n == n && memcmp(w->s, lit, n) == 0;
}

/* A {key = 1, value = 2} entry (MeminfoValue, VmstatValue, InterruptCount),
 * written in one piece: there are hundreds of them per poll. */
static void key_value(struct pbw *out, uint32_t field, uint64_t key, uint64_t value) {
        uint8_t b[2 + 1 + 10 + 1 + 10];
        size_t n = 2;
        b[n++] = 1u << 3;
        n += pbw_put_varint(b + n, key);
        b[n++] = 2u << 3;
        n += pbw_put_varint(b + n, value);
        b[0] = (uint8_t) (field << 3 | 2u); /* fields below 16: a one-byte tag */
        b[1] = (uint8_t) (n - 2);           /* at most 22: a one-byte length */
        pbw_raw(out, b, n);
}

/* "key[:] value ..." lines whose key the set selects. The key of each line
 * is checked against the same line of the last text (key_set_line), so a
 * steady poll neither hashes nor looks up. */
static size_t parse_keyed(const char *buf, size_t len, struct key_set *keys, bool colon, uint32_t field,
                          struct pbw *out) {
        const char *p = buf, *end = buf + len;
        char delim = colon ? ':' : ' ';
        size_t n = 0, i = 0;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *e = nl ? nl : end;
                const char *k = p;
                p = nl ? nl + 1 : end;
                while (k < e && is_space(*k))
                        k++;
                const char *d = memchr(k, delim, (size_t) (e - k));
                if (!d || d == k)
                        continue;
                uint32_t id;
                if (key_set_line(keys, i++, k, (size_t) (d - k), &id) < 0 && out->error == 0)
                        out->error = -ENOMEM;
                const char *v = d + 1;
                while (v < e && is_space(*v))
                        v++;
                if (id == 0 || v == e) /* not selected, or no value */
                        continue;
                key_value(out, field, id, parse_u64(v, (size_t) (e - v)));
                n++;
        }
        key_set_end(keys, i);
        return n;
}

size_t parse_meminfo(const char *buf, size_t len, struct key_set *keys, struct pbw *out) {
        return parse_keyed(buf, len, keys, true, SYS_STATS_MEMINFO, out);
}

size_t parse_vmstat(const char *buf, size_t len, struct key_set *keys, struct pbw *out) {
        return parse_keyed(buf, len, keys, false, SYS_STATS_VMSTAT, out);
}

/* "intr TOTAL N0 N1 ..." or "softirq TOTAL N0 ...": the total, then one
 * InterruptCount per number (with skip_zero, only those not 0). */
static void interrupt_counts(struct cursor *line, uint32_t total_field, uint32_t field, bool skip_zero,
                             struct pbw *out) {
        struct word w;
        if (!next_word(line, &w))
                return;
        pbw_varint(out, total_field, word_u64(&w));
        for (int32_t irq = 0; next_word(line, &w); irq++) {
                uint64_t v = word_u64(&w);
                if (v == 0 && skip_zero)
                        continue;
                key_value(out, field, (uint64_t) (int64_t) irq, v);
        }
}

size_t parse_stat(const char *buf, size_t len, uint32_t mask, uint64_t ns_per_tick, struct pbw *out,
                  struct pbw *item) {
        struct cursor c = { buf, buf + len }, line;
        size_t cpus = 0;
        while (next_line(&c, &line)) {
                struct word k;
                if (!next_word(&line, &k))
                        continue;
                /* "cpuN": the machine-wide "cpu" line is left out. */
                if ((mask & (1u << STAT_CPU_TIMES)) && k.n > 3 && memcmp(k.s, "cpu", 3) == 0) {
                        pbw_reset(item);
                        pbw_varint(item, 1, parse_u64(k.s + 3, k.n - 3));
                        /* user nice system idle iowait irq softirq steal:
                         * CpuTimes fields 2 to 9. */
                        struct word w;
                        for (uint32_t f = 2; f <= 9; f++)
                                pbw_varint(item, f, next_word(&line, &w) ? word_u64(&w) * ns_per_tick : 0);
                        pbw_message(out, SYS_STATS_CPU_STAT, item);
                        cpus++;
                } else if ((mask & (1u << STAT_IRQ_COUNTS)) && word_is(&k, "intr"))
                        interrupt_counts(&line, SYS_STATS_NUM_IRQ_TOTAL, SYS_STATS_NUM_IRQ, true, out);
                else if ((mask & (1u << STAT_SOFTIRQ_COUNTS)) && word_is(&k, "softirq"))
                        interrupt_counts(&line, SYS_STATS_NUM_SOFTIRQ_TOTAL, SYS_STATS_NUM_SOFTIRQ, false, out);
                else if ((mask & (1u << STAT_FORK_COUNT)) && word_is(&k, "processes")) {
                        struct word v;
                        if (next_word(&line, &v))
                                pbw_varint(out, SYS_STATS_NUM_FORKS, word_u64(&v));
                }
        }
        return cpus;
}

size_t parse_psi(const char *buf, size_t len, uint32_t resource_some, struct pbw *out, struct pbw *item) {
        struct cursor c = { buf, buf + len }, line;
        size_t n = 0;
        while (next_line(&c, &line)) {
                struct word k, w;
                uint32_t resource;
                if (!next_word(&line, &k))
                        continue;
                if (word_is(&k, "some"))
                        resource = resource_some;
                else if (word_is(&k, "full"))
                        resource = resource_some + 1;
                else
                        continue;
                while (next_word(&line, &w)) {
                        if (w.n <= 6 || memcmp(w.s, "total=", 6) != 0)
                                continue;
                        pbw_reset(item);
                        pbw_varint(item, 1, resource);
                        pbw_varint(item, 2, parse_u64(w.s + 6, w.n - 6) * 1000u);
                        pbw_message(out, SYS_STATS_PSI, item);
                        n++;
                        break;
                }
        }
        return n;
}

size_t parse_buddyinfo(const char *buf, size_t len, struct pbw *out, struct pbw *item) {
        struct cursor c = { buf, buf + len }, line;
        size_t n = 0;
        while (next_line(&c, &line)) {
                /* "Node 0, zone   Normal   N0 N1 ... N10" */
                struct word node_w, node, zone_w, zone, w;
                if (!next_word(&line, &node_w) || !word_is(&node_w, "Node") || !next_word(&line, &node) ||
                    !next_word(&line, &zone_w) || !word_is(&zone_w, "zone") || !next_word(&line, &zone))
                        continue;
                if (node.n > 0 && node.s[node.n - 1] == ',')
                        node.n--;
                pbw_reset(item);
                pbw_bytes(item, 1, node.s, node.n);
                pbw_bytes(item, 2, zone.s, zone.n);
                while (next_word(&line, &w))
                        pbw_varint(item, 3, (uint32_t) word_u64(&w));
                pbw_message(out, SYS_STATS_BUDDY_INFO, item);
                n++;
        }
        return n;
}

size_t parse_diskstats(const char *buf, size_t len, struct pbw *out, struct pbw *item) {
        /* Word index in a line -> DiskStat field (0: not recorded). Index
         * 2 is the device; 5, 6 sectors and ms reading; 9, 10 writing; 16,
         * 17 discarding; 18, 19 flushes and ms flushing. */
        static const uint8_t field_of[20] = { [5] = 2,  [6] = 3,  [9] = 4,  [10] = 5,
                                              [16] = 6, [17] = 7, [18] = 8, [19] = 9 };
        struct cursor c = { buf, buf + len }, line;
        size_t n = 0;
        while (next_line(&c, &line)) {
                struct word w;
                size_t i = 0;
                pbw_reset(item);
                for (; i < 20 && next_word(&line, &w); i++) {
                        if (i == 2)
                                pbw_bytes(item, 1, w.s, w.n);
                        else if (field_of[i])
                                pbw_varint(item, field_of[i], word_u64(&w));
                }
                if (i < 3)
                        continue;
                pbw_message(out, SYS_STATS_DISK_STAT, item);
                n++;
        }
        return n;
}
