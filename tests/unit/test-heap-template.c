/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Stack templates: made from a walk's words, found again for a stack that
 * holds the same return addresses at the same places, never for another. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "heap/heap-template.h"

#define DEPTH 4096u

static uint8_t stack[DEPTH];

static void put_word(uint32_t off, uint64_t v) {
        memcpy(stack + off, &v, sizeof(v));
}

static struct heap_template *table(void) {
        struct heap_template *t = calloc(1, HEAP_TEMPLATES_SIZE);
        cr_assert_not_null(t);
        return t;
}

/* A walk that read a saved register, then two return addresses, then
 * another saved register: in that order, out of the offsets' order. */
static const uint32_t walk[] = { 40, 24, 1000, 3000 };
static const uint64_t ras[] = { 0x401234, 0x405678 };

static void fill_stack(void) {
        memset(stack, 0xcc, sizeof(stack));
        put_word(40, 7);
        put_word(24, ras[0]);
        put_word(1000, ras[1]);
        put_word(3000, 9);
}

/* The stack above, and the walk's template in tab: its slot. */
static int made(struct heap_template *tab, struct heap_template *t) {
        fill_stack();
        cr_assert(heap_template_make(t, walk, 4, stack, DEPTH, DEPTH, ras, 2));
        int slot = heap_template_add(tab, t);
        cr_assert_geq(slot, 0);
        return slot;
}

Test(heap_template, a_walks_words_make_one_found_for_the_same_stack) {
        fill_stack();
        struct heap_template t, *tab = table();
        cr_assert(heap_template_make(&t, walk, 4, stack, DEPTH, DEPTH, ras, 2));
        cr_assert_eq(t.nwords, 4);
        uint32_t sorted[] = { 24, 40, 1000, 3000 };
        cr_assert_arr_eq(t.offs, sorted, sizeof(sorted), "the words ascend");
        cr_assert_eq(t.nguards, 2);
        cr_assert_eq(t.guard_offs[0], 24);
        cr_assert_eq(t.guard_vals[0], ras[0]);
        cr_assert_eq(t.guard_offs[1], 1000);
        int slot = heap_template_add(tab, &t);
        cr_assert_geq(slot, 0);
        cr_assert_eq(heap_template_add(tab, &t), -EEXIST, "one live template a key");
        const struct heap_template *found = heap_template_find(tab, stack, DEPTH, DEPTH);
        cr_assert_eq(found, &tab[slot]);
        /* Other values in the words that are not guards: the same. */
        put_word(40, 8);
        cr_assert_eq(heap_template_find(tab, stack, DEPTH, DEPTH), &tab[slot]);
        /* The record's side. */
        cr_assert_eq(heap_template_at(tab, (uint32_t) slot, 4), &tab[slot]);
        cr_assert_null(heap_template_at(tab, (uint32_t) slot, 3), "another count of words");
        cr_assert_null(heap_template_at(tab, HEAP_TEMPLATE_SLOTS, 4), "a slot outside the table");
        cr_assert_null(heap_template_at(tab, ((uint32_t) slot + 1) % HEAP_TEMPLATE_SLOTS, 4), "an empty slot");
        free(tab);
}

Test(heap_template, another_stack_finds_none) {
        struct heap_template t, *tab = table();
        (void) made(tab, &t);
        cr_assert_null(heap_template_find(tab, stack, DEPTH - 16, DEPTH - 16), "another depth");
        cr_assert_null(heap_template_find(tab, stack, DEPTH, DEPTH - 8), "another extent of the copy");
        put_word(1000, ras[1] + 4);
        cr_assert_null(heap_template_find(tab, stack, DEPTH, DEPTH), "another return address at a guard");
        put_word(1000, ras[1]);
        cr_assert_not_null(heap_template_find(tab, stack, DEPTH, DEPTH));
        cr_assert_null(heap_template_find(NULL, stack, DEPTH, DEPTH), "no table");
        free(tab);
}

Test(heap_template, a_dead_one_is_passed_over_and_made_again) {
        struct heap_template t, *tab = table();
        int slot = made(tab, &t);
        heap_template_kill(tab, (uint32_t) slot);
        cr_assert_null(heap_template_find(tab, stack, DEPTH, DEPTH));
        /* A record made before it died still reads its words. */
        cr_assert_eq(heap_template_at(tab, (uint32_t) slot, 4), &tab[slot]);
        int again = heap_template_add(tab, &t);
        cr_assert_geq(again, 0);
        cr_assert_neq(again, slot);
        cr_assert_eq(heap_template_find(tab, stack, DEPTH, DEPTH), &tab[again]);
        free(tab);
}

Test(heap_template, a_depth_holds_so_many_and_no_more) {
        fill_stack();
        struct heap_template t, *tab = table();
        cr_assert(heap_template_make(&t, walk, 4, stack, DEPTH, DEPTH, ras, 2));
        for (unsigned k = 0; k < HEAP_TEMPLATE_PROBES; k++) {
                t.guard_vals[0] = ras[0] + k; /* another call site each */
                cr_assert_geq(heap_template_add(tab, &t), 0, "template %u", k);
        }
        t.guard_vals[0] = ras[0] + HEAP_TEMPLATE_PROBES;
        cr_assert_eq(heap_template_add(tab, &t), -ENOSPC);
        /* Each is found by its own guard. */
        put_word(24, ras[0] + 3);
        const struct heap_template *f = heap_template_find(tab, stack, DEPTH, DEPTH);
        cr_assert_not_null(f);
        cr_assert_eq(f->guard_vals[0], ras[0] + 3);
        free(tab);
}

Test(heap_template, none_made_from_what_cannot_be_one) {
        fill_stack();
        struct heap_template t;
        uint32_t many[HEAP_TEMPLATE_WORDS + 1];
        for (unsigned k = 0; k < HEAP_TEMPLATE_WORDS + 1; k++)
                many[k] = 8u * k;
        put_word(0, ras[0]);
        cr_assert(heap_template_make(&t, many, HEAP_TEMPLATE_WORDS, stack, DEPTH, DEPTH, ras, 1));
        cr_assert_not(heap_template_make(&t, many, HEAP_TEMPLATE_WORDS + 1, stack, DEPTH, DEPTH, ras, 1),
                      "more words than a template holds");
        uint32_t outside[] = { 24, DEPTH - 4 };
        cr_assert_not(heap_template_make(&t, outside, 2, stack, DEPTH, DEPTH, ras, 1), "a word past the copy");
        uint64_t elsewhere[] = { 0x999999 };
        cr_assert_not(heap_template_make(&t, walk, 4, stack, DEPTH, DEPTH, elsewhere, 1),
                      "no return address among the words: nothing to match a stack by");
        cr_assert_not(heap_template_make(&t, walk, 0, stack, DEPTH, DEPTH, ras, 2), "no words");
}

Test(heap_template, a_table_that_lies_is_not_believed) {
        /* The library reads what the table says at its own stack: a
         * template whose words reach past the copy is passed over, not
         * read. */
        struct heap_template t, *tab = table();
        int slot = made(tab, &t);
        tab[slot].offs[1] = DEPTH; /* past the end */
        cr_assert_null(heap_template_find(tab, stack, DEPTH, DEPTH));
        tab[slot].offs[1] = 40;
        tab[slot].guard_offs[0] = DEPTH - 4;
        cr_assert_null(heap_template_find(tab, stack, DEPTH, DEPTH));
        tab[slot].guard_offs[0] = 24;
        tab[slot].nwords = HEAP_TEMPLATE_WORDS + 1;
        cr_assert_null(heap_template_find(tab, stack, DEPTH, DEPTH));
        free(tab);
}
