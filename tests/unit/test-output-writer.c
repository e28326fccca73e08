/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/output/output-writer.h"

/* The test's file, removed by the suite's .fini whether the test passed
 * or not. */
static char made[64];

static void remove_made(void) {
        if (made[0] && unlink(made) < 0 && errno != ENOENT)
                cr_expect_fail("could not remove %s: %s", made, strerror(errno));
        made[0] = '\0';
}

TestSuite(output_writer, .fini = remove_made);

/* A file next to the test binary: a real file system (O_DIRECT may or may
 * not be taken; both must give the same bytes). */
static int temp_file(char *path, size_t n) {
        snprintf(path, n, "output-writer-test-XXXXXX");
        int fd = mkostemp(path, O_CLOEXEC);
        cr_assert_geq(fd, 0);
        snprintf(made, sizeof(made), "%s", path);
        return fd;
}

static uint8_t pattern(size_t i) {
        return (uint8_t) (i * 7 + i / 4093);
}

/* Puts n pattern bytes (starting at pattern index *at), waiting for space
 * like the service does: with odd, in pieces of varying size with partial
 * submits between; else as much as fits each time, and no submit. */
static void put_as(struct output_writer *w, size_t *at, size_t n, bool odd) {
        size_t piece = 1;
        while (n > 0) {
                size_t avail;
                uint8_t *dst = output_writer_space(w, &avail);
                if (!dst) {
                        cr_assert_eq(output_writer_wait_space(w), 0);
                        continue;
                }
                size_t k = n < avail ? n : avail;
                k = !odd || k < piece ? k : piece;
                for (size_t i = 0; i < k; i++)
                        dst[i] = pattern(*at + i);
                output_writer_commit(w, k);
                *at += k;
                n -= k;
                piece = piece * 3 % 70001 + 1;
                if (odd && piece % 5 == 0)
                        output_writer_submit(w, false);
        }
}

static void put(struct output_writer *w, size_t *at, size_t n) {
        put_as(w, at, n, true);
}

static void wait_written(struct output_writer *w) {
        for (int i = 0; i < 2000 && output_writer_pending(w) > 0; i++) {
                struct pollfd p = { .fd = output_writer_event_fd(w), .events = POLLIN };
                (void) poll(&p, 1, 10);
                (void) output_writer_ack(w);
        }
        cr_assert_eq(output_writer_pending(w), 0, "%zu bytes never reached the file", output_writer_pending(w));
}

/* Submits everything put, waits until it is in the file, checks that no
 * write failed, and frees the writer. */
static void end_without_error(struct output_writer *w) {
        output_writer_submit(w, true);
        wait_written(w);
        cr_assert_eq(output_writer_error(w), 0);
        output_writer_free(w);
}

static void check_file(int fd, size_t skip, size_t n) {
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        cr_assert_eq((size_t) st.st_size, skip + n, "file has %zu bytes, expected %zu", (size_t) st.st_size, skip + n);
        uint8_t *buf = malloc(n + 1);
        cr_assert_eq(pread(fd, buf, n, (off_t) skip), (ssize_t) n);
        for (size_t i = 0; i < n; i++)
                cr_assert_eq(buf[i], pattern(i), "byte %zu differs", i);
        free(buf);
}

/* 9 MB and an odd tail, put in odd pieces with partial submits between:
 * the file holds exactly those bytes, and its flags are as before. */
Test(output_writer, writes_every_byte_in_order) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        int flags = fcntl(fd, F_GETFL);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        size_t at = 0, total = 9u * 1024u * 1024u + 12345u;
        put(w, &at, total);
        end_without_error(w);
        cr_assert_eq(fcntl(fd, F_GETFL), flags, "the file's flags were not restored");
        check_file(fd, 0, total);
        close(fd);
        unlink(path);
}

/* A file whose offset is not block-aligned cannot take O_DIRECT writes: it
 * is written through the page cache, after what it held. */
Test(output_writer, unaligned_offset_is_written_buffered) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        char head[100];
        memset(head, 'h', sizeof(head));
        cr_assert_eq(write(fd, head, sizeof(head)), (ssize_t) sizeof(head));
        /* check_file compares from the offset on; the head stays. */
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        cr_assert_not(output_writer_is_direct(w));
        size_t at = 0, total = 3u * 1024u * 1024u + 77u;
        put(w, &at, total);
        output_writer_submit(w, true);
        wait_written(w);
        output_writer_free(w);
        check_file(fd, sizeof(head), total);
        char back[100];
        cr_assert_eq(pread(fd, back, sizeof(back), 0), (ssize_t) sizeof(back));
        cr_assert_arr_eq(back, head, sizeof(head));
        close(fd);
        unlink(path);
}

