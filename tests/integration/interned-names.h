/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The interned names of one packet sequence, as the integration tests
 * read a profiler's trace: function names, frames (to their function
 * name) and callstacks (their frame ids, outermost first), each indexed by
 * iid. A later definition of an iid replaces the earlier one. */

#include <stddef.h>
#include <stdint.h>

#include "perfetto/trace/trace_packet.pb-c.h"

struct interned_names {
        char **fn;
        size_t n_fn;
        uint64_t *frame_fn;
        size_t n_frame;
        uint64_t **cs;
        size_t *cs_n, n_cs;
};

/* *p, an array of *n elements of elem bytes, to at least need elements
 * (the new ones zeroed; asserts on out of memory). */
void grow_zeroed(void **p, size_t *n, size_t need, size_t elem);
/* Adds what d interns (asserting on out of memory). */
void interned_names_add(struct interned_names *q, const Perfetto__Protos__InternedData *d);
void interned_names_free(struct interned_names *q);
