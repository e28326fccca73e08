/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The names one task had over a trace (process tree entries: the scan at
 * the start, a profiler's after each exec or rename), so that a sample is
 * named by the name in effect when it was taken, not by whatever was
 * last written under its pid (an exec'd shim, a pid reused after exit).
 * Entries may come in any order: the packets of different sequences are
 * not in time order in a file. */

#include <stddef.h>
#include <stdint.h>

#define NAME_HISTORY_NAME_MAX 64

struct name_history {
        struct name_entry {
                uint64_t ts; /* 0: the packet had none (before everything) */
                char name[NAME_HISTORY_NAME_MAX];
        } *v;
        size_t n, cap;
};

/* Adds that the task was called name from ts on: 0 or -ENOMEM. An empty
 * name is not added. */
int name_history_add(struct name_history *h, uint64_t ts, const char *name);
/* The name in effect at ts: the latest entry at or before it, else the
 * earliest one; NULL when there is none. */
const char *name_history_at(const struct name_history *h, uint64_t ts);
/* The name last given, whenever that was. */
const char *name_history_last(const struct name_history *h);
void name_history_done(struct name_history *h);
