/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profiling/cpus.h"
#include "profiling/perf-notes.h"
#include "profiling/perf-record.h"

#define MAX_CPUS 1024
#define SCRATCH_SIZE (UINT16_MAX + 1)

struct notes_ring {
        int fd;
        uint8_t *base, *data;
        size_t mmap_size;
        uint64_t data_size;
};

/* One note: a copy of its record. */
struct note {
        uint64_t time, seq;
        uint8_t *rec;
        uint16_t len;
};

struct perf_notes {
        clockid_t clock;
        size_t ring_pages;
        int epoll_fd;
        struct notes_ring rings[MAX_CPUS]; /* by CPU */
        struct cpu_hotplug hotplug;
        uint8_t *scratch;
        struct note *q; /* [head, n) queued, in time order */
        size_t head, n, cap;
        uint64_t seq;
        uint64_t read_time; /* every note timed before it was in the queue */
        struct perf_notes_stats stats;
};

static const struct perf_layout layout = {
        .sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
        .sample_id_all = true,
};

static uint64_t clock_now(clockid_t clock) {
        struct timespec ts;
        if (clock_gettime(clock, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void note_done(struct note *e) {
        free(e->rec);
        e->rec = NULL;
}

/* --- the queue ----------------------------------------------------------- */

static int by_time(const void *a, const void *b) {
        const struct note *x = a, *y = b;
        if (x->time != y->time)
                return x->time < y->time ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void perf_notes_apply_record(struct proc_table *t, const struct perf_record *r) {
        switch (r->kind) {
        case PERF_REC_MMAP2: {
                if (r->u.mmap2.len == 0 || r->u.mmap2.addr + r->u.mmap2.len < r->u.mmap2.addr)
                        break;
                struct pmap e = {
                        .start = r->u.mmap2.addr, .end = r->u.mmap2.addr + r->u.mmap2.len, .pgoff = r->u.mmap2.pgoff,
                        .inode = r->u.mmap2.ino, .dev_major = r->u.mmap2.maj, .dev_minor = r->u.mmap2.min,
                        .prot = r->u.mmap2.prot, .path = (char *) r->u.mmap2.filename,
                };
                (void) proc_table_mmap(t, (int) r->u.mmap2.pid, &e);
                break;
        }
        case PERF_REC_COMM:
                /* A process's (a thread's rename is no process's). */
                if (r->u.comm.pid != r->u.comm.tid)
                        break;
                if (r->u.comm.exec)
                        (void) proc_table_exec_noted(t, (int) r->u.comm.pid, r->u.comm.comm);
                else
                        (void) proc_table_comm(t, (int) r->u.comm.pid, r->u.comm.comm);
                break;
        case PERF_REC_FORK:
                (void) proc_table_fork(t, (int) r->u.task.pid, (int) r->u.task.ppid);
                break;
        case PERF_REC_EXIT:
                if (r->u.task.pid == r->u.task.tid)
                        proc_table_exit(t, (int) r->u.task.pid, r->u.task.time);
                break;
        default:
                break;
        }
}

static void apply_front(struct perf_notes *n, struct proc_table *t) {
        struct note *e = &n->q[n->head++];
        struct perf_record r;
        if (perf_record_parse(e->rec, e->len, &layout, &r) == 0) {
                perf_notes_apply_record(t, &r);
                n->stats.applied++;
        }
        note_done(e);
}

/* Keeps a copy of the record, if it says something of a process. */
static void take(struct perf_notes *n, const uint8_t *rec, size_t len) {
        struct perf_record r;
        if (perf_record_parse(rec, len, &layout, &r) < 0) {
                n->stats.bad++;
                return;
        }
        switch (r.kind) {
        case PERF_REC_MMAP2:
        case PERF_REC_COMM:
        case PERF_REC_FORK:
        case PERF_REC_EXIT:
                break;
        case PERF_REC_LOST:
        case PERF_REC_LOST_SAMPLES:
                n->stats.lost += r.u.lost.lost;
                return;
        default:
                return;
        }
        struct note e = { .time = r.time, .rec = malloc(len), .len = (uint16_t) len };
        if (!e.rec || GREEDY_REALLOC_MIN(n->q, n->cap, n->n + 1, 256) < 0) {
                free(e.rec);
                n->stats.lost++;
                return;
        }
        memcpy(e.rec, rec, len);
        e.seq = n->seq++;
        n->q[n->n++] = e;
}

/* Whether the ring held records: its event runs. */
static bool read_ring(struct perf_notes *n, struct notes_ring *r) {
        if (!r->base)
                return false;
        struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *) (void *) r->base;
        uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;
        bool any = head != tail;
        while (head - tail >= sizeof(struct perf_event_header)) {
                int len = perf_ring_copy(r->data, r->data_size, tail, head, n->scratch, SCRATCH_SIZE);
                if (len <= 0) {
                        n->stats.bad++;
                        tail = head;
                        break;
                }
                take(n, n->scratch, (size_t) len);
                tail += (uint64_t) len;
        }
        __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
        return any;
}

/* Each ring is in time order, the rings together are not: the new notes
 * are sorted in with the others. */
static void sort_queue(struct perf_notes *n, size_t from) {
        bool sorted = true;
        for (size_t k = from > n->head ? from : n->head + 1; k < n->n && sorted; k++)
                sorted = by_time(&n->q[k - 1], &n->q[k]) <= 0;
        if (!sorted)
                qsort(n->q + n->head, n->n - n->head, sizeof(*n->q), by_time);
}

static void compact(struct perf_notes *n) {
        if (n->head == 0 || (n->head < n->n / 2 && n->head < 4096))
                return;
        memmove(n->q, n->q + n->head, (n->n - n->head) * sizeof(*n->q));
        n->n -= n->head;
        n->head = 0;
}

void perf_notes_read(struct perf_notes *n, struct proc_table *t) {
        struct epoll_event evs[16];
        /* The wake-ups are answered by reading every ring. */
        while (epoll_wait(n->epoll_fd, evs, (int) ELEMENTSOF(evs), 0) == (int) ELEMENTSOF(evs))
                ;
        compact(n);
        size_t from = n->n;
        uint64_t lost = n->stats.lost;
        n->read_time = clock_now(n->clock);
        for (size_t cpu = 0; cpu < n->hotplug.n; cpu++)
                if (read_ring(n, &n->rings[cpu]))
                        cpu_hotplug_active(&n->hotplug, cpu);
        sort_queue(n, from);
        /* Maps built from the notes alone may now miss a mapping. */
        if (t && n->stats.lost != lost)
                proc_table_notes_lost(t);
        while (t && n->n - n->head > PERF_NOTES_MAX_QUEUED)
                apply_front(n, t);
}

void perf_notes_apply(struct perf_notes *n, struct proc_table *t, uint64_t until) {
        if (until >= n->read_time)
                perf_notes_read(n, t);
        while (n->head < n->n && n->q[n->head].time <= until)
                apply_front(n, t);
}

/* --- the events ---------------------------------------------------------- */

static void close_ring(struct notes_ring *r) {
        if (r->base)
                munmap(r->base, r->mmap_size);
        *r = (struct notes_ring) { .fd = safe_close(r->fd) };
}

static int open_ring(struct perf_notes *n, uint32_t cpu, struct notes_ring *r) {
        long page = sysconf(_SC_PAGESIZE);
        struct perf_event_attr a = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(a),
                .config = PERF_COUNT_SW_DUMMY,
                .sample_type = layout.sample_type,
                .read_format = CPU_HOTPLUG_READ_FORMAT,
                .mmap = 1,
                .mmap2 = 1,
                .comm = 1,
                .comm_exec = 1,
                .task = 1,
                .sample_id_all = 1,
                .use_clockid = 1,
                .clockid = n->clock,
                .watermark = 1,
                .wakeup_watermark = (uint32_t) ((size_t) page * n->ring_pages / 4),
        };
        *r = (struct notes_ring) { .fd = (int) syscall(SYS_perf_event_open, &a, -1, (int) cpu, -1, PERF_FLAG_FD_CLOEXEC) };
        if (r->fd < 0)
                return (r->fd = negative_errno());
        r->mmap_size = (size_t) page * (1 + n->ring_pages);
        void *p = mmap(NULL, r->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
        if (p == MAP_FAILED) {
                int e = negative_errno();
                r->mmap_size = 0;
                close_ring(r);
                return e;
        }
        r->base = p;
        struct perf_event_mmap_page *mp = p;
        r->data = r->base + (mp->data_offset ? mp->data_offset : (uint64_t) page);
        r->data_size = mp->data_size ? mp->data_size : (uint64_t) page * n->ring_pages;
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = cpu };
        if (epoll_ctl(n->epoll_fd, EPOLL_CTL_ADD, r->fd, &ev) < 0) {
                int e = negative_errno();
                close_ring(r);
                return e;
        }
        return r->fd;
}

static void hotplug_close(void *userdata, size_t k) {
        struct perf_notes *n = userdata;
        /* What it wrote until its CPU left is kept. */
        read_ring(n, &n->rings[k]);
        sort_queue(n, 0);
        close_ring(&n->rings[k]);
}

static int hotplug_open(void *userdata, size_t k) {
        struct perf_notes *n = userdata;
        return open_ring(n, (uint32_t) k, &n->rings[k]);
}

static const struct cpu_hotplug_ops hotplug_ops = {
        .close = hotplug_close,
        .open = hotplug_open,
};

int perf_notes_new(clockid_t clock, size_t ring_pages, struct perf_notes **ret) {
        if (ring_pages == 0 || (ring_pages & (ring_pages - 1)))
                return -EINVAL;
        long conf = sysconf(_SC_NPROCESSORS_CONF);
        uint32_t online[MAX_CPUS];
        size_t n_online;
        int r = cpus_online(online, ELEMENTSOF(online), &n_online);
        if (r < 0)
                return r;
        struct perf_notes *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        *n = (struct perf_notes) { .clock = clock, .ring_pages = ring_pages };
        for (size_t k = 0; k < MAX_CPUS; k++)
                n->rings[k].fd = -EBADF;
        size_t n_cpus = conf > 0 ? (size_t) conf : 1;
        for (size_t k = 0; k < n_online; k++)
                n_cpus = MAX(n_cpus, (size_t) online[k] + 1);
        n_cpus = MIN(n_cpus, (size_t) MAX_CPUS);
        n->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        n->scratch = malloc(SCRATCH_SIZE);
        if (n->epoll_fd < 0 || !n->scratch) {
                r = n->epoll_fd < 0 ? negative_errno() : -ENOMEM;
                goto fail;
        }
        if ((r = cpu_hotplug_init(&n->hotplug, n_cpus, &hotplug_ops, n)) < 0)
                goto fail;
        for (size_t k = 0; k < n_online; k++) {
                if (online[k] >= n_cpus)
                        continue;
                int fd = open_ring(n, online[k], &n->rings[online[k]]);
                /* A CPU refused for want of privileges: all of them are. */
                if (fd == -EACCES || fd == -EPERM || fd == -ENOENT || fd == -EOPNOTSUPP || fd == -ENOMEM) {
                        r = fd;
                        goto fail;
                }
                cpu_hotplug_set(&n->hotplug, online[k], online[k], fd);
                n->stats.cpus += fd >= 0;
        }
        if (n->stats.cpus == 0) {
                r = -ENODEV;
                goto fail;
        }
        n->read_time = clock_now(clock);
        *ret = n;
        return 0;
fail:
        perf_notes_free(n);
        return r;
}

void perf_notes_free(struct perf_notes *n) {
        if (!n)
                return;
        for (size_t k = 0; k < MAX_CPUS; k++)
                if (n->rings[k].fd >= 0 || n->rings[k].base)
                        close_ring(&n->rings[k]);
        cpu_hotplug_done(&n->hotplug);
        for (size_t k = n->head; k < n->n; k++)
                note_done(&n->q[k]);
        free(n->q);
        free(n->scratch);
        safe_close(n->epoll_fd);
        free(n);
}

int perf_notes_fd(const struct perf_notes *n) {
        return n->epoll_fd;
}

void perf_notes_check_cpus(struct perf_notes *n) {
        (void) cpu_hotplug_check(&n->hotplug);
        n->stats.cpus = 0;
        for (size_t k = 0; k < n->hotplug.n; k++)
                n->stats.cpus += n->rings[k].fd >= 0;
}

void perf_notes_stats(const struct perf_notes *n, struct perf_notes_stats *ret) {
        *ret = n->stats;
}
