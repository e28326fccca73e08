/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record-output.h"
#include "test-scratch.h"

static char dir[256], path[400];

static void setup(void) {
        int r = test_mkdtemp(dir, sizeof(dir), "traced-test-record-output-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        snprintf(path, sizeof(path), "%s/t.pftrace", dir);
}

static void teardown(void) {
        cr_expect_eq(test_scratch_remove(dir), 0, "could not remove %s", dir);
}

TestSuite(record_output, .init = setup, .fini = teardown);

static size_t entries(void) {
        DIR *d = opendir(dir);
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
        closedir(d);
        return n;
}

static void write_file(const char *p, const char *text, mode_t mode) {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
        cr_assert_eq(chmod(p, mode), 0);
}

static void assert_content(const char *p, const char *text) {
        char buf[64] = {};
        int fd = open(p, O_RDONLY);
        cr_assert_geq(fd, 0, "%s is gone", p);
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        cr_assert_str_eq(buf, text, "%s holds %zd bytes", p, n);
}

Test(record_output, a_failed_recording_leaves_the_old_file_and_nothing_else) {
        write_file(path, "old trace", 0640);
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, path), 0);
        cr_assert_eq(write(o.fd, "partial", 7), 7);
        cr_assert_eq(entries(), 2, "the new file is written beside");
        assert_content(path, "old trace");
        record_output_free(&o);
        assert_content(path, "old trace");
        cr_assert_eq(entries(), 1, "the temporary file stayed");
        cr_assert_eq(o.fd, -EBADF);
}

Test(record_output, a_finished_recording_replaces_the_file_keeping_its_mode) {
        write_file(path, "old trace", 0604);
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, path), 0);
        cr_assert_eq(write(o.fd, "new", 3), 3);
        cr_assert_eq(record_output_commit(&o), 0);
        record_output_free(&o);
        assert_content(path, "new");
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_mode & 07777, 0604);
        cr_assert_eq(entries(), 1);
}

Test(record_output, a_new_file_gets_the_umask_mode) {
        mode_t old = umask(027);
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, path), 0);
        cr_assert_eq(access(path, F_OK), -1, "the file exists before the recording completed");
        cr_assert_eq(record_output_commit(&o), 0);
        record_output_free(&o);
        umask(old);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_mode & 07777, 0640);
}

Test(record_output, a_symbolic_link_keeps_pointing_at_the_new_trace) {
        char target[450];
        snprintf(target, sizeof(target), "%s/real.pftrace", dir);
        write_file(target, "old", 0644);
        cr_assert_eq(symlink(target, path), 0);
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, path), 0);
        cr_assert_eq(write(o.fd, "new", 3), 3);
        cr_assert_eq(record_output_commit(&o), 0);
        record_output_free(&o);
        struct stat st;
        cr_assert_eq(lstat(path, &st), 0);
        cr_assert(S_ISLNK(st.st_mode));
        assert_content(target, "new");
}

Test(record_output, a_device_is_written_directly) {
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, "/dev/null"), 0);
        cr_assert_null(o.tmp_path);
        cr_assert_eq(record_output_commit(&o), 0);
        record_output_free(&o);
}

Test(record_output, a_missing_directory_is_an_error_and_leaves_nothing) {
        char p[450];
        snprintf(p, sizeof(p), "%s/no/such.pftrace", dir);
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, p), -ENOENT);
        cr_assert_eq(o.fd, -EBADF);
        cr_assert_null(o.path);
        cr_assert_eq(entries(), 0);
}

/* A Trace of n packets, each field 1 with len bytes of 'x': into buf,
 * returns its size. */
static size_t trace_bytes(uint8_t *buf, unsigned n, uint8_t len) {
        size_t k = 0;
        for (unsigned i = 0; i < n; i++) {
                buf[k++] = 0x0a;
                buf[k++] = len;
                memset(buf + k, 'x', len);
                k += len;
        }
        return k;
}

static off_t file_size(int fd) {
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        return st.st_size;
}

Test(record_output, trim_cuts_a_torn_last_packet) {
        struct record_output o = RECORD_OUTPUT_INIT;
        uint8_t buf[256];
        cr_assert_eq(record_output_open(&o, path), 0);
        size_t whole = trace_bytes(buf, 3, 20);
        /* The fourth packet's header says 50 bytes; 10 were written. */
        buf[whole] = 0x0a;
        buf[whole + 1] = 50;
        memset(buf + whole + 2, 'y', 10);
        cr_assert_eq(write(o.fd, buf, whole + 12), (ssize_t) (whole + 12));
        uint64_t packets, cut;
        cr_assert_eq(record_output_trim(&o, &packets, &cut), 0);
        cr_assert_eq(packets, 3);
        cr_assert_eq(cut, 12);
        cr_assert_eq(file_size(o.fd), (off_t) whole);
        cr_assert_eq(record_output_commit(&o), 0);
        record_output_free(&o);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_size, (off_t) whole);
}

Test(record_output, trim_leaves_a_whole_trace_alone) {
        struct record_output o = RECORD_OUTPUT_INIT;
        uint8_t buf[256];
        cr_assert_eq(record_output_open(&o, path), 0);
        size_t whole = trace_bytes(buf, 5, 30);
        cr_assert_eq(write(o.fd, buf, whole), (ssize_t) whole);
        uint64_t packets, cut;
        cr_assert_eq(record_output_trim(&o, &packets, &cut), 0);
        cr_assert_eq(packets, 5);
        cr_assert_eq(cut, 0);
        cr_assert_eq(file_size(o.fd), (off_t) whole);
        record_output_free(&o);
}

Test(record_output, trim_of_an_empty_file_keeps_no_packet) {
        struct record_output o = RECORD_OUTPUT_INIT;
        cr_assert_eq(record_output_open(&o, path), 0);
        uint64_t packets = 1, cut = 1;
        cr_assert_eq(record_output_trim(&o, &packets, &cut), 0);
        cr_assert_eq(packets, 0);
        cr_assert_eq(cut, 0);
        record_output_free(&o);
        cr_assert_eq(entries(), 0);
}