/* A partial submit makes what was put visible in the file at once, an
 * unaligned tail included (an O_DIRECT writer keeps that tail to write it
 * again with the next block); the final submit completes the file, and the
 * caller's offset ends after the data. */
Test(output_writer, partial_submit_shows_everything_in_the_file) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        cr_log_info("O_DIRECT: %s", output_writer_is_direct(w) ? "yes" : "no");
        size_t at = 0;
        put(w, &at, 10000);
        output_writer_submit(w, false);
        struct stat st = {};
        for (int i = 0; i < 400 && st.st_size < 10000; i++) {
                usleep(5000);
                cr_assert_eq(fstat(fd, &st), 0);
        }
        check_file(fd, 0, 10000);
        cr_assert_eq(output_writer_pending(w), output_writer_is_direct(w) ? 10000u % 4096u : 0u);
        put(w, &at, 5000);
        output_writer_submit(w, false);
        put(w, &at, 3);
        output_writer_submit(w, true);
        wait_written(w);
        output_writer_free(w);
        check_file(fd, 0, 15003);
        cr_assert_eq(lseek(fd, 0, SEEK_CUR), 15003, "the fd's offset is not after the data");
        close(fd);
        unlink(path);
}

static void wait_size(int fd, size_t size) {
        struct stat st = {};
        for (int i = 0; i < 1000 && (size_t) st.st_size < size; i++) {
                usleep(5000);
                cr_assert_eq(fstat(fd, &st), 0);
        }
        cr_assert_geq((size_t) st.st_size, size, "the file shows %zu bytes of %zu", (size_t) st.st_size, size);
}

/* Direct mode: the page of a shown tail is not written back and dropped
 * by the next block's write (that block's first page goes through the
 * page cache as well), and the file holds every byte. */
Test(output_writer, a_shown_tails_page_stays_in_the_page_cache) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        if (!output_writer_is_direct(w)) {
                cr_log_info("skipped: the file system of %s takes no O_DIRECT writes", path);
                output_writer_free(w);
                close(fd);
                unlink(path);
                return;
        }
        size_t at = 0;
        put_as(w, &at, 10000, false); /* its tail: 1808 bytes in the page at 8192 */
        output_writer_submit(w, false);
        wait_size(fd, 10000);
        put_as(w, &at, 2u * 1024u * 1024u, false);
        output_writer_submit(w, false);
        wait_size(fd, at);
        long page = sysconf(_SC_PAGESIZE);
        void *map = mmap(NULL, (size_t) page, PROT_READ, MAP_SHARED, fd, 8192);
        cr_assert_neq(map, MAP_FAILED);
        unsigned char in_core = 0;
        cr_assert_eq(mincore(map, (size_t) page, &in_core), 0);
        munmap(map, (size_t) page);
        cr_assert(in_core & 1, "the shown tail's page was dropped from the page cache by a direct write over it");
        put_as(w, &at, 777, false);
        end_without_error(w);
        check_file(fd, 0, at);
        close(fd);
        unlink(path);
}

/* A destination that takes nothing: once every block waits, there is no
 * space; when it takes data again, space comes back and the event fd
 * says so. */
/* A writer into a new pipe (p) with every block filled with pattern bytes
 * (*ret_at of them): nobody reads the pipe yet. */
static struct output_writer *writer_on_full_pipe(int p[2], size_t *ret_at) {
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(p[1], &w), 0);
        size_t at = 0, avail;
        uint8_t *dst;
        while ((dst = output_writer_space(w, &avail))) {
                for (size_t i = 0; i < avail; i++)
                        dst[i] = pattern(at + i);
                output_writer_commit(w, avail);
                at += avail;
                cr_assert_lt(at, 64u * 1024u * 1024u, "the writer never ran out of blocks");
        }
        *ret_at = at;
        return w;
}

