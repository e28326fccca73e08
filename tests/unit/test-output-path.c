/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* traced.conf's parser (not the build's config.h). */
#include "supervisor/config.h"
#include "core/output/output-path.h"
#include "test-scratch.h"

static char top[256], dir[300], outside[300];
static int dir_fd = -1;

static void setup(void) {
        int r = test_mkdtemp(top, sizeof(top), "traced-test-output-path-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        snprintf(dir, sizeof(dir), "%s/traces", top);
        snprintf(outside, sizeof(outside), "%s/outside", top);
        cr_assert_eq(mkdir(dir, 0700), 0);
        cr_assert_eq(mkdir(outside, 0700), 0);
        dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(dir_fd, 0);
}

static void teardown(void) {
        close(dir_fd);
        cr_expect_eq(test_scratch_remove(top), 0, "could not remove %s", top);
}

TestSuite(output_path, .init = setup, .fini = teardown);

static void refused(const char *path, const char *why) {
        char *error = NULL;
        int fd = output_path_open(dir_fd, dir, path, NULL, &error);
        cr_assert_lt(fd, 0, "%s was accepted", path);
        cr_assert_not_null(error);
        cr_assert(strstr(error, why) != NULL, "%s: %s", path, error);
        cr_assert(strstr(error, "output_path") != NULL || strstr(error, "trace directory") != NULL, "%s", error);
        free(error);
}

Test(output_path, a_file_inside_is_created_and_kept_until_claimed) {
        char p[400];
        bool created = false;
        snprintf(p, sizeof(p), "%s/a.pftrace", dir);
        int fd = output_path_open(dir_fd, dir, p, &created, NULL);
        cr_assert_geq(fd, 0);
        cr_assert(created);
        cr_assert_eq(write(fd, "abc", 3), 3);
        close(fd);
        /* Opening an existing file keeps what it holds (a session may yet
         * be refused); claiming it empties it. */
        fd = output_path_open(dir_fd, dir, p, &created, NULL);
        cr_assert_geq(fd, 0);
        cr_assert_not(created);
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        cr_assert_eq(st.st_size, 3);
        cr_assert_eq(st.st_mode & 07777, 0640);
        cr_assert_eq(output_path_claim(fd), 0);
        cr_assert_eq(fstat(fd, &st), 0);
        cr_assert_eq(st.st_size, 0);
        close(fd);
        output_path_unlink(dir_fd, dir, p);
        cr_assert_eq(access(p, F_OK), -1, "the file refused sessions leave was not removed");
}

Test(output_path, a_subdirectory_inside_is_fine) {
        char sub[400], p[500];
        snprintf(sub, sizeof(sub), "%s/sub", dir);
        cr_assert_eq(mkdir(sub, 0700), 0);
        snprintf(p, sizeof(p), "%s/sub/b.pftrace", dir);
        int fd = output_path_open(dir_fd, dir, p, NULL, NULL);
        cr_assert_geq(fd, 0);
        close(fd);
}

Test(output_path, paths_outside_or_odd_are_refused_untouched) {
        char p[600], lnk[400], victim[400];
        refused("/etc/passwd", "outside");
        refused("relative.pftrace", "not an absolute path");
        snprintf(p, sizeof(p), "%s/../outside/x", dir);
        refused(p, "\"..\"");
        snprintf(p, sizeof(p), "%s/./x", dir);
        refused(p, "\".\"");
        snprintf(p, sizeof(p), "%s//x", dir);
        refused(p, "empty");
        snprintf(p, sizeof(p), "%s", dir);
        refused(p, "outside");
        snprintf(p, sizeof(p), "%s/", dir);
        refused(p, "outside");
        snprintf(p, sizeof(p), "%sx/y", dir); /* a sibling sharing the prefix */
        refused(p, "outside");

        /* A symbolic link out of the directory, as the file or on the way. */
        snprintf(victim, sizeof(victim), "%s/victim", outside);
        int v = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_geq(v, 0);
        cr_assert_eq(write(v, "keep", 4), 4);
        close(v);
        snprintf(lnk, sizeof(lnk), "%s/link", dir);
        cr_assert_eq(symlink(victim, lnk), 0);
        refused(lnk, "symbolic link");
        snprintf(lnk, sizeof(lnk), "%s/linkdir", dir);
        cr_assert_eq(symlink(outside, lnk), 0);
        snprintf(p, sizeof(p), "%s/linkdir/new", dir);
        refused(p, "symbolic link");
        struct stat st;
        cr_assert_eq(stat(victim, &st), 0);
        cr_assert_eq(st.st_size, 4, "the symlink's target was truncated");
        snprintf(p, sizeof(p), "%s/new", outside);
        cr_assert_neq(access(p, F_OK), 0, "a file was created outside");

        /* A hard link to a file elsewhere. */
        snprintf(p, sizeof(p), "%s/hard", dir);
        cr_assert_eq(link(victim, p), 0);
        refused(p, "plain file");
        cr_assert_eq(stat(victim, &st), 0);
        cr_assert_eq(st.st_size, 4);
}

Test(output_path, no_directory_means_no_output_path) {
        char *error = NULL;
        cr_assert_lt(output_path_open(-EBADF, NULL, "/var/lib/traced/traces/x", NULL, &error), 0);
        cr_assert(strstr(error, "tracectl record -o") != NULL, "%s", error);
        free(error);
}

static void write_conf(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

Test(output_path, trace_directory_in_traced_conf) {
        char conf[400];
        struct traced_config cfg;
        char *error = NULL;
        snprintf(conf, sizeof(conf), "%s/traced.conf", top);

        write_conf(conf, "[plugins]\nenabled = yes\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), 0);
        cr_assert_str_eq(traced_config_trace_directory(&cfg), "/var/lib/traced/traces");
        traced_config_done(&cfg);

        write_conf(conf, "[service]\ntrace_directory = /srv/traces\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), 0);
        cr_assert_str_eq(traced_config_trace_directory(&cfg), "/srv/traces");
        traced_config_done(&cfg);

        write_conf(conf, "[service]\ntrace_directory =\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), 0);
        cr_assert_null(traced_config_trace_directory(&cfg));
        traced_config_done(&cfg);

        write_conf(conf, "[service]\n\ntrace_directory = traces\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), -EINVAL);
        cr_assert(strstr(error, ":3:") && strstr(error, "trace_directory"), "%s", error);
        free(error);
        error = NULL;
        write_conf(conf, "[service]\ntrace_directory = /a/../etc\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), -EINVAL);
        free(error);
}

Test(output_path, retention_in_traced_conf) {
        char conf[400];
        struct traced_config cfg;
        char *error = NULL;
        snprintf(conf, sizeof(conf), "%s/traced.conf", top);

        write_conf(conf, "[service]\nmax_use = 4G\nkeep_free = 512M\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), 0);
        cr_assert_eq(cfg.max_use, 4ull << 30);
        cr_assert_eq(cfg.keep_free, 512ull << 20);
        traced_config_done(&cfg);

        write_conf(conf, "[service]\nmax_use = 1000\n");
        cr_assert_eq(traced_config_load(conf, &cfg, &error), 0);
        cr_assert_eq(cfg.max_use, 1000);
        cr_assert_eq(cfg.keep_free, 0);
        traced_config_done(&cfg);

        const char *bad[] = { "max_use = 4X", "max_use = -1", "keep_free = 1GB", "keep_free =", "max_use = 99999999999T" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[128];
                snprintf(text, sizeof(text), "[service]\n%s\n", bad[i]);
                write_conf(conf, text);
                cr_assert_eq(traced_config_load(conf, &cfg, &error), -EINVAL, "%s was taken", bad[i]);
                cr_assert(strstr(error, ":2:"), "%s", error);
                free(error);
                error = NULL;
        }
}
