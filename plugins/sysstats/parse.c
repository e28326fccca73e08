/* SPDX-License-Identifier: LGPL-2.1-or-later */

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

/* A MeminfoValue or VmstatValue entry: there are hundreds of them per
 * poll. */
static inline void keyed_value(SysStats *out, bool vmstat, uint32_t key, uint64_t value) {
        if (vmstat) {
                SysStats_VmstatValue v;
                SysStats_begin_vmstat(out, &v);
                SysStats_VmstatValue_set_key(&v, (VmstatCounters) key);
                SysStats_VmstatValue_set_value(&v, value);
                SysStats_end_vmstat(out, &v);
        } else {
                SysStats_MeminfoValue m;
                SysStats_begin_meminfo(out, &m);
                SysStats_MeminfoValue_set_key(&m, (MeminfoCounters) key);
                SysStats_MeminfoValue_set_value(&m, value);
                SysStats_end_meminfo(out, &m);
        }
}

/* "key[:] value ..." lines whose key the set selects. The key of each line
 * is checked against the same line of the last text (key_set_line), so a
 * steady poll neither hashes nor looks up. */
static size_t parse_keyed(const char *buf, size_t len, struct key_set *keys, bool vmstat, SysStats *out) {
        const char *p = buf, *end = buf + len;
        char delim = vmstat ? ' ' : ':';
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
                /* No memory to remember the line: the counter is still found. */
                (void) key_set_line(keys, i++, k, (size_t) (d - k), &id);
                const char *v = d + 1;
                while (v < e && is_space(*v))
                        v++;
                if (id == 0 || v == e) /* not selected, or no value */
                        continue;
                keyed_value(out, vmstat, id, parse_u64(v, (size_t) (e - v)));
                n++;
        }
        key_set_end(keys, i);
        return n;
}

size_t parse_meminfo(const char *buf, size_t len, struct key_set *keys, SysStats *out) {
        return parse_keyed(buf, len, keys, false, out);
}

size_t parse_vmstat(const char *buf, size_t len, struct key_set *keys, SysStats *out) {
        return parse_keyed(buf, len, keys, true, out);
}

/* "intr TOTAL N0 N1 ..." or "softirq TOTAL N0 ...": the total, then one
 * InterruptCount per number (of the interrupts, only those not 0). */
static void interrupt_counts(struct cursor *line, bool softirq, SysStats *out) {
        struct word w;
        if (!next_word(line, &w))
                return;
        if (softirq)
                SysStats_set_num_softirq_total(out, word_u64(&w));
        else
                SysStats_set_num_irq_total(out, word_u64(&w));
        for (int32_t irq = 0; next_word(line, &w); irq++) {
                uint64_t v = word_u64(&w);
                SysStats_InterruptCount ic;
                if (softirq)
                        SysStats_begin_num_softirq(out, &ic);
                else if (v == 0)
                        continue;
                else
                        SysStats_begin_num_irq(out, &ic);
                SysStats_InterruptCount_set_irq(&ic, irq);
                SysStats_InterruptCount_set_count(&ic, v);
                traced_pb_msg_end_nested(&out->msg, &ic.msg);
        }
}

size_t parse_stat(const char *buf, size_t len, uint32_t mask, uint64_t ns_per_tick, SysStats *out) {
        struct cursor c = { buf, buf + len }, line;
        size_t cpus = 0;
        while (next_line(&c, &line)) {
                struct word k;
                if (!next_word(&line, &k))
                        continue;
                /* "cpuN": the machine-wide "cpu" line is left out. */
                if ((mask & (1u << SysStatsConfig_STAT_CPU_TIMES)) && k.n > 3 && memcmp(k.s, "cpu", 3) == 0) {
                        /* user nice system idle iowait irq softirq steal */
                        uint64_t t[8];
                        struct word w;
                        for (size_t f = 0; f < 8; f++)
                                t[f] = next_word(&line, &w) ? word_u64(&w) * ns_per_tick : 0;
                        SysStats_CpuTimes ct;
                        SysStats_begin_cpu_stat(out, &ct);
                        SysStats_CpuTimes_set_cpu_id(&ct, (uint32_t) parse_u64(k.s + 3, k.n - 3));
                        SysStats_CpuTimes_set_user_ns(&ct, t[0]);
                        SysStats_CpuTimes_set_user_nice_ns(&ct, t[1]);
                        SysStats_CpuTimes_set_system_mode_ns(&ct, t[2]);
                        SysStats_CpuTimes_set_idle_ns(&ct, t[3]);
                        SysStats_CpuTimes_set_io_wait_ns(&ct, t[4]);
                        SysStats_CpuTimes_set_irq_ns(&ct, t[5]);
                        SysStats_CpuTimes_set_softirq_ns(&ct, t[6]);
                        SysStats_CpuTimes_set_steal_ns(&ct, t[7]);
                        SysStats_end_cpu_stat(out, &ct);
                        cpus++;
                } else if ((mask & (1u << SysStatsConfig_STAT_IRQ_COUNTS)) && word_is(&k, "intr"))
                        interrupt_counts(&line, false, out);
                else if ((mask & (1u << SysStatsConfig_STAT_SOFTIRQ_COUNTS)) && word_is(&k, "softirq"))
                        interrupt_counts(&line, true, out);
                else if ((mask & (1u << SysStatsConfig_STAT_FORK_COUNT)) && word_is(&k, "processes")) {
                        struct word v;
                        if (next_word(&line, &v))
                                SysStats_set_num_forks(out, word_u64(&v));
                }
        }
        return cpus;
}

