/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf's loop thread: the records of each CPU's ring are copied into
 * the worker's queue (samples outside the configured scope, or with no room
 * left to be unwound, as notes; samples with no room at all only counted),
 * and a ring whose CPU went offline is read whole, closed, and opened again
 * when the CPU is back. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "basic/macro.h"
#include "perf-session.h"

/* ---- scope (loop thread) ---- */

static struct scope_slot *scope_slot(struct perf_session *s, int pid) {
        if (s->scope_used * 2 >= SCOPE_SLOTS) {
                memset(s->scope, 0, SCOPE_SLOTS * sizeof(*s->scope));
                s->scope_used = 0;
        }
        for (size_t i = ((uint32_t) pid * 2654435761u) & (SCOPE_SLOTS - 1);; i = (i + 1) & (SCOPE_SLOTS - 1)) {
                if (s->scope[i].pid == pid)
                        return &s->scope[i];
                if (s->scope[i].pid == 0) {
                        s->scope[i].pid = pid;
                        s->scope_used++;
                        return &s->scope[i];
                }
        }
}

static void scope_forget(struct perf_session *s, int pid) {
        if (pid > 0)
                scope_slot(s, pid)->state = 0;
}

/* A process without a command line to read (exec'ing: the new image's
 * arguments not set up yet; gone; a kernel thread) is out of scope for
 * now and read again for its samples RETRY_NS later: caching that for
 * good lost every sample of a program whose first sample was read while
 * it exec'd. */
#define SCOPE_RETRY_NS (50 * 1000 * 1000ull)

static bool in_scope(struct perf_session *s, int pid, uint64_t time) {
        const struct perf_config *c = &s->cfg;
        if (!c->n_target_pid && !c->n_target_cmdline && !c->additional_cmdline_count && !c->n_exclude_pid &&
            !c->n_exclude_cmdline)
                return true;
        if (pid <= 0)
                return false;
        struct scope_slot *slot = scope_slot(s, pid);
        if (slot->state == 3 && time < slot->read_at + SCOPE_RETRY_NS && time + SCOPE_RETRY_NS > slot->read_at)
                return false;
        if (slot->state == 1 || slot->state == 2)
                return slot->state == 1;
        char path[64], cmdline[512] = "";
        snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, cmdline, sizeof(cmdline) - 1);
                cmdline[n > 0 ? n : 0] = '\0';
                close(fd);
        }
        bool in = perf_config_in_scope(c, pid, cmdline, &s->additional_left);
        slot->state = in ? 1 : cmdline[0] ? 2 : 3;
        slot->read_at = time;
        return in;
}

/* ---- ring reading (loop thread) ---- */

/* A sample that finds the queue at its item bound leaves no item behind:
 * its CPU's count of dropped samples stands for it in the trace. */
