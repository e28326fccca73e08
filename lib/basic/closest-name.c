/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>
#include <string.h>

#include "basic/closest-name.h"
#include "basic/macro.h"

/* Names longer than this are not compared (no typo is found in them). */
#define NAME_DISTANCE_MAX_LEN 255u

unsigned name_distance(const char *a, const char *b, unsigned limit) {
        size_t la = strlen(a), lb = strlen(b);
        if (la > NAME_DISTANCE_MAX_LEN || lb > NAME_DISTANCE_MAX_LEN)
                return limit + 1;
        if ((la > lb ? la - lb : lb - la) > limit)
                return limit + 1;
        /* Three rows of the optimal-string-alignment table. */
        unsigned rows[3][NAME_DISTANCE_MAX_LEN + 1];
        unsigned *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
        for (size_t j = 0; j <= lb; j++)
                prev[j] = (unsigned) j;
        for (size_t i = 1; i <= la; i++) {
                cur[0] = (unsigned) i;
                unsigned row_min = cur[0];
                for (size_t j = 1; j <= lb; j++) {
                        unsigned cost = a[i - 1] != b[j - 1];
                        unsigned v = MIN(MIN(prev[j] + 1, cur[j - 1] + 1), prev[j - 1] + cost);
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                                v = MIN(v, prev2[j - 2] + 1);
                        cur[j] = v;
                        row_min = MIN(row_min, v);
                }
                if (row_min > limit)
                        return limit + 1;
                unsigned *t = prev2;
                prev2 = prev;
                prev = cur;
                cur = t;
        }
        return MIN(prev[lb], limit + 1);
}

const char *closest_name(const char *name, const char *const *names, size_t n) {
        unsigned limit = (unsigned) MIN(MAX(strlen(name) / 3, (size_t) 1), (size_t) 3);
        const char *best = NULL;
        unsigned best_d = limit + 1;
        for (size_t i = 0; i < n; i++) {
                if (!names[i] || strcmp(names[i], name) == 0)
                        continue;
                unsigned d = name_distance(name, names[i], limit);
                if (d < best_d) {
                        best_d = d;
                        best = names[i];
                }
        }
        return best;
}
