/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The plugin host and traced's supervision: broken plugins are refused
 * with their reason and not restarted; a plugin that crashes is restarted
 * while traced and the other plugins keep serving. */

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "test-consumer.h"
#include "test-scratch.h"
#include "traced-instance.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

extern char **environ;

#define HOST TOP_BUILDDIR "/tests/bin/traced-plugin-host"
#define PLUGIN(n) TOP_BUILDDIR "/tests/plugins/.libs/" n ".so"

static struct traced_instance inst;
static sd_event *ev;
/* What a test makes besides traced's own directory (the plugin directory,
 * configuration files, a plugin copied aside) goes under scratch, which
 * the suite's .fini removes whole. */
static char scratch[256];
static char plugin_dir[300];

/* scratch/name into buf. */
static void scratch_path(char *buf, size_t size, const char *name) {
        cr_assert_lt((size_t) snprintf(buf, size, "%s/%s", scratch, name), size);
}

static void setup(void) {
        int r = test_mkdtemp(scratch, sizeof(scratch), "traced-plugins-");
        cr_assert_eq(r, 0, "no scratch directory: %s", strerror(-r));
}

static void teardown(void) {
        if (ev) {
                int st = traced_instance_destroy(&inst);
                cr_expect_eq(st, 0);
                ev = sd_event_unref(ev);
        }
        int r = test_scratch_remove(scratch);
        cr_expect_eq(r, 0, "could not remove %s: %s", scratch, strerror(-r));
}

TestSuite(plugins, .init = setup, .fini = teardown, .timeout = 60);

/* scratch/plugins with a symbolic link to each plugin named: a name, for
 * the build's test plugin of that name, or a path. */
static void make_plugin_dir(const char *const *names) {
        scratch_path(plugin_dir, sizeof(plugin_dir), "plugins");
        cr_assert_eq(mkdir(plugin_dir, 0700), 0);
        for (size_t i = 0; names[i]; i++) {
                char src[512], dst[512];
                /* A path: a plugin of the build, linked under its own name. */
                const char *slash = strrchr(names[i], '/');
                if (slash) {
                        snprintf(src, sizeof(src), "%s", names[i]);
                        snprintf(dst, sizeof(dst), "%s/%s", plugin_dir, slash + 1);
                } else {
                        snprintf(src, sizeof(src), TOP_BUILDDIR "/tests/plugins/.libs/%s.so", names[i]);
                        snprintf(dst, sizeof(dst), "%s/%s.so", plugin_dir, names[i]);
                }
                cr_assert_eq(symlink(src, dst), 0);
        }
}

/* These tests watch the plugin hosts from traced's start (their users,
 * capabilities, crashes, restarts): every host starts with traced
 * (hosts started on demand: test-lazy-hosts, test-resident). */
#define EAGER "--plugin-hosts=eager"

/* traced, socket-activated, with the plugins of plugin_dir (and up to two
 * more arguments). */
static void start_traced_with_plugin_dir(const char *extra1, const char *extra2) {
        char dir_arg[400];
        snprintf(dir_arg, sizeof(dir_arg), "--plugin-dir=%s", plugin_dir);
        const char *const args[] = { dir_arg, "--plugin-host=" HOST, EAGER, extra1, extra2, NULL };
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(traced_instance_start_args(&inst, true, args), 0);
}

static void start_with_plugins_args(const char *const *names, const char *extra1, const char *extra2) {
        make_plugin_dir(names);
        start_traced_with_plugin_dir(extra1, extra2);
}

/* scratch/traced.conf holding text, and traced's argument naming it. */
static void config_arg(const char *text, char *arg, size_t size) {
        char conf[512];
        scratch_path(conf, sizeof(conf), "traced.conf");
        FILE *f = fopen(conf, "w");
        cr_assert_not_null(f);
        cr_assert_geq(fputs(text, f), 0);
        cr_assert_eq(fclose(f), 0);
        cr_assert_lt((size_t) snprintf(arg, size, "--config=%s", conf), size);
}

static void start_with_plugins(const char *const *names) {
        start_with_plugins_args(names, NULL, NULL);
}

/* Runs the host on one plugin; returns its exit status, stderr in err. */
static int run_host(const char *plugin, const char *socket, char *err, size_t size) {
        int fd = test_tmpfile();
        cr_assert_geq(fd, 0, "no file for the host's stderr: %s", strerror(-fd));
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, STDERR_FILENO);
        char *argv[] = { (char *) HOST, (char *) "--socket", (char *) socket, (char *) plugin, NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, HOST, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        int st;
        for (int i = 0; i < 500; i++) {
                if (waitpid(pid, &st, WNOHANG) == pid)
                        break;
                if (ev)
                        spin_ms(ev, 10);
                else
                        usleep(10000);
                if (i == 499) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &st, 0);
                }
        }
        ssize_t n = pread(fd, err, size - 1, 0);
        err[n > 0 ? n : 0] = '\0';
        close(fd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(plugins, broken_plugins_are_refused_with_a_reason) {
        static const struct {
                const char *plugin, *why;
        } cases[] = {
                { PLUGIN("bad_magic"), "bad magic" },
                { PLUGIN("future_major"), "this host speaks 1.x" },
                { PLUGIN("no_entry"), "no traced_plugin_entry symbol" },
                { TOP_BUILDDIR "/tests/plugins/.libs/does-not-exist.so", "cannot load it" },
        };
        char err[4096];
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int st = run_host(cases[i].plugin, "/nonexistent.sock", err, sizeof(err));
                cr_assert_eq(st, 78, "%s: exit %d, stderr: %s", cases[i].plugin, st, err);
                cr_assert(strstr(err, cases[i].why) != NULL, "%s: stderr lacks \"%s\": %s", cases[i].plugin,
                          cases[i].why, err);
        }
}

