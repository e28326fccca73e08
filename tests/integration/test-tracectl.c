/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl against the real traced (socket-activated), with a producer in
 * this process; the files tracectl leaves behind are decoded and checked. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "raw-producer.h"
#include "test-consumer.h"
#include "traced-instance.h"
#include "trace-file-checks.h"
#include "tracectl-child.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(tracectl, .init = setup, .fini = teardown, .timeout = 60);

static void spawn_tracectl(struct tracectl_child *c, const char *const *args) {
        tracectl_child_spawn(c, inst.dir, inst.consumer_path, args, 0);
}

/* Runs the loop (serving the producer) until the child exits. */
static int wait_child(struct tracectl_child *c, unsigned timeout_ms) {
        return tracectl_child_wait(c, ev, timeout_ms);
}

static bool started(struct raw_producer *p) {
        return p->n_start > 0;
}

Test(tracectl, record_with_text_config) {
        struct raw_producer prod;
        struct tracectl_child c;
        char cfg[512], out[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 300;
        prod.payload_size = 40;
        snprintf(cfg, sizeof(cfg), "%s/config.pbtxt", inst.dir);
        snprintf(out, sizeof(out), "%s/trace.pftrace", inst.dir);
        FILE *f = fopen(cfg, "w");
        fprintf(f, "# an upstream-style text config\n"
                   "buffers { size_kb: 4096 fill_policy: RING_BUFFER }\n"
                   "data_sources { config { name: \"test.data\" } }\n"
                   "duration_ms: 800\n"
                   "write_into_file: true\nfile_write_period_ms: 200\n");
        fclose(f);
        spawn_tracectl(&c, (const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL });
        int st = wait_child(&c, 20000);
        char *so = test_slurp(c.out, NULL), *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d\nstdout:\n%s\nstderr:\n%s", st, so, se);
        cr_assert_eq(tracectl_count_test_packets(out, 40), 300);
        cr_assert(strstr(so, "for_testing") != NULL, "the summary does not list the packets:\n%s", so);
        cr_assert(strstr(so, "trace_config") != NULL);
        free(so);
        free(se);
        raw_producer_free(&prod);
}

Test(tracectl, record_with_quick_flags) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 100;
        prod.payload_size = 10;
        snprintf(out, sizeof(out), "%s/quick.pftrace", inst.dir);
        spawn_tracectl(&c, (const char *const[]) { "record", "-t", "700ms", "-b", "2mb", "--no-process-stats", "--ds",
                                                   "test.data", "-o", out, NULL });
        int st = wait_child(&c, 20000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "warning") == NULL, "tracectl warns about its own config: %s", se);
        free(se);
        cr_assert_eq(tracectl_count_test_packets(out, 10), 100);
        /* The config the service recorded is the quick one. */
        struct tracectl_child q;
        spawn_tracectl(&q, (const char *const[]) { "print", out, NULL });
        cr_assert_eq(wait_child(&q, 10000), 0);
        char *so = test_slurp(q.out, NULL);
        cr_assert(strstr(so, "size_kb: 2048") != NULL, "print output:\n%.2000s", so);
        cr_assert(strstr(so, "duration_ms: 700") != NULL);
        /* write_into_file without a flush period is an error in
         * trace_processor's stats (config_write_into_file_no_flush). */
        cr_assert(strstr(so, "write_into_file: true") != NULL, "print output:\n%.2000s", so);
        cr_assert(strstr(so, "flush_period_ms: 5000") != NULL, "print output:\n%.2000s", so);
        free(so);
        raw_producer_free(&prod);
}

/* A user's config that trace_processor would flag is recorded as asked,
 * with a warning naming what trace_processor will report. */
