/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.systemd_journald through the real traced and the journald plugin's
 * host, against a systemd-journald of our own: started standalone in a
 * journal namespace of this test (no systemd needed, the machine's journal
 * untouched), fed with logger(1) on its syslog socket, stopped and its
 * files removed at the end. */

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-id128.h>
#include <systemd/sd-journal.h>

#include "plugin-fixture.h"
#include "test-scratch.h"
#include "tracectl-child.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define JOURNALD_BINARY "/lib/systemd/systemd-journald"
#define DS "linux.systemd_journald"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;
static pid_t journald = -1;
static char ns[64];       /* our journal namespace */
static char dev_log[128]; /* its syslog socket */
static char run[64];      /* a distinct word in this run's messages */

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The namespace's sockets and journal files, wherever journald put them. */
static void remove_namespace_files(void) {
        char path[256];
        sd_id128_t machine;
        snprintf(path, sizeof(path), "/run/systemd/journal.%s", ns);
        (void) rm_rf(path);
        if (sd_id128_get_machine(&machine) < 0)
                return;
        static const char *const roots[] = { "/run/log/journal", "/var/log/journal" };
        for (size_t i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "%s/" SD_ID128_FORMAT_STR ".%s", roots[i], SD_ID128_FORMAT_VAL(machine),
                         ns);
                (void) rm_rf(path);
        }
}

static void stop_journald(void) {
        if (journald > 0) {
                kill(journald, SIGTERM);
                (void) waitpid(journald, NULL, 0);
                journald = -1;
        }
        if (ns[0])
                remove_namespace_files();
}

static void start_journald(void) {
        snprintf(ns, sizeof(ns), "tracedtest%d", (int) getpid());
        snprintf(dev_log, sizeof(dev_log), "/run/systemd/journal.%s/dev-log", ns);
        snprintf(run, sizeof(run), "run%d.%llu", (int) getpid(), (unsigned long long) boottime_ns());
        remove_namespace_files();
        cr_assert_eq(access(JOURNALD_BINARY, X_OK), 0,
                     "%s is missing: the test starts a journald of its own (install systemd)", JOURNALD_BINARY);
        char *argv[] = { (char *) JOURNALD_BINARY, ns, NULL };
        cr_assert_eq(posix_spawn(&journald, JOURNALD_BINARY, NULL, NULL, argv, environ), 0);
        struct stat st;
        for (int i = 0; i < 200 && stat(dev_log, &st) < 0; i++)
                spin_ms(ev, 50);
        cr_assert_eq(stat(dev_log, &st), 0, "journald (namespace %s) made no %s", ns, dev_log);
}

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
        start_journald();
}

