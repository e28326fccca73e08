/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The id -> event table of a tracefs instance: one walk over events/ (a
 * couple of thousand small reads on a distribution kernel), then a binary
 * search per lookup. */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "event-index.h"
#include "tracefs.h"

static int by_id(const void *a, const void *b) {
        const struct event_index_entry *x = a, *y = b;
        return (x->id > y->id) - (x->id < y->id);
}

/* Adds the events of one group directory. */
static int add_group(const char *root, const char *events_dir, const char *group, struct event_index *idx) {
        char dir[768];
        snprintf(dir, sizeof(dir), "%s/%s", events_dir, group);
        DIR *d = opendir(dir);
        if (!d)
                return 0; /* a plain file (enable, header_page): not a group */
        int r = 0;
        for (struct dirent *e; r == 0 && (e = readdir(d));) {
                if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(idx->entries->name))
                        continue;
                char rel[256], text[32], *end;
                snprintf(rel, sizeof(rel), "events/%s/%s/id", group, e->d_name);
                if (tracefs_read(root, rel, text, sizeof(text)) < 0)
                        continue;
                errno = 0;
                unsigned long id = strtoul(text, &end, 10);
                if (errno || end == text || (*end && *end != '\n') || id > UINT16_MAX)
                        continue;
                if (GREEDY_REALLOC(idx->entries, idx->cap, idx->n + 1) < 0) {
                        r = -ENOMEM;
                        break;
                }
                struct event_index_entry *x = &idx->entries[idx->n++];
                x->id = (uint16_t) id;
                snprintf(x->group, sizeof(x->group), "%s", group);
                snprintf(x->name, sizeof(x->name), "%s", e->d_name);
        }
        closedir(d);
        return r;
}

int event_index_build(const char *root, struct event_index *ret) {
        char events_dir[512];
        snprintf(events_dir, sizeof(events_dir), "%s/events", root);
        DIR *d = opendir(events_dir);
        if (!d)
                return negative_errno();
        struct event_index idx = {};
        int r = 0;
        for (struct dirent *g; r == 0 && (g = readdir(d));)
                if (g->d_name[0] != '.' && strlen(g->d_name) < sizeof(idx.entries->group))
                        r = add_group(root, events_dir, g->d_name, &idx);
        closedir(d);
        if (r < 0) {
                event_index_done(&idx);
                return r;
        }
        if (idx.n)
                qsort(idx.entries, idx.n, sizeof(*idx.entries), by_id);
        *ret = idx;
        return 0;
}

const struct event_index_entry *event_index_find(const struct event_index *idx, uint16_t id) {
        struct event_index_entry key = { .id = id };
        return idx->n ? bsearch(&key, idx->entries, idx->n, sizeof(key), by_id) : NULL;
}

void event_index_done(struct event_index *idx) {
        free(idx->entries);
        *idx = (struct event_index) {};
}