static void drop_sample(struct perf_session *s, struct cpu_ring *ring, uint64_t time) {
        /* The loop thread is the only writer of both: plain stores will do. */
        atomic_store_explicit(&ring->dropped_time, time, memory_order_relaxed);
        atomic_store_explicit(&ring->dropped, atomic_load_explicit(&ring->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        /* Released after the CPU's count: the worker reads the total first. */
        atomic_fetch_add_explicit(&s->dropped, 1, memory_order_release);
}

/* A sample written without unwinding. Returns -ENOMEM or -ENOBUFS (queue
 * at its item bound) when it could not be queued. */
static int note(struct perf_session *s, const struct perf_record *r, struct cpu_ring *ring, uint8_t reason) {
        struct perf_item *it = perf_item_new(PERF_ITEM_NOTE, 0);
        if (!it)
                return -ENOMEM;
        it->reason = reason;
        it->misc = r->misc;
        it->cpu = (uint32_t) ring->cpu;
        it->pid = r->u.sample.pid;
        it->tid = r->u.sample.tid;
        it->time = r->u.sample.time;
        it->count = ring->count;
        int ret = perf_queue_push(&s->q, it);
        if (ret < 0)
                free(it);
        return ret;
}

/* Takes it, the copy of a sample: queued to be unwound (with its
 * thread's Python frames, read now), or replaced by a note, or counted as
 * dropped when not even a note can be queued. */
static void take_sample(struct perf_session *s, struct cpu_ring *ring, struct perf_item *it,
                        const struct perf_record *r) {
        atomic_uint_fast64_t *counter = NULL;
        uint8_t reason = SKIP_NONE;
        it->kind = PERF_ITEM_SAMPLE;
        it->count = ring->count;
        if (s->cfg.callstacks) {
                if (!in_scope(s, (int) r->u.sample.pid, r->u.sample.time)) {
                        counter = &s->skipped_scope;
                        reason = SKIP_NOT_IN_SCOPE;
                } else if (perf_queue_push(&s->q, it = perf_py_attach(s, ring, it, r)) >= 0)
                        return;
                else {
                        counter = &s->skipped_enqueue;
                        reason = SKIP_UNWIND_ENQUEUE;
                }
        }
        perf_queue_item_free(&s->q, it);
        if (note(s, r, ring, reason) < 0)
                drop_sample(s, ring, r->u.sample.time);
        else if (counter)
                (*counter)++;
}

/* The kernel's bookkeeping is never refused by the queue (see
 * perf-queue.h); were it, it would be freed here, not leaked. */
static void push_bookkeeping(struct perf_session *s, struct perf_item *it) {
        if (perf_queue_push(&s->q, it) < 0)
                perf_queue_item_free(&s->q, it);
}

/* Takes it (a copied record), r what the record parsed into (its views
 * may point into the ring: used during the call only). */
static void handle_record(struct perf_session *s, struct cpu_ring *ring, struct perf_item *it,
                          const struct perf_record *r) {
        it->cpu = (uint32_t) ring->cpu;
        switch (r->kind) {
        case PERF_REC_SAMPLE:
                s->samples++;
                ring->count += r->u.sample.period;
                take_sample(s, ring, it, r);
                return;
        case PERF_REC_COMM:
                        if (r->u.comm.exec)
                        scope_forget(s, (int) r->u.comm.pid);
                break;
        case PERF_REC_FORK:
        case PERF_REC_EXIT:
                if (r->u.task.pid == r->u.task.tid)
                        scope_forget(s, (int) r->u.task.pid);
                break;
        case PERF_REC_MMAP2:
                break;
        case PERF_REC_LOST:
        case PERF_REC_LOST_SAMPLES:
                s->lost += r->u.lost.lost;
                it->kind = PERF_ITEM_LOST;
                it->count = r->u.lost.lost;
                it->time = r->time;
                push_bookkeeping(s, it);
                return;
        case PERF_REC_THROTTLE:
                s->throttles++;
                it->kind = PERF_ITEM_THROTTLE;
                it->count = ++ring->throttles;
                it->time = r->time;
                push_bookkeeping(s, it);
                return;
        default:
                perf_queue_item_free(&s->q, it);
                return;
        }
        /* Process notes go to the worker, in ring order with the samples. */
        push_bookkeeping(s, it);
}

/* With the queue at its item bound, a sample is only counted: read where
 * it lies in the ring, nothing allocated or copied. */
static void count_sample_dropped(struct perf_session *s, struct cpu_ring *ring, const struct perf_record *r) {
        s->samples++;
        ring->count += r->u.sample.period;
        drop_sample(s, ring, r->u.sample.time);
}

/* A record of the sampling event, or a note of the kernel's: copied into
 * what the worker gets, or counted. */
static void take_record(struct perf_session *s, struct cpu_ring *ring, const struct perf_event_header *h,
                        const uint8_t *src) {
        /* Parsed once, where it lies: the copy is the same record. */
        struct perf_record r;
        if (perf_record_parse(src, h->size, &s->layout, &r) < 0) {
                s->bad_records++;
                return;
        }
        if (r.kind == PERF_REC_SAMPLE && !perf_queue_room(&s->q, PERF_ITEM_NOTE, 0)) {
                count_sample_dropped(s, ring, &r);
                return;
        }
        int n = perf_record_compact_parsed(src, h->size, &r, NULL);
        if (n < 0) {
                s->bad_records++;
                return;
        }
        size_t len = (size_t) n;
        /* A sample that may get its Python frames has room for a few. */
        bool py = s->py_bpf ? ring->py_pending && ring->py_pending->valid
                            : s->cfg.python_frames && atomic_load(&s->py_any);
        size_t room = h->type == PERF_RECORD_SAMPLE && py ? PERF_ITEM_EXTRA(len) - len + PERF_PY_ROOM : 0;
        struct perf_item *it = perf_queue_item_new(&s->q, PERF_ITEM_RECORD, len, room);
        if (!it) {
                s->skipped_enqueue++;
                return;
        }
        (void) perf_record_compact_parsed(src, h->size, &r, it->rec);
        handle_record(s, ring, it, &r);
}

/* Handles the record at *tail (there is one) and moves past it. False
 * when the drain stops here: the queue is congested, or the ring is
 * damaged (then *tail is head). */
static bool drain_one(struct perf_session *s, struct cpu_ring *ring, uint64_t head, uint64_t *tail) {
        uint64_t mask = ring->data_size - 1;
        /* Bookkeeping alone has filled the queue: the rest waits in the
         * ring (but for the last drain, at the stop). */
        if (!s->stopping && perf_queue_congested(&s->q))
                return false;
        struct perf_event_header h;
        for (size_t k = 0; k < sizeof(h); k++)
                ((uint8_t *) &h)[k] = ring->data[(*tail + k) & mask];
        if (h.size < sizeof(h) || h.size > head - *tail) {
                s->bad_records++;
                *tail = head;
                return false;
        }
        /* A record is read where it lies (or, when it wraps the ring's
         * end, from a scratch copy) and copied once into what the worker
         * gets, without the part of the user stack copy the kernel left
         * unfilled: most stacks use a few KiB of the 64 KiB reserved. */
        const uint8_t *src = ring->data + (*tail & mask);
        uint64_t at = *tail;
        *tail += h.size;
        if ((at & mask) + h.size > ring->data_size) {
                if (!ring->scratch)
                        ring->scratch = malloc(UINT16_MAX + 1);
                if (!ring->scratch ||
                    perf_ring_copy(ring->data, ring->data_size, at, head, ring->scratch, UINT16_MAX + 1) != h.size) {
                        s->skipped_enqueue++;
                        return true;
                }
                src = ring->scratch;
        }
        uint64_t id;
        if (ring->py_id && perf_record_sample_id(src, h.size, &s->layout, &id) && id == ring->py_id) {
                /* The BPF walk of the sample that follows. */
                perf_py_take_record(s, ring, src, h.size);
                return true;
        }
        take_record(s, ring, &h, src);
        /* A walk is for the record right after it, whatever that was. */
        if (ring->py_pending)
                ring->py_pending->valid = false;
        return true;
}

static struct perf_event_mmap_page *ring_page(const struct cpu_ring *ring) {
        return (struct perf_event_mmap_page *) (void *) ring->base;
}

void perf_drain_ring(struct cpu_ring *ring) {
        struct perf_session *s = ring->s;
        if (!ring->base)
                return;
        struct perf_event_mmap_page *mp = ring_page(ring);
        uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;
        while (head - tail >= sizeof(struct perf_event_header) && drain_one(s, ring, head, &tail))
                ;
        __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
        perf_queue_publish(&s->q);
}

/* ---- all rings, in time order (loop thread) ---- */

/* A ring with records left, in the merge. */
struct pending {
        struct cpu_ring *ring;
        uint64_t head, tail, time;
};

/* The time of the record at tail (0 for one without: it goes first). */
static uint64_t time_at(const struct perf_session *s, const struct cpu_ring *ring, uint64_t tail) {
        uint64_t mask = ring->data_size - 1, t = 0;
        struct perf_event_header h;
        size_t off;
        for (size_t k = 0; k < sizeof(h); k++)
                ((uint8_t *) &h)[k] = ring->data[(tail + k) & mask];
        if (!perf_record_time_offset(&s->layout, h.type, h.size, &off))
                return 0;
        for (size_t k = 0; k < sizeof(t); k++)
                ((uint8_t *) &t)[k] = ring->data[(tail + off + k) & mask];
        return t;
}

/* A min-heap of the rings by the time of their next record. */
static void sift_down(struct pending *v, size_t n, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                if (l < n && v[l].time < v[m].time)
                        m = l;
                if (r < n && v[r].time < v[m].time)
                        m = r;
                if (m == i)
                        return;
                struct pending x = v[i];
                v[i] = v[m];
                v[m] = x;
                i = m;
        }
}

/* Every ring's records, oldest first, as perf report orders them: a
 * process's fork, exec and mmaps are noted on the CPU where they happened
 * and its samples on others, and the worker must see the notes first (a
 * process gone by then has its maps from them only). */
void perf_drain_all(struct perf_session *s) {
        struct pending *v = s->n_rings ? calloc(s->n_rings, sizeof(*v)) : NULL;
        if (!v) {
                for (size_t k = 0; k < s->n_rings; k++)
                        perf_drain_ring(&s->rings[k]);
                return;
        }
        size_t n = 0, all;
        for (size_t k = 0; k < s->n_rings; k++) {
                struct cpu_ring *ring = &s->rings[k];
                if (!ring->base)
                        continue;
                struct perf_event_mmap_page *mp = ring_page(ring);
                v[n] = (struct pending) { .ring = ring, .head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE),
                                          .tail = mp->data_tail };
                /* Its event runs: the hotplug look need not read it. */
                if (v[n].head != v[n].tail)
                        cpu_hotplug_active(&s->hotplug, k);
                v[n].time = time_at(s, ring, v[n].tail);
                n++;
        }
        all = n;
        /* Rings with nothing to read go to the end, out of the heap. */
        for (size_t i = 0; i < n;)
                if (v[i].head - v[i].tail < sizeof(struct perf_event_header)) {
                        struct pending x = v[i];
                        v[i] = v[--n];
                        v[n] = x;
                } else
                        i++;
        for (size_t i = n / 2; i-- > 0;)
                sift_down(v, n, i);
        while (n > 0) {
                struct pending *p = &v[0];
                if (!drain_one(s, p->ring, p->head, &p->tail))
                        break;
                if (p->head - p->tail >= sizeof(struct perf_event_header))
                        p->time = time_at(s, p->ring, p->tail);
                else {
                        struct pending x = v[0];
                        v[0] = v[--n];
                        v[n] = x;
                }
                sift_down(v, n, 0);
        }
        for (size_t i = 0; i < all; i++)
                __atomic_store_n(&ring_page(v[i].ring)->data_tail, v[i].tail, __ATOMIC_RELEASE);
        /* The drains for the Python frames and for a ring's watermark
         * leave the batch to a later one unless it grew (in items, or to a
         * quarter of the queue's byte bound, which a small
         * max_enqueued_footprint_kb reaches first): the worker is not woken
         * for each of them. */
        if (s->q.batch_items >= s->hold_items || s->q.batch_bytes >= s->q.max_bytes / 4)
                perf_queue_publish(&s->q);
        free(v);
}

