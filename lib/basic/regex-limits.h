/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* POSIX extended regular expressions from untrusted peers (a consumer's
 * producer_name_regex_filter, a trigger's producer_name_regex), compiled
 * with bounded time and memory. glibc's regcomp copies a subexpression
 * once per allowed repetition, so ((a{1,60}){1,60}){1,60} becomes 216,000
 * nodes (hundreds of MB, most of a second); back-references make regexec
 * exponential. The pattern is measured before regcomp sees it: its length,
 * the nesting of its groups and the size it expands to; back-references
 * are refused. Within these limits regcomp takes at most about a
 * millisecond and regexec on a subject of REGEX_MAX_SUBJECT bytes less
 * (measured with glibc 2.36 on the worst shapes: (.*){1,42}, (a?){128}). */

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#define REGEX_MAX_LENGTH 256u    /* bytes of pattern */
#define REGEX_MAX_DEPTH 8u       /* nested groups */
#define REGEX_MAX_EXPANDED 128u /* atoms after repetition bounds are expanded */
#define REGEX_MAX_SUBJECT 128u  /* longer subjects never match */

/* 0 when pattern is within the limits; otherwise -E2BIG (too long, too
 * deep, expands too far) or -EINVAL (back-reference, unbalanced) with a
 * static description in *ret_reason. */
int regex_check_limits(const char *pattern, size_t *ret_expanded, const char **ret_reason);

/* Checks, then compiles "^(pattern)$" (a whole-string match, like
 * upstream's std::regex_match) with REG_EXTENDED | REG_NOSUB. Returns 0,
 * or -errno with a static reason (regcomp's own errors included). */
int regex_compile_bounded(const char *pattern, regex_t *ret, const char **ret_reason);
/* The same, adding the pattern's expanded size to *budget_used and
 * refusing it (-E2BIG) when that would exceed budget: a config's regexes
 * share one budget. */
int regex_compile_budgeted(const char *pattern, size_t budget, size_t *budget_used, regex_t *ret,
                           const char **ret_reason);

/* Whether subject matches a regex from regex_compile_bounded. */
bool regex_matches(const regex_t *re, const char *subject);
