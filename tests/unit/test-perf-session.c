/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf's two threads without the kernel: perf-drain.c reading a ring
 * laid out by hand into the queue, and perf-worker.c writing what a queue
 * holds through a host that keeps the packets. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test-packets.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "basic/pbr.h"
#include "bpfstack/bpfstack.h"
#include "perf-session.h"
#include "perfpy.h"
#include "profiling/elf-image.h"
#include "profiling/intern.h"
#include "profiling/procmaps.h"
#include "profiling/unwind.h"

/* perf-ds.c is not linked: the hotplug callbacks are not called here. */
int perf_open_ring(struct perf_session *s, struct perf_event_attr *attr, struct cpu_ring *ring) {
        return -ENODEV;
}

void perf_close_ring(struct perf_session *s, struct cpu_ring *ring) {
}

#define PAGE 4096u
#define DATA_SIZE 4096u /* a power of two */
#define MAX_PACKETS 16

struct fake_host {
        uint8_t *packets[MAX_PACKETS];
        size_t sizes[MAX_PACKETS];
        size_t n;
        unsigned flushes, freed;
};

static struct fake_host fh;

static int32_t fake_write_packet(struct traced_writer *w, const void *packet, size_t size) {
        cr_assert_lt(fh.n, MAX_PACKETS);
        fh.packets[fh.n] = malloc(size ? size : 1);
        memcpy(fh.packets[fh.n], packet, size);
        fh.sizes[fh.n++] = size;
        return 0;
}

static int32_t fake_flush_writer(struct traced_writer *w) {
        fh.flushes++;
        return 0;
}

static void fake_free_writer(struct traced_writer *w) {
        fh.freed++;
}

static void fake_log(struct traced_host *host, int level, const char *message) {
}

static const struct traced_host_api api = {
        .struct_size = sizeof(struct traced_host_api),
        .log = fake_log,
        .write_packet = fake_write_packet,
        .begin_packet = test_begin_packet,
        .end_packet = test_end_packet,
        .flush_writer = fake_flush_writer,
        .free_writer = fake_free_writer,
};

static struct perf_plugin pl = { .api = &api };
static struct perf_session *s;
static uint8_t *area; /* the ring: its control page, then the data */

static void setup(void) {
        memset(&fh, 0, sizeof(fh));
        test_packets_sink = fake_write_packet;
        s = calloc(1, sizeof(*s));
        cr_assert_not_null(s);
        s->pl = &pl;
        s->inst.id = 9;
        s->layout = (struct perf_layout) { .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                          PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD,
                                           .sample_id_all = true };
        s->cfg.clock_id = 6;
        s->epoch = 1;
        s->n_rings = 1;
        s->rings = calloc(1, sizeof(*s->rings));
        s->frames = calloc(FRAME_CACHE_SLOTS, sizeof(*s->frames));
        s->track_epoch = calloc((size_t) _COUNTER_KIND_MAX * MAX_CPUS, sizeof(*s->track_epoch));
        area = aligned_alloc(PAGE, PAGE + DATA_SIZE);
        cr_assert(s->rings && s->frames && s->track_epoch && area);
        memset(area, 0, PAGE + DATA_SIZE);
        s->rings[0] = (struct cpu_ring) { .s = s, .cpu = 2, .fd = -EBADF, .base = area, .data = area + PAGE,
                                          .data_size = DATA_SIZE };
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->done_cv, NULL);
}

static void teardown(void) {
        perf_queue_done(&s->q);
        intern_writer_free(s->iw);
        unwinder_free(s->unw);
        proc_table_free(s->procs);
        elf_cache_free(s->elves);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->done_cv);
        free(s->rings);
        free(s->frames);
        free(s->track_epoch);
        free(s);
        free(area);
        for (size_t k = 0; k < fh.n; k++)
                free(fh.packets[k]);
}

/* Appends a record at the head of the ring in a (a control page, then
 * the data). */
