/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Stack templates (heap-wire.h): the plugin makes one from a walk of a
 * whole stack copy and puts it in the process's table; the library looks
 * one up for each sample and, when the stack matches it, copies its words
 * only. No allocation and no libc call but memcpy on the library's side:
 * it runs inside malloc.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap-wire.h"

/* The slot a depth's templates are looked for from. */
uint32_t heap_template_home(uint32_t depth);

/* The live template for a stack of depth bytes above sp, copied up to
 * copy bytes, whose guards hold; NULL when there is none. Reads the words
 * of the guards at sp; any template whose words lie outside the copy is
 * passed over. */
const struct heap_template *heap_template_find(const struct heap_template *table, const uint8_t *sp, uint32_t depth,
                                               uint32_t copy);

/* A template from a walk of a whole copy (stack, copy bytes, of a stack
 * depth bytes deep): offs, the words the walk read (n, in the order first
 * read), and ras, the return addresses of the program's innermost frames
 * (innermost first), whose places become its guards. False when it makes
 * none: more words than a template holds, a word outside the copy, or no
 * return address found among them. */
bool heap_template_make(struct heap_template *ret, const uint32_t *offs, size_t n, const uint8_t *stack, uint32_t copy,
                        uint32_t depth, const uint64_t *ras, size_t n_ras);

/* Puts t in the table (the plugin's): its slot; -EEXIST when a live one
 * has its depth, extent and guards; -ENOSPC when the slots it may take
 * are all filled. */
int heap_template_add(struct heap_template *table, const struct heap_template *t);

/* The template of a sparse record's slot, with nwords words: NULL when the
 * slot is out of the table, empty, or holds another count (the plugin's
 * side: the record comes from the process). */
const struct heap_template *heap_template_at(const struct heap_template *table, uint32_t slot, uint32_t nwords);

/* A walk of the slot's words missed: the library stops using it. */
void heap_template_kill(struct heap_template *table, uint32_t slot);