/* A newer minor whose structures hold nothing this host lacks gets past
 * the checks (tests/check-plugin-minor.sh runs such plugins under traced):
 * here it only finds no service. */
Test(plugins, a_newer_minor_using_nothing_new_is_not_refused) {
        char err[4096];
        int st = run_host(PLUGIN("newer_minor"), "/nonexistent.sock", err, sizeof(err));
        cr_assert_neq(st, 78, "refused: %s", err);
        cr_assert(strstr(err, "cannot connect to the tracing service") != NULL, "exit %d: %s", st, err);
}

Test(plugins, create_failure_is_refused) {
        const char *const none[] = { NULL };
        start_with_plugins(none);
        char err[4096];
        int st = run_host(PLUGIN("create_fails"), inst.producer_path, err, sizeof(err));
        cr_assert_eq(st, 78, "exit %d: %s", st, err);
        cr_assert(strstr(err, "create() failed") != NULL, "%s", err);
}

static size_t count_hello(const uint8_t *buf, size_t len) {
        static struct pbr_field pkts[10000];
        int n = pbr_split_trace(buf, len, pkts, 10000);
        size_t found = 0;
        for (int i = 0; i < n; i++) {
                struct pbr_field t, s;
                if (pbr_get(pkts[i].data, pkts[i].len, 900, false, &t) && pbr_get(t.data, t.len, 1, false, &s) &&
                    s.len == 19 && memcmp(s.data, "hello from a plugin", 19) == 0)
                        found++;
        }
        return found;
}

static int run_session(struct test_consumer *cons, unsigned ms) {
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.plugin", ms);
        int r = test_consumer_enable(cons, cfg, -EBADF);
        test_config_free(cfg);
        if (r < 0)
                return r;
        if (!test_consumer_wait_disabled(cons, 20000))
                return -ETIMEDOUT;
        return test_consumer_read(cons, 10000);
}

static bool wait_for_data_source_n(struct test_consumer *c, unsigned producers, int tries) {
        for (int i = 0; i < tries; i++) {
                Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
                ProtobufCMessage *reply = NULL;
                unsigned n = 0;
                if (test_consumer_call(c, "QueryServiceState", &rq.base,
                                       &perfetto__protos__query_service_state_response__descriptor, &reply, 5000) == 0 &&
                    reply) {
                        const Perfetto__Protos__TracingServiceState *st =
                                ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
                        for (size_t k = 0; st && k < st->n_data_sources; k++)
                                if (st->data_sources[k]->ds_descriptor &&
                                    strcmp(st->data_sources[k]->ds_descriptor->name, "test.plugin") == 0)
                                        n++;
                        protobuf_c_message_free_unpacked(reply, NULL);
                }
                if (n >= producers)
                        return true;
                spin_ms(ev, 50);
        }
        return false;
}

static bool wait_for_data_source(struct test_consumer *c, unsigned producers) {
        return wait_for_data_source_n(c, producers, 200);
}

static bool wait_for_data_source_quick(struct test_consumer *c, unsigned producers) {
        return wait_for_data_source_n(c, producers, 1);
}

/* CapEff of the first producer named name, from /proc. */
static bool producer_capabilities(struct test_consumer *c, const char *name, unsigned long long *ret) {
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        int pid = 0;
        if (test_consumer_call(c, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                               &reply, 5000) != 0 || !reply)
                return false;
        const Perfetto__Protos__TracingServiceState *st = ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        for (size_t k = 0; st && k < st->n_producers && !pid; k++)
                if (st->producers[k]->name && strcmp(st->producers[k]->name, name) == 0)
                        pid = st->producers[k]->pid;
        protobuf_c_message_free_unpacked(reply, NULL);
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        FILE *f = pid ? fopen(path, "r") : NULL;
        bool found = false;
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "CapEff: %llx", ret) == 1)
                        found = true;
        if (f)
                fclose(f);
        return found;
}

Test(plugins, good_plugin_traces_end_to_end) {
        const char *const names[] = { "good", NULL };
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1), "the plugin's data source never appeared");
        unsigned long long caps = ~0ull;
        cr_assert(producer_capabilities(&cons, "traced.test", &caps), "no plugin host process found");
        cr_assert_eq(caps, 0, "a plugin that declares no capabilities runs with 0x%llx", caps);
        cr_assert_eq(run_session(&cons, 500), 0);
        cr_assert_eq(count_hello(cons.data, cons.len), 1);
        test_consumer_free(&cons);
}

Test(plugins, a_crashing_plugin_leaves_traced_serving) {
        const char *const names[] = { "good", "crash_on_start", NULL };
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 2), "both plugins should register test.plugin");
        /* The session starts the data source in both: one crashes. */
        cr_assert_eq(run_session(&cons, 800), 0);
        cr_assert_eq(count_hello(cons.data, cons.len), 1, "the good plugin's packet is missing");
        cr_assert(traced_instance_alive(&inst), "traced died with its plugin");
        test_consumer_free(&cons);

        /* The crashed host is restarted; a second session still works. */
        struct test_consumer again;
        cr_assert_eq(test_consumer_connect(&again, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&again, 2), "the crashed plugin was not restarted");
        cr_assert_eq(run_session(&again, 500), 0);
        cr_assert_eq(count_hello(again.data, again.len), 1);
        test_consumer_free(&again);
        char log[8192];
        FILE *f = fopen(inst.log_path, "r");
        size_t n = f ? fread(log, 1, sizeof(log) - 1, f) : 0;
        log[n] = '\0';
        if (f)
                fclose(f);
        /* A plain build dies of SIGSEGV; under ASan the host exits with an
         * error status instead. Either way traced reports and restarts. */
        cr_assert(strstr(log, "crash_on_start.so") != NULL && strstr(log, "restarting in") != NULL,
                  "traced did not report the crash:\n%s", log);
}

