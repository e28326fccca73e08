/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "basic/regex-limits.h"

static void refused(const char *pattern, int error, const char *reason_part) {
        regex_t re;
        const char *reason = NULL;
        int r = regex_compile_bounded(pattern, &re, &reason);
        cr_assert_eq(r, error, "\"%s\": %d (%s)", pattern, r, reason ? reason : "");
        cr_assert_not_null(reason);
        cr_assert(strstr(reason, reason_part), "\"%s\": reason \"%s\"", pattern, reason);
}

static void matches(const char *pattern, const char *yes, const char *no) {
        regex_t re;
        const char *reason = NULL;
        cr_assert_eq(regex_compile_bounded(pattern, &re, &reason), 0, "\"%s\": %s", pattern, reason ? reason : "");
        cr_assert(regex_matches(&re, yes), "\"%s\" should match \"%s\"", pattern, yes);
        cr_assert(!regex_matches(&re, no), "\"%s\" should not match \"%s\"", pattern, no);
        regfree(&re);
}

Test(regex_limits, ordinary_filters_work_as_whole_string_matches) {
        matches("traced\\..*", "traced.ftrace", "xtraced.ftrace");
        matches("com\\.example\\.(foo|bar)", "com.example.bar", "com.example.bar2");
        matches("[[:alpha:]]+-[0-9]{1,4}", "producer-42", "producer-12345");
        matches("(ab.*){1,20}", "abxab", "ba");
        matches("a{2,}b?", "aaab", "ab");
        matches("[]a]x", "]x", "bx");
}

Test(regex_limits, nested_repetition_is_refused_before_compiling) {
        /* The finding: 216,000 copies of 'a' after expansion. */
        refused("((a{1,60}){1,60}){1,60}", -E2BIG, "expands");
        refused("(a{1,60}){1,60}", -E2BIG, "expands");
        refused("a{200}", -E2BIG, "expands");
        refused("(.*){1,100}", -E2BIG, "expands");
        refused("(a{30}|b{30}){30}", -E2BIG, "expands");
        refused("a{99999999999999999999}", -E2BIG, "expands");
}

Test(regex_limits, length_depth_and_backreferences) {
        char longp[REGEX_MAX_LENGTH + 2];
        memset(longp, 'a', sizeof(longp) - 1);
        longp[sizeof(longp) - 1] = '\0';
        refused(longp, -E2BIG, "longer");
        /* 256 characters, one atom. */
        longp[0] = '[';
        longp[REGEX_MAX_LENGTH - 1] = ']';
        longp[REGEX_MAX_LENGTH] = '\0';
        regex_t re;
        cr_assert_eq(regex_compile_bounded(longp, &re, NULL), 0);
        regfree(&re);

        refused("(((((((((a)))))))))", -E2BIG, "nested");
        refused("(a)\\1", -EINVAL, "back-references");
        refused("(a", -EINVAL, "unbalanced");
        refused("a)", -EINVAL, "unbalanced");
        refused("[a", -EINVAL, "unbalanced");
}

Test(regex_limits, expansion_is_counted_through_groups_and_alternatives) {
        size_t n = 0;
        cr_assert_eq(regex_check_limits("abc", &n, NULL), 0);
        cr_assert_eq(n, 3);
        cr_assert_eq(regex_check_limits("(ab){10}", &n, NULL), 0);
        cr_assert_geq(n, 20);
        cr_assert_eq(regex_check_limits("(a|b|c){20}", &n, NULL), 0);
        cr_assert_geq(n, 60);
        cr_assert_eq(regex_check_limits("(a|b|c){30}", &n, NULL), -E2BIG);
        cr_assert_eq(regex_check_limits("((ab){5}){5}", &n, NULL), 0);
        cr_assert_eq(regex_check_limits("((ab){8}){8}", &n, NULL), -E2BIG);
}

Test(regex_limits, a_budget_is_shared) {
        regex_t re[3];
        size_t used = 0;
        const char *reason = NULL;
        cr_assert_eq(regex_compile_budgeted("a{100}", 250, &used, &re[0], &reason), 0);
        cr_assert_eq(regex_compile_budgeted("b{100}", 250, &used, &re[1], &reason), 0);
        cr_assert_eq(regex_compile_budgeted("c{100}", 250, &used, &re[2], &reason), -E2BIG);
        cr_assert(strstr(reason, "together"));
        regfree(&re[0]);
        regfree(&re[1]);
}

Test(regex_limits, long_subjects_never_match) {
        regex_t re;
        cr_assert_eq(regex_compile_bounded(".*", &re, NULL), 0);
        char subject[REGEX_MAX_SUBJECT + 2];
        memset(subject, 'x', sizeof(subject) - 1);
        subject[sizeof(subject) - 1] = '\0';
        cr_assert(!regex_matches(&re, subject));
        subject[REGEX_MAX_SUBJECT] = '\0';
        cr_assert(regex_matches(&re, subject));
        regfree(&re);
}
