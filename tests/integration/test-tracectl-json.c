/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl query --json against the real traced with a session running,
 * and tracectl summary --json on recorded traces: each output is parsed
 * by a JSON parser (python3's) and its documented keys checked. */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-consumer.h"
#include "tracectl-child.h"
#include "traced-instance.h"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(tracectl_json, .init = setup, .fini = teardown, .timeout = 60);

static void check_json(const char *args, const char *check) {
        cr_assert(tracectl_check_json(ev, inst.dir, inst.consumer_path, args, check),
                  "tracectl %s: the JSON check failed:\n%s", args, check);
}

Test(tracectl_json, query) {
        struct test_consumer c;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.nobody", 60000);
        cr_assert_eq(test_consumer_enable(&c, cfg, -1), 0);
        test_config_free(cfg);
        check_json("query --json",
                   "assert isinstance(d['service_version'], str)\n"
                   "assert isinstance(d['producers'], list) and isinstance(d['data_sources'], list)\n"
                   "assert d['num_sessions'] >= 1, d\n"
                   "s = d['tracing_sessions'][0]\n"
                   "for k in ('id', 'state', 'consumer_uid', 'unique_session_name', 'num_data_sources',\n"
                   "          'buffer_size_kb', 'buffers_kb', 'duration_ms', 'start_realtime_ns', 'is_started',\n"
                   "          'detach_key', 'output_path'):\n"
                   "    assert k in s, k\n"
                   "assert s['buffer_size_kb'] == 1024 and s['buffers_kb'] == [1024], s\n"
                   "assert s['duration_ms'] == 60000 and s['detach_key'] is None, s\n"
                   "import time\n"
                   "assert abs(s['start_realtime_ns'] / 1e9 - time.time()) < 3600, s");
        test_consumer_free(&c);
}

Test(tracectl_json, summary_of_a_profile) {
        check_json("summary --json " TEST_DATA_DIR "/profiling/trace-perf-python3.pftrace",
                   "assert d['complete'] is True and d['packets'] == 231, d\n"
                   "assert d['packet_types']['perf_sample'] == 213\n"
                   "assert d['ftrace'] is None\n"
                   "w = d['stack_walks']\n"
                   "assert (w['total'], w['sampled'], w['sampled_cut'], w['sampled_cut_by']) == (0, 196, 2, {'unwind_info': 2}), w\n"
                   "p = d['perf']\n"
                   "assert (p['samples'], p['with_callstack'], p['unwind_errors'], p['skipped'], p['lost']) == (196, 196, 2, 17, 0), p\n"
                   "assert p['processes'][0]['pid'] == 8 and p['processes'][0]['samples'] == 196\n"
                   "assert d['system']['sysname'] == 'Linux'\n"
                   "for k in ('file', 'file_bytes', 'bytes', 'undecodable_packets', 'first_ts_ns', 'last_ts_ns',\n"
                   "          'sequences', 'sequences_with_data_losses', 'processes_in_tree', 'top_threads',\n"
                   "          'top_processes', 'service_stats'):\n"
                   "    assert k in d, k");
}

Test(tracectl_json, summary_of_a_sched_trace) {
        check_json("summary --json " TEST_DATA_DIR "/ftrace/compact-sched.pftrace",
                   "f = d['ftrace']\n"
                   "assert f['events'] > 0 and f['sched_switch'] > 0, f\n"
                   "assert isinstance(f['events_per_cpu'], list) and sum(f['events_per_cpu']) == f['events'], f\n"
                   "t = d['top_threads'][0]\n"
                   "assert set(t) == {'tid', 'name', 'cpu_ms', 'switches'}, t\n"
                   "p = d['top_processes'][0]\n"
                   "assert set(p) == {'pid', 'name', 'cpu_ms', 'threads', 'proc_cpu_ms', 'rss_kb'}, p\n"
                   "assert p['cpu_ms'] > 0");
}

/* A truncated file: its size is the file's, and what was read of it is
 * said apart. */
Test(tracectl_json, summary_of_a_truncated_file) {
        char path[512], args[600];
        size_t len;
        char *data = test_slurp(TEST_DATA_DIR "/profiling/trace-perf-python3.pftrace", &len);
        cr_assert_not_null(data);
        cr_assert_gt(len, 1000);
        snprintf(path, sizeof(path), "%s/cut.pftrace", inst.dir);
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        /* Cut in the middle of a packet. */
        cr_assert_eq(fwrite(data, 1, len - 7, f), len - 7);
        fclose(f);
        free(data);
        snprintf(args, sizeof(args), "summary --json %s", path);
        char check[512];
        snprintf(check, sizeof(check),
                 "assert d['file_bytes'] == %zu and d['readable_bytes'] < d['file_bytes'], d\n"
                 "assert d['complete'] is False and d['whole'] is False, d",
                 len - 7);
        /* Exit status 1: the summary covers only the packets before the cut. */
        cr_assert(tracectl_check_json_status(ev, inst.dir, inst.consumer_path, args, 1, check),
                  "the JSON check failed:\n%s", check);
        char cmd[1024], line[1024] = "", expect[128];
        snprintf(cmd, sizeof(cmd), "%s summary %s 2>/dev/null", TRACECTL_BINARY, path);
        FILE *p = popen(cmd, "r");
        cr_assert_not_null(p);
        cr_assert_not_null(fgets(line, sizeof(line), p));
        pclose(p);
        snprintf(expect, sizeof(expect), "(%zu bytes, of which ", len - 7);
        cr_assert(strstr(line, expect) != NULL, "%s", line);
        (void) unlink(path);
}
