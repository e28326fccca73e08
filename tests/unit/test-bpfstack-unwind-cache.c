/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The bpfstack plugin's unwind tables off the event loop: the cache on
 * disk (stored, read back, refused once its file changed or it is
 * malformed, kept under its bound) and the worker threads (compile this
 * very test binary's tables, hottest job first, and what is still queued
 * when they are let go into the cache). */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-scratch.h"
#include "unwind-cache.h"
#include "unwind-compiler.h"

static char dir[512], cache[600];

static void setup(void) {
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "unwind-cache-"), 0);
        snprintf(cache, sizeof(cache), "%s/cache", dir);
}

static void teardown(void) {
        (void) test_scratch_remove(dir);
}

TestSuite(unwind_cache, .init = setup, .fini = teardown);

/* A file of size bytes under dir; its fd (read-only). */
static int make_file(const char *name, size_t size) {
        char path[700];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, (off_t) size), 0);
        return fd;
}

static const struct bpfstack_row rows[] = {
        { .pc = 0x1000, .cfa_off = 8, .kind = BPFSTACK_ROW_CFA_SP },
        { .pc = 0x1004, .cfa_off = 16, .bp_off8 = -2, .kind = BPFSTACK_ROW_CFA_SP | BPFSTACK_ROW_BP_SAVED },
        { .pc = 0x2000, .kind = BPFSTACK_ROW_NONE },
};

Test(unwind_cache, stored_then_read_back) {
        int fd = make_file("elf", 4096);
        struct bpfstack_row *got = NULL;
        size_t n = 0;
        int err = 0;
        cr_assert_eq(unwind_cache_load(cache, fd, 100, &got, &n, &err), -ENOENT, "nothing cached yet");
        cr_assert_eq(unwind_cache_store(cache, fd, rows, 3, 0, 1 << 20), 0);
        cr_assert_eq(unwind_cache_load(cache, fd, 100, &got, &n, &err), 0);
        cr_assert_eq(n, 3);
        cr_assert_eq(err, 0);
        cr_assert_eq(memcmp(got, rows, sizeof(rows)), 0);
        free(got);
        cr_assert_eq(unwind_cache_load(cache, fd, 2, &got, &n, &err), -EBADMSG, "more rows than allowed");
        close(fd);
}

Test(unwind_cache, refusal_remembered) {
        int fd = make_file("elf", 4096);
        struct bpfstack_row *got = NULL;
        size_t n = 1;
        int err = 0;
        cr_assert_eq(unwind_cache_store(cache, fd, NULL, 0, -E2BIG, 1 << 20), 0);
        cr_assert_eq(unwind_cache_load(cache, fd, 100, &got, &n, &err), 0);
        cr_assert_eq(n, 0);
        cr_assert_eq(err, -E2BIG);
        cr_assert_null(got);
        close(fd);
}

Test(unwind_cache, changed_file_not_used) {
        int fd = make_file("elf", 4096);
        cr_assert_eq(unwind_cache_store(cache, fd, rows, 3, 0, 1 << 20), 0);
        cr_assert_eq(ftruncate(fd, 8192), 0); /* another size, another mtime */
        struct bpfstack_row *got = NULL;
        size_t n = 0;
        int err = 0;
        cr_assert_eq(unwind_cache_load(cache, fd, 100, &got, &n, &err), -ENOENT);
        close(fd);
}

Test(unwind_cache, malformed_refused) {
        int fd = make_file("elf", 4096);
        cr_assert_eq(unwind_cache_store(cache, fd, rows, 3, 0, 1 << 20), 0);
        /* Cut short: the rows the header announces are not all there. */
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        char path[800];
        snprintf(path, sizeof(path), "%s/%llx-%llx.rows", cache, (unsigned long long) st.st_dev,
                 (unsigned long long) st.st_ino);
        cr_assert_eq(truncate(path, 64 + 8), 0, "%s: %s", path, strerror(errno));
        struct bpfstack_row *got = NULL;
        size_t n = 0;
        int err = 0;
        cr_assert_eq(unwind_cache_load(cache, fd, 100, &got, &n, &err), -EBADMSG);
        /* Unsorted rows. */
        struct bpfstack_row bad[] = { rows[2], rows[0] };
        cr_assert_eq(unwind_cache_store(cache, fd, bad, 2, 0, 1 << 20), 0);
        cr_assert_eq(unwind_cache_load(cache, fd, 100, &got, &n, &err), -EBADMSG);
        close(fd);
}

/* The bytes of the cache's tables. */
static uint64_t cache_bytes(void) {
        char cmd[800];
        snprintf(cmd, sizeof(cmd), "cat %s/*.rows | wc -c", cache);
        FILE *p = popen(cmd, "r");
        cr_assert_not_null(p);
        unsigned long long n = 0;
        cr_assert_eq(fscanf(p, "%llu", &n), 1);
        pclose(p);
        return n;
}

Test(unwind_cache, kept_under_its_bound) {
        /* Each table: a 64-byte header and 3 rows of 8 bytes. */
        const uint64_t bound = 3 * 88;
        int fds[6];
        for (int k = 0; k < 6; k++) {
                char name[16];
                snprintf(name, sizeof(name), "elf%d", k);
                fds[k] = make_file(name, 4096);
                cr_assert_eq(unwind_cache_store(cache, fds[k], rows, 3, 0, bound), 0);
                cr_assert_leq(cache_bytes(), bound);
        }
        struct bpfstack_row *got = NULL;
        size_t n = 0;
        int err = 0;
        cr_assert_eq(unwind_cache_load(cache, fds[5], 100, &got, &n, &err), 0, "the newest stays");
        free(got);
        cr_assert_eq(unwind_cache_store(cache, fds[0], rows, 3, 0, 10), -E2BIG, "larger than the bound");
        for (int k = 0; k < 6; k++)
                close(fds[k]);
}