static void ring_put_at(uint8_t *a, uint32_t type, uint16_t misc, const uint64_t *body, size_t n_words) {
        struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *) (void *) a;
        struct perf_event_header h = { .type = type, .misc = misc,
                                       .size = (uint16_t) (sizeof(h) + n_words * sizeof(uint64_t)) };
        uint8_t *at = a + PAGE + mp->data_head;
        cr_assert_leq(mp->data_head + h.size, DATA_SIZE);
        memcpy(at, &h, sizeof(h));
        memcpy(at + sizeof(h), body, n_words * sizeof(uint64_t));
        mp->data_head += h.size;
}

static void ring_put(uint32_t type, uint16_t misc, const uint64_t *body, size_t n_words) {
        ring_put_at(area, type, misc, body, n_words);
}

static uint64_t pair(uint32_t lo, uint32_t hi) {
        return (uint64_t) hi << 32 | lo;
}

/* A sample of pid 42 (tid 43) at time on CPU 2, with period. */
static void put_sample(uint64_t time, uint64_t period) {
        uint64_t body[] = { 0x401000, pair(42, 43), time, pair(2, 0), period };
        ring_put(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, body, 5);
}

static void put_throttle(uint64_t time) {
        /* time, id, stream_id, then the sample id: tid, time, cpu */
        uint64_t body[] = { time, 1, 1, pair(42, 43), time, pair(2, 0) };
        ring_put(PERF_RECORD_THROTTLE, 0, body, 6);
}

TestSuite(perf_session, .init = setup, .fini = teardown);

Test(perf_session, drain_queues_notes_and_bookkeeping) {
        cr_assert_eq(perf_queue_init(&s->q, 1u << 20), 0);
        put_sample(1000, 7);
        put_throttle(1100);
        put_sample(1200, 5);
        perf_drain_ring(&s->rings[0]);

        struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *) (void *) area;
        cr_expect_eq(mp->data_tail, mp->data_head);
        cr_expect_eq(s->samples, 2);
        cr_expect_eq(s->throttles, 1);
        cr_expect_eq(s->bad_records, 0);
        cr_expect_eq(s->rings[0].count, 12);

        /* Without callstacks a sample becomes a note, in ring order. */
        struct perf_item *it = perf_queue_pop(&s->q);
        cr_expect_eq(it->kind, PERF_ITEM_NOTE);
        cr_expect_eq(it->reason, SKIP_NONE);
        cr_expect_eq(it->cpu, 2);
        cr_expect_eq(it->pid, 42);
        cr_expect_eq(it->tid, 43);
        cr_expect_eq(it->time, 1000);
        cr_expect_eq(it->count, 7);
        free(it);
        it = perf_queue_pop(&s->q);
        cr_expect_eq(it->kind, PERF_ITEM_THROTTLE);
        cr_expect_eq(it->count, 1);
        cr_expect_eq(it->time, 1100);
        free(it);
        it = perf_queue_pop(&s->q);
        cr_expect_eq(it->kind, PERF_ITEM_NOTE);
        cr_expect_eq(it->count, 12);
        free(it);
}

/* A sample of event id (pid 42, thread tid) at time, its identifier first. */
static void put_sample_id(uint64_t id, uint32_t tid, uint64_t time) {
        uint64_t body[] = { id, 0x401000, pair(42, tid), time, pair(2, 0), 1 };
        ring_put(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, body, 6);
}

/* A record of the BPF output event id: the walk of thread tid, with its
 * n frames (code objects 0x1000 * (k + 1), the first an entry frame), or
 * a record whose magic is wrong. */
static void put_walk(uint64_t id, uint32_t tid, uint8_t stop, uint16_t n, bool bad_magic) {
        uint64_t body[64] = { id, 0x401000, pair(42, tid), 900, pair(2, 0), 1 };
        uint8_t raw[4 + 16 + 16 * 8 + 4];
        struct perf_pyrec h = { .magic = bad_magic ? 0 : PERF_PYREC_MAGIC, .tid = tid, .stop = stop, .n = n };
        uint32_t size = (uint32_t) (sizeof(h) + 16u * n + 4u); /* 4 + size: a multiple of 8 */
        cr_assert_leq(n, 8);
        memset(raw, 0, sizeof(raw));
        memcpy(raw, &size, 4);
        memcpy(raw + 4, &h, sizeof(h));
        for (uint16_t k = 0; k < n; k++) {
                uint64_t code = 0x1000u * (k + 1u) | (k == 0 ? PY_WALK_ENTRY : 0), instr = 0x2000u + k;
                memcpy(raw + 4 + sizeof(h) + 16u * k, &code, 8);
                memcpy(raw + 4 + sizeof(h) + 16u * k + 8, &instr, 8);
        }
        memcpy(body + 6, raw, 4 + size);
        ring_put(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, body, 6 + (4 + size) / 8);
}