static void teardown(void) {
        stop_journald();
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(journald, .init = setup, .fini = teardown, .timeout = 90);

/* Whether the namespace's journal holds the message of tag. */
static bool in_journal(const char *tag, const char *message) {
        sd_journal *j = NULL;
        char m1[256], m2[512];
        int found = 0;
        if (sd_journal_open_namespace(&j, ns, SD_JOURNAL_LOCAL_ONLY) < 0)
                return false;
        snprintf(m1, sizeof(m1), "SYSLOG_IDENTIFIER=%s", tag);
        snprintf(m2, sizeof(m2), "MESSAGE=%s", message);
        if (sd_journal_add_match(j, m1, 0) >= 0 && sd_journal_add_match(j, m2, 0) >= 0 && sd_journal_seek_head(j) >= 0)
                found = sd_journal_next(j);
        sd_journal_close(j);
        return found > 0;
}

struct logged {
        const char *tag, *prio; /* logger's -p, e.g. "user.err" */
        char message[192];
        pid_t pid;
};

/* logger(1) writes it to our journald; waits until it is in the journal. */
static void log_one(struct logged *l, const char *text) {
        snprintf(l->message, sizeof(l->message), "%s %s", run, text);
        char *argv[] = { (char *) "logger", (char *) "-u", dev_log, (char *) "-t", (char *) l->tag,
                         (char *) "-p", (char *) l->prio, (char *) "--", l->message, NULL };
        int status;
        cr_assert_eq(posix_spawnp(&l->pid, "logger", NULL, NULL, argv, environ), 0, "logger(1) is missing");
        cr_assert_eq(waitpid(l->pid, &status, 0), l->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "logger -u %s failed", dev_log);
        for (int i = 0; i < 200 && !in_journal(l->tag, l->message); i++)
                spin_ms(ev, 50);
        cr_assert(in_journal(l->tag, l->message), "journald never stored \"%s\"", l->message);
}

#define MAX_SEEN 64

struct seen {
        unsigned n, notes, counts;
        unsigned all; /* entries in the trace, this run's or not */
        uint64_t num_total, num_failed;
        struct {
                uint64_t ts;
                uint32_t pid, prio;
                bool has_prio;
                char tag[64], message[192], transport[32], comm[32];
        } e[MAX_SEEN];
};

static void collect(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct seen *s = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_JOURNALD_EVENT)
                return;
        const Perfetto__Protos__SystemdJournaldEvent *j = p->journald_event;
        if (j->has_num_total || j->has_num_failed) {
                s->counts++;
                s->num_total = j->num_total;
                s->num_failed = j->num_failed;
                return;
        }
        if (j->tag && strcmp(j->tag, "traced-journald") == 0 && !j->transport) {
                s->notes++;
                return;
        }
        s->all++;
        /* Only this run's entries: the namespace is ours, but be sure. */
        if (!j->message || strncmp(j->message, run, strlen(run)) != 0 || s->n == MAX_SEEN)
                return;
        cr_assert(p->has_timestamp, "an entry without a timestamp");
        s->e[s->n].ts = p->timestamp;
        s->e[s->n].pid = j->pid;
        s->e[s->n].has_prio = j->has_prio;
        s->e[s->n].prio = j->prio;
        snprintf(s->e[s->n].tag, sizeof(s->e[s->n].tag), "%s", j->tag ? j->tag : "");
        snprintf(s->e[s->n].message, sizeof(s->e[s->n].message), "%s", j->message);
        snprintf(s->e[s->n].transport, sizeof(s->e[s->n].transport), "%s", j->transport ? j->transport : "");
        snprintf(s->e[s->n].comm, sizeof(s->e[s->n].comm), "%s", j->comm ? j->comm : "");
        s->n++;
}

static int find(const struct seen *s, const struct logged *l) {
        for (unsigned i = 0; i < s->n; i++)
                if (strcmp(s->e[i].message, l->message) == 0)
                        return (int) i;
        return -1;
}

static char config[1024];

static const char *config_of(const char *journald_config) {
        snprintf(config, sizeof(config),
                 "buffers { size_kb: 4096 } write_into_file: true file_write_period_ms: 200 flush_period_ms: 1000\n"
                 "data_sources { config { name: \"" DS "\" journald_config { journal_namespace: \"%s\" %s } } }\n",
                 ns, journald_config);
        return config;
}

/* Whether `tracectl COMMAND` on the recorded trace prints the line. */
static bool tracectl_says(const char *command, const char *line) {
        char cmd[1024], buf[2048];
        snprintf(cmd, sizeof(cmd), "%s %s %s/recorded.pftrace", TRACECTL_BINARY, command, inst.dir);
        FILE *f = popen(cmd, "r");
        cr_assert_not_null(f);
        bool found = false;
        while (fgets(buf, sizeof(buf), f))
                found |= strstr(buf, line) != NULL;
        cr_assert_eq(pclose(f), 0, "%s failed", cmd);
        return found;
}

struct two {
        struct logged err, info;
        uint64_t before, after;
};

static void log_two(void *userdata) {
        struct two *t = userdata;
        t->before = boottime_ns();
        log_one(&t->err, "the disk is on fire");
        log_one(&t->info, "all is well again");
        t->after = boottime_ns();
}

