/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The system calls of a trace, as `perf trace -s` counts them: calls,
 * failures and time from entry to exit per system call, from
 * raw_syscalls/sys_enter and sys_exit (numbers, named from the kernel's
 * table of the trace's architecture) or from syscalls/sys_enter_NAME and
 * sys_exit_NAME. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "basic/hashmap.h"

/* Raw numbers below this are counted each on its own (above: together). */
#define SYSCALL_STATS_NR_MAX 2048

struct syscall_stat {
        uint64_t calls, errors;
        uint64_t timed, total_ns, max_ns; /* calls whose exit was seen */
        char name[48];                    /* syscalls/ events; raw ones are named when printed */
};

struct syscall_stats {
        struct syscall_stat *v; /* [0, SYSCALL_STATS_NR_MAX]: raw numbers (the last: any above); then named events */
        size_t n, cap;
        struct hashmap by_name;     /* hash of a syscalls/ event's name -> index */
        struct hashmap entered;     /* tid -> index + 1 of the call it is in */
        struct hashmap entered_ts;  /* tid -> its entry time */
        uint64_t calls;
};

/* An entry or exit of tid at ts: by number (raw_syscalls) or by name. */
void syscall_stats_enter_nr(struct syscall_stats *s, int32_t tid, uint64_t ts, int64_t nr);
void syscall_stats_exit_nr(struct syscall_stats *s, int32_t tid, uint64_t ts, int64_t nr, bool failed);
void syscall_stats_enter_name(struct syscall_stats *s, int32_t tid, uint64_t ts, const char *name);
void syscall_stats_exit_name(struct syscall_stats *s, int32_t tid, uint64_t ts, const char *name, bool failed);
/* A syscalls/ event (sys_enter_NAME, sys_exit_NAME; others are
 * ignored); ret < 0 on exit is a failure. */
void syscall_stats_event(struct syscall_stats *s, int32_t tid, uint64_t ts, const char *event, int64_t ret);
/* The name of stat i (machine: the trace's architecture, may be empty). */
const char *syscall_stats_name(const struct syscall_stats *s, size_t i, const char *machine, char *buf, size_t size);
/* The indexes of the stats with calls, by total time then calls, into
 * *ret (malloc'd): their number, or 0. */
size_t syscall_stats_sorted(const struct syscall_stats *s, size_t **ret);
/* The table, top_n rows; nothing without calls. */
void syscall_stats_print(FILE *f, const struct syscall_stats *s, const char *machine, size_t top_n);
void syscall_stats_done(struct syscall_stats *s);
