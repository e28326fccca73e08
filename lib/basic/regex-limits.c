/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/regex-limits.h"

struct level {
        uint64_t sum;  /* expanded size of what is complete at this level */
        uint64_t last; /* the last atom, still open to a quantifier */
        bool has_last;
};

static uint64_t cap(uint64_t v) {
        /* Saturate well above the limit: no overflow, still refused. */
        return MIN(v, (uint64_t) REGEX_MAX_EXPANDED * 1024u);
}

static void add_atom(struct level *l, uint64_t size) {
        l->sum = cap(l->sum + l->last);
        l->last = size;
        l->has_last = true;
}

/* Parses {m}, {m,}, {m,n} at p (just after '{'); returns the factor the
 * atom is copied by, or 0 when the text is not a valid bound. */
static uint64_t parse_bound(const char *p, const char **ret_end) {
        uint64_t m = 0, n;
        bool any = false;
        while (*p >= '0' && *p <= '9') {
                m = cap(m * 10 + (uint64_t) (*p++ - '0'));
                any = true;
        }
        if (!any)
                return 0;
        n = m;
        if (*p == ',') {
                p++;
                if (*p == '}')
                        n = m + 1; /* unbounded: the copies plus a star */
                else {
                        n = 0;
                        any = false;
                        while (*p >= '0' && *p <= '9') {
                                n = cap(n * 10 + (uint64_t) (*p++ - '0'));
                                any = true;
                        }
                        if (!any)
                                return 0;
                }
        }
        if (*p != '}')
                return 0;
        *ret_end = p + 1;
        return MAX(MAX(m, n), (uint64_t) 1);
}

int regex_check_limits(const char *pattern, size_t *ret_expanded, const char **ret_reason) {
        struct level stack[REGEX_MAX_DEPTH + 1] = {};
        unsigned depth = 0;
        const char *p = pattern;
        const char *reason_dummy;

        if (!ret_reason)
                ret_reason = &reason_dummy;
        if (strlen(pattern) > REGEX_MAX_LENGTH) {
                *ret_reason = "longer than 256 characters";
                return -E2BIG;
        }
        while (*p) {
                struct level *l = &stack[depth];
                char c = *p++;
                switch (c) {
                case '\\':
                        if (*p >= '1' && *p <= '9') {
                                *ret_reason = "back-references are not allowed";
                                return -EINVAL;
                        }
                        if (*p)
                                p++;
                        add_atom(l, 1);
                        break;
                case '[':
                        /* A bracket expression is one atom; ']' first is literal. */
                        if (*p == '^')
                                p++;
                        if (*p == ']')
                                p++;
                        while (*p && *p != ']') {
                                if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
                                        char kind = p[1];
                                        const char *e = p + 2;
                                        while (*e && !(e[0] == kind && e[1] == ']'))
                                                e++;
                                        if (!*e)
                                                break;
                                        p = e + 2;
                                        continue;
                                }
                                p++;
                        }
                        if (*p != ']') {
                                *ret_reason = "unbalanced [";
                                return -EINVAL;
                        }
                        p++;
                        add_atom(l, 1);
                        break;
                case '(':
                        if (depth == REGEX_MAX_DEPTH) {
                                *ret_reason = "groups nested deeper than 8";
                                return -E2BIG;
                        }
                        stack[++depth] = (struct level) {};
                        break;
                case ')': {
                        if (depth == 0) {
                                *ret_reason = "unbalanced )";
                                return -EINVAL;
                        }
                        uint64_t group = cap(l->sum + l->last + 1);
                        depth--;
                        add_atom(&stack[depth], group);
                        break;
                }
                case '|':
                        l->sum = cap(l->sum + l->last + 1);
                        l->last = 0;
                        l->has_last = false;
                        break;
                case '*':
                case '?':
                        l->last = cap(l->last + 1);
                        break;
                case '+':
                        /* a+ is a a*. */
                        l->last = cap(l->last * 2 + 1);
                        break;
                case '{': {
                        const char *end = NULL;
                        uint64_t factor = l->has_last ? parse_bound(p, &end) : 0;
                        if (factor == 0) {
                                add_atom(l, 1); /* a literal brace */
                                break;
                        }
                        p = end;
                        l->last = cap(l->last * factor + 1);
                        break;
                }
                default:
                        add_atom(l, 1);
                        break;
                }
                if (cap(stack[depth].sum + stack[depth].last) > REGEX_MAX_EXPANDED) {
                        *ret_reason = "expands to more than 128 elements (repetition bounds multiply)";
                        return -E2BIG;
                }
        }
        if (depth != 0) {
                *ret_reason = "unbalanced (";
                return -EINVAL;
        }
        /* Everything that was open multiplies into the total. */
        uint64_t total = cap(stack[0].sum + stack[0].last);
        if (total > REGEX_MAX_EXPANDED) {
                *ret_reason = "expands to more than 128 elements (repetition bounds multiply)";
                return -E2BIG;
        }
        if (ret_expanded)
                *ret_expanded = (size_t) total;
        return 0;
}

int regex_compile_budgeted(const char *pattern, size_t budget, size_t *budget_used, regex_t *ret,
                           const char **ret_reason) {
        const char *reason_dummy;
        size_t expanded = 0;
        int r;

        if (!ret_reason)
                ret_reason = &reason_dummy;
        r = regex_check_limits(pattern, &expanded, ret_reason);
        if (r < 0)
                return r;
        if (budget_used) {
                if (*budget_used + expanded > budget) {
                        *ret_reason = "the config's regular expressions together expand too far";
                        return -E2BIG;
                }
                *budget_used += expanded;
        }
        size_t len = strlen(pattern);
        _cleanup_free_ char *anchored = malloc(len + 5);
        if (!anchored)
                return -ENOMEM;
        snprintf(anchored, len + 5, "^(%s)$", pattern);
        r = regcomp(ret, anchored, REG_EXTENDED | REG_NOSUB);
        if (r != 0) {
                *ret_reason = r == REG_ESPACE ? "out of memory" : "not a valid extended regular expression";
                return r == REG_ESPACE ? -ENOMEM : -EINVAL;
        }
        return 0;
}

int regex_compile_bounded(const char *pattern, regex_t *ret, const char **ret_reason) {
        return regex_compile_budgeted(pattern, 0, NULL, ret, ret_reason);
}

bool regex_matches(const regex_t *re, const char *subject) {
        if (!subject || strlen(subject) > REGEX_MAX_SUBJECT)
                return false;
        return regexec(re, subject, 0, NULL, 0) == 0;
}
