/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* supervisor/host-probe.c: a probe's answer from its exit status, its
 * output and its error output (stand-in hosts: shell scripts), the path an
 * exec could not reach, file stamps; and plugin_user_required= in
 * traced.conf. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/config.h"
#include "supervisor/host-exec.h"
#include "supervisor/host-probe.h"
#include "test-scratch.h"

static char dir[256];
static char plugin[512];

static void setup(void) {
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "host-probe-"), 0);
        snprintf(plugin, sizeof(plugin), "%s/plugin.so", dir);
        int fd = open(plugin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        close(fd);
}

static void teardown(void) {
        cr_expect_eq(test_scratch_remove(dir), 0);
}

TestSuite(host_probe, .init = setup, .fini = teardown, .timeout = 30);

/* A stand-in for traced-plugin-host: a script of body. */
static void host_script(char *path, size_t size, const char *body) {
        snprintf(path, size, "%s/host", dir);
        (void) unlink(path);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fprintf(f, "#!/bin/sh\n%s\n", body);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(chmod(path, 0755), 0);
}

static const struct host_identity self = { .switch_user = false };

static int probe(const char *host, enum host_probe_mode mode, uint64_t *caps, char *err, size_t size,
                 char **output) {
        struct host_probe p;
        int r = host_probe_start(&p, host, &self, plugin, mode, 0);
        cr_assert_eq(r, 0, "the probe did not start: %s", strerror(-r));
        return host_probe_finish(&p, caps, err, size, output);
}

Test(host_probe, an_answer_is_the_declared_capabilities) {
        char host[512], err[256];
        /* It gets the mode, the plugin's descriptor and its path. */
        host_script(host, sizeof(host),
                    "[ \"$1\" = --print-capabilities ] && [ \"$2\" = --plugin-fd=5 ] && [ -r /proc/self/fd/5 ] "
                    "|| exit 1\necho 200000002");
        uint64_t caps = 0;
        char *output = NULL;
        cr_assert_eq(probe(host, HOST_PROBE_CAPABILITIES, &caps, err, sizeof(err), &output), 0, "%s", err);
        cr_expect_eq(caps, 0x200000002ull);
        cr_expect_str_empty(err);
        cr_expect_null(output);
}

Test(host_probe, check_mode_answers_by_its_status) {
        char host[512], err[256];
        host_script(host, sizeof(host), "[ \"$1\" = --check ] || exit 1\necho loaded >&2");
        char *output = NULL;
        cr_assert_eq(probe(host, HOST_PROBE_CHECK, NULL, err, sizeof(err), &output), 0, "%s", err);
        cr_expect_str_eq(output, "loaded\n");
        free(output);
}

Test(host_probe, a_refusal_is_eperm_with_its_reason) {
        char host[512], err[256];
        host_script(host, sizeof(host), "echo 'Refusing plugin x: bad magic.' >&2\nexit 78");
        cr_expect_eq(probe(host, HOST_PROBE_CAPABILITIES, NULL, err, sizeof(err), NULL), -EPERM);
        cr_expect_str_eq(err, "Refusing plugin x: bad magic.");
}

Test(host_probe, a_failure_keeps_the_last_line_of_what_it_said) {
        char host[512], err[256];
        host_script(host, sizeof(host),
                    "echo first >&2\necho 'host: error while loading shared libraries: libx.so.1: cannot open' "
                    ">&2\necho >&2\nexit 127");
        uint64_t caps = 7;
        cr_expect_eq(probe(host, HOST_PROBE_CAPABILITIES, &caps, err, sizeof(err), NULL), -ENOEXEC);
        cr_expect_str_eq(err, "host: error while loading shared libraries: libx.so.1: cannot open");
        cr_expect_eq(caps, 7, "a failed probe set the capabilities");
}

Test(host_probe, an_answer_that_is_no_number_is_ebadmsg) {
        char host[512], err[256];
        host_script(host, sizeof(host), "echo hello");
        uint64_t caps = 0;
        cr_expect_eq(probe(host, HOST_PROBE_CAPABILITIES, &caps, err, sizeof(err), NULL), -EBADMSG);
}

Test(host_probe, an_exec_that_fails_names_the_path_out_of_reach) {
        char host[512], err[512], want[1400];
        snprintf(host, sizeof(host), "%s/missing/traced-plugin-host", dir);
        cr_expect_eq(probe(host, HOST_PROBE_CAPABILITIES, NULL, err, sizeof(err), NULL), -ENOEXEC);
        snprintf(want, sizeof(want), "cannot execute %s as uid %u: %s/missing: no such file or directory",
                 host, (unsigned) getuid(), dir);
        cr_expect_str_eq(err, want);
}

Test(host_probe, a_plugin_file_open_to_all_is_not_probed) {
        char host[512];
        host_script(host, sizeof(host), "echo 0");
        cr_assert_eq(chmod(plugin, 0666), 0);
        struct host_probe p;
        cr_expect_eq(host_probe_start(&p, host, &self, plugin, HOST_PROBE_CAPABILITIES, 0), -EPERM);
}