Test(tracectl, config_trace_processor_flags_is_warned_about) {
        struct raw_producer prod;
        struct tracectl_child c;
        char cfg[512], out[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 50;
        prod.payload_size = 20;
        snprintf(cfg, sizeof(cfg), "%s/flagged.pbtxt", inst.dir);
        snprintf(out, sizeof(out), "%s/flagged.pftrace", inst.dir);
        FILE *f = fopen(cfg, "w");
        fprintf(f, "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
                   "buffers { size_kb: 1024 fill_policy: DISCARD }\n"
                   "data_sources { config { name: \"test.data\" } }\n"
                   "duration_ms: 500\n"
                   "write_into_file: true\n");
        fclose(f);
        spawn_tracectl(&c, (const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, "--no-summary", NULL });
        int st = wait_child(&c, 20000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "a warning is not fatal: tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "config_write_into_file_no_flush") != NULL, "stderr: %s", se);
        cr_assert(strstr(se, "buffers[1]") != NULL && strstr(se, "config_write_into_file_discard") != NULL,
                  "stderr: %s", se);
        cr_assert(strstr(se, "buffers[0]") == NULL, "the RING_BUFFER is fine: %s", se);
        free(se);
        cr_assert_eq(tracectl_count_test_packets(out, 20), 50);

        /* Without write_into_file in the config, tracectl picks the flush
         * period that goes with the file it writes: nothing to warn. */
        f = fopen(cfg, "w");
        fprintf(f, "buffers { size_kb: 1024 }\n"
                   "data_sources { config { name: \"test.data\" } }\n"
                   "duration_ms: 300\n");
        fclose(f);
        spawn_tracectl(&c, (const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, "--no-summary", NULL });
        st = wait_child(&c, 20000);
        se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d: %s", st, se);
        cr_assert(strstr(se, "warning") == NULL, "stderr: %s", se);
        free(se);
        raw_producer_free(&prod);
}

Test(tracectl, bad_config_is_a_positioned_error) {
        struct tracectl_child c;
        char cfg[512], out[512];
        snprintf(cfg, sizeof(cfg), "%s/bad.pbtxt", inst.dir);
        snprintf(out, sizeof(out), "%s/never.pftrace", inst.dir);
        FILE *f = fopen(cfg, "w");
        fprintf(f, "buffers {\n  size_kb: 1024\n}\nbuffers {\n  bufer_size_kb: 2\n}\n");
        fclose(f);
        spawn_tracectl(&c, (const char *const[]) { "record", "-c", cfg, "--txt", "-o", out, NULL });
        cr_assert_eq(wait_child(&c, 10000), 3);
        char *se = test_slurp(c.err_path, NULL);
        char expected[700];
        snprintf(expected, sizeof(expected),
                 "%s:5:3: unknown field \"bufer_size_kb\" in perfetto.protos.TraceConfig.BufferConfig", cfg);
        cr_assert(strstr(se, expected) != NULL, "stderr was: %s", se);
        free(se);

        spawn_tracectl(&c, (const char *const[]) { "record", "-t", "soon", "-o", out, NULL });
        cr_assert_eq(wait_child(&c, 10000), 2, "a usage error must exit 2");
        spawn_tracectl(&c, (const char *const[]) { "frobnicate", NULL });
        cr_assert_eq(wait_child(&c, 10000), 2);
}

Test(tracectl, unreachable_service) {
        struct tracectl_child c;
        char *argv[] = { (char *) TRACECTL_BINARY, (char *) "--socket", (char *) "/nonexistent/consumer.sock",
                         (char *) "query", NULL };
        c.pid = 0;
        snprintf(c.out, sizeof(c.out), "/dev/null");
        cr_assert_eq(posix_spawn(&c.pid, TRACECTL_BINARY, NULL, NULL, argv, environ), 0);
        int st;
        waitpid(c.pid, &st, 0);
        cr_assert(WIFEXITED(st));
        cr_assert_eq(WEXITSTATUS(st), 4);
}

Test(tracectl, ctrl_c_leaves_a_complete_file) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
        prod.packets_at_start = 200;
        prod.payload_size = 30;
        snprintf(out, sizeof(out), "%s/interrupted.pftrace", inst.dir);
        spawn_tracectl(&c, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds", "test.data",
                                                   "-o", out, NULL });
        cr_assert(raw_producer_spin_until(&prod, started, 10000));
        spin_ms(ev, 200);
        kill(c.pid, SIGINT);
        int st = wait_child(&c, 20000);
        char *se = test_slurp(c.err_path, NULL);
        cr_assert_eq(st, 0, "tracectl exited %d after Ctrl-C: %s", st, se);
        free(se);
        cr_assert_geq(prod.n_flush, 1, "Ctrl-C did not flush");
        cr_assert_eq(tracectl_count_test_packets(out, 30), 200);
        /* And the file ends with the service's stats. */
        struct tracectl_child s;
        spawn_tracectl(&s, (const char *const[]) { "summary", out, NULL });
        cr_assert_eq(wait_child(&s, 10000), 0);
        char *so = test_slurp(s.out, NULL);
        cr_assert(strstr(so, "trace_stats") != NULL, "%s", so);
        free(so);
        raw_producer_free(&prod);
}

Test(tracectl, query_and_detach) {
        struct raw_producer prod;
        struct tracectl_child c;
        char out[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "query-me", "test.data", 0, 0), 0);
        spin_ms(ev, 100);
        spawn_tracectl(&c, (const char *const[]) { "query", NULL });
        cr_assert_eq(wait_child(&c, 10000), 0);
        char *so = test_slurp(c.out, NULL);
        cr_assert(strstr(so, "query-me") != NULL && strstr(so, "test.data") != NULL, "%s", so);
        free(so);

        prod.packets_at_start = 20;
        prod.payload_size = 5;
        snprintf(out, sizeof(out), "%s/detached.pftrace", inst.dir);
        spawn_tracectl(&c, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds", "test.data",
                                                   "--detach", "k1", "-o", out, NULL });
        cr_assert_eq(wait_child(&c, 10000), 0);
        cr_assert(raw_producer_spin_until(&prod, started, 5000));
        spawn_tracectl(&c, (const char *const[]) { "stop", "k1", NULL });
        cr_assert_eq(wait_child(&c, 20000), 0);
        cr_assert_eq(tracectl_count_test_packets(out, 5), 20);
        raw_producer_free(&prod);
}

/* A consumer killed outright while traced is told to stop: the service
 * answers a consumer that is gone while finishing its session, and must
 * neither crash nor lose its exit status. (The core used to free the
 * session from inside that answer and then use it.) */
Test(tracectl, killed_consumer_and_shutdown_together) {
        for (int round = 0; round < 4; round++) {
                if (round > 0) {
                        cr_assert_eq(traced_instance_stop(&inst), 0, "round %d: traced did not exit cleanly", round);
                        cr_assert_eq(traced_instance_restart(&inst, true, NULL), 0);
                }
                struct raw_producer prod;
                struct tracectl_child c;
                char out[512];
                cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 1024 * 1024, 0), 0);
                prod.packets_at_start = 50;
                prod.payload_size = 30;
                snprintf(out, sizeof(out), "%s/killed-%d.pftrace", inst.dir, round);
                spawn_tracectl(&c, (const char *const[]) { "record", "-t", "60s", "--no-process-stats", "--ds",
                                                           "test.data", "-o", out, NULL });
                cr_assert(raw_producer_spin_until(&prod, started, 10000));
                /* Both at once: traced learns of the dead consumer while it
                 * is already shutting the session down. */
                kill(c.pid, SIGKILL);
                kill(inst.pid, SIGTERM);
                (void) wait_child(&c, 10000);
                raw_producer_free(&prod);
        }
}
