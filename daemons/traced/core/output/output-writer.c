/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "core/output/output-writer.h"

#define OW_BLOCK (1024u * 1024u)
#define OW_BLOCKS 4u
/* What O_DIRECT needs of buffers, lengths and file offsets (the largest
 * logical block size in use). */
#define OW_ALIGN 4096u
#define OW_HUGE_PAGE (2u * 1024u * 1024u)
/* Without O_DIRECT: each window this large is pushed to the disk once
 * written, and the one before it dropped from the page cache. */
#define OW_WINDOW (8u * 1024u * 1024u)

struct ow_block {
        uint8_t *data;
        size_t len;
        /* Direct mode: the unaligned tail is written through the page
         * cache so that the file shows it now, and written again (by
         * O_DIRECT) as the start of the next block. */
        bool tail_again;
};

struct output_writer {
        int fd;        /* the consumer's: positioned writes (and its offset) */
        int direct_fd; /* O_DIRECT: our own open of the file, or fd itself; -1 if none */
        bool shared;   /* direct_fd is fd, O_DIRECT set on the consumer's description */
        int flags;     /* fd's status flags as we found them */
        int event_fd;
        atomic_bool direct; /* cleared by the thread when it gives O_DIRECT up */

        bool thread_started;
        /* Under pool.lock: the thread is done with this writer (it may go
         * on to serve another); its next in pool.waiting. */
        bool released;
        struct output_writer *pool_next;
        pthread_mutex_t lock;
        pthread_cond_t cond;  /* to the thread: a block was queued, or stop */
        pthread_cond_t freed; /* from the thread: a block was written */
        /* Under lock: blocks [head, head + n_queued) belong to the thread,
         * the one after them is being filled by the loop. */
        struct ow_block blocks[OW_BLOCKS];
        unsigned head, n_queued;
        size_t queued_bytes;
        int error;
        bool stop;
        /* output_writer_finish: called by the thread at the end; finished
         * once it returned (or was skipped), with its result. */
        int (*done)(int fd, void *userdata);
        void *done_userdata;
        bool finished;
        int done_result;

        /* Loop only: the block being filled, once known to be free (-1:
         * not looked up yet), so that filling takes no lock; how many of
         * its bytes the file already shows (a tail written ahead). */
        int cur;
        size_t shown;

        /* Thread only: where the next block goes and where the file ends
         * (direct mode), page cache windows (without O_DIRECT). */
        uint64_t off, end, window_start, last_window_off, last_window_len;
        /* Thread only, direct mode: a shown tail is in the page cache up
         * to here, in the page at off (0: none). */
        uint64_t paged_end;
};

/* Threads whose writer ended wait here a while for the next one (a
 * rotation's next file), so that a cut does not create and end a thread:
 * a writer starts on a parked thread when there is one. */
#define POOL_MAX_PARKED 2u
#define POOL_PARK_SEC 60
static struct {
        pthread_mutex_t lock;
        pthread_cond_t cond; /* to the parked: a writer waits; to freers: a writer was released */
        unsigned n_parked;
        struct output_writer *waiting, **waiting_tail;
} pool = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .cond = PTHREAD_COND_INITIALIZER,
        .waiting_tail = &pool.waiting,
};

static unsigned fill_index(const struct output_writer *w) {
        return (w->head + w->n_queued) % OW_BLOCKS;
}

/* Writes all of p at the fd's position (pos < 0) or at pos; 0 or -errno. */
static int write_all(int fd, const uint8_t *p, size_t n, int64_t pos) {
        while (n > 0) {
                ssize_t k = pos < 0 ? write(fd, p, n) : pwrite(fd, p, n, (off_t) pos);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
                if (pos >= 0)
                        pos += k;
        }
        return 0;
}