/* The Python frames of the item's trailer: their number, -1 without one. */
static int item_walk(const struct perf_item *it, struct perf_py_trailer *t) {
        if (it->extra < sizeof(*t))
                return -1;
        memcpy(t, it->rec + PERF_ITEM_EXTRA(it->len), sizeof(*t));
        return (int) t->n;
}

/* Python frames walked by BPF at the sample: each record goes with the
 * sample right after it in the ring, of the same thread, and with no
 * other; a record that is not one is counted, never attached. */
Test(perf_session, bpf_walks_go_with_the_sample_after_them) {
        cr_assert_eq(perf_queue_init(&s->q, 1u << 20), 0);
        s->cfg.callstacks = true;
        s->cfg.python_frames = true;
        s->layout.sample_type |= PERF_SAMPLE_IDENTIFIER;
        s->py_layout = (struct perf_layout){ .sample_type = PERF_PYBPF_SAMPLE_TYPE };
        s->py_bpf = (struct perf_pybpf *) (uintptr_t) 1; /* only its presence is looked at here */
        s->scope = calloc(SCOPE_SLOTS, sizeof(*s->scope));
        s->rings[0].py_id = 77;
        put_walk(77, 43, BPFSTACK_PY_END, 3, false);
        put_sample_id(5, 43, 1000); /* 1: three frames */
        put_walk(77, 43, BPFSTACK_PY_END, 1, false);
        put_throttle(1100);
        put_sample_id(5, 43, 1200); /* 2: none, a throttle came between */
        put_walk(77, 99, BPFSTACK_PY_END, 2, false);
        put_sample_id(5, 43, 1300); /* 3: none, another thread's walk */
        put_walk(77, 43, BPFSTACK_PY_END, 2, true);
        put_sample_id(5, 43, 1400); /* 4: none, a bad record */
        put_walk(77, 43, BPFSTACK_PY_FAULT, 0, false);
        put_sample_id(5, 43, 1500); /* 5: a walk that faulted */
        put_sample_id(5, 43, 1600); /* 6: none, no walk before it */
        perf_drain_ring(&s->rings[0]);

        cr_expect_eq(s->samples, 6, "the walks are not samples");
        cr_expect_eq(s->py_bpf_records, 5);
        cr_expect_eq(s->bad_records, 1);
        struct perf_py_trailer t;
        int want[] = { 3, -1, -1, -1, 0, -1 };
        size_t k = 0;
        struct perf_item *it;
        while (perf_queue_items(&s->q) > 0) {
                it = perf_queue_pop(&s->q);
                if (it->kind == PERF_ITEM_SAMPLE) {
                        cr_assert_lt(k, 6);
                        int n = item_walk(it, &t);
                        cr_expect_eq(n, want[k], "sample %zu: %d frames, not %d", k + 1, n, want[k]);
                        if (k == 0) {
                                cr_expect_eq(t.result, PY_WALK_OK);
                                cr_expect_eq(t.entries, 1);
                                cr_expect_not(t.has_copy);
                                uint64_t f[6];
                                memcpy(f, it->rec + PERF_ITEM_EXTRA(it->len) + sizeof(t), sizeof(f));
                                cr_expect_eq(f[0], 0x1000 | PY_WALK_ENTRY);
                                cr_expect_eq(f[4], 0x3000);
                                cr_expect_eq(f[5], 0x2002);
                        }
                        if (k == 4)
                                cr_expect_eq(t.result, PY_WALK_FAULT);
                        k++;
                }
                free(it);
        }
        cr_expect_eq(k, 6, "%zu samples queued", k);
        free(s->scope);
        s->scope = NULL;
        free(s->rings[0].py_pending);
}

