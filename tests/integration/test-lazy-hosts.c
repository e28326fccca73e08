/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* traced.conf's [plugins] hosts=lazy through the real traced, its real
 * plugins and tracectl: no plugin host runs until a session names one of
 * its plugin's data sources, QueryServiceState (tracectl query) lists
 * those data sources all along, the session that names one records its
 * data, and a host that served no session for idle_stop_sec stops and
 * comes back for the next session. */

#include <criterion/criterion.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"
#include "basic/macro.h"
#include "test-scratch.h"

#include "perfetto/trace/trace_packet.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;
static char conf_dir[512];

/* Every plugin this build has. */
static const char *const plugin_files[] = { "bpfstack.so", "ftrace.so", "journald.so", "perf.so", "sysstats.so" };

static void setup(void) {
        cr_assert_eq(test_mkdtemp(conf_dir, sizeof(conf_dir), "lazy-hosts-"), 0);
        char conf[600], arg[620];
        snprintf(conf, sizeof(conf), "%s/traced.conf", conf_dir);
        FILE *f = fopen(conf, "we");
        cr_assert_not_null(f);
        fputs("[plugins]\nhosts = lazy\nidle_stop_sec = 2\n", f);
        cr_assert_eq(fclose(f), 0);
        snprintf(arg, sizeof(arg), "--config=%s", conf);
        const char *const args[] = { "--plugin-dir=" TOP_BUILDDIR "/plugins/.libs",
                                     "--plugin-host=" TOP_BUILDDIR "/tests/bin/traced-plugin-host", arg, NULL };
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(traced_instance_start_args(&inst, true, args), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
        test_scratch_remove(conf_dir);
}

TestSuite(lazy_hosts, .init = setup, .fini = teardown, .timeout = 120);

/* Waits (the loop running) until the host of plugin runs (want) or not. */
static bool wait_host(const char *plugin, bool want, unsigned timeout_ms) {
        for (unsigned waited = 0;; waited += 50) {
                if ((fixture_plugin_host_pid(&inst, plugin) != 0) == want)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                spin_ms(ev, 50);
        }
}

/* Runs tracectl with argv (NULL-terminated after the socket options),
 * the loop running meanwhile; its standard output into out (may be
 * NULL). Returns its exit status, -1 when it did not exit normally.
 * While it runs, *saw_host (may be NULL) notes whether the host of
 * plugin ran. */
static int run_tracectl(char *const *args, char *out, size_t out_size, const char *plugin, bool *saw_host) {
        char *argv[16] = { (char *) TRACECTL_BINARY, (char *) "--socket", inst.consumer_path };
        size_t n = 3;
        for (size_t i = 0; args[i] && n < ELEMENTSOF(argv) - 1; i++)
                argv[n++] = args[i];
        argv[n] = NULL;
        int fd = test_tmpfile();
        cr_assert_geq(fd, 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        int st;
        while (waitpid(pid, &st, WNOHANG) == 0) {
                if (saw_host && fixture_plugin_host_pid(&inst, plugin) != 0)
                        *saw_host = true;
                spin_ms(ev, 50);
        }
        if (out) {
                ssize_t k = pread(fd, out, out_size - 1, 0);
                out[k > 0 ? k : 0] = '\0';
        }
        close(fd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void count_sys_stats(const Perfetto__Protos__TracePacket *p, void *userdata) {
        unsigned *n = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS && p->sys_stats->n_meminfo > 0)
                (*n)++;
}

/* tracectl record of linux.sys_stats (meminfo every 100 ms for 2 s):
 * how many SysStats packets with meminfo the trace holds. */
static unsigned record_sys_stats(const char *name, bool *saw_host) {
        char cfg[600], out[600];
        snprintf(cfg, sizeof(cfg), "%s/%s.cfg", conf_dir, name);
        snprintf(out, sizeof(out), "%s/%s.pftrace", conf_dir, name);
        FILE *f = fopen(cfg, "we");
        cr_assert_not_null(f);
        fputs("buffers { size_kb: 4096 }\n"
              "duration_ms: 2000\n"
              "data_sources { config { name: \"linux.sys_stats\" sys_stats_config { meminfo_period_ms: 100 } } }\n",
              f);
        cr_assert_eq(fclose(f), 0);
        char *args[] = { (char *) "record", (char *) "-c", cfg, (char *) "--txt", (char *) "-o", out,
                         (char *) "--no-summary", NULL };
        cr_assert_eq(run_tracectl(args, NULL, 0, "sysstats.so", saw_host), 0, "tracectl record failed");
        unsigned n = 0;
        int fd = open(out, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        fixture_for_each_packet(fd, count_sys_stats, &n);
        close(fd);
        return n;
}

Test(lazy_hosts, no_host_runs_until_a_session_names_its_plugin) {
        struct test_consumer c;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        /* Listed by the service with no host behind them. */
        cr_assert(fixture_wait_data_source(&c, ev, "linux.sys_stats", 1, 30000), "linux.sys_stats not listed");
        cr_assert_eq(fixture_count_data_source(&c, "linux.perf"), 1);
        cr_assert_eq(fixture_count_data_source(&c, "linux.process_stats"), 1);
        test_consumer_free(&c);
        for (size_t i = 0; i < ELEMENTSOF(plugin_files); i++)
                cr_assert_eq(fixture_plugin_host_pid(&inst, plugin_files[i]), 0, "the host of %s runs",
                             plugin_files[i]);
        char text[16384];
        char *query[] = { (char *) "query", NULL };
        cr_assert_eq(run_tracectl(query, text, sizeof(text), NULL, NULL), 0);
        cr_assert(strstr(text, "linux.sys_stats") && strstr(text, "started when a session names it"), "%s", text);

        bool saw = false;
        unsigned n = record_sys_stats("first", &saw);
        cr_assert(saw, "the sysstats host never ran during the recording");
        /* Every 100 ms for 2 s: allow for a loaded machine. */
        cr_assert_geq(n, 5, "%u SysStats packets", n);
        /* The others were not needed. */
        cr_assert_eq(fixture_plugin_host_pid(&inst, "perf.so"), 0);
        cr_assert_eq(fixture_plugin_host_pid(&inst, "ftrace.so"), 0);
}

Test(lazy_hosts, an_idle_host_stops_and_comes_back_for_the_next_session) {
        bool saw = false;
        cr_assert_geq(record_sys_stats("first", &saw), 5);
        cr_assert(saw);
        /* idle_stop_sec=2: gone between 2 and 3 s after the session. */
        cr_assert(wait_host("sysstats.so", false, 30000), "the idle sysstats host did not stop");
        cr_assert_geq(fixture_log_count(&inst, "served no session for", NULL), 1);
        /* Stopped as idle: neither a failure nor restarted. */
        cr_assert_eq(fixture_log_count(&inst, "restarting in", NULL), 0);
        spin_ms(ev, 1500);
        cr_assert_eq(fixture_plugin_host_pid(&inst, "sysstats.so"), 0, "the idle sysstats host came back alone");

        struct test_consumer c;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        cr_assert_eq(fixture_count_data_source(&c, "linux.sys_stats"), 1, "linux.sys_stats not listed once");
        test_consumer_free(&c);

        saw = false;
        unsigned n = record_sys_stats("second", &saw);
        cr_assert(saw, "the sysstats host did not start again");
        cr_assert_geq(n, 5, "%u SysStats packets in the second recording", n);
}