/* Hints only: failures change nothing but the page cache's use. */
static void push_window(struct output_writer *w) {
        if (w->off - w->window_start < OW_WINDOW)
                return;
        uint64_t start = w->window_start, len = w->off - start;
        (void) sync_file_range(w->fd, (off_t) start, (off_t) len, SYNC_FILE_RANGE_WRITE);
        if (w->last_window_len > 0) {
                (void) sync_file_range(w->fd, (off_t) w->last_window_off, (off_t) w->last_window_len,
                                       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
                (void) posix_fadvise(w->fd, (off_t) w->last_window_off, (off_t) w->last_window_len,
                                     POSIX_FADV_DONTNEED);
        }
        w->last_window_off = start;
        w->last_window_len = len;
        w->window_start = w->off;
}

static void close_direct(struct output_writer *w) {
        if (w->direct_fd < 0)
                return;
        if (w->shared)
                (void) fcntl(w->fd, F_SETFL, w->flags);
        else
                safe_close(w->direct_fd);
        w->direct_fd = -EBADF;
}

/* A tail through the page cache: on the consumer's description, with
 * O_DIRECT lifted for it when we set it there. */
static int write_buffered_at(struct output_writer *w, const uint8_t *p, size_t n, uint64_t pos) {
        if (w->shared && fcntl(w->fd, F_SETFL, w->flags) < 0)
                return -errno;
        int r = write_all(w->fd, p, n, (int64_t) pos);
        if (w->shared && fcntl(w->fd, F_SETFL, w->flags | O_DIRECT) < 0 && r >= 0)
                r = -errno;
        return r;
}

/* Leaves direct mode: from here on the consumer's fd is written at its
 * position, which is moved to where the direct writes ended. */
static int stop_direct(struct output_writer *w) {
        close_direct(w);
        w->direct = false;
        if (lseek(w->fd, (off_t) w->off, SEEK_SET) < 0)
                return -errno;
        w->window_start = w->off;
        return 0;
}

static int write_block(struct output_writer *w, const struct ow_block *b) {
        int r;
        if (w->direct_fd >= 0) {
                size_t aligned = b->len - b->len % OW_ALIGN;
                /* After a shown tail the block's first page goes through
                 * the page cache too, where that tail is, and the direct
                 * write starts at the next page: a direct write over a
                 * dirty page makes the kernel write it back and drop it
                 * first, a synchronous page write on this thread at every
                 * show (each second of a recording, and each cut of a
                 * rotation). The page reaches the disk with the file's
                 * writeback or its fsync instead. */
                size_t lead = w->paged_end > w->off ? MIN(b->len, (size_t) OW_ALIGN) : 0;
                r = lead ? write_buffered_at(w, b->data, lead, w->off) : 0;
                if (r >= 0 && aligned > lead) {
                        r = write_all(w->direct_fd, b->data + lead, aligned - lead, (int64_t) (w->off + lead));
                        if (r == -EINVAL) {
                                /* The file system refused a direct write after all. */
                                r = stop_direct(w);
                                return r < 0 ? r : write_block(w, b);
                        }
                }
                size_t tail = MAX(aligned, lead);
                if (r >= 0 && tail < b->len)
                        r = write_buffered_at(w, b->data + tail, b->len - tail, w->off + tail);
                if (r < 0)
                        return r;
                w->paged_end = aligned < b->len ? w->off + b->len : 0;
                w->end = MAX(w->end, w->off + b->len);
                w->off += b->tail_again ? aligned : b->len;
                return 0;
        }
        r = write_all(w->fd, b->data, b->len, -1);
        if (r < 0)
                return r;
        w->off += b->len;
        push_window(w);
        return 0;
}

/* Writes w's blocks until it stops, then calls its done(). */
static void serve(struct output_writer *w) {
        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (w->n_queued == 0 && !w->stop)
                        pthread_cond_wait(&w->cond, &w->lock);
                if (w->n_queued == 0)
                        break; /* stopping, and everything is written */
                struct ow_block *b = &w->blocks[w->head];
                bool failed = w->error < 0;
                pthread_mutex_unlock(&w->lock);

                /* After a failure the rest is dropped, not written. */
                int r = failed ? 0 : write_block(w, b);

                pthread_mutex_lock(&w->lock);
                if (r < 0 && w->error == 0)
                        w->error = r;
                w->queued_bytes -= b->len;
                b->len = 0;
                b->tail_again = false;
                w->head = (w->head + 1) % OW_BLOCKS;
                w->n_queued--;
                pthread_cond_signal(&w->freed);
                /* A finishing writer's owner waits for the end alone
                 * (output_writer_finished): one wake-up, after done(). */
                if (!w->done)
                        (void) eventfd_write(w->event_fd, 1);
        }
        int (*done)(int, void *) = w->done;
        bool failed = w->error < 0;
        pthread_mutex_unlock(&w->lock);

        if (done) {
                int r = failed ? 0 : done(w->fd, w->done_userdata);
                pthread_mutex_lock(&w->lock);
                w->done_result = r;
                w->finished = true;
                pthread_cond_broadcast(&w->freed);
                pthread_mutex_unlock(&w->lock);
                (void) eventfd_write(w->event_fd, 1);
        }
}