static void read_traced_log(char *log, size_t size) {
        FILE *f = fopen(inst.log_path, "r");
        size_t n = f ? fread(log, 1, size - 1, f) : 0;
        log[n] = '\0';
        if (f)
                fclose(f);
}

Test(plugins, a_plugin_crashing_after_its_first_commit_keeps_that_packet) {
        const char *const names[] = { "good", "crash_after_commit", NULL };
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 2), "both plugins should register test.plugin");
        cr_assert_eq(run_session(&cons, 800), 0);
        /* The good plugin's packet and the one the crashing plugin
         * committed before it died. */
        cr_assert_eq(count_hello(cons.data, cons.len), 2, "a committed packet died with its plugin");
        cr_assert(traced_instance_alive(&inst));
        test_consumer_free(&cons);
        static char log[65536];
        read_traced_log(log, sizeof(log));
        cr_assert(strstr(log, "crash_after_commit.so") != NULL && strstr(log, "restarting in") != NULL,
                  "traced did not report the crash:\n%s", log);
}

Test(plugins, a_crash_loop_backs_off_and_costs_only_itself) {
        const char *const names[] = { "good", "crash_at_load", NULL };
        start_with_plugins(names);
        static char log[65536];
        /* A first connection starts the socket-activated traced. */
        struct test_consumer first;
        cr_assert_eq(test_consumer_connect(&first, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&first, 1));
        test_consumer_free(&first);
        /* Three crashes in a row: the delays double. */
        bool looped = false;
        for (int i = 0; i < 300 && !looped; i++) {
                read_traced_log(log, sizeof(log));
                looped = strstr(log, "restarting in 1.0s") && strstr(log, "restarting in 2.0s") &&
                         strstr(log, "restarting in 4.0s");
                if (!looped)
                        spin_ms(ev, 100);
        }
        cr_assert(looped, "no doubling backoff in the log:\n%s", log);
        cr_assert_not_null(strstr(log, "crash_at_load.so"), "the crashing plugin is not named:\n%s", log);
        /* Meanwhile the other plugin serves, session after session. */
        for (int round = 0; round < 2; round++) {
                struct test_consumer cons;
                cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
                cr_assert(wait_for_data_source(&cons, 1));
                cr_assert_eq(run_session(&cons, 300), 0);
                cr_assert_eq(count_hello(cons.data, cons.len), 1, "the good plugin's packet is missing");
                test_consumer_free(&cons);
        }
        cr_assert(traced_instance_alive(&inst));
}

/* The first connection is what starts a socket-activated traced: a
 * session configured at once comes before any plugin host registered its
 * data sources. It waits for them, but not for a host that died first:
 * here one plugin registers 1.5 s late and the other crashes as it loads,
 * and the bound on the wait (start_timeout_sec) is longer than this
 * suite's timeout. */
Test(plugins, sessions_of_the_start_wait_for_the_plugins_but_not_for_a_dead_one) {
        char arg[600];
        config_arg("[plugins]\nstart_timeout_sec = 600\n", arg, sizeof(arg));
        const char *const names[] = { "slow_create", "crash_at_load", NULL };
        start_with_plugins_args(names, arg, NULL);

        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert_eq(run_session(&cons, 300), 0, "the session configured at the start did not end");
        cr_assert_eq(count_hello(cons.data, cons.len), 1,
                     "the session configured at the start lacks the slow plugin's data source");
        test_consumer_free(&cons);

        static char log[65536];
        read_traced_log(log, sizeof(log));
        cr_assert(strstr(log, "Plugin crash_at_load (host ") && strstr(log, "went away before it registered"),
                  "the crashed plugin was waited for, or not named:\n%s", log);
        cr_assert_null(strstr(log, "did not register their data sources within"), "the bound ended the wait:\n%s",
                       log);
}

Test(plugins, configuration_disables_plugins_and_bad_lines_are_named) {
        char conf[512], psock[600], csock[600];
        /* A bad file: traced refuses to start and names the line and field. */
        scratch_path(conf, sizeof(conf), "traced.conf");
        snprintf(psock, sizeof(psock), "--producer-socket=%s/p.sock", scratch);
        snprintf(csock, sizeof(csock), "--consumer-socket=%s/c.sock", scratch);
        FILE *f = fopen(conf, "w");
        cr_assert_not_null(f);
        fprintf(f, "# traced configuration\n[plugins]\nenabled = yes\ndirectry = /usr/lib\n");
        fclose(f);
        char arg[600], err[4096];
        snprintf(arg, sizeof(arg), "--config=%s", conf);
        int fd = test_tmpfile();
        cr_assert_geq(fd, 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, STDERR_FILENO);
        char *argv[] = { (char *) TRACED_BINARY, arg, psock, csock, NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACED_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        ssize_t n = pread(fd, err, sizeof(err) - 1, 0);
        err[n > 0 ? n : 0] = '\0';
        close(fd);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "traced started with a bad configuration");
        char expected[700];
        snprintf(expected, sizeof(expected), "%s:4: unknown field \"directry\" in section [plugins]", conf);
        cr_assert(strstr(err, expected) != NULL, "stderr: %s", err);

        /* A good one disables a plugin by name. */
        f = fopen(conf, "w");
        cr_assert_not_null(f);
        fprintf(f, "[plugins]\ndisable = crash_on_start, something_else\n");
        fclose(f);
        const char *const names[] = { "good", "crash_on_start", NULL };
        start_with_plugins_args(names, arg, NULL);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1));
        spin_ms(ev, 500);
        cr_assert_not(wait_for_data_source_quick(&cons, 2), "the disabled plugin was started");
        test_consumer_free(&cons);
}

