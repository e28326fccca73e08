/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tools/tracectl/snapshot-store.c: the snapshot directory's names, and
 * its retention (traced.conf's max_use= and keep_free=): the oldest other
 * snapshots go first, the new one and files that are no snapshots stay. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "snapshot-store.h"
#include "test-scratch.h"

static char top[256];

static void setup(void) {
        int r = test_mkdtemp(top, sizeof(top), "traced-test-snapshot-store-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
}

static void teardown(void) {
        cr_expect_eq(test_scratch_remove(top), 0, "could not remove %s", top);
}

TestSuite(snapshot_store, .init = setup, .fini = teardown);

/* A file of size bytes under top, last written age seconds ago. */
static void make_file(const char *name, size_t size, time_t age) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", top, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        cr_assert_eq(ftruncate(fd, (off_t) size), 0);
        time_t t = time(NULL) - age;
        cr_assert_eq(futimens(fd, (const struct timespec[]) { { .tv_sec = t }, { .tv_sec = t } }), 0);
        close(fd);
}

static bool exists(const char *name) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", top, name);
        return access(path, F_OK) == 0;
}

Test(snapshot_store, names_are_new_and_plain) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        cr_assert_eq(snapshot_store_path(top, "../etc/x.service", &a), 0);
        cr_assert(strncmp(a, top, strlen(top)) == 0 && strchr(a + strlen(top) + 1, '/') == NULL,
                  "%s is not a plain name in %s", a, top);
        cr_assert(a[strlen(top) + 1] != '.', "%s is hidden", a);
        cr_assert(strstr(a, ".pftrace") != NULL);
        /* Taken within the same second: another name. */
        int fd = open(a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(snapshot_store_path(top, "../etc/x.service", &b), 0);
        cr_assert_str_neq(a, b);
        char missing[300];
        snprintf(missing, sizeof(missing), "%s/none", top);
        char *c = NULL;
        cr_assert_eq(snapshot_store_path(missing, "x", &c), -ENOENT);
        cr_assert_eq(unlink(a), 0);
}

Test(snapshot_store, max_use_removes_the_oldest_others) {
        make_file("a-1.pftrace", 100, 400);
        make_file("b-1.pftrace", 100, 300);
        make_file("c-1.pftrace", 100, 200);
        make_file("notes.txt", 10000, 500);
        make_file(".tmp.tracectl-x", 10000, 500);
        make_file("new.pftrace", 150, 0);
        char path[512];
        snprintf(path, sizeof(path), "%s/new.pftrace", top);
        struct snapshot_store_pruned pr;
        cr_assert_eq(snapshot_store_committed(top, path, 300, 0, &pr), 0);
        /* 450 bytes of snapshots over 300: the two oldest go (350 is still over; then 250). */
        cr_assert_eq(pr.removed, 2);
        cr_assert_eq(pr.freed, 200);
        cr_assert(!pr.still_over);
        cr_assert(!exists("a-1.pftrace") && !exists("b-1.pftrace"));
        cr_assert(exists("c-1.pftrace") && exists("new.pftrace"));
        cr_assert(exists("notes.txt") && exists(".tmp.tracectl-x"), "a file that is no snapshot went");

        /* A cap below the new snapshot alone: every other goes, it stays. */
        cr_assert_eq(snapshot_store_committed(top, path, 100, 0, &pr), 0);
        cr_assert_eq(pr.removed, 1);
        cr_assert(pr.still_over);
        cr_assert(exists("new.pftrace") && !exists("c-1.pftrace"));

        /* No caps: nothing goes. */
        make_file("d-1.pftrace", 100, 100);
        cr_assert_eq(snapshot_store_committed(top, path, 0, 0, &pr), 0);
        cr_assert_eq(pr.removed, 0);
        cr_assert(exists("d-1.pftrace"));
}

Test(snapshot_store, keep_free_beyond_the_disk_removes_every_other) {
        make_file("a-1.pftrace", 100, 400);
        make_file("b-1.pftrace", 100, 300);
        make_file("new.pftrace", 100, 0);
        char path[512];
        snprintf(path, sizeof(path), "%s/new.pftrace", top);
        struct snapshot_store_pruned pr;
        /* More free than any disk has: all others go, the new one stays. */
        cr_assert_eq(snapshot_store_committed(top, path, 0, UINT64_MAX / 2, &pr), 0);
        cr_assert_eq(pr.removed, 2);
        cr_assert(pr.still_over);
        cr_assert(exists("new.pftrace"));
        /* One free byte is there: nothing goes. */
        make_file("c-1.pftrace", 100, 100);
        cr_assert_eq(snapshot_store_committed(top, path, 0, 1, &pr), 0);
        cr_assert_eq(pr.removed, 0);
        cr_assert(!pr.still_over);
        cr_assert(exists("c-1.pftrace"));
}
