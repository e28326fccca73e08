/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
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