Test(host_probe, a_stamp_changes_with_the_file) {
        struct host_probe_stamp a, b, none;
        host_probe_stamp(plugin, &a);
        host_probe_stamp(plugin, &b);
        cr_expect(host_probe_stamp_equal(&a, &b));
        /* Replaced by a new file (as an install does): a new inode. */
        char fresh[600];
        snprintf(fresh, sizeof(fresh), "%s.new", plugin);
        int fd = open(fresh, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, "x", 1), 1);
        close(fd);
        cr_assert_eq(rename(fresh, plugin), 0);
        host_probe_stamp(plugin, &b);
        cr_expect_not(host_probe_stamp_equal(&a, &b));
        snprintf(fresh, sizeof(fresh), "%s/none", dir);
        host_probe_stamp(fresh, &none);
        cr_expect_not(host_probe_stamp_equal(&none, &b));
}

/* Loads text as traced.conf: traced_config_load's result. */
static int load_conf(const char *text, struct traced_config *cfg, char **error) {
        char path[600];
        snprintf(path, sizeof(path), "%s/traced.conf", dir);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        cr_assert_eq(fclose(f), 0);
        *error = NULL;
        return traced_config_load(path, cfg, error);
}

Test(host_probe, plugin_user_required_in_traced_conf) {
        static const struct {
                const char *text;
                int r;
                bool required;
        } cases[] = {
                { "[service]\n", 0, false },
                { "[service]\nplugin_user_required = yes\n", 0, true },
                { "[service]\nplugin_user_required = no\n", 0, false },
                { "[service]\nplugin_user_required = maybe\n", -EINVAL, false },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct traced_config cfg;
                char *error;
                int r = load_conf(cases[i].text, &cfg, &error);
                cr_expect_eq(r, cases[i].r, "%s: %d (%s)", cases[i].text, r, error ? error : "");
                if (r == 0) {
                        cr_expect_eq(cfg.plugin_user_required, cases[i].required, "%s", cases[i].text);
                        traced_config_done(&cfg);
                } else
                        cr_expect(error && strstr(error, "plugin_user_required"), "%s", error ? error : "");
                free(error);
        }
}

Test(host_probe, data_sources_mode_keeps_the_whole_answer) {
        char host[512], err[256], text[1024];
        host_script(host, sizeof(host),
                    "[ \"$1\" = --print-data-sources ] || exit 1\n"
                    "echo 'linux.ftrace will_notify_on_stop'\necho 'linux.process_stats'");
        struct host_probe p;
        cr_assert_eq(host_probe_start(&p, host, &self, plugin, HOST_PROBE_DATA_SOURCES, 0), 0);
        cr_assert_eq(host_probe_finish_text(&p, text, sizeof(text), err, sizeof(err), NULL), 0, "%s", err);
        cr_expect_str_eq(text, "linux.ftrace will_notify_on_stop\nlinux.process_stats\n");
        /* One longer than the buffer: refused, not cut. */
        host_script(host, sizeof(host), "i=0; while [ $i -lt 100 ]; do echo linux.data_source_$i; i=$((i+1)); done");
        cr_assert_eq(host_probe_start(&p, host, &self, plugin, HOST_PROBE_DATA_SOURCES, 0), 0);
        cr_expect_eq(host_probe_finish_text(&p, text, sizeof(text), err, sizeof(err), NULL), -EMSGSIZE);
        cr_expect(strstr(err, "longer than"), "%s", err);
}

Test(host_probe, plugin_hosts_and_idle_stop_in_traced_conf) {
        static const struct {
                const char *text;
                int r;
                bool lazy;
                unsigned idle;
        } cases[] = {
                { "[plugins]\n", 0, true, TRACED_CONFIG_DEFAULT_IDLE_STOP_SEC },
                { "[plugins]\nhosts = lazy\n", 0, true, TRACED_CONFIG_DEFAULT_IDLE_STOP_SEC },
                { "[plugins]\nhosts = eager\nidle_stop_sec = 0\n", 0, false, 0 },
                { "[plugins]\nhosts = lazy\nidle_stop_sec = 30\n", 0, true, 30 },
                { "[plugins]\nhosts = sometimes\n", -EINVAL, false, 0 },
                { "[plugins]\nidle_stop_sec = 86401\n", -EINVAL, false, 0 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct traced_config cfg;
                char *error;
                int r = load_conf(cases[i].text, &cfg, &error);
                cr_expect_eq(r, cases[i].r, "%s: %d (%s)", cases[i].text, r, error ? error : "");
                if (r == 0) {
                        cr_expect_eq(cfg.plugin_hosts_lazy, cases[i].lazy, "%s", cases[i].text);
                        cr_expect_eq(cfg.idle_stop_sec, cases[i].idle, "%s", cases[i].text);
                        traced_config_done(&cfg);
                } else
                        cr_expect(error && (strstr(error, "hosts") || strstr(error, "idle_stop_sec")), "%s",
                                  error ? error : "");
                free(error);
        }
}