/* The thread is done with w (nothing of it is touched after this: its
 * freer waits for that, then frees it), and parks for up to
 * POOL_PARK_SEC: the next writer it serves, or NULL, and the thread ends.
 * Released and parked at once, so that a writer made as soon as the last
 * one is freed finds the thread parked. */
static struct output_writer *release_and_park(struct output_writer *w) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += POOL_PARK_SEC;
        struct output_writer *next = NULL;
        pthread_mutex_lock(&pool.lock);
        w->released = true;
        pthread_cond_broadcast(&pool.cond);
        if (pool.n_parked < POOL_MAX_PARKED) {
                pool.n_parked++;
                int r = 0;
                while (!pool.waiting && r != ETIMEDOUT)
                        r = pthread_cond_timedwait(&pool.cond, &pool.lock, &until);
                next = pool.waiting;
                if (next) {
                        pool.waiting = next->pool_next;
                        if (!pool.waiting)
                                pool.waiting_tail = &pool.waiting;
                }
                pool.n_parked--;
        }
        pthread_mutex_unlock(&pool.lock);
        return next;
}

static void *thread_main(void *userdata) {
        for (struct output_writer *w = userdata; w; w = release_and_park(w))
                serve(w);
        return NULL;
}

/* Starts w's thread: a parked one, else a new one (detached: its writers'
 * freers wait for their release instead of a join). */
static int thread_start(struct output_writer *w) {
        pthread_mutex_lock(&pool.lock);
        /* Each writer queued has a parked thread of its own: one that
         * leaves the pool does so only with the queue empty. */
        size_t queued = 0;
        for (struct output_writer *q = pool.waiting; q; q = q->pool_next)
                queued++;
        if (queued < pool.n_parked) {
                w->pool_next = NULL;
                *pool.waiting_tail = w;
                pool.waiting_tail = &w->pool_next;
                pthread_cond_broadcast(&pool.cond);
                pthread_mutex_unlock(&pool.lock);
                return 0;
        }
        pthread_mutex_unlock(&pool.lock);
        pthread_attr_t attr;
        pthread_t t;
        int r = pthread_attr_init(&attr);
        if (r != 0)
                return -r;
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, thread_main, w);
        pthread_attr_destroy(&attr);
        return -r;
}

/* Blocks until w's thread is done with it. */
static void thread_release_wait(struct output_writer *w) {
        pthread_mutex_lock(&pool.lock);
        while (!w->released)
                pthread_cond_wait(&pool.cond, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
}

/* The blocks in one region on huge page boundaries, in huge pages where
 * the kernel has them (transparent huge pages, madvise mode): fewer TLB
 * misses for the copies into them, and the disk pins two pages per block
 * write instead of 256. */
static uint8_t *region_alloc(void) {
        uint8_t *region;
        if (posix_memalign((void **) &region, OW_HUGE_PAGE, (size_t) OW_BLOCK * OW_BLOCKS) != 0)
                return NULL;
        (void) madvise(region, (size_t) OW_BLOCK * OW_BLOCKS, MADV_HUGEPAGE);
        return region;
}

struct output_region *output_region_new(void) {
        uint8_t *region = region_alloc();
        if (!region)
                return NULL;
        /* Faulted in now, in one call where the kernel can (5.14+), else a
         * write per page. */
        if (madvise(region, (size_t) OW_BLOCK * OW_BLOCKS, MADV_POPULATE_WRITE) < 0)
                for (size_t k = 0; k < (size_t) OW_BLOCK * OW_BLOCKS; k += OW_ALIGN)
                        ((volatile uint8_t *) region)[k] = 0;
        return (struct output_region *) region;
}

void output_region_free(struct output_region *region) {
        free(region);
}

int output_writer_new(int fd, struct output_writer **ret) {
        return output_writer_new_in(fd, NULL, ret);
}

int output_writer_new_in(int fd, struct output_region *reuse, struct output_writer **ret) {
        struct output_writer *w = calloc(1, sizeof(*w));
        int r;

        if (!w) {
                output_region_free(reuse);
                return -ENOMEM;
        }
        w->fd = fd;
        w->direct_fd = -EBADF;
        w->event_fd = -EBADF;
        w->cur = -1;
        int flags = w->flags = fcntl(fd, F_GETFL);
        if (flags < 0) {
                r = -errno;
                output_region_free(reuse);
                free(w);
                return r;
        }
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        /* Timed waits for it count on the monotonic clock. */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w->freed, &ca);
        pthread_condattr_destroy(&ca);
        uint8_t *region = reuse ? (uint8_t *) reuse : region_alloc();
        if (!region) {
                output_writer_free(w);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < OW_BLOCKS; i++)
                w->blocks[i].data = region + (size_t) i * OW_BLOCK;
        w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->event_fd < 0) {
                r = -errno;
                output_writer_free(w);
                return r;
        }
        off_t at = lseek(fd, 0, SEEK_CUR);
        if (at >= 0)
                w->off = w->end = w->window_start = (uint64_t) at;
        /* O_DIRECT on a description of our own, so that the consumer's keeps
         * its flags whatever becomes of us. Where the file cannot be opened
         * again (it belongs to the consumer's user: permissions) O_DIRECT is
         * set on the consumer's description while we write, and its flags
         * are restored after (a core killed meanwhile leaves it set: a
         * consumer reading through that fd then clears it). Where neither
         * works the file is written through the page cache. */
        struct stat st;
        if (at >= 0 && at % OW_ALIGN == 0 && !(flags & O_APPEND) && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode)) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                w->direct_fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC | O_NOCTTY);
                if (w->direct_fd < 0) {
                        w->direct_fd = -EBADF;
                        if (!(flags & O_DIRECT) && fcntl(fd, F_SETFL, flags | O_DIRECT) >= 0) {
                                w->direct_fd = fd;
                                w->shared = true;
                        }
                }
                w->direct = w->direct_fd >= 0;
        }
        r = thread_start(w);
        if (r < 0) {
                output_writer_free(w);
                return r;
        }
        w->thread_started = true;
        *ret = w;
        return 0;
}