Test(output_writer, full_blocks_give_no_space_until_written) {
        int p[2];
        size_t at, avail;
        struct output_writer *w = writer_on_full_pipe(p, &at);
        cr_assert_gt(output_writer_pending(w), 0);
        /* Nobody reads the pipe: a bounded wait for space ends unanswered. */
        cr_assert_eq(output_writer_wait_space_for(w, 30000), -ETIMEDOUT);
        cr_assert_null(output_writer_space(w, &avail));
        /* Read everything back: the blocks free up, in order. */
        size_t got = 0;
        uint8_t buf[65536];
        while (got < at) {
                ssize_t n = read(p[0], buf, sizeof(buf));
                cr_assert_gt(n, 0);
                for (ssize_t i = 0; i < n; i++)
                        cr_assert_eq(buf[i], pattern(got + (size_t) i), "byte %zu differs", got + (size_t) i);
                got += (size_t) n;
        }
        wait_written(w);
        cr_assert_eq(output_writer_wait_space_for(w, 30000), 0);
        cr_assert_not_null(output_writer_space(w, &avail));
        output_writer_free(w);
        close(p[0]);
        close(p[1]);
}

/* A write that fails is reported, and nothing hangs. */
Test(output_writer, write_errors_are_reported) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(ro, 0);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(ro, &w), 0);
        size_t at = 0;
        put(w, &at, 5000);
        output_writer_submit(w, true);
        wait_written(w);
        cr_assert_eq(output_writer_error(w), -EBADF);
        output_writer_free(w);
        close(ro);
        close(fd);
        unlink(path);
}

/* sync: everything put is in the file and the fd reads as opened, even
 * right after blocks filled up and a tail was written ahead; writing goes
 * on after resume. */
Test(output_writer, sync_makes_the_file_whole_and_readable) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        int flags = fcntl(fd, F_GETFL);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        size_t at = 0;
        put(w, &at, 5000);
        output_writer_submit(w, false);
        put(w, &at, 2u * 1024u * 1024u + 3u);
        cr_assert_eq(output_writer_sync(w), 0);
        cr_assert_eq(fcntl(fd, F_GETFL), flags);
        check_file(fd, 0, at);
        uint8_t odd[7];
        cr_assert_eq(pread(fd, odd, sizeof(odd), 3), (ssize_t) sizeof(odd), "an unaligned read failed");
        cr_assert_eq(output_writer_resume(w), 0);
        size_t before = at;
        put(w, &at, 1000);
        output_writer_submit(w, true);
        wait_written(w);
        output_writer_free(w);
        check_file(fd, 0, before + 1000);
        close(fd);
        unlink(path);
}

/* output_writer_fill copies what fits and stops at full blocks. */
Test(output_writer, fill_takes_what_fits) {
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(p[1], &w), 0);
        size_t n = 64u * 1024u * 1024u;
        uint8_t *src = malloc(n);
        cr_assert_not_null(src);
        for (size_t i = 0; i < n; i++)
                src[i] = pattern(i);
        /* Nobody reads the pipe: the blocks fill and the rest stays out. */
        size_t took = output_writer_fill(w, src, n);
        cr_assert_gt(took, 0);
        cr_assert_lt(took, n);
        size_t avail;
        cr_assert_null(output_writer_space(w, &avail));
        cr_assert_eq(output_writer_fill(w, src + took, n - took), 0);
        /* What went in comes out in order. */
        output_writer_submit(w, true);
        size_t got = 0;
        uint8_t buf[65536];
        while (got < took) {
                ssize_t r = read(p[0], buf, sizeof(buf));
                cr_assert_gt(r, 0);
                for (ssize_t i = 0; i < r; i++)
                        cr_assert_eq(buf[i], pattern(got + (size_t) i), "byte %zu differs", got + (size_t) i);
                got += (size_t) r;
        }
        cr_assert_eq(got, took);
        output_writer_free(w);
        free(src);
        close(p[0]);
        close(p[1]);
}

/* One file after another (a rotation): the second writer fills the first
 * one's memory, and each file still holds exactly its own bytes. */
Test(output_writer, a_freed_writers_memory_is_the_next_ones) {
        char path1[64], path2[64];
        int fd1 = temp_file(path1, sizeof(path1)), fd2 = temp_file(path2, sizeof(path2));
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd1, &w), 0);
        size_t avail;
        uint8_t *first = output_writer_space(w, &avail);
        cr_assert_not_null(first);
        size_t at = 0, n1 = 3u * 1024u * 1024u + 777u;
        put(w, &at, n1);
        output_writer_submit(w, true);
        wait_written(w);
        struct output_region *region = output_writer_free_keep(w);
        cr_assert_not_null(region);
        check_file(fd1, 0, n1);

        cr_assert_eq(output_writer_new_in(fd2, region, &w), 0);
        uint8_t *again = output_writer_space(w, &avail);
        cr_assert_eq((void *) again, (void *) first, "the next writer has memory of its own");
        at = 0;
        size_t n2 = 2u * 1024u * 1024u + 99u;
        put(w, &at, n2);
        end_without_error(w);
        check_file(fd2, 0, n2);
        close(fd1);
        close(fd2);
        unlink(path1);
        unlink(path2);
}

