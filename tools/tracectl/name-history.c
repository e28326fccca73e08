/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "name-history.h"

int name_history_add(struct name_history *h, uint64_t ts, const char *name) {
        if (!name || !name[0])
                return 0;
        for (size_t i = 0; i < h->n; i++)
                if (h->v[i].ts == ts && strncmp(h->v[i].name, name, NAME_HISTORY_NAME_MAX - 1) == 0)
                        return 0; /* said twice (a thread and its process) */
        if (GREEDY_REALLOC_MIN(h->v, h->cap, h->n + 1, 2) < 0)
                return -ENOMEM;
        struct name_entry *e = &h->v[h->n++];
        e->ts = ts;
        snprintf(e->name, sizeof(e->name), "%s", name);
        return 0;
}

static const struct name_entry *pick(const struct name_history *h, uint64_t ts, bool bounded) {
        const struct name_entry *best = NULL, *first = NULL;
        for (size_t i = 0; i < h->n; i++) {
                const struct name_entry *e = &h->v[i];
                /* Of equal times, the one added last. */
                if (!first || e->ts < first->ts)
                        first = e;
                if ((!bounded || e->ts <= ts) && (!best || e->ts >= best->ts))
                        best = e;
        }
        return best ? best : first;
}

const char *name_history_at(const struct name_history *h, uint64_t ts) {
        const struct name_entry *e = pick(h, ts, true);
        return e ? e->name : NULL;
}

const char *name_history_last(const struct name_history *h) {
        const struct name_entry *e = pick(h, 0, false);
        return e ? e->name : NULL;
}

void name_history_done(struct name_history *h) {
        free(h->v);
        *h = (struct name_history) {};
}
