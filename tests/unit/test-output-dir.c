/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A rotation's files (core/output/output-dir.c), and the directory a
 * consumer passes to rotate in (output-path.c). */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/output/output-dir.h"
#include "core/output/output-path.h"
#include "test-scratch.h"

static char top[256];
static int top_fd = -1;

static void setup(void) {
        int r = test_mkdtemp(top, sizeof(top), "traced-test-output-dir-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        top_fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(top_fd, 0);
}

static void teardown(void) {
        close(top_fd);
        cr_expect_eq(test_scratch_remove(top), 0, "could not remove %s", top);
}

TestSuite(output_dir, .init = setup, .fini = teardown);

static bool exists(const char *name) {
        return faccessat(top_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A Trace.packet of n payload bytes (n < 128). */
static void put_packet(int fd, size_t n) {
        uint8_t buf[130] = { 0x0a, (uint8_t) n };
        cr_assert_eq(write(fd, buf, n + 2), (ssize_t) (n + 2));
}

/* A closed file of the session prefix, number index, size bytes in
 * packets, closed at time t (s). */
static void make_closed(const char *prefix, uint64_t index, size_t packets, time_t t) {
        int fd = output_dir_create(top_fd, prefix, index);
        cr_assert_geq(fd, 0, "%s", strerror(-fd));
        for (size_t i = 0; i < packets; i++)
                put_packet(fd, 98);
        cr_assert_eq(output_dir_close(top_fd, fd, prefix, index, true), 0);
        close(fd);
        char name[OUTPUT_DIR_NAME_MAX];
        snprintf(name, sizeof(name), "%s-%06llu.pftrace", prefix, (unsigned long long) index);
        struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };
        cr_assert_eq(utimensat(top_fd, name, ts, AT_SYMLINK_NOFOLLOW), 0);
}

Test(output_dir, the_prefix_sorts_in_time_order) {
        char a[OUTPUT_DIR_NAME_MAX], b[OUTPUT_DIR_NAME_MAX];
        output_dir_prefix(1764644835, a); /* 2025-12-02T03:07:15Z */
        output_dir_prefix(1764644836, b);
        cr_assert_str_eq(a, "trace-20251202T030715Z");
        cr_assert_lt(strcmp(a, b), 0);
}

Test(output_dir, a_file_is_part_until_closed_whole) {
        int fd = output_dir_create(top_fd, "trace-x", 1);
        cr_assert_geq(fd, 0);
        cr_assert(exists("trace-x-000001.pftrace.part"));
        cr_assert(!exists("trace-x-000001.pftrace"));
        /* Never an existing name. */
        cr_assert_eq(output_dir_create(top_fd, "trace-x", 1), -EEXIST);
        put_packet(fd, 10);
        cr_assert_eq(output_dir_close(top_fd, fd, "trace-x", 1, true), 0);
        close(fd);
        cr_assert(exists("trace-x-000001.pftrace"));
        cr_assert(!exists("trace-x-000001.pftrace.part"));
        /* A file given up goes. */
        fd = output_dir_create(top_fd, "trace-x", 2);
        close(fd);
        output_dir_remove_part(top_fd, "trace-x", 2);
        cr_assert(!exists("trace-x-000002.pftrace.part"));
}

/* fsync, counted by what it syncs (the test links with --wrap=fsync). */
static unsigned fsyncs_of_files, fsyncs_of_dirs;
int __real_fsync(int fd);
int __wrap_fsync(int fd);
int __wrap_fsync(int fd) {
        struct stat st;
        if (fstat(fd, &st) == 0)
                ++*(S_ISDIR(st.st_mode) ? &fsyncs_of_dirs : &fsyncs_of_files);
        return __real_fsync(fd);
}

Test(output_dir, a_close_syncs_the_file_and_the_directory_only_when_asked) {
        /* A cut's close: the file, not its directory. */
        int fd = output_dir_create(top_fd, "trace-x", 1);
        cr_assert_geq(fd, 0);
        put_packet(fd, 10);
        fsyncs_of_files = fsyncs_of_dirs = 0;
        cr_assert_eq(output_dir_close(top_fd, fd, "trace-x", 1, false), 0);
        close(fd);
        cr_assert_eq(fsyncs_of_files, 1);
        cr_assert_eq(fsyncs_of_dirs, 0);
        cr_assert(exists("trace-x-000001.pftrace"));
        /* The last file's: both. */
        fd = output_dir_create(top_fd, "trace-x", 2);
        cr_assert_geq(fd, 0);
        put_packet(fd, 10);
        cr_assert_eq(output_dir_close(top_fd, fd, "trace-x", 2, true), 0);
        close(fd);
        cr_assert_eq(fsyncs_of_files, 2);
        cr_assert_eq(fsyncs_of_dirs, 1);
        cr_assert(exists("trace-x-000002.pftrace"));
}

Test(output_dir, a_symbolic_link_is_never_followed) {
        char target[400];
        snprintf(target, sizeof(target), "%s/elsewhere", top);
        cr_assert_eq(symlinkat(target, top_fd, "trace-x-000001.pftrace.part"), 0);
        cr_assert_lt(output_dir_create(top_fd, "trace-x", 1), 0);
        cr_assert(!exists("elsewhere"));
}

Test(output_dir, listing_is_oldest_first_and_only_closed_files_of_ours) {
        make_closed("trace-b", 1, 1, 3000);
        make_closed("trace-a", 1, 1, 1000);
        make_closed("trace-a", 2, 1, 2000);
        int fd = output_dir_create(top_fd, "trace-a", 3); /* being written */
        close(fd);
        fd = openat(top_fd, "notes.txt", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        close(fd);
        fd = openat(top_fd, "trace-a-1.pftrace", O_CREAT | O_WRONLY | O_CLOEXEC, 0600); /* not a number of ours */
        close(fd);

        struct dir_file *files;
        size_t n;
        cr_assert_eq(output_dir_list(top_fd, "trace-a", &files, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(files[0].name, "trace-a-000001.pftrace");
        cr_assert_str_eq(files[1].name, "trace-a-000002.pftrace");
        cr_assert_eq(files[0].bytes, 100);
        free(files);
        cr_assert_eq(output_dir_list(top_fd, NULL, &files, &n), 0);
        cr_assert_eq(n, 3);
        cr_assert_str_eq(files[2].name, "trace-b-000001.pftrace");
        free(files);
}

Test(output_dir, pruning_removes_the_oldest_first) {
        for (uint64_t i = 1; i <= 5; i++)
                make_closed("trace-a", i, 2, (time_t) (1000 + i)); /* 200 bytes each */
        struct dir_file *files;
        size_t n;
        uint64_t freed;
        cr_assert_eq(output_dir_list(top_fd, "trace-a", &files, &n), 0);
        cr_assert_eq(dir_files_prune(top_fd, files, n, 3, 0, &freed), 2);
        cr_assert_eq(freed, 400);
        free(files);
        cr_assert(!exists("trace-a-000001.pftrace") && !exists("trace-a-000002.pftrace"));
        cr_assert(exists("trace-a-000003.pftrace"));
        cr_assert_eq(output_dir_list(top_fd, "trace-a", &files, &n), 0);
        cr_assert_eq(dir_files_prune(top_fd, files, n, 0, 250, &freed), 2);
        free(files);
        cr_assert(exists("trace-a-000005.pftrace") && !exists("trace-a-000004.pftrace"));
}

Test(output_dir, the_tree_is_listed_across_subdirectories_without_links) {
        make_closed("trace-a", 1, 1, 2000);
        cr_assert_eq(mkdirat(top_fd, "sess", 0700), 0);
        int sub = openat(top_fd, "sess", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(sub, 0);
        int fd = output_dir_create(sub, "trace-s", 1);
        put_packet(fd, 10);
        cr_assert_eq(output_dir_close(sub, fd, "trace-s", 1, true), 0);
        close(fd);
        struct timespec ts[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };
        cr_assert_eq(utimensat(sub, "trace-s-000001.pftrace", ts, 0), 0);
        close(sub);
        cr_assert_eq(symlinkat("sess", top_fd, "link"), 0);

        struct dir_file *files;
        size_t n;
        cr_assert_eq(output_dir_list_tree(top_fd, &files, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(files[0].name, "sess/trace-s-000001.pftrace");
        cr_assert_eq(dir_files_remove(top_fd, files[0].name), 0);
        free(files);
        cr_assert(!exists("sess/trace-s-000001.pftrace"));
        cr_assert_eq(dir_files_remove(top_fd, "link/x"), -ENOTDIR);
}

Test(output_dir, trimming_keeps_whole_packets) {
        int fd = output_dir_create(top_fd, "trace-t", 1);
        put_packet(fd, 50);
        put_packet(fd, 50);
        uint8_t torn[] = { 0x0a, 100, 1, 2, 3 };
        cr_assert_eq(write(fd, torn, sizeof(torn)), (ssize_t) sizeof(torn));
        cr_assert_eq(output_dir_trim(fd), 0);
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        cr_assert_eq(st.st_size, 104);
        close(fd);
}

Test(output_dir, a_directory_to_rotate_in_must_be_the_consumers) {
        cr_assert_null(output_path_check_dir(top_fd, geteuid()));
        cr_assert_null(output_path_check_dir(top_fd, 0));
        cr_assert_not_null(output_path_check_dir(top_fd, 12345));
}