/* The time of an item, as the worker will read it. */
static uint64_t item_time(const struct perf_item *it) {
        struct perf_record r;
        if (it->kind != PERF_ITEM_RECORD)
                return it->time;
        cr_assert_eq(perf_record_parse(it->rec, it->len, &s->layout, &r), 0);
        return r.time;
}

/* A process forked on one CPU and sampled at once on another: the fork
 * reaches the worker before the sample, whichever ring is read first
 * (the child may be gone before its maps are read: they come from the
 * fork). */
Test(perf_session, drain_all_orders_the_rings_by_time) {
        cr_assert_eq(perf_queue_init(&s->q, 1u << 20), 0);
        uint8_t *area1 = aligned_alloc(PAGE, PAGE + DATA_SIZE);
        struct cpu_ring *rings = realloc(s->rings, 2 * sizeof(*s->rings));
        cr_assert(area1 && rings);
        memset(area1, 0, PAGE + DATA_SIZE);
        s->rings = rings;
        s->n_rings = 2;
        s->scope = calloc(SCOPE_SLOTS, sizeof(*s->scope)); /* forks and exits reset a pid's scope */
        cr_assert_not_null(s->scope);
        s->rings[1] = (struct cpu_ring) { .s = s, .cpu = 3, .fd = -EBADF, .base = area1, .data = area1 + PAGE,
                                          .data_size = DATA_SIZE };
        put_sample(1000, 1);
        put_throttle(2200);
        put_sample(3000, 1);
        /* pid, ppid, tid, ptid, time, then the sample id: tid, time, cpu */
        uint64_t fork[] = { pair(50, 42), pair(50, 43), 2000, pair(50, 50), 2000, pair(3, 0) };
        ring_put_at(area1, PERF_RECORD_FORK, 0, fork, 6);
        uint64_t sample[] = { 0x401000, pair(50, 50), 2500, pair(3, 0), 1 };
        ring_put_at(area1, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, sample, 5);

        perf_drain_all(s);
        static const uint64_t want[] = { 1000, 2000, 2200, 2500, 3000 };
        for (size_t k = 0; k < sizeof(want) / sizeof(*want); k++) {
                struct perf_item *it = perf_queue_pop(&s->q);
                cr_expect_eq(item_time(it), want[k], "item %zu: time %llu, not %llu", k,
                             (unsigned long long) item_time(it), (unsigned long long) want[k]);
                free(it);
        }
        for (size_t k = 0; k < 2; k++) {
                struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *) (void *) s->rings[k].base;
                cr_expect_eq(mp->data_tail, mp->data_head, "ring %zu read whole", k);
        }
        free(s->scope);
        free(area1);
}

Test(perf_session, drain_counts_what_finds_no_room) {
        /* An item bound of one, taken by a throttle: no room for a note. */
        cr_assert_eq(perf_queue_init(&s->q, PERF_ITEM_FOOTPRINT), 0);
        cr_assert_eq(s->q.max_items, 1);
        struct perf_item *it = perf_item_new(PERF_ITEM_THROTTLE, 0);
        cr_assert_eq(perf_queue_push(&s->q, it), 0);
        put_sample(2000, 3);
        perf_drain_ring(&s->rings[0]);
        cr_expect_eq(s->samples, 1);
        cr_expect_eq(s->dropped, 1);
        cr_expect_eq(s->rings[0].dropped, 1);
        cr_expect_eq(s->rings[0].dropped_time, 2000);
        cr_expect_eq(s->rings[0].count, 3);
}

/* The top-level field number of a packet's one payload (besides the
 * timestamp, clock and sequence fields). */
static uint32_t payload_of(size_t k) {
        static const uint32_t payloads[] = { 11, 59, 60, 66 };
        for (size_t p = 0; p < sizeof(payloads) / sizeof(*payloads); p++)
                if (pbr_count(fh.packets[k], fh.sizes[k], payloads[p]))
                        return payloads[p];
        return 0;
}

