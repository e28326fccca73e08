/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The journald plugin: its config into sd-journal matches, and journal
 * entries into packets. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "basic/pb-buf.h"
#include "journald-config.h"
#include "journald-dirs.h"
#include "test-scratch.h"
#include "journald-entry.h"
#include "pbtxt/pbtxt.h"

#include "perfetto/config/data_source_config.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

/* DataSourceConfig text -> journald_config; returns the parse result. */
static int parse_text(const char *text, struct journald_config *c, char *err, size_t n) {
        ProtobufCMessage *m = NULL;
        char *perr = NULL;
        cr_assert_eq(pbtxt_parse(&perfetto__protos__data_source_config__descriptor, text, strlen(text), "t", &m,
                                 &perr),
                     0, "%s", perr);
        size_t size = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(size + 1);
        protobuf_c_message_pack(m, buf);
        protobuf_c_message_free_unpacked(m, NULL);
        int r = journald_config_parse(buf, size, c, err, n);
        free(buf);
        return r;
}

/* The matches of a config, joined with spaces ("" for none). */
static void matches_of(const char *text, char *out, size_t size) {
        struct journald_config c;
        char err[256] = "";
        cr_assert_eq(parse_text(text, &c, err, sizeof(err)), 0, "%s", err);
        char **m;
        size_t n;
        cr_assert_eq(journald_config_matches(&c, &m, &n), 0);
        out[0] = 0;
        for (size_t i = 0; i < n; i++)
                snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "", m[i]);
        cr_assert_null(m[n], "the list ends with NULL");
        journald_matches_free(m);
        journald_config_done(&c);
}

