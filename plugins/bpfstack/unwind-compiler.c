/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "profiling/cfi-table.h"
#include "unwind-cache.h"
#include "unwind-compiler.h"

struct unwind_compiler {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        struct unwind_job *queued, *done;
        bool quit;
        unsigned threads; /* running: the last one out frees the compiler */
        int done_fd;      /* an eventfd: readable when jobs are done */
        char *cache_dir;  /* NULL: no cache on disk */
        uint64_t started; /* jobs taken by a worker so far */
};

/* One row of the compact CFI in the walker's form. */
static struct bpfstack_row convert(const struct cfi_row *c) {
        struct bpfstack_row r = { .pc = (uint32_t) c->start };
        if (c->flags & CFI_NONE)
                r.kind = BPFSTACK_ROW_NONE;
        else if (c->flags & CFI_REFUSED)
                r.kind = BPFSTACK_ROW_REFUSED;
        else if (c->flags & CFI_OUTERMOST)
                r.kind = BPFSTACK_ROW_OUTERMOST;
        else if (c->ra_off != -8 || c->cfa_off < INT16_MIN || c->cfa_off > INT16_MAX)
                r.kind = BPFSTACK_ROW_REFUSED;
        else {
                r.kind = c->cfa_reg == CFI_CFA_SP ? BPFSTACK_ROW_CFA_SP : BPFSTACK_ROW_CFA_BP;
                r.cfa_off = (int16_t) c->cfa_off;
                if (c->flags & CFI_BP_SAVED) {
                        if (c->bp_off % 8 == 0 && c->bp_off / 8 >= INT8_MIN && c->bp_off / 8 <= INT8_MAX) {
                                r.kind |= BPFSTACK_ROW_BP_SAVED;
                                r.bp_off8 = (int8_t) (c->bp_off / 8);
                        } else
                                r.kind |= BPFSTACK_ROW_BP_LOST;
                } else if (c->flags & CFI_BP_LOST)
                        r.kind |= BPFSTACK_ROW_BP_LOST;
        }
        return r;
}

/* The rows of data/size in the walker's form, converted and merged again:
 * rows libdw tells apart (a different saved register, say) may read the
 * same to the walker. */
static int compile_rows(const uint8_t *data, size_t size, size_t max_rows, struct bpfstack_row **ret,
                        size_t *ret_n) {
        struct cfi_row *rows = NULL;
        size_t n = 0;
        int r = cfi_table_compile(data, size, max_rows, &rows, &n);
        if (r < 0)
                return r;
        if (n == 0 || rows[n - 1].start > UINT32_MAX) {
                free(rows);
                return -ERANGE; /* addresses past 4 GiB do not fit a row */
        }
        struct bpfstack_row *v = malloc(n * sizeof(*v));
        if (!v) {
                free(rows);
                return -ENOMEM;
        }
        size_t out = 0;
        for (size_t k = 0; k < n; k++) {
                struct bpfstack_row b = convert(&rows[k]);
                if (out > 0 && v[out - 1].kind == b.kind && v[out - 1].cfa_off == b.cfa_off &&
                    v[out - 1].bp_off8 == b.bp_off8)
                        continue;
                v[out++] = b;
        }
        free(rows);
        *ret = v;
        *ret_n = out;
        return 0;
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void run(struct unwind_compiler *c, struct unwind_job *j) {
        uint64_t t0 = now_us();
        const uint8_t *data = j->data;
        size_t size = j->size;
        void *map = MAP_FAILED;
        if (j->fd >= 0) {
                struct stat st;
                if (fstat(j->fd, &st) < 0 || st.st_size <= 0) {
                        j->error = fstat(j->fd, &st) < 0 ? -errno : -ENOEXEC;
                        goto out;
                }
                size = (size_t) st.st_size;
                /* Private and writable: libelf may convert data in place. */
                map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, j->fd, 0);
                if (map == MAP_FAILED) {
                        j->error = -errno;
                        goto out;
                }
                data = map;
                if (c->cache_dir &&
                    unwind_cache_load(c->cache_dir, j->fd, j->max_rows, &j->rows, &j->n, &j->error) == 0) {
                        j->from_cache = true;
                        munmap(map, size);
                        goto out;
                }
        }
        j->error = data ? compile_rows(data, size, j->max_rows, &j->rows, &j->n) : -ENODATA;
        /* Refusals too (too large, no unwind information): they cost as
         * much to find out. Not what may pass (out of memory). */
        if (j->fd >= 0 && c->cache_dir && j->error != -ENOMEM)
                j->cache_error = unwind_cache_store(c->cache_dir, j->fd, j->rows, j->n, j->error, UNWIND_CACHE_BYTES);
        if (map != MAP_FAILED)
                munmap(map, size);
out:
        if (j->fd >= 0)
                close(j->fd);
        j->fd = -EBADF;
        j->compile_us = now_us() - t0;
}

