/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "summary-syscalls.h"
#include "syscalls.h"

static struct syscall_stat *stat_at(struct syscall_stats *s, size_t i) {
        if (i >= s->n) {
                if (GREEDY_REALLOC_MIN(s->v, s->cap, i + 1, SYSCALL_STATS_NR_MAX + 1) < 0)
                        return NULL;
                memset(s->v + s->n, 0, (i + 1 - s->n) * sizeof(*s->v));
                s->n = i + 1;
        }
        return &s->v[i];
}

static size_t nr_index(int64_t nr) {
        return nr >= 0 && nr < SYSCALL_STATS_NR_MAX ? (size_t) nr : SYSCALL_STATS_NR_MAX;
}

/* The index of a syscalls/ event's system call, made on first sight;
 * SIZE_MAX when out of memory. */
static size_t name_index(struct syscall_stats *s, const char *name) {
        uint64_t h = fnv1a64_str(name), i;
        for (;; h++) {
                if (!hashmap_get(&s->by_name, h, &i))
                        break;
                if (strcmp(s->v[i].name, name) == 0)
                        return (size_t) i;
        }
        size_t k = s->n > SYSCALL_STATS_NR_MAX ? s->n : SYSCALL_STATS_NR_MAX + 1;
        struct syscall_stat *st = stat_at(s, k);
        if (!st || hashmap_put(&s->by_name, h, k) < 0)
                return SIZE_MAX;
        snprintf(st->name, sizeof(st->name), "%s", name);
        return k;
}

static void enter(struct syscall_stats *s, int32_t tid, uint64_t ts, size_t i) {
        struct syscall_stat *st = i == SIZE_MAX ? NULL : stat_at(s, i);
        if (!st)
                return;
        st->calls++;
        s->calls++;
        (void) hashmap_put(&s->entered, (uint32_t) tid, i + 1);
        (void) hashmap_put(&s->entered_ts, (uint32_t) tid, ts);
}

static void leave(struct syscall_stats *s, int32_t tid, uint64_t ts, size_t i, bool failed) {
        uint64_t in, t0;
        if (i == SIZE_MAX || i >= s->n)
                return;
        struct syscall_stat *st = &s->v[i];
        st->errors += failed;
        /* Timed when this thread's entry into the same call was seen. */
        if (!hashmap_remove(&s->entered, (uint32_t) tid, &in) || in != i + 1 ||
            !hashmap_remove(&s->entered_ts, (uint32_t) tid, &t0) || ts < t0)
                return;
        st->timed++;
        st->total_ns += ts - t0;
        if (ts - t0 > st->max_ns)
                st->max_ns = ts - t0;
}

void syscall_stats_enter_nr(struct syscall_stats *s, int32_t tid, uint64_t ts, int64_t nr) {
        enter(s, tid, ts, nr_index(nr));
}

void syscall_stats_exit_nr(struct syscall_stats *s, int32_t tid, uint64_t ts, int64_t nr, bool failed) {
        leave(s, tid, ts, nr_index(nr), failed);
}

void syscall_stats_enter_name(struct syscall_stats *s, int32_t tid, uint64_t ts, const char *name) {
        enter(s, tid, ts, name_index(s, name));
}

void syscall_stats_exit_name(struct syscall_stats *s, int32_t tid, uint64_t ts, const char *name, bool failed) {
        leave(s, tid, ts, name_index(s, name), failed);
}

void syscall_stats_event(struct syscall_stats *s, int32_t tid, uint64_t ts, const char *event, int64_t ret) {
        if (!event)
                return;
        if (strncmp(event, "sys_enter_", 10) == 0 && event[10])
                syscall_stats_enter_name(s, tid, ts, event + 10);
        else if (strncmp(event, "sys_exit_", 9) == 0 && event[9])
                syscall_stats_exit_name(s, tid, ts, event + 9, ret < 0);
}

const char *syscall_stats_name(const struct syscall_stats *s, size_t i, const char *machine, char *buf, size_t size) {
        if (i > SYSCALL_STATS_NR_MAX)
                return s->v[i].name;
        if (i == SYSCALL_STATS_NR_MAX) {
                snprintf(buf, size, "[%d and above]", SYSCALL_STATS_NR_MAX);
                return buf;
        }
        const char *n = syscall_name(machine, (int64_t) i);
        if (n)
                return n;
        snprintf(buf, size, "[%zu]", i);
        return buf;
}

static const struct syscall_stats *sorting;

static int by_time(const void *a, const void *b) {
        const struct syscall_stat *x = &sorting->v[*(const size_t *) a], *y = &sorting->v[*(const size_t *) b];
        if (x->total_ns != y->total_ns)
                return x->total_ns < y->total_ns ? 1 : -1;
        if (x->calls != y->calls)
                return x->calls < y->calls ? 1 : -1;
        return *(const size_t *) a < *(const size_t *) b ? -1 : 1;
}

size_t syscall_stats_sorted(const struct syscall_stats *s, size_t **ret) {
        size_t k = 0, *v = malloc((s->n ? s->n : 1) * sizeof(size_t));
        *ret = v;
        if (!v)
                return 0;
        for (size_t i = 0; i < s->n; i++)
                if (s->v[i].calls)
                        v[k++] = i;
        sorting = s;
        qsort(v, k, sizeof(size_t), by_time);
        return k;
}

void syscall_stats_print(FILE *f, const struct syscall_stats *s, const char *machine, size_t top_n) {
        if (!s->calls)
                return;
        size_t *order, n = syscall_stats_sorted(s, &order);
        fprintf(f, "Syscalls:       %" PRIu64 " calls of %zu system calls; by time from entry to exit:\n", s->calls, n);
        fprintf(f, "  %-24s %10s %8s %12s %10s %10s\n", "syscall", "calls", "errors", "total ms", "avg us", "max us");
        for (size_t k = 0; k < n && k < top_n; k++) {
                const struct syscall_stat *st = &s->v[order[k]];
                char buf[48];
                fprintf(f, "  %-24s %10" PRIu64 " %8" PRIu64 " %12.3f %10.3f %10.3f\n",
                        syscall_stats_name(s, order[k], machine, buf, sizeof(buf)), st->calls, st->errors,
                        (double) st->total_ns / 1e6, st->timed ? (double) st->total_ns / (double) st->timed / 1e3 : 0.0,
                        (double) st->max_ns / 1e3);
        }
        free(order);
}

void syscall_stats_done(struct syscall_stats *s) {
        free(s->v);
        hashmap_clear(&s->by_name);
        hashmap_clear(&s->entered);
        hashmap_clear(&s->entered_ts);
        *s = (struct syscall_stats) {};
}