/* A region made ahead (a rotation's second one, made as the session
 * starts) has its pages in memory before any writer touches them, and a
 * writer made in it writes from it. */
Test(output_writer, a_region_made_ahead_is_in_memory_before_use) {
        struct output_region *region = output_region_new();
        cr_assert_not_null(region);
        char path[64];
        int fd = temp_file(path, sizeof(path));
        struct output_writer *w;
        cr_assert_eq(output_writer_new_in(fd, region, &w), 0);
        size_t avail;
        uint8_t *first = output_writer_space(w, &avail);
        cr_assert_eq((void *) first, (void *) region, "the writer does not write from the region it was given");
        size_t page = (size_t) sysconf(_SC_PAGESIZE), n = avail / page;
        cr_assert_gt(n, 0);
        unsigned char *vec = malloc(n);
        cr_assert_not_null(vec);
        cr_assert_eq(mincore(first, n * page, vec), 0);
        size_t missing = 0;
        for (size_t i = 0; i < n; i++)
                missing += !(vec[i] & 1);
        free(vec);
        cr_assert_eq(missing, 0, "%zu of the %zu pages of the first block were not in memory yet", missing, n);
        size_t at = 0, total = 1024u * 1024u + 4321u;
        put(w, &at, total);
        end_without_error(w);
        check_file(fd, 0, total);
        close(fd);
        unlink(path);
}

/* What a finishing writer's thread calls at the end: it sees the whole file
 * (its size then), and runs off the caller's thread. */
struct finish_probe {
        pthread_t caller;
        off_t size;
        bool other_thread;
        pid_t tid; /* the thread's, in the kernel */
        int calls;
        int result;
};

static int finish_probe_done(int fd, void *userdata) {
        struct finish_probe *p = userdata;
        struct stat st;
        p->calls++;
        p->tid = gettid();
        p->other_thread = !pthread_equal(pthread_self(), p->caller);
        p->size = fstat(fd, &st) == 0 ? st.st_size : -1;
        return p->result;
}

/* finish: the unaligned end goes out too, done() runs once on the writer's
 * thread after the last byte is in the file, the event fd wakes the caller,
 * and done()'s result is the writer's. */
Test(output_writer, finish_ends_the_file_on_the_thread) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        size_t at = 0, n = 5u * 1024u * 1024u + 4321u;
        put(w, &at, n);
        struct finish_probe probe = { .caller = pthread_self(), .result = -EXDEV };
        output_writer_finish(w, finish_probe_done, &probe);
        int r = 0;
        bool finished = false;
        for (int i = 0; i < 2000 && !finished; i++) {
                struct pollfd p = { .fd = output_writer_event_fd(w), .events = POLLIN };
                (void) poll(&p, 1, 10);
                (void) output_writer_ack(w);
                finished = output_writer_finished(w, &r);
        }
        cr_assert(finished, "the writer never said it was finished");
        cr_assert_eq(r, -EXDEV, "done()'s result is not the writer's: %d", r);
        cr_assert_eq(output_writer_wait_finished(w), -EXDEV);
        cr_assert_eq(probe.calls, 1);
        cr_assert(probe.other_thread, "done() ran on the caller's thread");
        cr_assert_eq((size_t) probe.size, n, "done() saw %lld bytes of %zu", (long long) probe.size, n);
        output_writer_free(w);
        check_file(fd, 0, n);
        close(fd);
        unlink(path);
}

/* A finishing writer wakes its owner once, when it is finished, not for
 * each block it writes on the way (the blocks are held in a pipe nobody
 * reads until the finish is asked for). */
Test(output_writer, a_finishing_writer_wakes_its_owner_once) {
        int p[2];
        size_t at;
        struct output_writer *w = writer_on_full_pipe(p, &at);
        (void) output_writer_ack(w);
        struct finish_probe probe = { .caller = pthread_self() };
        output_writer_finish(w, finish_probe_done, &probe);
        size_t got = 0;
        uint8_t buf[65536];
        while (got < at) {
                ssize_t n = read(p[0], buf, sizeof(buf));
                cr_assert_gt(n, 0);
                got += (size_t) n;
        }
        cr_assert_eq(output_writer_wait_finished(w), 0);
        cr_assert_eq(probe.calls, 1);
        /* The wake-up follows the finish. */
        struct pollfd pf = { .fd = output_writer_event_fd(w), .events = POLLIN };
        cr_assert_eq(poll(&pf, 1, 10000), 1, "the owner was never woken");
        cr_assert_eq(output_writer_ack(w), 1, "the owner was woken more than once");
        output_writer_free(w);
        close(p[0]);
        close(p[1]);
}