static void free_list(struct unwind_job *j) {
        while (j) {
                struct unwind_job *next = j->next;
                unwind_job_free(j);
                j = next;
        }
}

/* The hottest job, out of the queue (not empty). */
static struct unwind_job *pop_hottest(struct unwind_compiler *c) {
        struct unwind_job **best = &c->queued;
        for (struct unwind_job **p = &c->queued; *p; p = &(*p)->next)
                if ((*p)->heat > (*best)->heat)
                        best = p;
        struct unwind_job *j = *best;
        if (!j)
                return NULL;
        *best = j->next;
        j->next = NULL;
        return j;
}

static void *worker(void *arg) {
        struct unwind_compiler *c = arg;
        bool idle = false;
        pthread_mutex_lock(&c->lock);
        for (;;) {
                while (!c->quit && !c->queued)
                        pthread_cond_wait(&c->wake, &c->lock);
                /* Let go: with a cache, what is still queued is compiled
                 * into it for the next recording, at idle priority; else
                 * dropped. */
                if (c->quit && (!c->cache_dir || !c->queued))
                        break;
                if (c->quit && !idle) {
                        (void) pthread_setschedparam(pthread_self(), SCHED_IDLE, &(struct sched_param){});
                        idle = true;
                }
                struct unwind_job *j = pop_hottest(c);
                if (!j)
                        continue;
                j->start_seq = ++c->started;
                pthread_mutex_unlock(&c->lock);
                run(c, j);
                pthread_mutex_lock(&c->lock);
                if (c->quit) {
                        unwind_job_free(j); /* in the cache now: nobody takes it back */
                        continue;
                }
                j->next = c->done;
                c->done = j;
                (void) eventfd_write(c->done_fd, 1);
        }
        bool last = --c->threads == 0;
        pthread_mutex_unlock(&c->lock);
        if (!last)
                return NULL;
        /* Ours alone now. */
        free_list(c->queued);
        free_list(c->done);
        free(c->cache_dir);
        safe_close(c->done_fd);
        pthread_cond_destroy(&c->wake);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

int unwind_compiler_new(const char *cache_dir, struct unwind_compiler **ret) {
        struct unwind_compiler *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (c->done_fd < 0 || (cache_dir && !(c->cache_dir = strdup(cache_dir)))) {
                int r = c->done_fd < 0 ? -errno : -ENOMEM;
                safe_close(c->done_fd);
                free(c);
                return r;
        }
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->wake, NULL);
        for (unsigned k = 0; k < UNWIND_COMPILER_THREADS; k++) {
                pthread_t th;
                pthread_mutex_lock(&c->lock);
                int r = pthread_create(&th, NULL, worker, c);
                if (r == 0)
                        c->threads++;
                pthread_mutex_unlock(&c->lock);
                if (r == 0) {
                        (void) pthread_detach(th);
                        continue;
                }
                if (k > 0)
                        break; /* fewer threads, still working */
                pthread_cond_destroy(&c->wake);
                pthread_mutex_destroy(&c->lock);
                free(c->cache_dir);
                safe_close(c->done_fd);
                free(c);
                return -r;
        }
        *ret = c;
        return 0;
}

void unwind_compiler_free(struct unwind_compiler *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->quit = true;
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->lock);
}

void unwind_compiler_submit(struct unwind_compiler *c, struct unwind_job *j) {
        pthread_mutex_lock(&c->lock);
        j->next = c->queued;
        c->queued = j;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->lock);
}

void unwind_compiler_heat(struct unwind_compiler *c, struct unwind_job *j, uint64_t heat) {
        pthread_mutex_lock(&c->lock);
        j->heat += heat;
        pthread_mutex_unlock(&c->lock);
}

int unwind_compiler_fd(const struct unwind_compiler *c) {
        return c->done_fd;
}

struct unwind_job *unwind_compiler_take(struct unwind_compiler *c) {
        eventfd_t v;
        (void) eventfd_read(c->done_fd, &v);
        pthread_mutex_lock(&c->lock);
        struct unwind_job *j = c->done;
        c->done = NULL;
        pthread_mutex_unlock(&c->lock);
        return j;
}

void unwind_job_free(struct unwind_job *j) {
        if (!j)
                return;
        if (j->fd >= 0)
                close(j->fd);
        free(j->rows);
        free(j);
}