/* Once per instance, as soon as the loop sees it: the writer refusing
 * packets means a trace with holes (the count comes when it stops). */
static void log_first_write_error(struct perf_session *s) {
        int r = atomic_load(&s->first_write_error);
        if (r == 0 || s->write_error_logged)
                return;
        s->write_error_logged = true;
        plugin_log(s->pl, TRACED_LOG_WARNING,
                   "linux.perf instance %llu: the trace writer refused a packet: %s (counted until the instance stops)",
                   (unsigned long long) s->inst.id, strerror(-r));
}

/* A CPU that goes offline takes its per-CPU event out of the kernel's
 * scheduling for good: when the CPU is back the event stays silent. On
 * each read period the shared tracker closes such a ring (what it recorded
 * is drained first) and opens it again once its CPU is online. */
void perf_on_timer(void *userdata) {
        struct perf_session *s = userdata;
        (void) cpu_hotplug_check(&s->hotplug);
        perf_drain_all(s);
        perf_py_timer_check(s);
        perf_py_log(s);
        /* The worker reads the notes' rings at least this often, samples
         * or not. */
        if (s->notes) {
                struct perf_item *it = perf_item_new(PERF_ITEM_TICK, 0);
                if (it) {
                        push_bookkeeping(s, it);
                        perf_queue_publish(&s->q);
                }
        }
        log_first_write_error(s);
}

