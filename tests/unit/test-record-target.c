/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pbtxt/pbtxt.h"
#include "record-target.h"
#include "test-scratch.h"

static Perfetto__Protos__TraceConfig *parse(const char *text) {
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        cr_assert_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), "t", &m, &err), 0,
                     "%s", err);
        return (Perfetto__Protos__TraceConfig *) m;
}

Test(record_target, pids) {
        pid_t pids[RECORD_TARGET_MAX_PIDS];
        size_t n = 0;
        cr_assert_eq(record_target_parse_pids("12,34", pids, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_eq(pids[0], 12);
        cr_assert_eq(pids[1], 34);
        cr_assert_eq(record_target_parse_pids("1,,2", pids, &n), -EINVAL, "an empty pid");
        cr_assert_eq(record_target_parse_pids("x", pids, &n), -EINVAL);
        cr_assert_eq(record_target_parse_pids("-3", pids, &n), -EINVAL);
        cr_assert_eq(record_target_parse_pids("0", pids, &n), -EINVAL);
}

Test(record_target, the_profilers_are_narrowed) {
        Perfetto__Protos__TraceConfig *cfg = parse(
                "data_sources { config { name: \"linux.perf\" perf_event_config { callstack_sampling { } } } }\n"
                "data_sources { config { name: \"linux.perf\" perf_event_config { target_pid: 1 } } }\n"
                "data_sources { config { name: \"linux.bpf_stack\" } }\n"
                "data_sources { config { name: \"linux.ftrace\" } }\n");
        pid_t pids[] = { 7, 8 };
        cr_assert_eq(record_target_apply(cfg, pids, 2), 3);
        const Perfetto__Protos__PerfEventConfig__Scope *sc =
                cfg->data_sources[0]->config->perf_event_config->callstack_sampling->scope;
        cr_assert_not_null(sc);
        cr_assert_eq(sc->n_target_pid, 2);
        cr_assert_eq(sc->target_pid[1], 8);
        const Perfetto__Protos__PerfEventConfig *flat = cfg->data_sources[1]->config->perf_event_config;
        cr_assert_eq(flat->n_target_pid, 3, "the older flat field gets them");
        const Perfetto__Protos__BpfStackConfig *bc = cfg->data_sources[2]->config->bpf_stack_config;
        cr_assert_eq(bc->n_filter, 2);
        cr_assert_str_eq(bc->filter[0], "pid=7");
        cr_assert_null(cfg->data_sources[3]->config->perf_event_config);
        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
}

Test(record_target, a_command_runs_only_when_released) {
        char dir[256], marker[300];
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "traced-test-record-target-"), 0);
        snprintf(marker, sizeof(marker), "%s/ran", dir);
        char *argv[] = { (char *) "touch", marker, NULL };

        struct record_command c;
        cr_assert_eq(record_command_fork(&c, argv), 0);
        cr_assert_not(record_command_poll(&c), "it ran away");
        record_command_finish(&c); /* never released: ends without running */
        cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 127);
        cr_assert_eq(access(marker, F_OK), -1, "a command never released ran");

        cr_assert_eq(record_command_fork(&c, argv), 0);
        record_command_release(&c);
        record_command_finish(&c);
        cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
        cr_assert_eq(access(marker, F_OK), 0, "a released command did not run");
        cr_assert_eq(test_scratch_remove(dir), 0);
}

/* What execvp would find, found before anything is recorded. */
Test(record_target, a_command_is_found_as_execvp_finds_it) {
        cr_assert_eq(record_command_find("sh"), 0, "sh is not found in $PATH");
        cr_assert_eq(record_command_find("/bin/sh"), 0);
        cr_assert_eq(record_command_find("/nonexistent/cmd"), -ENOENT);
        cr_assert_eq(record_command_find("traced-test-no-such-command"), -ENOENT);
        cr_assert_eq(record_command_find("/"), -EISDIR);
        cr_assert_eq(record_command_find(""), -ENOENT);

        char dir[256], file[300];
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "traced-test-record-target-"), 0);
        snprintf(file, sizeof(file), "%s/not-executable", dir);
        FILE *f = fopen(file, "we");
        cr_assert_not_null(f);
        fclose(f);
        cr_assert_eq(record_command_find(file), -EACCES);
        cr_assert_eq(test_scratch_remove(dir), 0);
}

/* A released command whose exec fails says why (not only status 127,
 * which a command may exit with itself). */
Test(record_target, an_exec_that_fails_is_told) {
        char *argv[] = { (char *) "/nonexistent/cmd", NULL };
        struct record_command c;
        cr_assert_eq(record_command_fork(&c, argv), 0);
        record_command_release(&c);
        record_command_finish(&c);
        cr_assert(c.exited);
        cr_assert_eq(c.exec_error, ENOENT);

        char *sh[] = { (char *) "sh", (char *) "-c", (char *) "exit 127", NULL };
        cr_assert_eq(record_command_fork(&c, sh), 0);
        record_command_release(&c);
        record_command_finish(&c);
        cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 127);
        cr_assert_eq(c.exec_error, 0, "a command that ran is said not to have");
}

static unsigned polls;
static bool give_up_after_three(void *userdata) {
        return ++polls > 3;
}

/* Waiting for a command can be given up: it runs on, and is not waited
 * for at the end. */
Test(record_target, waiting_for_a_command_can_be_given_up) {
        char *argv[] = { (char *) "sleep", (char *) "30", NULL };
        struct record_command c;
        cr_assert_eq(record_command_fork(&c, argv), 0);
        record_command_release(&c);
        cr_assert_not(record_command_wait(&c, -1, give_up_after_three, NULL));
        cr_assert(c.abandoned);
        pid_t pid = c.pid;
        record_command_finish(&c); /* returns at once */
        cr_assert_eq(kill(pid, 0), 0, "the command does not run on");
        kill(pid, SIGKILL);
        cr_assert_eq(waitpid(pid, NULL, 0), pid);
}