Test(journald_config, no_config_keeps_everything_from_the_start) {
        struct journald_config c;
        char err[256] = "";
        cr_assert_eq(parse_text("name: \"linux.systemd_journald\"", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(c.min_prio, 7);
        cr_assert_eq(c.n_identifiers + c.n_units, 0);
        cr_assert_eq(c.lookback_ms, 0);
        cr_assert_null(c.journal_namespace);
        journald_config_done(&c);
        char m[512];
        matches_of("name: \"linux.systemd_journald\" journald_config { }", m, sizeof(m));
        cr_assert_str_empty(m);
        /* Upstream: unset or 0 takes every priority; 7 (debug) as well,
         * and then entries without a PRIORITY field are not dropped. */
        matches_of("journald_config { min_prio: 0 }", m, sizeof(m));
        cr_assert_str_empty(m);
        matches_of("journald_config { min_prio: 7 }", m, sizeof(m));
        cr_assert_str_empty(m);
}

Test(journald_config, min_prio_matches_every_more_urgent_priority) {
        char m[512];
        matches_of("journald_config { min_prio: 3 }", m, sizeof(m));
        cr_assert_str_eq(m, "PRIORITY=0 PRIORITY=1 PRIORITY=2 PRIORITY=3");
        matches_of("journald_config { min_prio: 6 }", m, sizeof(m));
        cr_assert_str_eq(m, "PRIORITY=0 PRIORITY=1 PRIORITY=2 PRIORITY=3 PRIORITY=4 PRIORITY=5 PRIORITY=6");
}

Test(journald_config, filters_become_matches_per_field) {
        char m[512];
        matches_of("journald_config { min_prio: 1 filter_identifiers: \"sshd\" filter_identifiers: \"sudo\""
                   " filter_units: \"cron.service\" }",
                   m, sizeof(m));
        cr_assert_str_eq(m, "PRIORITY=0 PRIORITY=1 SYSLOG_IDENTIFIER=sshd SYSLOG_IDENTIFIER=sudo "
                            "_SYSTEMD_UNIT=cron.service");
        matches_of("journald_config { filter_units: \"a.service\" filter_units: \"b.scope\" }", m, sizeof(m));
        cr_assert_str_eq(m, "_SYSTEMD_UNIT=a.service _SYSTEMD_UNIT=b.scope");
}

Test(journald_config, our_fields) {
        struct journald_config c;
        char err[256] = "";
        cr_assert_eq(parse_text("journald_config { lookback_ms: 60000 journal_namespace: \"test\" }", &c, err,
                                sizeof(err)),
                     0, "%s", err);
        cr_assert_eq(c.lookback_ms, 60000);
        cr_assert_str_eq(c.journal_namespace, "test");
        journald_config_done(&c);
}

static void refused(const char *text, const char *field) {
        struct journald_config c;
        char err[256] = "";
        cr_assert_eq(parse_text(text, &c, err, sizeof(err)), -EINVAL, "%s was accepted", text);
        cr_assert(strncmp(err, field, strlen(field)) == 0, "%s: \"%s\" does not name %s", text, err, field);
        cr_assert_null(c.identifiers, "nothing is left allocated");
}

Test(journald_config, refuses_what_is_no_filter) {
        refused("journald_config { min_prio: 8 }", "min_prio");
        refused("journald_config { filter_identifiers: \"\" }", "filter_identifiers");
        refused("journald_config { filter_identifiers: \"a\" filter_units: \"two\\nlines\" }", "filter_units");
        refused("journald_config { lookback_ms: 604800001 }", "lookback_ms");
        refused("journald_config { journal_namespace: \"../x\" }", "journal_namespace");
        char text[8192] = "journald_config {";
        for (int i = 0; i <= JOURNALD_MAX_FILTERS; i++)
                snprintf(text + strlen(text), sizeof(text) - strlen(text), " filter_identifiers: \"id%d\"", i);
        strcat(text, " }");
        refused(text, "filter_identifiers");
}

/* The plugin decodes only journald_config of the DataSourceConfig: two
 * occurrences of it merge as protobuf merges them (the second's fields
 * added to the first's), the fields of other data sources around it are
 * skipped, and bytes that are no protobuf are refused. */
Test(journald_config, only_its_own_field_is_decoded) {
        uint8_t buf[64];
        size_t n = 0;
        /* name: "x" */
        buf[n++] = 0x0a, buf[n++] = 1, buf[n++] = 'x';
        /* journald_config (141, length-delimited) { min_prio: 3 } */
        buf[n++] = 0xea, buf[n++] = 0x08, buf[n++] = 2, buf[n++] = 0x08, buf[n++] = 3;
        /* ftrace_config (100) { buffer_size_kb (10): 1 }: another source's */
        buf[n++] = 0xa2, buf[n++] = 0x06, buf[n++] = 2, buf[n++] = 0x50, buf[n++] = 1;
        /* journald_config { filter_identifiers (2): "ab" } */
        buf[n++] = 0xea, buf[n++] = 0x08, buf[n++] = 4, buf[n++] = 0x12, buf[n++] = 2, buf[n++] = 'a', buf[n++] = 'b';
        struct journald_config c;
        char err[256] = "";
        cr_assert_eq(journald_config_parse(buf, n, &c, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(c.min_prio, 3);
        cr_assert_eq(c.n_identifiers, 1);
        cr_assert_str_eq(c.identifiers[0], "ab");
        journald_config_done(&c);

        /* A field cut short. */
        cr_assert_eq(journald_config_parse(buf, n - 1, &c, err, sizeof(err)), -EINVAL);
        cr_assert(strstr(err, "does not decode"), "%s", err);
        /* journald_config as a varint. */
        const uint8_t varint[] = { 0xe8, 0x08, 1 };
        cr_assert_eq(journald_config_parse(varint, sizeof(varint), &c, err, sizeof(err)), -EINVAL);
}

/* ---- entries ---- */

struct fake_entry {
        const char *fields[16][2];
        int fail_with; /* returned for field "MESSAGE" when set */
};

static int fake_get(void *userdata, const char *field, const void **ret, size_t *ret_len) {
        const struct fake_entry *e = userdata;
        if (e->fail_with && strcmp(field, "MESSAGE") == 0)
                return e->fail_with;
        for (size_t i = 0; i < 16 && e->fields[i][0]; i++)
                if (strcmp(e->fields[i][0], field) == 0) {
                        *ret = e->fields[i][1];
                        *ret_len = strlen(e->fields[i][1]);
                        return 0;
                }
        return -ENOENT;
}

/* An event written into a heap buffer. */
struct event_buf {
        struct pb_buf b;
        SystemdJournaldEvent ev;
};

static SystemdJournaldEvent *event_begin(struct event_buf *e) {
        *e = (struct event_buf) {};
        SystemdJournaldEvent_init(&e->ev, pb_buf_stream(&e->b));
        return &e->ev;
}

static Perfetto__Protos__SystemdJournaldEvent *decode(struct event_buf *e) {
        cr_assert_eq(traced_pb_msg_finish(&e->ev.msg), 0);
        Perfetto__Protos__SystemdJournaldEvent *j =
                perfetto__protos__systemd_journald_event__unpack(NULL, pb_buf_len(&e->b), pb_buf_data(&e->b));
        cr_assert_not_null(j, "the event does not decode");
        pb_buf_done(&e->b);
        return j;
}

Test(journald_entry, every_field_upstream_has) {
        struct fake_entry e = { .fields = {
                { "_PID", "1234" }, { "_TID", "1240" }, { "_UID", "1000" }, { "_GID", "100" },
                { "PRIORITY", "3" }, { "SYSLOG_IDENTIFIER", "mytag" }, { "MESSAGE", "disk on fire" },
                { "_COMM", "logger" }, { "_EXE", "/usr/bin/logger" }, { "_SYSTEMD_UNIT", "cron.service" },
                { "_HOSTNAME", "vm" }, { "_TRANSPORT", "syslog" }, { "SYSLOG_FACILITY", "1" } } };
        struct event_buf eb;
        cr_assert_eq(journald_entry_encode(fake_get, &e, event_begin(&eb)), 0);
        Perfetto__Protos__SystemdJournaldEvent *j = decode(&eb);
        cr_assert(j->has_pid && j->has_tid && j->has_uid && j->has_gid && j->has_prio);
        cr_assert_eq(j->pid, 1234);
        cr_assert_eq(j->tid, 1240);
        cr_assert_eq(j->uid, 1000);
        cr_assert_eq(j->gid, 100);
        cr_assert_eq(j->prio, 3);
        cr_assert_str_eq(j->tag, "mytag");
        cr_assert_str_eq(j->message, "disk on fire");
        cr_assert_str_eq(j->comm, "logger");
        cr_assert_str_eq(j->exe, "/usr/bin/logger");
        cr_assert_str_eq(j->systemd_unit, "cron.service");
        cr_assert_str_eq(j->hostname, "vm");
        cr_assert_str_eq(j->transport, "syslog");
        cr_assert(!j->has_num_total && !j->has_num_failed, "an entry holds no counts");
        perfetto__protos__systemd_journald_event__free_unpacked(j, NULL);
}

Test(journald_entry, missing_and_malformed_fields_are_left_out) {
        struct fake_entry e = { .fields = { { "_PID", "12x" }, { "PRIORITY", "99999999999" }, { "MESSAGE", "" },
                                            { "_UID", "4294967295" }, { "_TRANSPORT", "kernel" } } };
        struct event_buf eb;
        cr_assert_eq(journald_entry_encode(fake_get, &e, event_begin(&eb)), 0);
        Perfetto__Protos__SystemdJournaldEvent *j = decode(&eb);
        cr_assert(!j->has_pid, "\"12x\" is no pid");
        cr_assert(!j->has_prio, "a priority past 32 bits is left out");
        cr_assert(!j->has_tid && !j->has_gid);
        cr_assert(j->has_uid);
        cr_assert_eq(j->uid, 4294967295u);
        cr_assert_str_eq(j->message, "", "an empty message is still a message");
        cr_assert_null(j->tag);
        cr_assert_null(j->systemd_unit);
        perfetto__protos__systemd_journald_event__free_unpacked(j, NULL);
}

Test(journald_entry, a_field_that_cannot_be_read_fails_the_entry) {
        struct fake_entry e = { .fields = { { "_PID", "1" } }, .fail_with = -EBADMSG };
        struct event_buf eb;
        cr_assert_eq(journald_entry_encode(fake_get, &e, event_begin(&eb)), -EBADMSG);
        pb_buf_done(&eb.b);
}

Test(journald_entry, counts_and_notes) {
        struct event_buf eb;
        journald_stats_encode(event_begin(&eb), 41, 2);
        Perfetto__Protos__SystemdJournaldEvent *j = decode(&eb);
        cr_assert(j->has_num_total && j->has_num_failed);
        cr_assert_eq(j->num_total, 41);
        cr_assert_eq(j->num_failed, 2);
        cr_assert(!j->has_prio && !j->message);
        perfetto__protos__systemd_journald_event__free_unpacked(j, NULL);

        journald_note_encode(event_begin(&eb), 5, 4321, "no journal");
        j = decode(&eb);
        cr_assert_str_eq(j->tag, JOURNALD_NOTE_TAG);
        cr_assert_str_eq(j->message, "no journal");
        cr_assert_eq(j->prio, 5);
        cr_assert_eq(j->pid, 4321);
        cr_assert_null(j->transport, "a note has no transport: journald gives every entry one");
        perfetto__protos__systemd_journald_event__free_unpacked(j, NULL);
}

Test(journald_entry, wall_clock_to_boot_time) {
        uint64_t ts = 0;
        /* Booted at 1000 s of wall-clock time: boot time = real - 1000 s. */
        int64_t offset = -1000000000000;
        cr_assert(journald_realtime_to_boottime(1000500000, offset, &ts));
        cr_assert_eq(ts, 500000000, "500 ms after the boot");
        cr_assert(!journald_realtime_to_boottime(999000000, offset, &ts), "an entry from before the boot");
        cr_assert(!journald_realtime_to_boottime(UINT64_MAX, offset, &ts));
        /* The machine's own clocks: an entry made now is now. */
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        uint64_t before = journald_boottime_now();
        cr_assert(journald_realtime_to_boottime((uint64_t) rt.tv_sec * 1000000 + (uint64_t) rt.tv_nsec / 1000,
                                                journald_clock_offset(), &ts));
        uint64_t after = journald_boottime_now();
        cr_assert(ts + 1000000 >= before && ts <= after + 1000000, "%llu not within [%llu, %llu] (1 ms slack)",
                  (unsigned long long) ts, (unsigned long long) before, (unsigned long long) after);
}

/* The look before sd-journal is opened again: a directory that is not
 * there, or empty, holds nothing; one entry (a machine's directory) in any
 * of them is enough. */
Test(journald_dirs, an_entry_in_any_directory) {
        char root[512], a[600], b[600], sub[700];
        cr_assert_eq(test_mkdtemp(root, sizeof(root), "journald-dirs-"), 0);
        snprintf(a, sizeof(a), "%s/run", root);
        snprintf(b, sizeof(b), "%s/var", root);
        const char *const dirs[] = {a, b};
        cr_expect_not(journald_dirs_have_entries(dirs, 2), "neither directory exists");
        cr_assert_eq(mkdir(a, 0755), 0);
        cr_assert_eq(mkdir(b, 0755), 0);
        cr_expect_not(journald_dirs_have_entries(dirs, 2), "both empty");
        snprintf(sub, sizeof(sub), "%s/0123456789abcdef", b);
        cr_assert_eq(mkdir(sub, 0755), 0);
        cr_expect(journald_dirs_have_entries(dirs, 2), "a machine directory in the second");
        cr_expect_not(journald_dirs_have_entries(dirs, 1), "the first alone is still empty");
        cr_expect_eq(rm_rf(root), 0);
}