static uint64_t field(const uint8_t *buf, size_t len, uint32_t number) {
        struct pbr_field f;
        cr_assert(pbr_get(buf, len, number, false, &f), "field %u missing", number);
        return f.varint;
}

/* What the worker needs: its queue, interning, process table, ELF cache
 * and unwinder. */
static void worker_setup(void) {
        cr_assert_eq(perf_queue_init(&s->q, 1u << 20), 0);
        cr_assert_eq(intern_writer_new(&s->iw), 0);
        cr_assert_eq(proc_table_new(NULL, &s->procs), 0);
        cr_assert_eq(elf_cache_new(NULL, &s->elves), 0);
        s->sym = (struct symbolizer) { .procs = s->procs, .elves = s->elves };
        cr_assert_eq(unwinder_new(&s->sym, &s->unw), 0);
}

Test(perf_session, worker_writes_samples_and_counters) {
        worker_setup();

        /* Drops counted by the loop thread go out before the next item. */
        s->rings[0].dropped = 5;
        s->rings[0].dropped_time = 1500;
        s->dropped = 5;

        struct perf_item *note = perf_item_new(PERF_ITEM_NOTE, 0);
        *note = (struct perf_item) { .kind = PERF_ITEM_NOTE, .reason = SKIP_UNWIND_ENQUEUE, .cpu = 1, .pid = 42,
                                     .tid = 43, .time = 1000, .count = 7 };
        struct perf_item *thr = perf_item_new(PERF_ITEM_THROTTLE, 0);
        *thr = (struct perf_item) { .kind = PERF_ITEM_THROTTLE, .cpu = 1, .time = 2000, .count = 3 };
        cr_assert_eq(perf_queue_push(&s->q, note), 0);
        cr_assert_eq(perf_queue_push(&s->q, thr), 0);
        cr_assert_eq(perf_queue_push(&s->q, perf_item_new(PERF_ITEM_FLUSH, 0)), 0);
        cr_assert_eq(perf_queue_push(&s->q, perf_item_new(PERF_ITEM_STOP, 0)), 0);
        perf_queue_publish(&s->q);

        cr_expect_null(perf_worker_main(s));
        cr_expect_eq(fh.flushes, 1);
        cr_expect_eq(s->flush_done, 1);
        cr_expect_eq(fh.freed, 1);
        cr_expect_null(s->writer);
        cr_expect_eq(s->write_errors, 0);

        /* dropped track and value, defaults, the note, throttle track and value */
        static const uint32_t want[] = { 60, 11, 59, 66, 60, 11 };
        cr_assert_eq(fh.n, sizeof(want) / sizeof(*want));
        for (size_t k = 0; k < fh.n; k++)
                cr_expect_eq(payload_of(k), want[k], "packet %zu", k);

        struct pbr_field f;
        cr_assert(pbr_get(fh.packets[1], fh.sizes[1], 11, false, &f));
        cr_expect_eq(field(f.data, f.len, 30), 5);
        cr_expect_eq(field(fh.packets[1], fh.sizes[1], 8), 1500);
        cr_expect_eq(s->dropped_written, 5);
        cr_expect_eq(s->rings[0].dropped_written, 5);

        cr_assert(pbr_get(fh.packets[3], fh.sizes[3], 66, false, &f));
        cr_expect_eq(field(f.data, f.len, 1), 1);
        cr_expect_eq(field(f.data, f.len, 2), 42);
        cr_expect_eq(field(f.data, f.len, 3), 43);
        cr_expect_eq(field(f.data, f.len, 6), 7);
        cr_expect_eq(field(f.data, f.len, 18), SKIP_UNWIND_ENQUEUE);
        cr_expect_eq(pbr_count(f.data, f.len, 4), 0); /* no callstack */
        cr_expect_eq(field(fh.packets[3], fh.sizes[3], 8), 1000);

        /* The throttle track names its CPU; its value is the CPU's count. */
        cr_assert(pbr_get(fh.packets[4], fh.sizes[4], 60, false, &f));
        struct pbr_field name;
        cr_assert(pbr_get(f.data, f.len, 2, false, &name));
        cr_expect_eq(name.len, strlen("linux.perf throttled (CPU 1)"));
        cr_expect_eq(memcmp(name.data, "linux.perf throttled (CPU 1)", name.len), 0);
        cr_assert(pbr_get(fh.packets[5], fh.sizes[5], 11, false, &f));
        cr_expect_eq(field(f.data, f.len, 30), 3);
        cr_expect_eq(field(fh.packets[5], fh.sizes[5], 8), 2000);
}

