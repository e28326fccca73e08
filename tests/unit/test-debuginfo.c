/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tracectl's debuginfo (tools/tracectl/debuginfo.c) on the pprof tests'
 * program (tests/pprof/inlined, -O2 -g): lines and inlined functions of an
 * address, names of functions by address, a stripped copy without them, a
 * build ID that is not the file's, a file that is not there; who opts in
 * to debuginfod. And pprof-writer.c: the string table, a file only once
 * committed.
 */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof-check.h"
#include "test-scratch.h"
#include "tools/tracectl/debuginfo.h"
#include "tools/tracectl/pprof-writer.h"

#define BIN PPROF_TEST_BIN_DIR "/inlined"
#define STRIPPED PPROF_TEST_BIN_DIR "/inlined-stripped"

/* The address of symbol name in BIN, and its build ID. */
static uint64_t symbol(const char *name) {
        char *cmd, line[256];
        cr_assert_gt(asprintf(&cmd, "nm %s | sed -n 's/^\\([0-9a-f]*\\) T %s$/\\1/p'", BIN, name), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        cr_assert_not_null(fgets(line, sizeof(line), p), "%s not in %s", name, BIN);
        pclose(p);
        free(cmd);
        return strtoull(line, NULL, 16);
}

static void build_id(const char *path, char *buf, size_t size) {
        char *cmd;
        cr_assert_gt(asprintf(&cmd, "readelf -n %s | sed -n 's/.*Build ID: //p'", path), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        cr_assert_not_null(fgets(buf, (int) size, p));
        buf[strcspn(buf, "\n")] = 0;
        pclose(p);
        free(cmd);
}

Test(debuginfo, lines_inlines_and_names) {
        struct debuginfo *d;
        cr_assert_eq(debuginfo_new(&(struct debuginfo_options){}, &d), 0);
        char bid[128];
        build_id(BIN, bid, sizeof(bid));
        uint64_t hot = symbol("pp_hot"), outer = symbol("pp_outer");
        /* Somewhere in pp_hot's loop, an address holds pp_mix inlined. */
        bool inlined = false;
        for (uint64_t a = hot; a < hot + 0x100 && !inlined; a++) {
                const struct debuginfo_line *l;
                size_t n = debuginfo_lines(d, BIN, bid, a, &l);
                if (n == 2) {
                        cr_assert_str_eq(l[0].function, "pp_mix");
                        cr_assert_str_eq(l[1].function, "pp_hot");
                        cr_assert(strstr(l[0].file, "inlined.c") && strstr(l[1].file, "inlined.c"));
                        cr_assert_gt(l[0].line, 0);
                        cr_assert_gt(l[1].line, 0);
                        cr_assert_neq(l[0].line, l[1].line, "the inner line is in pp_mix, the outer at its call");
                        inlined = true;
                }
        }
        cr_assert(inlined, "no address of pp_hot has pp_mix inlined");
        const struct debuginfo_line *l;
        cr_assert_eq(debuginfo_lines(d, BIN, bid, outer, &l), 1);
        cr_assert_str_eq(l[0].function, "pp_outer");
        cr_assert_str_eq(debuginfo_function(d, BIN, bid, hot + 4), "pp_hot");
        cr_assert_str_eq(debuginfo_function(d, BIN, NULL, outer + 1), "pp_outer");
        /* again, from what it remembers */
        cr_assert_str_eq(debuginfo_function(d, BIN, bid, hot + 4), "pp_hot");

        /* Stripped, its debug file nowhere known: no name, no line. */
        cr_assert_null(debuginfo_function(d, STRIPPED, NULL, hot + 4));
        /* A build ID that is not the file's: the file is not used. */
        cr_assert_null(debuginfo_function(d, BIN, "0123456789abcdef0123456789abcdef01234567", hot + 4));
        cr_assert_eq(debuginfo_lines(d, "/nonexistent/inlined", "89abcdef", hot + 4, &l), 0);
        struct debuginfo_stats st;
        debuginfo_stats(d, &st);
        cr_assert_eq(st.files_build_id_differs, 1);
        cr_assert_eq(st.files_missing, 2);
        cr_assert_eq(st.files_debuginfod, 0);
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        debuginfo_print_problems(d, f, "  ");
        fclose(f);
        cr_assert_not_null(strstr(text, "its build ID is not the trace's 0123456789abcdef"), "%s", text);
        cr_assert_not_null(strstr(text, "/nonexistent/inlined build ID 89abcdef: not found"), "%s", text);
        free(text);
        debuginfo_free(d);
}

Test(debuginfo, opting_in) {
        char *urls;
        setenv("DEBUGINFOD_URLS", "http://127.0.0.1:9", 1);
        cr_assert_eq(debuginfo_opt_in(NULL, false, false, &urls), 0);
        cr_assert_str_eq(urls, "http://127.0.0.1:9", "DEBUGINFOD_URLS opts in, as elfutils documents");
        cr_assert_null(getenv("DEBUGINFOD_URLS"), "no library asks a server on its own");
        free(urls);
        setenv("DEBUGINFOD_URLS", "http://127.0.0.1:9", 1);
        cr_assert_eq(debuginfo_opt_in(NULL, false, true, &urls), 0);
        cr_assert_null(urls, "--no-debuginfod");
        cr_assert_null(getenv("DEBUGINFOD_URLS"));
        cr_assert_eq(debuginfo_opt_in("http://127.0.0.1:8 http://127.0.0.1:7", true, false, &urls), 0);
        cr_assert_str_eq(urls, "http://127.0.0.1:8 http://127.0.0.1:7");
        free(urls);
        cr_assert_eq(debuginfo_opt_in(NULL, false, false, &urls), 0);
        cr_assert_null(urls, "nothing set, nothing asked: not opted in");
        if (access("/etc/debuginfod", F_OK) < 0)
                cr_assert_eq(debuginfo_opt_in(NULL, true, false, &urls), -ENOENT, "--debuginfod without a server");
}

/* ---- pprof-writer ---------------------------------------------------------- */

static char scratch[256];

static void remove_scratch(void) {
        if (scratch[0])
                cr_expect_eq(test_scratch_remove(scratch), 0);
        scratch[0] = 0;
}

TestSuite(pprof_writer, .fini = remove_scratch);

Test(pprof_writer, strings_once_and_the_file_only_when_committed) {
        cr_assert_eq(test_mkdtemp(scratch, sizeof(scratch), "test-pprof-writer-"), 0);
        char path[512];
        snprintf(path, sizeof(path), "%s/p.pb.gz", scratch);
        struct pprof_writer *w;
        cr_assert_eq(pprof_writer_open(path, &w), 0);
        cr_assert_eq(pprof_string(w, ""), 0);
        cr_assert_eq(pprof_string(w, NULL), 0);
        int64_t a = pprof_string(w, "samples"), b = pprof_string(w, "count");
        cr_assert(a > 0 && b > 0 && a != b);
        cr_assert_eq(pprof_string(w, "samples"), a);
        perftools_profiles_Profile *pr = pprof_writer_profile(w);
        perftools_profiles_ValueType vt;
        perftools_profiles_Profile_begin_sample_type(pr, &vt);
        perftools_profiles_ValueType_set_type(&vt, a);
        perftools_profiles_ValueType_set_unit(&vt, b);
        perftools_profiles_Profile_end_sample_type(pr, &vt);
        pprof_writer_flush(w);
        perftools_profiles_Profile_set_default_sample_type(pr, a);
        pprof_writer_flush(w);
        cr_assert_gt(pprof_writer_size(w), 0);
        cr_assert_neq(access(path, F_OK), 0, "nothing at the name before the commit");
        cr_assert_eq(pprof_writer_commit(w), 0);
        pprof_writer_free(w);
        struct pp_profile pp;
        cr_assert_eq(pp_read(path, &pp), 0);
        cr_assert_null(pp_check(&pp));
        cr_assert_eq(pp.n_strings, 3);
        cr_assert_str_eq(pp_string(&pp, pp.sample_types[0][0]), "samples");
        cr_assert_str_eq(pp_string(&pp, pp.default_sample_type), "samples");
        pp_free(&pp);

        /* Not committed: the old file stays, no temporary one is left. */
        cr_assert_eq(pprof_writer_open(path, &w), 0);
        (void) pprof_string(w, "other");
        pprof_writer_free(w);
        cr_assert_eq(pp_read(path, &pp), 0);
        cr_assert_eq(pp.n_strings, 3);
        pp_free(&pp);
        char *cmd;
        cr_assert_gt(asprintf(&cmd, "test $(ls -A %s | wc -l) = 1", scratch), 0);
        cr_assert_eq(system(cmd), 0, "a temporary file was left in %s", scratch);
        free(cmd);
        unlink(path);
}

Test(pprof_writer, fields_deflated_as_they_end_come_back_whole) {
        /* Far more than the 64 KiB the writer holds before it deflates:
         * every field written on the profile, each once, in order. */
        enum { N = 20000 };
        cr_assert_eq(test_mkdtemp(scratch, sizeof(scratch), "test-pprof-writer-"), 0);
        char path[512];
        snprintf(path, sizeof(path), "%s/p.pb.gz", scratch);
        struct pprof_writer *w;
        cr_assert_eq(pprof_writer_open(path, &w), 0);
        perftools_profiles_Profile *pr = pprof_writer_profile(w);
        perftools_profiles_ValueType vt;
        perftools_profiles_Profile_begin_sample_type(pr, &vt);
        perftools_profiles_ValueType_set_type(&vt, pprof_string(w, "samples"));
        perftools_profiles_ValueType_set_unit(&vt, pprof_string(w, "count"));
        perftools_profiles_Profile_end_sample_type(pr, &vt);
        pprof_writer_flush(w);
        for (uint64_t i = 1; i <= N; i++) {
                perftools_profiles_Sample s;
                perftools_profiles_Label l;
                uint64_t ids[] = { i, i + 1, i + 2 };
                int64_t v = (int64_t) i;
                perftools_profiles_Profile_begin_sample(pr, &s);
                perftools_profiles_Sample_set_location_id(&s, ids, 3);
                perftools_profiles_Sample_set_value(&s, &v, 1);
                perftools_profiles_Sample_begin_label(&s, &l);
                perftools_profiles_Label_set_key(&l, pprof_string(w, "pid"));
                perftools_profiles_Label_set_num(&l, v);
                perftools_profiles_Sample_end_label(&s, &l);
                perftools_profiles_Profile_end_sample(pr, &s);
                pprof_writer_flush(w);
        }
        cr_assert_gt(pprof_writer_size(w), 4 * 65536);
        cr_assert_eq(pprof_writer_commit(w), 0);
        pprof_writer_free(w);

        struct pp_profile pp;
        cr_assert_eq(pp_read(path, &pp), 0);
        cr_assert_eq(pp.n_sample_types, 1);
        cr_assert_eq(pp.n_samples, N);
        for (size_t i = 0; i < N; i++) {
                const struct pp_sample *s = &pp.samples[i];
                cr_assert_eq(s->n_locations, 3);
                cr_assert_eq(s->location_ids[0], i + 1);
                cr_assert_eq(s->location_ids[2], i + 3);
                cr_assert_eq(s->n_values, 1);
                cr_assert_eq(s->values[0], (int64_t) i + 1);
                cr_assert_eq(s->n_labels, 1);
                cr_assert_str_eq(pp_string(&pp, s->labels[0].key), "pid");
                cr_assert_eq(s->labels[0].num, (int64_t) i + 1);
        }
        cr_assert_eq(pp.n_strings, 4);
        pp_free(&pp);
        unlink(path);
}

Test(pprof_writer, a_field_left_open_is_an_error_and_no_file) {
        cr_assert_eq(test_mkdtemp(scratch, sizeof(scratch), "test-pprof-writer-"), 0);
        char path[512];
        snprintf(path, sizeof(path), "%s/p.pb.gz", scratch);
        struct pprof_writer *w;
        cr_assert_eq(pprof_writer_open(path, &w), 0);
        perftools_profiles_Sample s;
        perftools_profiles_Profile_begin_sample(pprof_writer_profile(w), &s);
        perftools_profiles_Sample_set_location_id(&s, (const uint64_t[]){ 1 }, 1);
        cr_assert_eq(pprof_writer_commit(w), -EBUSY);
        pprof_writer_free(w);
        cr_assert_neq(access(path, F_OK), 0, "nothing at the name");
}
