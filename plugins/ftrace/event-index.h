/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Every event of a tracefs instance by its id (events/<group>/<name>/id),
 * for decoding a buffer whose events someone else enabled: any record
 * found in it can be named and its format read. */

#include <stddef.h>
#include <stdint.h>

struct event_index_entry {
        uint16_t id;
        char group[64];
        char name[64];
};

struct event_index {
        struct event_index_entry *entries; /* sorted by id */
        size_t n, cap;
};

/* Reads the ids under root's events/. -errno when events/ cannot be read;
 * an event whose id file is missing or not a number is left out. */
int event_index_build(const char *root, struct event_index *ret);
const struct event_index_entry *event_index_find(const struct event_index *idx, uint16_t id);
void event_index_done(struct event_index *idx);
