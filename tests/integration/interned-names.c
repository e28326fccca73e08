/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "interned-names.h"

void grow_zeroed(void **p, size_t *n, size_t need, size_t elem) {
        if (need <= *n)
                return;
        size_t cap = need * 2;
        *p = realloc(*p, cap * elem);
        cr_assert_not_null(*p);
        memset((char *) *p + *n * elem, 0, (cap - *n) * elem);
        *n = cap;
}

void interned_names_add(struct interned_names *q, const Perfetto__Protos__InternedData *d) {
        for (size_t k = 0; k < d->n_function_names; k++) {
                uint64_t iid = d->function_names[k]->iid;
                grow_zeroed((void **) &q->fn, &q->n_fn, iid + 1, sizeof(*q->fn));
                free(q->fn[iid]);
                q->fn[iid] = strndup((const char *) d->function_names[k]->str.data, d->function_names[k]->str.len);
                cr_assert_not_null(q->fn[iid]);
        }
        for (size_t k = 0; k < d->n_frames; k++) {
                uint64_t iid = d->frames[k]->iid;
                grow_zeroed((void **) &q->frame_fn, &q->n_frame, iid + 1, sizeof(*q->frame_fn));
                q->frame_fn[iid] = d->frames[k]->function_name_id;
        }
        for (size_t k = 0; k < d->n_callstacks; k++) {
                uint64_t iid = d->callstacks[k]->iid;
                size_t had = q->n_cs;
                grow_zeroed((void **) &q->cs, &had, iid + 1, sizeof(*q->cs));
                grow_zeroed((void **) &q->cs_n, &q->n_cs, iid + 1, sizeof(*q->cs_n));
                free(q->cs[iid]);
                q->cs_n[iid] = d->callstacks[k]->n_frame_ids;
                q->cs[iid] = calloc(q->cs_n[iid] + 1, sizeof(uint64_t));
                cr_assert_not_null(q->cs[iid]);
                /* An empty one (a process gone before its dump: nothing
                 * symbolized) has no array at all. */
                if (q->cs_n[iid] > 0)
                        memcpy(q->cs[iid], d->callstacks[k]->frame_ids, q->cs_n[iid] * sizeof(uint64_t));
        }
}

void interned_names_free(struct interned_names *q) {
        for (size_t k = 0; k < q->n_fn; k++)
                free(q->fn[k]);
        for (size_t k = 0; k < q->n_cs; k++)
                free(q->cs[k]);
        free(q->fn);
        free(q->frame_fn);
        free(q->cs);
        free(q->cs_n);
        *q = (struct interned_names) {};
}