/* pid of the first producer named name (0 if none). */
static int producer_pid(struct test_consumer *c, const char *name) {
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        int pid = 0;
        if (test_consumer_call(c, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                               &reply, 5000) != 0 || !reply)
                return 0;
        const Perfetto__Protos__TracingServiceState *st = ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        for (size_t k = 0; st && k < st->n_producers && !pid; k++)
                if (st->producers[k]->name && strcmp(st->producers[k]->name, name) == 0)
                        pid = st->producers[k]->pid;
        protobuf_c_message_free_unpacked(reply, NULL);
        return pid;
}

struct proc_info {
        int ppid;
        unsigned uid;
        unsigned long long cap_eff, cap_bnd, cap_amb;
        int no_new_privs;
};

static bool proc_info(int pid, struct proc_info *ret) {
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        FILE *f = fopen(path, "r");
        if (!f)
                return false;
        *ret = (struct proc_info) { .ppid = -1, .no_new_privs = -1 };
        while (fgets(line, sizeof(line), f)) {
                (void) sscanf(line, "PPid: %d", &ret->ppid);
                (void) sscanf(line, "Uid: %u", &ret->uid);
                (void) sscanf(line, "CapEff: %llx", &ret->cap_eff);
                (void) sscanf(line, "CapBnd: %llx", &ret->cap_bnd);
                (void) sscanf(line, "CapAmb: %llx", &ret->cap_amb);
                (void) sscanf(line, "NoNewPrivs: %d", &ret->no_new_privs);
        }
        fclose(f);
        return ret->ppid >= 0;
}

/* The child of parent that is not skip (the service core). */
static int other_child(int parent, int skip) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        int found = 0;
        while (d && (de = readdir(d)) && !found) {
                int pid = atoi(de->d_name);
                struct proc_info pi;
                if (pid > 0 && pid != skip && proc_info(pid, &pi) && pi.ppid == parent)
                        found = pid;
        }
        if (d)
                closedir(d);
        return found;
}

Test(plugins, the_core_runs_unprivileged_and_hosts_keep_declared_capabilities) {
        const char *const names[] = { "good", NULL };
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1), "the plugin's data source never appeared");
        int host = producer_pid(&cons, "traced.test");
        cr_assert_gt(host, 0);
        int core = other_child(inst.pid, host);
        cr_assert_gt(core, 0, "no service core process under traced (%d)", (int) inst.pid);
        struct proc_info sup, c, h;
        cr_assert(proc_info(inst.pid, &sup) && proc_info(core, &c) && proc_info(host, &h));
        cr_assert_eq(h.ppid, inst.pid, "the plugin host is not the supervisor's child");
        cr_assert_eq(c.cap_eff, 0, "the service core has capabilities 0x%llx", c.cap_eff);
        cr_assert_eq(c.no_new_privs, 1);
        cr_assert_eq(h.cap_eff, 0, "a plugin declaring no capabilities runs with 0x%llx", h.cap_eff);
        cr_assert_eq(h.no_new_privs, 1);
        if (geteuid() == 0) {
                cr_assert_eq(sup.uid, 0);
                cr_assert_neq(c.uid, 0, "the service core still runs as root");
                cr_assert_eq(c.cap_bnd, 0, "the core's bounding set is 0x%llx", c.cap_bnd);
        }
        /* The core still serves: a session through it works. */
        cr_assert_eq(run_session(&cons, 300), 0);
        cr_assert_eq(count_hello(cons.data, cons.len), 1);
        test_consumer_free(&cons);
}

/* Capabilities the supervisor uses itself: CAP_KILL, CAP_SETGID,
 * CAP_SETUID, CAP_SETPCAP. */
#define SUPERVISOR_OWN_CAPS 0x1e0ull

/* Started as root outside systemd, the supervisor limits itself to its own
 * capabilities and those its plugins declare (it held 0x1fffeffffff); the
 * plugin's host runs as another user, holding what its plugin declares as
 * ambient capabilities, and nothing else even in its bounding set. */
static void check_supervisor_caps(const char *const *names, const char *producer, unsigned long long declared) {
        if (geteuid() != 0) {
                cr_skip_test("the supervisor keeps capabilities only when started as root");
                return;
        }
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        int host = 0;
        for (int i = 0; i < 200 && host <= 0; i++) {
                host = producer_pid(&cons, producer);
                if (host <= 0)
                        spin_ms(ev, 50);
        }
        cr_assert_gt(host, 0, "the plugin host of %s never connected", producer);
        struct proc_info sup;
        cr_assert(proc_info(inst.pid, &sup));
        cr_assert_eq(sup.uid, 0);
        unsigned long long want = SUPERVISOR_OWN_CAPS | declared;
        cr_assert_eq(sup.cap_eff, want, "the supervisor's CapEff is 0x%llx, expected 0x%llx", sup.cap_eff, want);
        cr_assert_eq(sup.cap_bnd, want, "the supervisor's CapBnd is 0x%llx, expected 0x%llx", sup.cap_bnd, want);
        struct proc_info h;
        cr_assert(proc_info(host, &h));
        cr_assert_neq(h.uid, 0, "the plugin host of %s runs as root", producer);
        cr_assert_eq(h.cap_eff, declared, "the host's CapEff is 0x%llx, expected 0x%llx", h.cap_eff, declared);
        cr_assert_eq(h.cap_amb, declared, "the host's CapAmb is 0x%llx, expected 0x%llx", h.cap_amb, declared);
        cr_assert_eq(h.cap_bnd, declared, "the host's CapBnd is 0x%llx, expected 0x%llx", h.cap_bnd, declared);
        cr_assert_eq(h.no_new_privs, 1);
        test_consumer_free(&cons);
}