void output_writer_free(struct output_writer *w) {
        output_region_free(output_writer_free_keep(w));
}

struct output_region *output_writer_free_keep(struct output_writer *w) {
        if (!w)
                return NULL;
        if (w->thread_started) {
                pthread_mutex_lock(&w->lock);
                w->stop = true;
                pthread_cond_signal(&w->cond);
                pthread_mutex_unlock(&w->lock);
                thread_release_wait(w);
        }
        /* Positioned writes leave the consumer's offset alone: move it to
         * the end, as writes through it would have. */
        if (w->direct_fd >= 0)
                (void) lseek(w->fd, (off_t) w->end, SEEK_SET);
        close_direct(w);
        struct output_region *region = (struct output_region *) w->blocks[0].data; /* the region of all of them */
        safe_close(w->event_fd);
        pthread_cond_destroy(&w->cond);
        pthread_cond_destroy(&w->freed);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return region;
}

int output_writer_event_fd(const struct output_writer *w) {
        return w->event_fd;
}

uint64_t output_writer_ack(struct output_writer *w) {
        eventfd_t v = 0;
        if (eventfd_read(w->event_fd, &v) < 0)
                return 0;
        return v;
}

/* Gives block i to the thread. */
static void enqueue(struct output_writer *w, unsigned i) {
        pthread_mutex_lock(&w->lock);
        w->n_queued++;
        w->queued_bytes += w->blocks[i].len;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

uint8_t *output_writer_space(struct output_writer *w, size_t *ret_avail) {
        if (w->cur < 0) {
                pthread_mutex_lock(&w->lock);
                if (w->n_queued < OW_BLOCKS)
                        w->cur = (int) fill_index(w);
                pthread_mutex_unlock(&w->lock);
                if (w->cur < 0)
                        return NULL;
        }
        struct ow_block *b = &w->blocks[w->cur];
        *ret_avail = OW_BLOCK - b->len;
        return b->data + b->len;
}

void output_writer_commit(struct output_writer *w, size_t n) {
        assert(w->cur >= 0);
        struct ow_block *b = &w->blocks[w->cur];
        b->len += n;
        if (b->len == OW_BLOCK) {
                enqueue(w, (unsigned) w->cur);
                w->cur = -1;
                w->shown = 0;
        }
}

size_t output_writer_fill(struct output_writer *w, const uint8_t *p, size_t n) {
        size_t done = 0;
        while (done < n) {
                size_t avail;
                uint8_t *dst = output_writer_space(w, &avail);
                if (!dst)
                        break;
                size_t k = MIN(avail, n - done);
                memcpy(dst, p + done, k);
                output_writer_commit(w, k);
                done += k;
        }
        return done;
}

void output_writer_submit(struct output_writer *w, bool final) {
        pthread_mutex_lock(&w->lock);
        unsigned n_queued = w->n_queued, i = fill_index(w);
        pthread_mutex_unlock(&w->lock);
        if (n_queued == OW_BLOCKS)
                return; /* the block being filled is queued already */
        struct ow_block *b = &w->blocks[i];
        if (b->len == 0)
                return;
        w->cur = -1;
        size_t tail = b->len % OW_ALIGN;
        if (!final && w->direct && tail > 0) {
                /* The tail goes out now and again with the next block, which
                 * starts with it: there must be a free one. */
                if (n_queued + 1 >= OW_BLOCKS)
                        return;
                struct ow_block *next = &w->blocks[(i + 1) % OW_BLOCKS];
                memcpy(next->data, b->data + b->len - tail, tail);
                next->len = tail;
                b->tail_again = true;
                enqueue(w, i);
                w->shown = tail;
                return;
        }
        enqueue(w, i);
        w->shown = 0;
}

int output_writer_sync(struct output_writer *w) {
        for (;;) {
                output_writer_submit(w, false);
                pthread_mutex_lock(&w->lock);
                bool idle = w->n_queued == 0;
                size_t filling = idle ? w->blocks[fill_index(w)].len : 0;
                pthread_mutex_unlock(&w->lock);
                if (idle && filling == w->shown)
                        break;
                /* Not idle, or the tail found no free block: wait for one. */
                int r = output_writer_wait_idle(w);
                if (r < 0)
                        return r;
        }
        if (w->shared && fcntl(w->fd, F_SETFL, w->flags) < 0)
                return -errno;
        return output_writer_error(w);
}

int output_writer_resume(struct output_writer *w) {
        if (w->shared && w->direct_fd >= 0 && fcntl(w->fd, F_SETFL, w->flags | O_DIRECT) < 0)
                return -errno;
        return 0;
}

int output_writer_wait_space(struct output_writer *w) {
        pthread_mutex_lock(&w->lock);
        while (w->n_queued == OW_BLOCKS && w->error == 0)
                pthread_cond_wait(&w->freed, &w->lock);
        int r = w->error;
        pthread_mutex_unlock(&w->lock);
        return r;
}

int output_writer_wait_space_for(struct output_writer *w, uint64_t usec) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t) (usec / 1000000u);
        until.tv_nsec += (long) (usec % 1000000u) * 1000;
        if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
        }
        int r = 0;
        pthread_mutex_lock(&w->lock);
        while (w->n_queued == OW_BLOCKS && w->error == 0 && r == 0)
                r = -pthread_cond_timedwait(&w->freed, &w->lock, &until);
        if (w->error != 0)
                r = w->error;
        else if (w->n_queued < OW_BLOCKS)
                r = 0;
        pthread_mutex_unlock(&w->lock);
        return r;
}

