/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Growing arrays: the one "double the capacity and realloc" of the tree.
 *
 * An array is a pointer and its capacity in elements (a size_t the caller
 * keeps next to its count). GREEDY_REALLOC(p, cap, need) makes room for at
 * least need elements: when cap is short it becomes the largest of need,
 * twice cap and a first size (16 elements, or min_cap with the _MIN form),
 * so appending one at a time costs amortised O(1). Returns 0, or -ENOMEM
 * when the size overflows or realloc fails; p and cap are then left as
 * they were (the old array stays valid and owned by the caller). */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "basic/macro.h"

static inline int greedy_realloc(void **p, size_t *cap, size_t need, size_t elem_size, size_t min_cap) {
        if (_likely_(need <= *cap))
                return 0;
        /* No object may be larger than PTRDIFF_MAX bytes. */
        size_t max = elem_size ? (size_t) PTRDIFF_MAX / elem_size : 0;
        if (need > max)
                return -ENOMEM;
        size_t n = MAX(need, min_cap);
        if (*cap <= max / 2)
                n = MAX(n, *cap * 2);
        if (n > max)
                n = need; /* doubling would pass the limit; need alone does not */
        void *q = realloc(*p, n * elem_size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = n;
        return 0;
}

#define GREEDY_REALLOC_MIN(p, cap, need, min_cap)                                                                      \
        greedy_realloc((void **) &(p), &(cap), (need), sizeof(*(p)), (min_cap))
#define GREEDY_REALLOC(p, cap, need) GREEDY_REALLOC_MIN(p, cap, need, 16)