Test(plugins, the_supervisor_keeps_only_its_own_capabilities_for_plugins_declaring_none) {
        const char *const names[] = { "good", NULL };
        check_supervisor_caps(names, "traced.test", 0);
}

Test(plugins, the_supervisor_keeps_what_the_ftrace_plugin_declares) {
        /* The ftrace plugin declares CAP_DAC_OVERRIDE (1), CAP_SYS_ADMIN
         * (21) and CAP_SYSLOG (34); its data sources appear even without
         * tracefs. */
        const char *const names[] = { TOP_BUILDDIR "/plugins/.libs/ftrace.so", NULL };
        check_supervisor_caps(names, "traced.ftrace", (1ull << 1) | (1ull << 21) | (1ull << 34));
}

static void read_log(char *buf, size_t size) {
        FILE *f = fopen(inst.log_path, "r");
        size_t n = f ? fread(buf, 1, size - 1, f) : 0;
        buf[n] = '\0';
        if (f)
                fclose(f);
}

/* Lines of traced's log holding a (and b, when not NULL). */
static unsigned log_lines(const char *a, const char *b) {
        FILE *f = fopen(inst.log_path, "r");
        char line[4096];
        unsigned n = 0;
        while (f && fgets(line, sizeof(line), f))
                n += strstr(line, a) && (!b || strstr(line, b));
        if (f)
                fclose(f);
        return n;
}

/* The sandbox plugin's report (tests/plugins/test-plugins.c): true when
 * found. */
static bool sandbox_report(const uint8_t *buf, size_t len, unsigned *uid, int *shadow, int *etc) {
        static struct pbr_field pkts[10000];
        int n = pbr_split_trace(buf, len, pkts, 10000);
        for (int i = 0; i < n; i++) {
                struct pbr_field t, s;
                char text[128];
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t) || !pbr_get(t.data, t.len, 1, false, &s) ||
                    s.len >= sizeof(text))
                        continue;
                memcpy(text, s.data, s.len);
                text[s.len] = '\0';
                if (sscanf(text, "sandbox uid=%u shadow=%d etc=%d", uid, shadow, etc) == 3)
                        return true;
        }
        return false;
}

/* Issue #45: a plugin that declares no capability, under a traced started
 * as root, reads nothing and writes nothing that an unprivileged user may
 * not (it used to run as uid 0: it read /etc/shadow, created files in
 * /etc). Its report comes back in the trace. */
Test(plugins, a_plugin_declaring_no_capability_cannot_read_shadow_or_write_etc) {
        if (geteuid() != 0) {
                cr_skip_test("traced switches its plugin hosts' user only when started as root");
                return;
        }
        const char *const names[] = { "sandbox", NULL };
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1), "the plugin's data source never appeared");
        cr_assert_eq(run_session(&cons, 300), 0);
        unsigned uid = 0;
        int shadow = -1, etc = -1;
        cr_assert(sandbox_report(cons.data, cons.len, &uid, &shadow, &etc), "no report from the plugin in the trace");
        cr_expect_neq(uid, 0, "the plugin runs as root");
        cr_expect_eq(shadow, EACCES, "reading /etc/shadow: %s", shadow ? strerror(shadow) : "it read it");
        cr_expect_eq(etc, EACCES, "creating a file in /etc: %s", etc ? strerror(etc) : "it created one");
        test_consumer_free(&cons);
        /* Its host within its user's reach: no word of root. */
        cr_expect_eq(log_lines("its host runs as root", NULL), 0);
}

/* Distinct trusted_pid values of the hello packets. */
static size_t hello_pids(const uint8_t *buf, size_t len) {
        static struct pbr_field pkts[10000];
        uint64_t pids[8];
        size_t n_pids = 0;
        int n = pbr_split_trace(buf, len, pkts, 10000);
        for (int i = 0; i < n; i++) {
                struct pbr_field t, pid;
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t) ||
                    !pbr_get(pkts[i].data, pkts[i].len, 79, false, &pid))
                        continue;
                bool seen = false;
                for (size_t k = 0; k < n_pids; k++)
                        seen = seen || pids[k] == pid.varint;
                if (!seen && n_pids < 8)
                        pids[n_pids++] = pid.varint;
        }
        return n_pids;
}