size_t parse_psi(const char *buf, size_t len, SysStats_PsiSample_PsiResource resource_some, SysStats *out) {
        struct cursor c = { buf, buf + len }, line;
        size_t n = 0;
        while (next_line(&c, &line)) {
                struct word k, w;
                SysStats_PsiSample_PsiResource resource;
                if (!next_word(&line, &k))
                        continue;
                if (word_is(&k, "some"))
                        resource = resource_some;
                else if (word_is(&k, "full"))
                        resource = (SysStats_PsiSample_PsiResource) (resource_some + 1);
                else
                        continue;
                while (next_word(&line, &w)) {
                        if (w.n <= 6 || memcmp(w.s, "total=", 6) != 0)
                                continue;
                        SysStats_PsiSample ps;
                        SysStats_begin_psi(out, &ps);
                        SysStats_PsiSample_set_resource(&ps, resource);
                        SysStats_PsiSample_set_total_ns(&ps, parse_u64(w.s + 6, w.n - 6) * 1000u);
                        SysStats_end_psi(out, &ps);
                        n++;
                        break;
                }
        }
        return n;
}

size_t parse_buddyinfo(const char *buf, size_t len, SysStats *out) {
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
                SysStats_BuddyInfo bi;
                SysStats_begin_buddy_info(out, &bi);
                SysStats_BuddyInfo_set_node_n(&bi, node.s, node.n);
                SysStats_BuddyInfo_set_zone_n(&bi, zone.s, zone.n);
                while (next_word(&line, &w))
                        SysStats_BuddyInfo_add_order_pages(&bi, (uint32_t) word_u64(&w));
                SysStats_end_buddy_info(out, &bi);
                n++;
        }
        return n;
}

size_t parse_diskstats(const char *buf, size_t len, SysStats *out) {
        /* The words of a line recorded: 2 is the device; 5, 6 sectors and
         * ms reading; 9, 10 writing; 16, 17 discarding; 18, 19 flushes and
         * ms flushing. */
        enum { DEVICE = 2, N_WORDS = 20 };
        struct cursor c = { buf, buf + len }, line;
        size_t n = 0;
        while (next_line(&c, &line)) {
                struct word w, device = {};
                uint64_t v[N_WORDS];
                bool has[N_WORDS] = {};
                size_t i = 0;
                for (; i < N_WORDS && next_word(&line, &w); i++) {
                        if (i == DEVICE)
                                device = w;
                        else {
                                v[i] = word_u64(&w);
                                has[i] = true;
                        }
                }
                if (i < 3)
                        continue;
                SysStats_DiskStat ds;
                SysStats_begin_disk_stat(out, &ds);
                SysStats_DiskStat_set_device_name_n(&ds, device.s, device.n);
                if (has[5])
                        SysStats_DiskStat_set_read_sectors(&ds, v[5]);
                if (has[6])
                        SysStats_DiskStat_set_read_time_ms(&ds, v[6]);
                if (has[9])
                        SysStats_DiskStat_set_write_sectors(&ds, v[9]);
                if (has[10])
                        SysStats_DiskStat_set_write_time_ms(&ds, v[10]);
                if (has[16])
                        SysStats_DiskStat_set_discard_sectors(&ds, v[16]);
                if (has[17])
                        SysStats_DiskStat_set_discard_time_ms(&ds, v[17]);
                if (has[18])
                        SysStats_DiskStat_set_flush_count(&ds, v[18]);
                if (has[19])
                        SysStats_DiskStat_set_flush_time_ms(&ds, v[19]);
                SysStats_end_disk_stat(out, &ds);
                n++;
        }
        return n;
}