/* A ring filling up: all of them are read, to keep the order. */
void perf_on_ring(int fd, uint32_t revents, void *userdata) {
        struct cpu_ring *ring = userdata;
        struct perf_session *s = ring->s;
        s->hold_items = PERF_RING_HOLD_ITEMS;
        perf_drain_all(s);
        s->hold_items = 0;
}

/* ---- CPU hotplug (loop thread) ---- */

/* What a stopped event recorded is kept: its ring is read whole before it
 * is closed, even with the queue congested (as at the stop: the kernel
 * writes no more into it). */
static void hotplug_close(void *userdata, size_t k) {
        struct perf_session *s = userdata;
        bool stopping = s->stopping;
        s->stopping = true;
        perf_drain_ring(&s->rings[k]);
        s->stopping = stopping;
        perf_close_ring(s, &s->rings[k]);
}

static int hotplug_open(void *userdata, size_t k) {
        struct perf_session *s = userdata;
        struct cpu_ring *ring = &s->rings[k];
        int r = perf_open_ring(s, &s->cfg.attr, ring);
        if (r >= 0)
                r = s->pl->api->add_fd(s->pl->host, ring->fd, EPOLLIN, perf_on_ring, ring, &ring->src);
        if (r >= 0 && ioctl(ring->fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
                r = negative_errno();
        if (r < 0) {
                perf_close_ring(s, ring);
                return r;
        }
        return ring->fd;
}

static void hotplug_changed(void *userdata, size_t k, enum cpu_hotplug_change what, int error) {
        struct perf_session *s = userdata;
        plugin_log_cpu_change(s->pl, "linux.perf", s->inst.id, (uint32_t) s->rings[k].cpu, what, error);
}

const struct cpu_hotplug_ops perf_hotplug_ops = {
        .close = hotplug_close,
        .open = hotplug_open,
        .changed = hotplug_changed,
};