static void copy_file(const char *src, const char *dst, mode_t mode) {
        int in = open(src, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(in, 0, "%s: %s", src, strerror(errno));
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        cr_assert_geq(out, 0, "%s: %s", dst, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        cr_assert_eq(n, 0);
        cr_assert_eq(fchmod(out, mode), 0);
        close(in);
        cr_assert_eq(close(out), 0);
}

/* The plugin host and the sandbox plugin copied under scratch/private,
 * root's, mode 0700, as a build in /root is (tools/run.sh on a fresh
 * machine): the plugin hosts' user cannot execute that host. The
 * host's path into host, the plugin directory into plugin_dir. */
static void make_private_install(char *priv, size_t priv_size, char *host, size_t size) {
        scratch_path(priv, priv_size, "private");
        cr_assert_eq(mkdir(priv, 0700), 0);
        cr_assert_eq(chmod(priv, 0700), 0);
        cr_assert_lt((size_t) snprintf(host, size, "%s/traced-plugin-host", priv), size);
        copy_file(HOST, host, 0755);
        cr_assert_lt((size_t) snprintf(plugin_dir, sizeof(plugin_dir), "%s/plugins", priv), sizeof(plugin_dir));
        cr_assert_eq(mkdir(plugin_dir, 0755), 0);
        char plugin[400];
        snprintf(plugin, sizeof(plugin), "%s/sandbox.so", plugin_dir);
        copy_file(PLUGIN("sandbox"), plugin, 0644);
}

static void start_private(const char *host, const char *extra) {
        char dir_arg[400], host_arg[450];
        snprintf(dir_arg, sizeof(dir_arg), "--plugin-dir=%s", plugin_dir);
        snprintf(host_arg, sizeof(host_arg), "--plugin-host=%s", host);
        const char *const args[] = { dir_arg, host_arg, EAGER, extra, NULL };
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(traced_instance_start_args(&inst, true, args), 0);
}

/* As root: the private install, traced on it (with extra) and a consumer
 * connected to it. false (the test skipped) when not root. */
static bool start_private_connected(char *priv, size_t priv_size, char *host, size_t size, const char *extra,
                                    struct test_consumer *cons) {
        if (geteuid() != 0) {
                cr_skip_test("traced switches its plugin hosts' user only when started as root");
                return false;
        }
        make_private_install(priv, priv_size, host, size);
        start_private(host, extra);
        cr_assert_eq(test_consumer_connect(cons, ev, inst.consumer_path), 0);
        return true;
}

#define FALLBACK_WARNING                                                                                    \
        "its host runs as root, holding only the capabilities it declares (none), not as the plugin hosts' user"

/* A plugin host its user cannot execute (a build under root's home, mode
 * 0700) used to exit with status 127 at every restart, and the plugin
 * never recorded: its host runs as root now, holding only what the plugin
 * declares (nothing), and traced says so once, naming the plugin, the
 * path out of reach and the way out. */
Test(plugins, a_host_its_user_cannot_reach_runs_as_root_with_one_warning) {
        char priv[300], host[400];
        struct test_consumer cons;
        if (!start_private_connected(priv, sizeof(priv), host, sizeof(host), NULL, &cons))
                return;
        char log[16384];
        if (!wait_for_data_source(&cons, 1)) {
                read_log(log, sizeof(log));
                cr_assert_fail("the plugin's data source never appeared; traced's log:\n%s", log);
        }
        cr_assert_eq(run_session(&cons, 300), 0);
        unsigned uid = 1;
        int shadow = -1, etc = -1;
        cr_assert(sandbox_report(cons.data, cons.len, &uid, &shadow, &etc), "no report from the plugin in the trace");
        cr_expect_eq(uid, 0, "the plugin's host runs as uid %u", uid);
        int pid = producer_pid(&cons, "traced.test");
        struct proc_info h;
        cr_assert(pid > 0 && proc_info(pid, &h));
        cr_expect_eq(h.uid, 0);
        cr_expect_eq(h.cap_eff, 0, "the host holds 0x%llx", h.cap_eff);
        cr_expect_eq(h.cap_bnd, 0, "the host's bounding set is 0x%llx", h.cap_bnd);
        cr_expect_eq(h.no_new_privs, 1);
        test_consumer_free(&cons);
        read_log(log, sizeof(log));
        /* The first directory on the way the user may not search (the
         * test's own, or private). */
        char out_of_reach[500];
        snprintf(out_of_reach, sizeof(out_of_reach), "cannot execute %s as uid ", host);
        cr_expect_eq(log_lines(FALLBACK_WARNING, NULL), 1, "not one warning:\n%s", log);
        cr_expect_eq(log_lines(FALLBACK_WARNING, "/sandbox.so"), 1, "the warning does not name the plugin:\n%s", log);
        cr_expect_eq(log_lines(FALLBACK_WARNING, out_of_reach), 1, "the warning does not name %s:\n%s", host, log);
        cr_expect_eq(log_lines(FALLBACK_WARNING, ": permission denied. "), 1, "the warning does not say why:\n%s",
                     log);
        cr_expect_eq(log_lines(FALLBACK_WARNING, "set plugin_user=root in traced.conf"), 1,
                     "the warning does not say how to silence it:\n%s", log);
        cr_expect_eq(log_lines("exited with status 127", NULL), 0, "the host failed:\n%s", log);
}

/* With plugin_user_required=yes such a plugin is refused instead: no host
 * runs it, and the service lists it as refused, with why. */
Test(plugins, plugin_user_required_refuses_a_plugin_its_user_cannot_run) {
        char priv[300], host[400], arg[600];
        config_arg("[service]\nplugin_user_required = yes\n", arg, sizeof(arg));
        struct test_consumer cons;
        if (!start_private_connected(priv, sizeof(priv), host, sizeof(host), arg, &cons))
                return;
        bool listed = false;
        char reason[512] = "";
        for (int i = 0; i < 200 && !listed; i++) {
                Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
                ProtobufCMessage *reply = NULL;
                if (test_consumer_call(&cons, "QueryServiceState", &rq.base,
                                       &perfetto__protos__query_service_state_response__descriptor, &reply, 5000) == 0 &&
                    reply) {
                        const Perfetto__Protos__TracingServiceState *st =
                                ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
                        for (size_t k = 0; st && k < st->n_traced_failed_plugins; k++)
                                if (st->traced_failed_plugins[k]->plugin &&
                                    strcmp(st->traced_failed_plugins[k]->plugin, "sandbox") == 0) {
                                        listed = true;
                                        snprintf(reason, sizeof(reason), "%s",
                                                 st->traced_failed_plugins[k]->reason ?: "");
                                }
                        protobuf_c_message_free_unpacked(reply, NULL);
                }
                if (!listed)
                        spin_ms(ev, 50);
        }
        char log[16384];
        read_log(log, sizeof(log));
        cr_assert(listed, "the plugin is not listed as refused; traced's log:\n%s", log);
        cr_expect(strstr(reason, "plugin_user_required=yes"), "reason: %s", reason);
        cr_expect_not(wait_for_data_source_quick(&cons, 1), "the plugin runs");
        cr_expect_eq(log_lines("Refusing plugin ", "/sandbox.so"), 1, "%s", log);
        cr_expect_eq(log_lines(FALLBACK_WARNING, NULL), 0, "%s", log);
        test_consumer_free(&cons);
}

/* Kills the host pid of traced.test and waits for its restart (traced's
 * backoff: 1 s); returns the new host's pid (0: none came). */
static int kill_and_wait_restart(struct test_consumer *cons, int pid) {
        cr_assert_eq(kill(pid, SIGKILL), 0);
        int again = 0;
        for (int i = 0; i < 200 && (again <= 0 || again == pid); i++) {
                spin_ms(ev, 50);
                again = producer_pid(cons, "traced.test");
        }
        return again != pid ? again : 0;
}

/* What traced learnt about a host holds until the plugin or the host
 * changes: once the host is within its user's reach and it changed, the
 * next start of the host (after it died) runs as that user again. */
Test(plugins, a_changed_host_is_asked_again_at_its_restart) {
        char priv[300], host[400];
        struct test_consumer cons;
        if (!start_private_connected(priv, sizeof(priv), host, sizeof(host), NULL, &cons))
                return;
        cr_assert(wait_for_data_source(&cons, 1), "the plugin's data source never appeared");
        int pid = producer_pid(&cons, "traced.test");
        struct proc_info h;
        cr_assert(pid > 0 && proc_info(pid, &h));
        cr_assert_eq(h.uid, 0);
        /* Not changed: the host restarts as root without a new probe or
         * warning. */
        int again = kill_and_wait_restart(&cons, pid);
        cr_assert(again > 0, "the plugin host was not restarted");
        cr_assert(proc_info(again, &h));
        cr_expect_eq(h.uid, 0);
        cr_expect_eq(log_lines(FALLBACK_WARNING, NULL), 1);
        /* Within reach (this test's own directories searchable by all:
         * run-test.sh's is 0700) and changed (a new copy): asked again. */
        if (strcmp(test_tmp_dir(), "/tmp") != 0)
                cr_assert_eq(chmod(test_tmp_dir(), 0755), 0);
        cr_assert_eq(chmod(scratch, 0755), 0);
        cr_assert_eq(chmod(priv, 0755), 0);
        char fresh[450];
        snprintf(fresh, sizeof(fresh), "%s.new", host);
        copy_file(HOST, fresh, 0755);
        cr_assert_eq(rename(fresh, host), 0);
        again = kill_and_wait_restart(&cons, again);
        char log[16384];
        read_log(log, sizeof(log));
        cr_assert(again > 0, "the plugin host was not restarted:\n%s", log);
        cr_assert(proc_info(again, &h));
        cr_expect_neq(h.uid, 0, "the host still runs as root:\n%s", log);
        cr_expect_eq(log_lines("sandbox.so changed: the plugin hosts' user ", "can run it now"), 1, "%s", log);
        test_consumer_free(&cons);
}

Test(plugins, killing_a_host_mid_session_is_survived) {
        const char *const names[] = { "good", NULL };
        start_with_plugins(names);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1));
        int host = producer_pid(&cons, "traced.test");
        cr_assert_gt(host, 0);

        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.plugin", 6000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        spin_ms(ev, 500);
        cr_assert_eq(kill(host, SIGKILL), 0);
        /* Restarted after the 1 s backoff, it registers again and joins the
         * session that is still running. */
        int again = 0;
        for (int i = 0; i < 100 && (again == 0 || again == host); i++) {
                spin_ms(ev, 50);
                again = producer_pid(&cons, "traced.test");
        }
        cr_assert(again > 0 && again != host, "the plugin host was not restarted");
        cr_assert(test_consumer_wait_disabled(&cons, 20000), "the session did not end");
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        cr_assert_eq(count_hello(cons.data, cons.len), 2, "expected one packet from each incarnation");
        cr_assert_eq(hello_pids(cons.data, cons.len), 2, "the packets should come from two host processes");
        cr_assert(traced_instance_alive(&inst));
        test_consumer_free(&cons);
}

