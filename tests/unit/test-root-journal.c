/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The root instance's saved state, kept on disk: what a killed session
 * had changed is written back into a (fake) tracefs tree, newest first,
 * and the journal is gone afterwards. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "root-journal.h"
#include "test-scratch.h"
#include "tracefs.h"

static char dir[128];

static void setup(void) {
        int r = test_mkdtemp(dir, sizeof(dir), "test-root-journal-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
}

static void teardown(void) {
        cr_expect_eq(test_scratch_remove(dir), 0, "could not remove %s", dir);
}

TestSuite(root_journal, .init = setup, .fini = teardown);

/* tracefs files exist before anyone writes them: created here. */
static void put(const char *rel, const char *value) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s: %m", path);
        fputs(value, f);
        fclose(f);
}

static void expect(const char *rel, const char *value) {
        char buf[256];
        cr_assert_geq(tracefs_read(dir, rel, buf, sizeof(buf)), 0, "%s", rel);
        cr_expect_str_eq(buf, value, "%s", rel);
}

Test(root_journal, a_killed_sessions_changes_are_put_back) {
        char path[256], events[256];
        snprintf(path, sizeof(path), "%s/state/journal", dir); /* directory made on save */
        snprintf(events, sizeof(events), "%s/events", dir);
        cr_assert_eq(mkdir(events, 0700), 0);
        put("tracing_on", "1");
        put("buffer_size_kb", "1408");
        put("events/enable", "0");

        /* A session saved these, then changed the files, then died. */
        struct saved_file saved[] = {
                { (char[]){ "tracing_on" }, (char[]){ "1" } },
                { (char[]){ "buffer_size_kb" }, (char[]){ "1408" } },
                { (char[]){ "events/enable" }, (char[]){ "0" } },
        };
        cr_assert_eq(root_journal_save(path, saved, 3), 0);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_expect_eq(st.st_mode & 0777, 0600);
        put("tracing_on", "0");
        put("buffer_size_kb", "4096");
        put("events/enable", "1");

        cr_assert_eq(root_journal_replay(path, dir), 3);
        expect("tracing_on", "1");
        expect("buffer_size_kb", "1408");
        expect("events/enable", "0");
        cr_expect_neq(stat(path, &st), 0, "the journal is still there after a replay");
        cr_expect_eq(root_journal_replay(path, dir), 0, "a second replay found something");
}

Test(root_journal, the_oldest_value_of_a_file_wins) {
        char path[256];
        snprintf(path, sizeof(path), "%s/journal", dir);
        /* tracing_on saved first (as "1"): written back last. */
        struct saved_file saved[] = {
                { (char[]){ "tracing_on" }, (char[]){ "1" } },
                { (char[]){ "trace_clock" }, (char[]){ "local" } },
        };
        cr_assert_eq(root_journal_save(path, saved, 2), 0);
        put("tracing_on", "0");
        put("trace_clock", "[boot]");
        cr_assert_eq(root_journal_replay(path, dir), 2);
        expect("tracing_on", "1");
        expect("trace_clock", "local");
}

Test(root_journal, no_journal_is_nothing_to_do) {
        char path[256];
        snprintf(path, sizeof(path), "%s/none", dir);
        cr_expect_eq(root_journal_replay(path, dir), 0);
}