Test(journald, entries_with_priority_tag_and_time) {
        struct two t = { .err = { .tag = "tracedtesta", .prio = "user.err" },
                         .info = { .tag = "tracedtestb", .prio = "daemon.info" } };
        struct seen s = {};
        fixture_record(&inst, ev, DS, config_of(""), log_two, &t, collect, &s);
        cr_assert_eq(s.notes, 0, "a note although the journal is there");
        struct logged *l[2] = { &t.err, &t.info };
        uint32_t prio[2] = { 3, 6 };
        for (int k = 0; k < 2; k++) {
                int i = find(&s, l[k]);
                cr_assert_geq(i, 0, "\"%s\" is not in the trace (%u entries of this run are)", l[k]->message, s.n);
                cr_assert(s.e[i].has_prio);
                cr_assert_eq(s.e[i].prio, prio[k], "priority %u, logged %s", s.e[i].prio, l[k]->prio);
                cr_assert_str_eq(s.e[i].tag, l[k]->tag);
                cr_assert_eq(s.e[i].pid, (uint32_t) l[k]->pid, "pid %u, logger was %d", s.e[i].pid, (int) l[k]->pid);
                cr_assert_str_eq(s.e[i].transport, "syslog");
                /* journald reads _COMM from /proc when it takes the entry:
                 * a logger that has already exited (a loaded machine) leaves
                 * none, which the plugin must pass on as absent. */
                if (s.e[i].comm[0])
                        cr_assert_str_eq(s.e[i].comm, "logger");
                else
                        cr_log_info("entry %d: journald recorded no _COMM (logger had exited)", k);
                /* journald stamps an entry when it receives it: between
                 * our logger's start and our seeing it stored (1 ms of
                 * slack for reading the two clocks apart). */
                cr_assert(s.e[i].ts + 1000000 >= t.before && s.e[i].ts <= t.after + 1000000,
                          "entry at boot time %llu, logged within [%llu, %llu]", (unsigned long long) s.e[i].ts,
                          (unsigned long long) t.before, (unsigned long long) t.after);
        }
        cr_assert_eq(s.n, 2, "%u entries of this run, 2 logged", s.n);
        cr_assert_geq(s.counts, 1, "no counts in the trace");
        /* journald may add lines of its own meanwhile (a loaded machine):
         * the count is of every entry written into the trace. */
        cr_assert_eq(s.num_total, s.all, "the data source counted %llu entries, the trace holds %u",
                     (unsigned long long) s.num_total, s.all);
        cr_assert_eq(s.num_failed, 0);
        char stopped[64];
        snprintf(stopped, sizeof(stopped), " stopped: %u entries written, 0 failed", s.all);
        cr_assert(fixture_log_count(&inst, DS " instance ", stopped) >= 1, "no stop line with the counts in the log");

        /* What tracectl shows of them. */
        char want[512];
        snprintf(want, sizeof(want), "journald_event: err tracedtesta[%d] (syslog): %s\n", (int) t.err.pid,
                 t.err.message);
        cr_assert(tracectl_says("print", want), "tracectl print has no line \"%s\"", want);
        /* print --journal: those lines alone (traced(8)'s way to read a
         * failed unit's snapshot). */
        snprintf(want, sizeof(want), " err tracedtesta[%d] (syslog): %s\n", (int) t.err.pid, t.err.message);
        cr_assert(tracectl_says("print --journal", want), "tracectl print --journal has no line \"%s\"", want);
        cr_assert(!tracectl_says("print --journal", "journald_event:"), "print --journal printed packet types");
        cr_assert(!tracectl_says("print --journal", "clock_snapshot"), "print --journal printed other packets");
        /* Ours are the one err and one of the info ones; journald's own
         * lines, if any, are not errors. */
        if (s.all == 2)
                snprintf(want, sizeof(want), "Journal:        2 entries (1 err, 1 info)\n");
        else
                snprintf(want, sizeof(want), "Journal:        %u entries (1 err, ", s.all);
        cr_assert(tracectl_says("summary", want), "tracectl summary does not count the entries: no \"%s\"", want);
        snprintf(want, sizeof(want), "the data source counted %u written, 0 failed\n", s.all);
        cr_assert(tracectl_says("summary", want), "no \"%s\" in tracectl summary", want);
}

struct filtered {
        struct logged keep_a, low_a, other, keep_b;
};

static void log_filtered(void *userdata) {
        struct filtered *f = userdata;
        log_one(&f->keep_a, "kept: an error of A");
        log_one(&f->low_a, "dropped: info is below min_prio");
        log_one(&f->other, "dropped: not an identifier asked for");
        log_one(&f->keep_b, "kept: a warning of B");
}