Test(plugins, a_hanging_host_is_killed_and_restarted) {
        char arg[600];
        config_arg("[plugins]\nwatchdog_sec = 1\n", arg, sizeof(arg));
        const char *const names[] = { "good", "hang_on_stop", NULL };
        start_with_plugins_args(names, arg, NULL);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 2));
        /* Both write their packet at start; one never returns from stop. */
        cr_assert_eq(run_session(&cons, 500), 0);
        cr_assert_eq(count_hello(cons.data, cons.len), 2);
        test_consumer_free(&cons);
        cr_assert(traced_instance_alive(&inst), "traced died with its plugin");

        /* The stop never returns, so the heartbeat stops: within about a
         * second the supervisor kills the host and starts it again. */
        char log[16384];
        for (int i = 0; i < 100; i++) {
                read_log(log, sizeof(log));
                const char *killed = strstr(log, "hang_on_stop.so was killed after it hung; restarting");
                if (killed && strstr(killed, "Started plugin host"))
                        break;
                spin_ms(ev, 50);
        }
        cr_assert(strstr(log, "has not shown a sign of life") != NULL &&
                          strstr(log, "hang_on_stop.so was killed after it hung; restarting") != NULL,
                  "traced did not report the hang:\n%s", log);
        cr_assert_not_null(strstr(strstr(log, "was killed after it hung"), "Started plugin host"),
                           "the hung plugin was not restarted:\n%s", log);
        struct test_consumer again;
        cr_assert_eq(test_consumer_connect(&again, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&again, 2), "the restarted plugin did not register");
        cr_assert_eq(run_session(&again, 300), 0);
        cr_assert_eq(count_hello(again.data, again.len), 2);
        test_consumer_free(&again);
}

