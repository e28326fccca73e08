/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyframes-check.h"

/* "FUNCTION (SCRIPT:LINE)" */
bool python_frame(const char *name, char *fn, size_t size) {
        const char *open = strstr(name, " (" PYFRAMES_SCRIPT ":");
        if (!open)
                return false;
        const char *line = open + strlen(" (" PYFRAMES_SCRIPT ":");
        char *end;
        long l = strtol(line, &end, 10);
        if (end == line || l <= 0 || strcmp(end, ")") != 0)
                return false;
        snprintf(fn, size, "%.*s", (int) (open - name), name);
        return true;
}

/* Whether the sample's Python frames read, root first, <module>, main
 * (the main thread only), loop, then work and fib, fib... or csum, or
 * rest (or stop before), with no evaluation frame of the interpreter
 * left. *innermost: the innermost Python function ("" if none);
 * *native_under: how many native frames lie under it (leafward). */
bool python_stack_right_under(const struct sample *s, char *innermost, size_t size, size_t *native_under) {
        static const char *const main_thread[] = {"<module>", "main", "loop"};
        static const char *const other[] = {"loop"};
        const char *const *want = s->tid == s->pid ? main_thread : other;
        size_t n_want = s->tid == s->pid ? 3 : 1;
        size_t depth = 0;
        innermost[0] = 0;
        *native_under = 0;
        bool ok = true;
        for (size_t k = s->n_names; k-- > 0;) {
                const char *n = s->names[k] ? s->names[k] : "";
                char fn[256];
                if (strcmp(n, "_PyEval_EvalFrameDefault") == 0)
                        ok = false;
                if (!python_frame(n, fn, sizeof(fn))) {
                        (*native_under)++;
                        continue;
                }
                *native_under = 0;
                if (depth < n_want)
                        ok = ok && strcmp(fn, want[depth]) == 0;
                else if (depth == n_want)
                        ok = ok && (strcmp(fn, "work") == 0 || strcmp(fn, "rest") == 0);
                else if (strcmp(fn, "fib") == 0)
                        ok = ok && (strcmp(innermost, "work") == 0 || strcmp(innermost, "fib") == 0);
                else
                        ok = ok && strcmp(fn, "csum") == 0 && strcmp(innermost, "work") == 0;
                snprintf(innermost, size, "%s", fn);
                depth++;
        }
        return ok && depth >= n_want;
}