/* The service's ClearIncrementalState (perf_session_clear counts it): the
 * worker's next packet starts the sequence again, TracePacketDefaults with
 * SEQ_INCREMENTAL_STATE_CLEARED, and what it interned is emitted anew. */
Test(perf_session, worker_starts_the_sequence_again_after_a_clear) {
        worker_setup();

        for (int k = 0; k < 3; k++) {
                struct perf_item *note = perf_item_new(PERF_ITEM_NOTE, 0);
                *note = (struct perf_item) { .kind = PERF_ITEM_NOTE, .reason = SKIP_UNWIND_ENQUEUE, .cpu = 1,
                                             .pid = 42, .tid = 43, .time = 1000u + (uint64_t) k, .count = 7 };
                cr_assert_eq(perf_queue_push(&s->q, note), 0);
        }
        cr_assert_eq(perf_queue_push(&s->q, perf_item_new(PERF_ITEM_STOP, 0)), 0);
        perf_queue_publish(&s->q);
        /* Asked once: carried out after the first item, not again. */
        atomic_store(&s->clears_asked, 1);
        uint32_t epoch = s->epoch;

        cr_expect_null(perf_worker_main(s));
        static const uint32_t want[] = { 59, 66, 59, 66, 66 };
        cr_assert_eq(fh.n, sizeof(want) / sizeof(*want));
        for (size_t k = 0; k < fh.n; k++)
                cr_expect_eq(payload_of(k), want[k], "packet %zu", k);
        cr_expect_eq(field(fh.packets[0], fh.sizes[0], 13), TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
        cr_expect_eq(field(fh.packets[2], fh.sizes[2], 13), TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
        cr_expect_eq(s->clears_done, 1);
        cr_expect_eq(s->epoch, epoch + 1, "the frame cache and counter tracks start again");
}

/* An unwind error the worker counts (the plugin's log line) is in the
 * trace, UNKNOWN included: its value is 0, which the PerfSample carries
 * all the same. A user-mode sample without user registers is one. */
Test(perf_session, every_unwind_error_counted_is_written) {
        worker_setup();
        s->cfg.user_frames = PERF_UNWIND_DWARF;

        /* ip, pid/tid, time, cpu, period: the layout of setup(), no
         * registers. */
        uint64_t body[] = { 0x401000, pair(42, 43), 1000, pair(2, 0), 1 };
        struct perf_event_header h = { .type = PERF_RECORD_SAMPLE, .misc = PERF_RECORD_MISC_USER,
                                       .size = (uint16_t) (sizeof(h) + sizeof(body)) };
        struct perf_item *it = perf_item_new(PERF_ITEM_SAMPLE, h.size);
        cr_assert_not_null(it);
        it->kind = PERF_ITEM_SAMPLE;
        it->cpu = 2;
        it->count = 1;
        memcpy(it->rec, &h, sizeof(h));
        memcpy(it->rec + sizeof(h), body, sizeof(body));
        cr_assert_eq(perf_queue_push(&s->q, it), 0);
        cr_assert_eq(perf_queue_push(&s->q, perf_item_new(PERF_ITEM_STOP, 0)), 0);
        perf_queue_publish(&s->q);
        cr_expect_null(perf_worker_main(s));

        cr_assert_eq(s->unwind_errors, 1);
        size_t samples = 0;
        for (size_t k = 0; k < fh.n; k++) {
                struct pbr_field f, e;
                if (!pbr_get(fh.packets[k], fh.sizes[k], 66, false, &f))
                        continue;
                samples++;
                cr_assert(pbr_get(f.data, f.len, 16, false, &e), "the sample does not carry its unwind error");
                cr_expect_eq(e.varint, UNWIND_ERR_UNKNOWN);
        }
        cr_assert_eq(samples, 1);
}

/* The drains for the Python frames (hold_items) batch what they read without
 * handing it to the worker, until PERF_PY_HOLD_ITEMS wait or a regular
 * drain comes; a sample of a process not in the table of CPython
 * processes is queued as it was, with no extra bytes. */
Test(perf_session, python_drains_hand_over_with_the_next_regular_one) {
        cr_assert_eq(perf_queue_init(&s->q, 1u << 20), 0);
        pthread_mutex_init(&s->py_mu, NULL);
        s->cfg.callstacks = true;
        s->cfg.python_frames = true;
        s->scope = calloc(SCOPE_SLOTS, sizeof(*s->scope));
        put_sample(1000, 7);
        put_sample(1200, 5);
        s->hold_items = PERF_PY_HOLD_ITEMS;
        perf_drain_all(s);
        s->hold_items = 0;
        cr_expect_eq(s->samples, 2);
        cr_expect_eq(s->q.queued_items, 0, "nothing handed over");
        cr_expect_eq(s->q.batch_items, 2);
        perf_drain_all(s);
        cr_expect_eq(s->q.queued_items, 2, "the regular drain hands the batch over");
        for (int k = 0; k < 2; k++) {
                struct perf_item *it = perf_queue_pop(&s->q);
                cr_expect_eq(it->kind, PERF_ITEM_SAMPLE);
                cr_expect_eq(it->extra, 0, "no Python frames for a process not known to run CPython");
                free(it);
        }
        free(s->scope);
        pthread_mutex_destroy(&s->py_mu);
}

/* A ring's watermark wakes the loop: what its drain reads waits in the
 * batch until PERF_RING_HOLD_ITEMS do (the worker is not woken for fewer),
 * or the read period's drain hands it over. */
Test(perf_session, watermark_drains_hand_over_from_a_batch_of_items) {
        cr_assert_eq(perf_queue_init(&s->q, 64u << 20), 0);
        s->cfg.callstacks = true;
        s->scope = calloc(SCOPE_SLOTS, sizeof(*s->scope));
        put_sample(1000, 1);
        put_sample(1100, 1);
        perf_on_ring(-1, 0, &s->rings[0]);
        cr_expect_eq(s->samples, 2);
        cr_expect_eq(s->q.queued_items, 0, "handed over for 2 items");
        cr_expect_eq(s->q.batch_items, 2);
        cr_expect_eq(s->hold_items, 0, "the hold outlasted its drain");
        perf_drain_all(s);
        cr_assert_eq(s->q.queued_items, 2, "a regular drain hands the batch over");
        /* PERF_RING_HOLD_ITEMS more, in drains of 32 (the ring laid out by
         * hand does not wrap: it starts again at 0 once read). */
        struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *) (void *) area;
        size_t n = 2;
        for (uint64_t k = 0; n < 2 + PERF_RING_HOLD_ITEMS; k++, n++) {
                put_sample(2000 + k, 1);
                if ((k + 1) % 32 == 0 && n + 1 < 2 + PERF_RING_HOLD_ITEMS) {
                        perf_on_ring(-1, 0, &s->rings[0]);
                        cr_expect_eq(s->q.queued_items, 2, "handed over at %zu items", s->q.batch_items);
                        cr_assert_eq(mp->data_tail, mp->data_head);
                        mp->data_head = mp->data_tail = 0;
                }
        }
        perf_on_ring(-1, 0, &s->rings[0]);
        /* Asserted: the pops below would wait for items never handed over. */
        cr_assert_eq(s->q.queued_items, n, "%zu items held", s->q.batch_items);
        cr_expect_eq(s->q.batch_items, 0);
        for (size_t k = 0; k < n; k++)
                free(perf_queue_pop(&s->q));
        free(s->scope);
}

/* With a small byte bound the batch goes over at a quarter of it, however
 * few items that is: held longer, the samples after it would be refused
 * while the worker waits for work. */
Test(perf_session, watermark_drains_hand_over_a_quarter_of_the_byte_bound) {
        cr_assert_eq(perf_queue_init(&s->q, 1024), 0);
        s->cfg.callstacks = true;
        s->scope = calloc(SCOPE_SLOTS, sizeof(*s->scope));
        put_sample(1000, 1);
        perf_on_ring(-1, 0, &s->rings[0]);
        cr_expect_eq(s->q.queued_items, 0, "one sample handed over");
        size_t n = 1;
        while (s->q.batch_bytes + 64 < 256) {
                put_sample(1100 + n, 1);
                n++;
                perf_on_ring(-1, 0, &s->rings[0]);
                cr_assert_lt(n, PERF_RING_HOLD_ITEMS);
        }
        cr_expect_eq(s->q.queued_items, 0);
        for (size_t k = 0; k < 4; k++, n++)
                put_sample(2000 + k, 1);
        perf_on_ring(-1, 0, &s->rings[0]);
        cr_assert_eq(s->q.queued_items, n, "%zu items (%llu bytes) held", s->q.batch_items,
                     (unsigned long long) s->q.batch_bytes);
        cr_expect_eq(s->samples, n);
        for (size_t k = 0; k < n; k++)
                free(perf_queue_pop(&s->q));
        free(s->scope);
}

static unsigned timers_added, fds_added, removed;
static struct traced_source *const fake_source = (struct traced_source *) (uintptr_t) 0x5000;

static int32_t fake_add_timer(struct traced_host *h, uint32_t period_ms, traced_timer_cb cb, void *userdata,
                              struct traced_source **ret) {
        timers_added++;
        *ret = fake_source;
        return 0;
}

static int32_t fake_add_fd(struct traced_host *h, int fd, uint32_t events, traced_fd_cb cb, void *userdata,
                           struct traced_source **ret) {
        fds_added++;
        *ret = fake_source;
        return 0;
}

static void fake_remove_source(struct traced_host *h, struct traced_source *src) {
        removed++;
}

/* While the drains for the Python frames run, a ring that holds 8 of
 * their periods leaves the loop (its watermark's wake-ups would only
 * cost); a smaller one stays; both are back when the drains stop. */
static void python_drains(uint64_t data_size, bool expect_quiet) {
        struct traced_host_api a = api;
        a.add_timer = fake_add_timer;
        a.add_fd = fake_add_fd;
        a.remove_source = fake_remove_source;
        struct perf_plugin p = { .api = &a };
        s->pl = &p;
        timers_added = fds_added = removed = 0;
        s->cfg.python_frames = true;
        s->cfg.read_period_ms = 100;
        s->cfg.attr.freq = 1;
        s->cfg.attr.sample_freq = 999;
        s->cfg.attr.sample_stack_user = 65280;
        s->rings[0].fd = 7;
        s->rings[0].data_size = data_size;
        s->rings[0].src = fake_source;
        atomic_store(&s->py_any, true);
        perf_py_timer_check(s);
        cr_expect_eq(timers_added, 1);
        cr_expect_eq(s->rings_quiet, expect_quiet);
        cr_expect_eq(s->rings[0].src == NULL, expect_quiet);
        cr_expect_eq(removed, expect_quiet ? 1 : 0);
        perf_py_timer_check(s);
        cr_expect_eq(timers_added, 1, "the drains' timer is added once");
        atomic_store(&s->py_any, false);
        perf_py_timer_check(s);
        cr_expect_eq(s->rings_quiet, false);
        cr_expect_not_null(s->rings[0].src, "the ring is back in the loop");
        cr_expect_eq(fds_added, expect_quiet ? 1 : 0);
        s->rings[0].src = NULL;
        s->pl = &pl;
}

Test(perf_session, python_drains_take_the_rings_out_of_the_loop) {
        python_drains(4u << 20, true);
}

Test(perf_session, python_drains_leave_a_small_ring_in_the_loop) {
        python_drains(1u << 20, false);
}
