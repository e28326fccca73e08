/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sessions directory's files (daemons/traced/shared/resident.c): what
 * makes a file a resident session, what is refused with its line and
 * field, and the set's way through the control channel. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shared/resident.h"
#include "test-scratch.h"

#include "perfetto/config/trace_config.pb-c.h"

#define GOOD "buffers { size_kb: 1024 }\ndata_sources { config { name: \"linux.process_stats\" } }\n"

static char *parse_error(const char *name, const char *text) {
        struct resident_config c;
        char *error = NULL;
        int r = resident_parse(name, "/d/x.cfg", text, strlen(text), &c, &error);
        cr_assert_eq(r, -EINVAL, "\"%s\" was accepted", text);
        cr_assert(error);
        return error;
}

Test(resident, a_good_file_is_named_by_its_file) {
        struct resident_config c;
        char *error = NULL;
        cr_assert_eq(resident_parse("flight-recorder", "/d/flight-recorder.cfg", GOOD, strlen(GOOD), &c, &error), 0);
        Perfetto__Protos__TraceConfig *cfg = perfetto__protos__trace_config__unpack(NULL, c.size, c.config);
        cr_assert(cfg);
        cr_assert_str_eq(cfg->unique_session_name, "flight-recorder");
        cr_assert_eq(cfg->n_buffers, 1);
        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
        free(c.name);
        free(c.path);
        free(c.config);
}

Test(resident, bad_files_name_their_line_and_field) {
        struct {
                const char *name, *text, *want;
        } cases[] = {
                { "x", GOOD "duration_ms: 1000\n", "/d/x.cfg:3:1: a resident session runs until" },
                { "x", GOOD "unique_session_name: \"y\"\n", "/d/x.cfg:3:1: unique_session_name \"y\"" },
                { "x", "data_sources { config { name: \"a\" } }\n", "a resident session needs a buffer" },
                { "x", GOOD "bufers { size_kb: 1 }\n", "/d/x.cfg:3:" },
                { "x", GOOD "write_into_file: true\n", "/d/x.cfg:3:1: write_into_file needs output_path" },
                { "x", GOOD "write_into_file: true\noutput_path: \"/var/lib/traced/traces/x.pftrace\"\n",
                  "/d/x.cfg:4:1: a resident session writes into a directory" },
                { "x", GOOD "deferred_start: true\n", "/d/x.cfg:3:1: nobody starts" },
                { "bad name", GOOD, "is not a session name" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *e = parse_error(cases[i].name, cases[i].text);
                cr_expect(strstr(e, cases[i].want), "case %zu: \"%s\" does not say \"%s\"", i, e, cases[i].want);
                free(e);
        }
}

static void write_file(const char *dir, const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        cr_assert(f);
        fputs(text, f);
        cr_assert_eq(fclose(f), 0);
}

static unsigned n_errors;
static void on_error(const char *message, void *userdata) {
        n_errors++;
        cr_expect(strstr(message, "bad.cfg:"), "unexpected error: %s", message);
}

Test(resident, a_directory_skips_bad_files_and_other_names_and_survives_the_channel) {
        char dir[256], path[512];
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "resident"), 0);
        write_file(dir, "b.cfg", GOOD);
        write_file(dir, "a.cfg", GOOD);
        write_file(dir, "bad.cfg", "buffers { size_kb: 1 }\nnope: 1\n");
        write_file(dir, "c.cfg~", GOOD);
        write_file(dir, ".hidden.cfg", GOOD);
        write_file(dir, "d.cfg.dpkg-old", GOOD);
        struct resident_set set;
        n_errors = 0;
        cr_assert_eq(resident_load_dir(dir, &set, on_error, NULL), 1);
        cr_assert_eq(n_errors, 1);
        cr_assert_eq(set.n, 2);
        cr_assert_str_eq(set.v[0].name, "a");
        cr_assert_str_eq(set.v[1].name, "b");

        int fd = -1;
        cr_assert_eq(resident_set_to_memfd(&set, &fd), 0);
        cr_assert_lt(write(fd, "x", 1), 0, "the memfd is not sealed");
        struct resident_set back;
        cr_assert_eq(resident_set_from_fd(fd, &back), 0);
        cr_assert_eq(back.n, 2);
        for (size_t i = 0; i < 2; i++) {
                cr_assert_str_eq(back.v[i].name, set.v[i].name);
                cr_assert_str_eq(back.v[i].path, set.v[i].path);
                cr_assert_eq(back.v[i].size, set.v[i].size);
                cr_assert_eq(memcmp(back.v[i].config, set.v[i].config, set.v[i].size), 0);
        }
        close(fd);
        resident_set_done(&back);
        resident_set_done(&set);

        /* A truncated set is refused whole. */
        fd = memfd_create("t", MFD_CLOEXEC);
        static const uint8_t torn[] = { 5, 0, 0, 0, 'a', 'b' };
        cr_assert_eq(write(fd, torn, sizeof(torn)), (ssize_t) sizeof(torn));
        cr_assert_eq(resident_set_from_fd(fd, &back), -EBADMSG);
        close(fd);

        /* A missing directory is an empty set. */
        const char *names[] = { "a.cfg", "b.cfg", "bad.cfg", "c.cfg~", ".hidden.cfg", "d.cfg.dpkg-old" };
        for (size_t i = 0; i < 6; i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                cr_assert_eq(unlink(path), 0);
        }
        cr_assert_eq(rmdir(dir), 0);
        cr_assert_eq(resident_load_dir(dir, &set, on_error, NULL), 0);
        cr_assert_eq(set.n, 0);
}