Test(journald, min_prio_and_identifiers_drop_the_rest) {
        struct filtered f = { .keep_a = { .tag = "tracedtesta", .prio = "user.err" },
                              .low_a = { .tag = "tracedtesta", .prio = "user.info" },
                              .other = { .tag = "tracedtestc", .prio = "user.crit" },
                              .keep_b = { .tag = "tracedtestb", .prio = "user.warning" } };
        struct seen s = {};
        fixture_record(&inst, ev, DS,
                       config_of("min_prio: 4 filter_identifiers: \"tracedtesta\" filter_identifiers: \"tracedtestb\""),
                       log_filtered, &f, collect, &s);
        cr_assert_geq(find(&s, &f.keep_a), 0, "the error of A is missing");
        cr_assert_geq(find(&s, &f.keep_b), 0, "the warning of B is missing");
        cr_assert_lt(find(&s, &f.low_a), 0, "min_prio 4 kept an info entry");
        cr_assert_lt(find(&s, &f.other), 0, "filter_identifiers kept another identifier");
        cr_assert_eq(s.n, 2);
        cr_assert_eq(s.num_total, 2, "the data source counted %llu entries", (unsigned long long) s.num_total);
}

static struct logged before_start;

static void nothing(void *unused) {
        (void) unused;
}

Test(journald, from_the_start_or_the_look_back) {
        before_start = (struct logged) { .tag = "tracedtesta", .prio = "user.notice" };
        log_one(&before_start, "logged before the session");
        struct seen s = {};
        fixture_record(&inst, ev, DS, config_of(""), nothing, NULL, collect, &s);
        cr_assert_lt(find(&s, &before_start), 0, "an entry from before the start was recorded");
        cr_assert_eq(s.num_total, 0);
        memset(&s, 0, sizeof(s));
        fixture_record(&inst, ev, DS, config_of("lookback_ms: 600000"), nothing, NULL, collect, &s);
        int i = find(&s, &before_start);
        cr_assert_geq(i, 0, "lookback_ms did not bring the earlier entry");
        cr_assert_eq(s.e[i].prio, 5);
}

Test(journald, no_journal_is_a_note_not_an_error) {
        /* A namespace no journald serves: no files at all. */
        stop_journald();
        struct seen s = {};
        unsigned before = fixture_log_count(&inst, DS " instance ", "no journal files of namespace");
        fixture_record(&inst, ev, DS, config_of(""), nothing, NULL, collect, &s);
        cr_assert_eq(s.notes, 1, "%u notes in the trace", s.notes);
        cr_assert_eq(s.n, 0);
        cr_assert_geq(s.counts, 1, "the instance ran: its counts are in the trace");
        cr_assert_eq(s.num_failed, 0);
        cr_assert_gt(fixture_log_count(&inst, DS " instance ", "no journal files of namespace"), before,
                     "the log does not say there is no journal");
}

struct late {
        struct logged entry;
};

/* journald starts once the recording runs, and logs. */
static void start_and_log(void *userdata) {
        struct late *l = userdata;
        start_journald();
        log_one(&l->entry, "logged by a journald started after the session");
        /* Found by the data source's next look at the journal. */
        spin_ms(ev, 2500);
}

/* The note promises entries once journald writes them: a journal that
 * appears after the data source started (journald started later, its
 * directories new) is read from the data source's start on. */
Test(journald, a_journal_that_appears_later_is_recorded) {
        stop_journald();
        struct late l = { .entry = { .tag = "tracedtestlate", .prio = "user.warning" } };
        struct seen s = {};
        fixture_record(&inst, ev, DS, config_of(""), start_and_log, &l, collect, &s);
        cr_assert_eq(s.notes, 1, "no note that there was no journal at the start");
        int i = find(&s, &l.entry);
        cr_assert_geq(i, 0, "the entry of the journal that appeared later is not in the trace");
        cr_assert_eq(s.e[i].prio, 4);
        /* journald's own start-up messages are in that journal too. */
        char args[600];
        snprintf(args, sizeof(args), "summary --json %s/recorded.pftrace", inst.dir);
        cr_assert(tracectl_check_json(ev, inst.dir, inst.consumer_path, args,
                                      "j = d['journal']\n"
                                      "assert j['entries'] >= 1 and j['by_priority']['warning'] >= 1, j\n"
                                      "assert j['notes'] == 1 and j['counted_written'] == j['entries'], j"),
                  "summary --json does not count it");
}
