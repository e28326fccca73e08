/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl's lines for journald packets (print) and their counts
 * (summary). */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tracectl/journald-view.h"

/* What fn printed, in a buffer the caller frees. */
static char *printed(void (*fn)(FILE *, const void *), const void *arg) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cr_assert_not_null(f);
        fn(f, arg);
        fclose(f);
        return buf;
}

static void print_event(FILE *f, const void *e) {
        journald_print_event(f, e);
}

static void print_counts(FILE *f, const void *c) {
        journald_counts_print(f, c);
}

static Perfetto__Protos__SystemdJournaldEvent entry(uint32_t prio, const char *tag, const char *unit,
                                                    const char *transport, const char *message) {
        Perfetto__Protos__SystemdJournaldEvent e = PERFETTO__PROTOS__SYSTEMD_JOURNALD_EVENT__INIT;
        e.has_prio = true;
        e.prio = prio;
        e.has_pid = true;
        e.pid = 42;
        e.tag = (char *) tag;
        e.systemd_unit = (char *) unit;
        e.transport = (char *) transport;
        e.message = (char *) message;
        return e;
}

Test(journald_view, one_line_per_entry) {
        Perfetto__Protos__SystemdJournaldEvent e = entry(3, "sshd", "ssh.service", "syslog", "bad key");
        char *s = printed(print_event, &e);
        cr_assert_str_eq(s, "err sshd[42] (ssh.service, syslog): bad key\n");
        free(s);
        e = entry(7, "x", NULL, "journal", "detail");
        s = printed(print_event, &e);
        cr_assert_str_eq(s, "debug x[42] (journal): detail\n");
        free(s);
        e = entry(5, "traced-journald", NULL, NULL, "no journal files");
        s = printed(print_event, &e);
        cr_assert_str_eq(s, "notice traced-journald[42] (note of the data source): no journal files\n");
        free(s);
        Perfetto__Protos__SystemdJournaldEvent counts = PERFETTO__PROTOS__SYSTEMD_JOURNALD_EVENT__INIT;
        counts.has_num_total = counts.has_num_failed = true;
        counts.num_total = 9;
        counts.num_failed = 1;
        s = printed(print_event, &counts);
        cr_assert_str_eq(s, "counts: 9 entries written, 1 failed\n");
        free(s);
}

Test(journald_view, counts_by_priority_and_sequence) {
        struct journald_counts c = {};
        char *s = printed(print_counts, &c);
        cr_assert_str_empty(s, "nothing for a trace without journald packets");
        free(s);
        Perfetto__Protos__SystemdJournaldEvent e = entry(3, "a", NULL, "syslog", "m");
        journald_counts_add(&c, 1, &e);
        journald_counts_add(&c, 1, &e);
        e = entry(6, "a", NULL, "stdout", "m");
        journald_counts_add(&c, 2, &e);
        e = entry(5, "traced-journald", NULL, NULL, "note");
        journald_counts_add(&c, 2, &e);
        Perfetto__Protos__SystemdJournaldEvent counts = PERFETTO__PROTOS__SYSTEMD_JOURNALD_EVENT__INIT;
        counts.has_num_total = true;
        counts.num_total = 1;
        journald_counts_add(&c, 1, &counts);
        counts.num_total = 2; /* the same sequence later: replaces */
        journald_counts_add(&c, 1, &counts);
        counts.num_total = 1;
        journald_counts_add(&c, 2, &counts);
        s = printed(print_counts, &c);
        cr_assert_str_eq(s, "Journal:        3 entries (2 err, 1 info)\n"
                            "                the data source counted 3 written, 0 failed\n"
                            "                1 note of the data source (tracectl print shows it)\n");
        free(s);
}