int output_writer_wait_idle(struct output_writer *w) {
        pthread_mutex_lock(&w->lock);
        while (w->n_queued > 0 && w->error == 0)
                pthread_cond_wait(&w->freed, &w->lock);
        int r = w->error;
        pthread_mutex_unlock(&w->lock);
        return r;
}

void output_writer_finish(struct output_writer *w, int (*done)(int fd, void *userdata), void *userdata) {
        output_writer_submit(w, true);
        pthread_mutex_lock(&w->lock);
        w->done = done;
        w->done_userdata = userdata;
        w->stop = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

bool output_writer_finished(struct output_writer *w, int *ret) {
        pthread_mutex_lock(&w->lock);
        bool f = w->finished;
        int r = w->error < 0 ? w->error : w->done_result;
        pthread_mutex_unlock(&w->lock);
        if (f && ret)
                *ret = r;
        return f;
}

int output_writer_wait_finished(struct output_writer *w) {
        pthread_mutex_lock(&w->lock);
        while (!w->finished)
                pthread_cond_wait(&w->freed, &w->lock);
        int r = w->error < 0 ? w->error : w->done_result;
        pthread_mutex_unlock(&w->lock);
        return r;
}

size_t output_writer_pending(const struct output_writer *w) {
        struct output_writer *m = (struct output_writer *) w;
        pthread_mutex_lock(&m->lock);
        size_t n = m->queued_bytes;
        if (m->n_queued < OW_BLOCKS)
                n += m->blocks[fill_index(m)].len;
        pthread_mutex_unlock(&m->lock);
        return n;
}

int output_writer_error(const struct output_writer *w) {
        struct output_writer *m = (struct output_writer *) w;
        pthread_mutex_lock(&m->lock);
        int r = m->error;
        pthread_mutex_unlock(&m->lock);
        return r;
}

bool output_writer_is_direct(const struct output_writer *w) {
        return w->direct;
}