Test(plugins, plugins_in_process_share_the_traced_process) {
        const char *const names[] = { "good", "bad_magic", NULL };
        start_with_plugins_args(names, "--plugins-in-process", NULL);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1));
        cr_assert_eq(producer_pid(&cons, "traced.test"), inst.pid, "the plugin does not run inside traced");
        cr_assert_eq(run_session(&cons, 300), 0);
        cr_assert_eq(count_hello(cons.data, cons.len), 1);
        test_consumer_free(&cons);
        char log[16384];
        read_log(log, sizeof(log));
        cr_assert(strstr(log, "bad_magic.so: bad magic") != NULL, "the bad plugin was not reported:\n%s", log);
}

Test(plugins, configuration_values_are_checked) {
        static const struct {
                const char *text, *expected;
        } cases[] = {
                { "[plugins]\nwatchdog_sec = soon\n", ":2: \"soon\" is not a number of seconds" },
                { "[plugins]\nstart_timeout_sec = 601\n",
                  ":2: \"601\" is not a number of seconds from 0 to 600 (field \"start_timeout_sec\")" },
                { "[plugins]\nin_process = maybe\n", ":2: \"maybe\" is not yes or no (field \"in_process\")" },
                { "[service]\nuser = a b\n", ":2: \"a b\" is not a user name or uid (field \"user\")" },
                { "[service]\n\nusr = traced\n", ":3: unknown field \"usr\" in section [service]" },
                { "[service]\nuser = no-such-user-here\n", "Unknown user \"no-such-user-here\"" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                if (strstr(cases[i].expected, "Unknown user") && geteuid() != 0)
                        continue; /* only root switches users */
                char conf[300], arg[320], err[4096], name[64], psock[600], csock[600];
                snprintf(name, sizeof(name), "traced-%zu.conf", i);
                scratch_path(conf, sizeof(conf), name);
                snprintf(psock, sizeof(psock), "--producer-socket=%s/p.sock", scratch);
                snprintf(csock, sizeof(csock), "--consumer-socket=%s/c.sock", scratch);
                FILE *f = fopen(conf, "w");
                cr_assert_not_null(f);
                fputs(cases[i].text, f);
                fclose(f);
                snprintf(arg, sizeof(arg), "--config=%s", conf);
                int fd = test_tmpfile();
                cr_assert_geq(fd, 0);
                posix_spawn_file_actions_t fa;
                posix_spawn_file_actions_init(&fa);
                posix_spawn_file_actions_adddup2(&fa, fd, STDERR_FILENO);
                char *argv[] = { (char *) TRACED_BINARY, arg, (char *) "--no-plugins", psock, csock, NULL };
                pid_t pid;
                cr_assert_eq(posix_spawn(&pid, TRACED_BINARY, &fa, NULL, argv, environ), 0);
                posix_spawn_file_actions_destroy(&fa);
                int st;
                cr_assert_eq(waitpid(pid, &st, 0), pid);
                ssize_t n = pread(fd, err, sizeof(err) - 1, 0);
                err[n > 0 ? n : 0] = '\0';
                close(fd);
                cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "traced started with: %s", cases[i].text);
                cr_assert(strstr(err, cases[i].expected) != NULL, "expected \"%s\", stderr: %s", cases[i].expected,
                          err);
        }
}

Test(plugins, plugins_writable_by_everyone_are_not_run) {
        /* The directory is fine, but one plugin is a file anyone could
         * have replaced. */
        char dir[300], bad[400], buf[65536];
        scratch_path(dir, sizeof(dir), "unsafe");
        cr_assert_eq(mkdir(dir, 0700), 0);
        snprintf(bad, sizeof(bad), "%s/copy", dir);
        cr_assert_eq(mkdir(bad, 0755), 0);
        snprintf(bad, sizeof(bad), "%s/copy/crash_on_start.so", dir);
        int in = open(PLUGIN("crash_on_start"), O_RDONLY), out = open(bad, O_WRONLY | O_CREAT, 0755);
        cr_assert(in >= 0 && out >= 0);
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        close(in);
        close(out);
        cr_assert_eq(chmod(bad, 0777), 0);

        const char *const names[] = { "good", NULL };
        make_plugin_dir(names);
        char dst[512];
        snprintf(dst, sizeof(dst), "%s/unsafe.so", plugin_dir);
        cr_assert_eq(symlink(bad, dst), 0);
        start_traced_with_plugin_dir(NULL, NULL);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(wait_for_data_source(&cons, 1));
        spin_ms(ev, 300);
        cr_assert_not(wait_for_data_source_quick(&cons, 2), "the world-writable plugin was run");
        test_consumer_free(&cons);
        char log[16384];
        read_log(log, sizeof(log));
        cr_assert(strstr(log, "unsafe.so: ") != NULL && strstr(log, "is writable by every user") != NULL,
                  "the unsafe plugin was not reported:\n%s", log);
}
