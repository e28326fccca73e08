/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* raw_syscalls recorded by the real traced and its ftrace plugin while dd
 * copies byte by byte: tracectl print names the system calls, and
 * tracectl summary counts and times them per system call. */

#include <criterion/criterion.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(syscalls, .init = setup, .fini = teardown, .timeout = 120);

static void run_dd(void *userdata) {
        pid_t *pid = userdata;
        const char *argv[] = { "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=3000", "status=none", NULL };
        int r = posix_spawnp(pid, "dd", NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(r, 0, "dd: %s", strerror(r));
        int st;
        cr_assert_eq(waitpid(*pid, &st, 0), *pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void nothing(const Perfetto__Protos__TracePacket *p, void *userdata) {
}

/* tracectl ARGS FILE | grep PATTERN: how many lines match. */
static unsigned count_lines(const char *args, const char *pattern) {
        char *cmd, line[512];
        cr_assert_gt(asprintf(&cmd, "%s %s %s/recorded.pftrace", TRACECTL_BINARY, args, inst.dir), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        unsigned n = 0;
        while (fgets(line, sizeof(line), p))
                if (strstr(line, pattern))
                        n++;
        cr_assert_eq(pclose(p), 0, "%s failed", cmd);
        free(cmd);
        return n;
}

/* The calls the summary's syscall table counts, and its row for name
 * (0: not among the rows shown, which are the top ones by time). */
static unsigned long long summary_calls(const char *name, unsigned long long *ret_all) {
        char *cmd, line[512];
        cr_assert_gt(asprintf(&cmd, "%s summary %s/recorded.pftrace", TRACECTL_BINARY, inst.dir), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        unsigned long long calls = 0;
        bool table = false;
        char n[64];
        while (fgets(line, sizeof(line), p)) {
                if (strncmp(line, "Syscalls:", 9) == 0)
                        table = true;
                else if (table && line[0] != ' ')
                        table = false;
                unsigned long long c;
                if (strncmp(line, "Syscalls:", 9) == 0 && sscanf(line, "Syscalls: %llu calls", &c) == 1)
                        *ret_all = c;
                if (table && sscanf(line, " %63s %llu", n, &c) == 2 && strcmp(n, name) == 0)
                        calls = c;
        }
        cr_assert_eq(pclose(p), 0);
        free(cmd);
        return calls;
}

Test(syscalls, print_names_them_and_summary_counts_them) {
        if (!fixture_tracefs_usable())
                cr_skip_test("tracefs is not mounted here");
        pid_t pid = 0;
        fixture_record(&inst, ev, "linux.ftrace",
                       "buffers { size_kb: 65536 }\n"
                       "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                       "  ftrace_events: \"raw_syscalls/sys_enter\" ftrace_events: \"raw_syscalls/sys_exit\"\n"
                       "  instance_name: \"syscalls\"\n"
                       "} } }\n"
                       "write_into_file: true file_write_period_ms: 250\n",
                       run_dd, &pid, nothing, NULL);
        char pat[64];
        snprintf(pat, sizeof(pat), "pid %d sys_enter", (int) pid);
        unsigned enters = count_lines("print", pat);
        snprintf(pat, sizeof(pat), "pid %d sys_enter id: 0", (int) pid);
        unsigned reads = count_lines("print", pat);
        cr_log_info("dd: %u system calls, %u read", enters, reads);
        cr_assert_geq(reads, 3000, "dd's reads: %u", reads);
        cr_assert_geq(count_lines("print", " (read)"), 3000 * 2, "entries and exits named read");
        cr_assert_geq(count_lines("print", " (write)"), 3000 * 2);
        /* All of dd's calls are counted; its rows are shown when among the
         * top ones by time (a busy machine's threads wait longer). */
        unsigned long long all = 0, rd = summary_calls("read", &all);
        cr_assert_geq(all, (unsigned long long) enters, "the table counts %llu calls, dd made %u", all, enters);
        cr_assert(rd == 0 || rd >= 3000, "read: %llu calls", rd);
        /* The same in summary --json. */
        char *cmd;
        cr_assert_gt(asprintf(&cmd,
                              "set -o pipefail; %s summary --json %s/recorded.pftrace | python3 -c '"
                              "import json, sys\n"
                              "rows = json.load(sys.stdin)[\"syscalls\"]\n"
                              "assert rows and all(set(r) == {\"name\", \"calls\", \"errors\", \"total_ms\", \"max_us\"} for r in rows), rows\n"
                              "assert all(r[\"calls\"] > 0 for r in rows), rows\n"
                              "d = {r[\"name\"]: r for r in rows}\n"
                              "assert \"read\" not in d or d[\"read\"][\"calls\"] >= 3000, d'",
                              TRACECTL_BINARY, inst.dir),
                     0);
        char *argv[] = { (char *) "bash", (char *) "-c", cmd, NULL };
        pid_t sh;
        cr_assert_eq(posix_spawnp(&sh, "bash", NULL, NULL, argv, environ), 0);
        int st;
        cr_assert_eq(waitpid(sh, &st, 0), sh);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "summary --json: no syscall rows as documented");
        free(cmd);
}