/* The worker: jobs handed back once compiled, the hottest first. */
static struct unwind_job *job_of(const char *path, uint64_t heat) {
        struct unwind_job *j = calloc(1, sizeof(*j));
        cr_assert_not_null(j);
        j->fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(j->fd, 0, "%s: %s", path, strerror(errno));
        j->max_rows = 1u << 20;
        j->heat = heat;
        return j;
}

/* The next want jobs the worker hands back, in the order it finished them
 * (each take's list is newest first). */
static void wait_done(struct unwind_compiler *c, struct unwind_job **ret, size_t want) {
        size_t n = 0;
        for (int i = 0; i < 3000 && n < want; i++) {
                size_t first = n;
                for (struct unwind_job *j = unwind_compiler_take(c); j && n < want; j = j->next)
                        ret[n++] = j;
                for (size_t a = first, b = n; a + 1 < b; a++, b--) {
                        struct unwind_job *t = ret[a];
                        ret[a] = ret[b - 1];
                        ret[b - 1] = t;
                }
                if (n < want)
                        usleep(10 * 1000);
        }
        cr_assert_eq(n, want, "the worker handed back every job");
}

Test(unwind_cache, worker_compiles_and_caches) {
        struct unwind_compiler *c;
        cr_assert_eq(unwind_compiler_new(cache, &c), 0);
        unwind_compiler_submit(c, job_of("/proc/self/exe", 1));
        struct unwind_job *j;
        wait_done(c, &j, 1);
        cr_assert_eq(j->error, 0, "%s", strerror(-j->error));
        cr_assert_gt(j->n, 0);
        cr_assert_not(j->from_cache);
        cr_assert_eq(j->cache_error, 0);
        size_t n = j->n;
        unwind_job_free(j);
        /* Again: from the cache, the same rows. */
        unwind_compiler_submit(c, job_of("/proc/self/exe", 1));
        wait_done(c, &j, 1);
        cr_assert(j->from_cache);
        cr_assert_eq(j->n, n);
        unwind_job_free(j);
        unwind_compiler_free(c);
}

Test(unwind_cache, worker_takes_the_hottest_first) {
        struct unwind_compiler *c;
        cr_assert_eq(unwind_compiler_new(NULL, &c), 0);
        /* Four jobs of equal heat, then the first queued heated past the
         * others: among the jobs still waiting it is taken first. Each of
         * the UNWIND_COMPILER_THREADS workers may have taken a job before
         * the heat came (a compile takes far longer than submitting and
         * heating), so it starts by the third at the latest; unheated, it
         * would start fourth (among equals the newest is taken first). */
        struct unwind_job *js[4];
        for (int k = 0; k < 4; k++)
                js[k] = job_of("/proc/self/exe", 10);
        for (int k = 0; k < 4; k++) {
                js[k]->dev = (uint64_t) k;
                unwind_compiler_submit(c, js[k]);
        }
        unwind_compiler_heat(c, js[0], 100);
        struct unwind_job *done[4];
        wait_done(c, done, 4);
        cr_assert_leq(js[0]->start_seq, UNWIND_COMPILER_THREADS + 1, "the heated job was taken %llu of 4",
                      (unsigned long long) js[0]->start_seq);
        for (int k = 0; k < 4; k++)
                unwind_job_free(done[k]);
        unwind_compiler_free(c);
}

/* A copy of this test binary under dir (another inode: another table). */
static void copy_self(const char *to) {
        int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
        cr_assert(in >= 0 && out >= 0, "%s: %s", to, strerror(errno));
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t) n), n);
        close(in);
        close(out);
}

/* Let go with files still queued (the instance stopped): with a cache,
 * they are compiled into it for the next recording, not dropped. */
Test(unwind_cache, queued_files_compiled_into_the_cache_after_free) {
        enum { N = 6 };
        char paths[N][700];
        struct unwind_compiler *c;
        cr_assert_eq(unwind_compiler_new(cache, &c), 0);
        for (int k = 0; k < N; k++) {
                snprintf(paths[k], sizeof(paths[k]), "%s/exe-%d", dir, k);
                copy_self(paths[k]);
        }
        for (int k = 0; k < N; k++)
                unwind_compiler_submit(c, job_of(paths[k], 1));
        unwind_compiler_free(c); /* two threads: most of the six still queued */
        for (int k = 0; k < N; k++) {
                int fd = open(paths[k], O_RDONLY | O_CLOEXEC);
                cr_assert_geq(fd, 0);
                struct bpfstack_row *got = NULL;
                size_t n = 0;
                int error = 0, r = -ENOENT;
                /* Given up after a minute: the threads run at idle priority. */
                for (int i = 0; i < 6000 && r < 0; i++) {
                        r = unwind_cache_load(cache, fd, 1u << 20, &got, &n, &error);
                        if (r < 0)
                                usleep(10 * 1000);
                }
                close(fd);
                cr_assert_eq(r, 0, "%s was not compiled into the cache: %s", paths[k], strerror(-r));
                cr_assert_eq(error, 0);
                cr_assert_gt(n, 0);
                free(got);
        }
}
