/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* "Did you mean ...?": the name of a list nearest to a misspelt one. */

#include <stddef.h>

/* Edits (insert, delete, replace, swap two neighbours) between a and b;
 * stops counting past limit (returns limit + 1 then). */
unsigned name_distance(const char *a, const char *b, unsigned limit);

/* The entry of names[0..n) nearest to name with at most a few edits (a
 * third of its length, at least one, at most 3), not name itself; NULL
 * when none is that close. */
const char *closest_name(const char *name, const char *const *names, size_t n);