/* A writer whose writes failed does not call done(), and says the error. */
Test(output_writer, finish_after_a_failed_write_skips_done) {
        char path[64];
        int fd = temp_file(path, sizeof(path));
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(ro, 0);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(ro, &w), 0);
        size_t at = 0;
        put(w, &at, 70000);
        struct finish_probe probe = { .caller = pthread_self() };
        output_writer_finish(w, finish_probe_done, &probe);
        cr_assert_eq(output_writer_wait_finished(w), -EBADF);
        cr_assert_eq(probe.calls, 0, "done() ran after a failed write");
        output_writer_free(w);
        close(ro);
        close(fd);
        unlink(path);
}

static void finish_probed(struct output_writer *w, struct finish_probe *probe) {
        *probe = (struct finish_probe) { .caller = pthread_self() };
        output_writer_finish(w, finish_probe_done, probe);
}

/* Writes n pattern bytes into a new file with a writer started now, and
 * finishes it if probe is given (it tells where done() ran). The writer is
 * returned unfreed, its file open in *ret_fd. */
static struct output_writer *write_one(char *path, size_t path_size, int *ret_fd, size_t n,
                                       struct finish_probe *probe) {
        int fd = temp_file(path, path_size);
        struct output_writer *w;
        cr_assert_eq(output_writer_new(fd, &w), 0);
        size_t at = 0;
        put(w, &at, n);
        if (probe)
                finish_probed(w, probe);
        *ret_fd = fd;
        return w;
}

/* A rotation's files one after another: the next writer is served by the
 * thread of the one before (parked when it was freed), not a new thread. */
Test(output_writer, the_next_writer_runs_on_the_last_ones_thread) {
        char path[2][64];
        int fd[2];
        struct finish_probe probe[2];
        size_t n = 2u * 1024u * 1024u + 77u;
        for (int i = 0; i < 2; i++) {
                struct output_writer *w = write_one(path[i], sizeof(path[i]), &fd[i], n + (size_t) i, &probe[i]);
                cr_assert_eq(output_writer_wait_finished(w), 0);
                output_writer_free(w);
                check_file(fd[i], 0, n + (size_t) i);
                cr_assert_eq(probe[i].calls, 1);
                cr_assert(probe[i].other_thread, "done() ran on the caller's thread");
        }
        cr_assert_eq(probe[0].tid, probe[1].tid, "the second writer ran on thread %d, the first on %d", probe[1].tid,
                     probe[0].tid);
        for (int i = 0; i < 2; i++) {
                close(fd[i]);
                unlink(path[i]);
        }
}

/* Writers writing at once (a file closing while the next is written)
 * each have a thread, a parked one first, and each file is whole. */
Test(output_writer, writers_at_once_each_have_a_thread) {
        enum { N = 4 };
        char path[N][64];
        int fd[N];
        struct finish_probe probe[N];
        struct output_writer *w[N];
        size_t n = 1024u * 1024u + 4099u;
        /* One thread parked first. */
        w[0] = write_one(path[0], sizeof(path[0]), &fd[0], n, &probe[0]);
        cr_assert_eq(output_writer_wait_finished(w[0]), 0);
        output_writer_free(w[0]);
        check_file(fd[0], 0, n);
        /* Unfinished, each keeps its thread. */
        for (int i = 1; i < N; i++)
                w[i] = write_one(path[i], sizeof(path[i]), &fd[i], n * (size_t) i, NULL);
        for (int i = 1; i < N; i++)
                finish_probed(w[i], &probe[i]);
        for (int i = 1; i < N; i++) {
                cr_assert_eq(output_writer_wait_finished(w[i]), 0);
                output_writer_free(w[i]);
                check_file(fd[i], 0, n * (size_t) i);
                cr_assert_eq(probe[i].calls, 1);
                for (int k = 1; k < i; k++)
                        cr_assert_neq(probe[i].tid, probe[k].tid, "writers %d and %d, alive at once, shared a thread",
                                      k, i);
        }
        for (int i = 0; i < N; i++) {
                close(fd[i]);
                unlink(path[i]);
        }
}
