/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ftrace plugin's parsers on formats and pages captured from a real
 * kernel (tests/data/ftrace, see capture.sh there) and on synthetic pages
 * for every record type and the malformed cases. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/pb-buf.h"
#include "encode.h"
#include "format.h"
#include "kprobes.h"
#include "profiling/ksyms.h"
#include "page.h"
#include "proc.h"
#include "syscalls.h"
#include "test-scratch.h"
#include "tracefs.h"

#include "perfetto/trace/ftrace/ftrace_event_bundle.pb-c.h"


/* FtraceEventBundle events written into a heap buffer, as the drain does. */
struct bundle_buf {
        struct pb_buf b;
        FtraceEventBundle m;
};

static FtraceEventBundle *bundle_begin(struct bundle_buf *bb) {
        *bb = (struct bundle_buf) {};
        FtraceEventBundle_init(&bb->m, pb_buf_stream(&bb->b));
        return &bb->m;
}

static Perfetto__Protos__FtraceEventBundle *bundle_decode(struct bundle_buf *bb) {
        cr_assert_eq(traced_pb_msg_finish(&bb->m.msg), 0);
        return perfetto__protos__ftrace_event_bundle__unpack(NULL, pb_buf_len(&bb->b), pb_buf_data(&bb->b));
}

/* Empties it for the next events. */
static void bundle_done(struct bundle_buf *bb) {
        pb_buf_done(&bb->b);
        bundle_begin(bb);
}

static char *slurp(const char *name, size_t *ret_len) {
        char path[512];
        snprintf(path, sizeof(path), "%s/ftrace/%s", TEST_DATA_DIR, name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "missing fixture %s", path);
        char *buf = malloc(1 << 20);
        size_t n = fread(buf, 1, (1 << 20) - 1, f);
        buf[n] = '\0';
        fclose(f);
        if (ret_len)
                *ret_len = n;
        return buf;
}

static void load_format(const char *file, const char *group, struct event_format *f) {
        char *text = slurp(file, NULL);
        cr_assert_eq(format_parse(text, group, f), 0, "%s does not parse", file);
        free(text);
}

Test(ftrace_format, sched_switch_layout) {
        struct event_format f;
        load_format("format-sched_switch", "sched", &f);
        cr_assert_str_eq(f.name, "sched_switch");
        cr_assert_gt(f.id, 0);
        cr_assert_eq(f.common_pid_offset, 4);
        cr_assert_eq(f.common_flags_offset, 2);
        const struct format_field *c = format_field(&f, "prev_comm");
        cr_assert_not_null(c);
        cr_assert_eq(c->offset, 8);
        cr_assert_eq(c->size, 16);
        cr_assert(c->is_string);
        const struct format_field *p = format_field(&f, "next_pid");
        cr_assert_not_null(p);
        cr_assert_eq(p->offset, 56);
        cr_assert_eq(p->size, 4);
        cr_assert(p->is_signed);
        cr_assert_not(p->is_string);
        cr_assert_not_null(format_field(&f, "prev_state"));
        cr_assert_null(format_field(&f, "common_pid"), "common fields are kept apart");
}

Test(ftrace_format, print_buf_runs_to_the_end) {
        struct event_format f;
        load_format("format-print", "ftrace", &f);
        const struct format_field *b = format_field(&f, "buf");
        cr_assert_not_null(b);
        cr_assert(b->is_dyn_tail);
        cr_assert_eq(b->offset, 16);
}

Test(ftrace_format, garbage_is_refused) {
        struct event_format f;
        cr_assert_eq(format_parse("hello\nworld\n", "x", &f), -EINVAL);
        cr_assert_eq(format_parse("", "x", &f), -EINVAL);
}

struct collect {
        struct event_format sw, wk, pr;
        uint64_t last_ts;
        bool monotonic;
        unsigned switches, wakings, prints;
        char markers[3][64];
};

static void on_rec(uint64_t ts, const uint8_t *data, size_t len, void *ud) {
        struct collect *k = ud;
        uint16_t id;
        cr_assert_geq(len, 8);
        memcpy(&id, data, 2);
        if (ts < k->last_ts)
                k->monotonic = false;
        k->last_ts = ts;
        if (id == k->sw.id) {
                char comm[32];
                k->switches++;
                format_read_str(format_field(&k->sw, "next_comm"), data, len, comm, sizeof(comm));
                cr_assert_gt(strlen(comm), 0, "empty next_comm");
                cr_assert_geq(format_read_int(format_field(&k->sw, "next_pid"), data, len), 0);
        } else if (id == k->wk.id)
                k->wakings++;
        else if (id == k->pr.id && k->prints < 3) {
                format_read_str(format_field(&k->pr, "buf"), data, len, k->markers[k->prints], 64);
                k->prints++;
        }
}

Test(ftrace_page, captured_pages) {
        size_t len;
        uint8_t *pages = (uint8_t *) slurp("cpu0.pages", &len);
        struct collect k = { .monotonic = true };
        load_format("format-sched_switch", "sched", &k.sw);
        load_format("format-sched_waking", "sched", &k.wk);
        load_format("format-print", "ftrace", &k.pr);
        cr_assert_geq(len, 4096);
        uint64_t records = 0;
        for (size_t off = 0; off + 4096 <= len; off += 4096) {
                struct page_info info;
                cr_assert_eq(page_parse(pages + off, 4096, on_rec, &k, &info), 0, "page %zu rejected", off / 4096);
                records += info.records;
        }
        cr_assert_gt(records, 0);
        cr_assert(k.monotonic, "timestamps went backwards");
        cr_assert_gt(k.switches, 0, "no sched_switch in the capture");
        cr_assert_eq(k.prints, 3, "expected the three fixture markers, got %u", k.prints);
        for (int i = 0; i < 3; i++) {
                char expected[32];
                snprintf(expected, sizeof(expected), "fixture-marker-%d\n", i + 1);
                cr_assert_str_eq(k.markers[i], expected);
        }
        free(pages);
}

/* Builds a synthetic page. */
struct syn {
        uint8_t page[4096];
        size_t len;
};

static void put32(struct syn *s, uint32_t v) {
        memcpy(s->page + 16 + s->len, &v, 4);
        s->len += 4;
}

static void finish(struct syn *s, uint64_t ts, uint64_t flags) {
        uint64_t commit = s->len | flags;
        memcpy(s->page, &ts, 8);
        memcpy(s->page + 8, &commit, 8);
}

struct seen {
        uint64_t ts[16];
        size_t len[16];
        int n;
};

static void rec_seen(uint64_t ts, const uint8_t *data, size_t len, void *ud) {
        struct seen *s = ud;
        if (s->n < 16) {
                s->ts[s->n] = ts;
                s->len[s->n] = len;
                s->n++;
        }
}

Test(ftrace_page, every_record_type) {
        struct syn s = {};
        put32(&s, (10u << 5) | 1);          /* data, 4 bytes, +10 */
        put32(&s, 0xabcd);
        put32(&s, (5u << 5) | 30);          /* time extend: +5 + (2 << 27) */
        put32(&s, 2);
        put32(&s, (3u << 5) | 2);           /* data, 8 bytes, +3 */
        put32(&s, 1);
        put32(&s, 2);
        put32(&s, (7u << 5) | 29);          /* padding: 8 bytes from its length word */
        put32(&s, 8);
        put32(&s, 0xdeadbeef);
        put32(&s, (100u << 5) | 31);        /* absolute timestamp */
        put32(&s, 1);
        put32(&s, (1u << 5) | 0);           /* long record: length in array[0] */
        put32(&s, 4 + 12);
        put32(&s, 1);
        put32(&s, 2);
        put32(&s, 3);
        finish(&s, 1000, 0);
        struct seen seen = {};
        struct page_info info;
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), 0);
        cr_assert_eq(seen.n, 3);
        cr_assert_eq(seen.ts[0], 1010);
        cr_assert_eq(seen.len[0], 4);
        cr_assert_eq(seen.ts[1], 1010 + 5 + (2ull << 27) + 3);
        cr_assert_eq(seen.len[1], 8);
        cr_assert_eq(seen.ts[2], 100 + (1ull << 27) + 1);
        cr_assert_eq(seen.len[2], 12);
        cr_assert_eq(info.records, 3);
        cr_assert_eq(info.missed, 0);
}

Test(ftrace_page, lost_events_and_end_padding) {
        struct syn s = {};
        put32(&s, (1u << 5) | 1);
        put32(&s, 7);
        put32(&s, 0 | 29); /* padding with delta 0: the rest is empty */
        put32(&s, 0xffffffff);
        finish(&s, 5, PAGE_COMMIT_MISSED_EVENTS | PAGE_COMMIT_MISSED_STORED);
        uint64_t lost = 42;
        memcpy(s.page + 16 + s.len, &lost, 8);
        struct seen seen = {};
        struct page_info info;
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), 0);
        cr_assert_eq(seen.n, 1);
        cr_assert_eq(info.missed, 1);
        cr_assert_eq(info.lost_events, 42);
}

Test(ftrace_page, malformed_pages_are_refused) {
        struct syn s = {};
        struct seen seen = {};
        struct page_info info;
        /* commit beyond the page */
        finish(&s, 0, 5000);
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), -EBADMSG);
        cr_assert_eq(info.status, PAGE_STATUS_INVALID_PAGE_HEADER);
        /* a long record claiming more than is there */
        s = (struct syn) {};
        put32(&s, 0);
        put32(&s, 4000);
        finish(&s, 0, 0);
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), -EBADMSG);
        cr_assert_eq(info.status, PAGE_STATUS_INVALID_DATA_LENGTH);
        /* a long record of length zero */
        s = (struct syn) {};
        put32(&s, 0);
        put32(&s, 0);
        finish(&s, 0, 0);
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), -EBADMSG);
        cr_assert_eq(info.status, PAGE_STATUS_ZERO_DATA_LENGTH);
        /* a time extend cut short */
        s = (struct syn) {};
        put32(&s, 30);
        finish(&s, 0, 0);
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), -EBADMSG);
        cr_assert_eq(info.status, PAGE_STATUS_SHORT_TIME_EXTEND);
        /* zero-length padding would never advance */
        s = (struct syn) {};
        put32(&s, (1u << 5) | 29);
        put32(&s, 0);
        finish(&s, 0, 0);
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), -EBADMSG);
        cr_assert_eq(info.status, PAGE_STATUS_INVALID_PADDING_LENGTH);
        /* a page shorter than its header */
        cr_assert_eq(page_parse(s.page, 8, rec_seen, &seen, &info), -EBADMSG);
        cr_assert_eq(info.status, PAGE_STATUS_INVALID_PAGE_HEADER);
        /* a good page says so */
        s = (struct syn) {};
        finish(&s, 0, 0);
        cr_assert_eq(page_parse(s.page, sizeof(s.page), rec_seen, &seen, &info), 0);
        cr_assert_eq(info.status, PAGE_STATUS_OK);
        /* random garbage: any answer, no crash */
        srand(1);
        for (int round = 0; round < 2000; round++) {
                for (size_t i = 0; i < sizeof(s.page); i++)
                        s.page[i] = (uint8_t) rand();
                uint64_t commit = (uint64_t) (rand() % 4200);
                memcpy(s.page + 8, &commit, 8);
                (void) page_parse(s.page, sizeof(s.page), rec_seen, &seen, NULL);
        }
}

struct encode_ctx {
        struct event_format sw;
        int done;
};

static void encode_first_switch(uint64_t ts, const uint8_t *data, size_t len, void *ud) {
        struct encode_ctx *k = ud;
        uint16_t id;
        memcpy(&id, data, 2);
        if (k->done || id != k->sw.id)
                return;
        k->done = 1;
        struct bundle_buf w;
        FtraceEventBundle *wm = bundle_begin(&w);
        ftrace_encode_event(wm, &k->sw, ts, data, len);
        /* w holds FtraceEventBundle.event = 2 { ... }: decode as a bundle. */
        Perfetto__Protos__FtraceEventBundle *b = bundle_decode(&w);
        cr_assert_not_null(b);
        cr_assert_eq(b->n_event, 1);
        const Perfetto__Protos__FtraceEvent *e = b->event[0];
        cr_assert_eq(e->timestamp, ts);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH);
        char comm[32];
        format_read_str(format_field(&k->sw, "next_comm"), data, len, comm, sizeof(comm));
        cr_assert_str_eq(e->sched_switch->next_comm, comm);
        cr_assert_eq(e->sched_switch->next_pid, format_read_int(format_field(&k->sw, "next_pid"), data, len));
        cr_assert_eq(e->sched_switch->prev_state, format_read_int(format_field(&k->sw, "prev_state"), data, len));
        int32_t pid;
        memcpy(&pid, data + 4, 4);
        cr_assert_eq(e->pid, (uint32_t) pid);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
        bundle_done(&w);
}

Test(ftrace_encode, sched_switch_round_trip) {
        size_t len;
        uint8_t *pages = (uint8_t *) slurp("cpu0.pages", &len);
        struct encode_ctx k = {};
        load_format("format-sched_switch", "sched", &k.sw);
        for (size_t off = 0; off + 4096 <= len && !k.done; off += 4096)
                (void) page_parse(pages + off, 4096, encode_first_switch, &k, NULL);
        cr_assert(k.done, "no sched_switch to encode");
        free(pages);
}

/* Builds a record for format f: common fields, then the named integer
 * fields set (strings are written by the caller). */
static size_t make_record(const struct event_format *f, uint8_t *rec, size_t size, int32_t pid) {
        memset(rec, 0, size);
        memcpy(rec, &f->id, 2);
        memcpy(rec + 4, &pid, 4);
        size_t len = 8;
        for (size_t i = 0; i < f->n_fields; i++)
                if ((size_t) f->fields[i].offset + f->fields[i].size > len)
                        len = (size_t) f->fields[i].offset + f->fields[i].size;
        cr_assert_leq(len, size);
        return len;
}

static void set_int(const struct event_format *f, uint8_t *rec, const char *name, int64_t v) {
        const struct format_field *ff = format_field(f, name);
        cr_assert_not_null(ff, "%s has no field %s", f->name, name);
        memcpy(rec + ff->offset, &v, ff->size < 8 ? ff->size : 8);
}

static Perfetto__Protos__FtraceEvent *encode_one(struct event_format *f, const uint8_t *rec, size_t len,
                                                 Perfetto__Protos__FtraceEventBundle **ret_bundle) {
        struct bundle_buf w;
        FtraceEventBundle *wm = bundle_begin(&w);
        ftrace_encode_event(wm, f, 1234, rec, len);
        Perfetto__Protos__FtraceEventBundle *b = bundle_decode(&w);
        bundle_done(&w);
        cr_assert_not_null(b);
        cr_assert_eq(b->n_event, 1);
        *ret_bundle = b;
        return b->event[0];
}

Test(ftrace_encode, irq_power_and_syscall_events_are_typed) {
        struct event_format f;
        uint8_t rec[256];
        Perfetto__Protos__FtraceEventBundle *b;
        Perfetto__Protos__FtraceEvent *e;
        size_t len;

        /* irq_handler_entry: irq and the handler's name (__data_loc). */
        load_format("format-irq_handler_entry", "irq", &f);
        len = make_record(&f, rec, 64, 0);
        set_int(&f, rec, "irq", 27);
        const struct format_field *name = format_field(&f, "name");
        cr_assert(name && name->is_data_loc);
        uint32_t loc = (6u << 16) | (uint32_t) len;
        memcpy(rec + name->offset, &loc, 4);
        memcpy(rec + len, "virtio", 6);
        e = encode_one(&f, rec, len + 6, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_IRQ_HANDLER_ENTRY);
        cr_assert_eq(e->irq_handler_entry->irq, 27);
        cr_assert_str_eq(e->irq_handler_entry->name, "virtio");
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        load_format("format-irq_handler_exit", "irq", &f);
        len = make_record(&f, rec, sizeof(rec), 0);
        set_int(&f, rec, "irq", 27);
        set_int(&f, rec, "ret", 1);
        e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_IRQ_HANDLER_EXIT);
        cr_assert_eq(e->irq_handler_exit->ret, 1);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        load_format("format-softirq_entry", "irq", &f);
        len = make_record(&f, rec, sizeof(rec), 0);
        set_int(&f, rec, "vec", 3);
        e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SOFTIRQ_ENTRY);
        cr_assert_eq(e->softirq_entry->vec, 3);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        load_format("format-cpu_frequency", "power", &f);
        len = make_record(&f, rec, sizeof(rec), 0);
        set_int(&f, rec, "state", 2400000);
        set_int(&f, rec, "cpu_id", 1);
        e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CPU_FREQUENCY);
        cr_assert_eq(e->cpu_frequency->state, 2400000);
        cr_assert_eq(e->cpu_frequency->cpu_id, 1);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        load_format("format-cpu_idle", "power", &f);
        len = make_record(&f, rec, sizeof(rec), 0);
        set_int(&f, rec, "state", 4294967295u); /* leaving idle: (u32) -1 */
        set_int(&f, rec, "cpu_id", 0);
        e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CPU_IDLE);
        cr_assert_eq(e->cpu_idle->state, 4294967295u);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        /* sys_enter: the id and the six argument registers. */
        load_format("format-sys_enter", "raw_syscalls", &f);
        len = make_record(&f, rec, sizeof(rec), 4242);
        set_int(&f, rec, "id", 39);
        const struct format_field *args = format_field(&f, "args");
        cr_assert(args && args->size == 48);
        for (uint64_t k = 0; k < 6; k++) {
                uint64_t v = 0x1000 + k;
                memcpy(rec + args->offset + 8 * k, &v, 8);
        }
        e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_ENTER);
        cr_assert_eq(e->pid, 4242);
        cr_assert_eq(e->sys_enter->id, 39);
        cr_assert_eq(e->sys_enter->n_args, 6);
        for (size_t k = 0; k < 6; k++)
                cr_assert_eq(e->sys_enter->args[k], 0x1000 + k);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        load_format("format-sys_exit", "raw_syscalls", &f);
        len = make_record(&f, rec, sizeof(rec), 4242);
        set_int(&f, rec, "id", 0);
        set_int(&f, rec, "ret", -11);
        e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_EXIT);
        cr_assert_eq(e->sys_exit->id, 0);
        cr_assert_eq(e->sys_exit->ret, -11, "a negative return must stay negative");
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
}

Test(ftrace_format, void_pointers_are_kernel_addresses) {
        struct event_format f;
        load_format("format-workqueue_queue_work", "workqueue", &f);
        cr_assert(format_field(&f, "work")->is_kaddr);
        cr_assert(format_field(&f, "function")->is_kaddr);
        cr_assert_not(format_field(&f, "cpu")->is_kaddr);
        cr_assert_not(format_field(&f, "workqueue")->is_kaddr);
        /* Not pointers: an unsigned long, a pointer-sized array, a char *. */
        const char *text = "name: x\nID: 9\nformat:\n"
                           "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                           "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
                           "\tfield:void *ptrs[2];\toffset:16;\tsize:16;\tsigned:0;\n"
                           "\tfield:const char * s;\toffset:32;\tsize:8;\tsigned:0;\n"
                           "\tfield:void *p32;\toffset:40;\tsize:4;\tsigned:0;\n";
        cr_assert_eq(format_parse(text, "g", &f), 0);
        cr_assert_not(format_field(&f, "ip")->is_kaddr);
        cr_assert_not(format_field(&f, "ptrs")->is_kaddr);
        cr_assert_not(format_field(&f, "s")->is_kaddr);
        cr_assert(format_field(&f, "p32")->is_kaddr);
}

/* A kallsyms excerpt: text symbols (t, T, w), data (D, b, r) to skip, a
 * module's symbol, lines that are not symbols, out of order. */
static const char kallsyms_text[] = "ffffffff81001000 T second_func\n"
                                    "ffffffff81000000 T first_func\n"
                                    "ffffffff81000800 D some_data\n"
                                    "ffffffff81002000 t static_func\n"
                                    "garbage line\n"
                                    "ffffffff81003000\n"
                                    "ffffffff81003000 b bss_thing\n"
                                    "ffffffff81004000 W weak_func\n"
                                    "ffffffffc0001000 t mod_func\t[somemod]\n"
                                    "ffffffff81005000 r rodata\n";

static struct ksyms *load_text(const char *text, int *ret) {
        FILE *f = fmemopen((void *) text, strlen(text), "r");
        cr_assert_not_null(f);
        struct ksyms *k = NULL;
        *ret = ksyms_load(f, &k);
        fclose(f);
        return k;
}

Test(ftrace_ksyms, lookup_finds_the_enclosing_function) {
        int r;
        struct ksyms *k = load_text(kallsyms_text, &r);
        cr_assert_eq(r, 0);
        cr_assert_eq(ksyms_count(k), 5, "%zu text symbols", ksyms_count(k));
        cr_assert_null(ksyms_lookup(k, 0xffffffff80ffffffull), "below the first symbol");
        cr_assert_null(ksyms_lookup(k, 0xffff888012345678ull), "a heap address");
        cr_assert_str_eq(ksyms_lookup(k, 0xffffffff81000000ull), "first_func");
        /* Data symbols do not split functions. */
        cr_assert_str_eq(ksyms_lookup(k, 0xffffffff81000900ull), "first_func");
        cr_assert_str_eq(ksyms_lookup(k, 0xffffffff81001fffull), "second_func");
        cr_assert_str_eq(ksyms_lookup(k, 0xffffffff81002010ull), "static_func");
        cr_assert_str_eq(ksyms_lookup(k, 0xffffffff81004004ull), "weak_func");
        cr_assert_str_eq(ksyms_lookup(k, 0xffffffffc0001234ull), "mod_func", "the module name is not part of it");
        cr_assert_null(ksyms_lookup(k, 0xffffffffc1001000ull), "far past the last symbol");
        ksyms_free(k);
}

Test(ftrace_ksyms, hidden_or_empty_tables_are_errors) {
        int r;
        /* What readers without CAP_SYSLOG get under kptr_restrict. */
        struct ksyms *k = load_text("0000000000000000 T first_func\n0000000000000000 t other\n", &r);
        cr_assert_eq(r, -EPERM);
        cr_assert_null(k);
        k = load_text("ffffffff81000800 D some_data\n", &r);
        cr_assert_eq(r, -ENODATA);
        k = load_text("", &r);
        cr_assert_eq(r, -ENODATA);
        cr_assert_null(ksyms_lookup(NULL, 0xffffffff81000000ull));
}

/* A table larger than the pieces it is read in (lines cut at their
 * ends), out of order (modules' symbols come after the kernel's, at lower
 * or higher addresses), and with no newline after its last line. */
Test(ftrace_ksyms, a_large_table_in_any_order) {
        enum { N = 30000 };
        size_t cap = (size_t) N * 64, len = 0;
        char *text = malloc(cap);
        cr_assert_not_null(text);
        for (unsigned i = 0; i < N; i++) {
                /* Every third one a data symbol; descending addresses. */
                unsigned k = N - 1 - i;
                len += (size_t) snprintf(text + len, cap - len, "ffffffff8%07x %c func_%u%s%s", k * 16,
                                         k % 3 == 2 ? 'd' : (k % 2 ? 't' : 'T'), k, k % 5 == 0 ? "\t[mod]" : "",
                                         i + 1 < N ? "\n" : "");
        }
        FILE *f = fmemopen(text, len, "r");
        cr_assert_not_null(f);
        struct ksyms *k = NULL;
        cr_assert_eq(ksyms_load(f, &k), 0);
        fclose(f);
        unsigned want = 0;
        for (unsigned i = 0; i < N; i++)
                want += i % 3 != 2;
        cr_assert_eq(ksyms_count(k), want, "%zu text symbols of %u", ksyms_count(k), want);
        char name[32];
        for (unsigned i = 0; i < N; i += 7) {
                uint64_t addr = 0xffffffff80000000ull + (uint64_t) i * 16 + 3;
                /* A data symbol does not split the function before it. */
                unsigned fn = i % 3 == 2 ? i - 1 : i;
                snprintf(name, sizeof(name), "func_%u", fn);
                const char *got = ksyms_lookup(k, addr);
                cr_assert(got && strcmp(got, name) == 0, "0x%llx: %s, not %s", (unsigned long long) addr,
                          got ? got : "(none)", name);
        }
        ksyms_free(k);
        free(text);
}

Test(ftrace_ksyms, addresses_are_numbered_in_order_of_use) {
        struct kaddr_table *t = malloc(sizeof(*t));
        cr_assert_not_null(t);
        kaddr_reset(t);
        cr_assert_eq(kaddr_intern(t, 0xffffffff81000000ull), 1);
        cr_assert_eq(kaddr_intern(t, 0xffff888000001000ull), 2);
        cr_assert_eq(kaddr_intern(t, 0xffffffff81000000ull), 1);
        for (uint64_t i = 2; i < KADDR_MAX; i++)
                cr_assert_eq(kaddr_intern(t, 0x1000 + i * 64), i + 1);
        cr_assert_eq(t->n, KADDR_MAX);
        cr_assert_eq(kaddr_intern(t, 0x42), 0, "a full table gives no iid");
        cr_assert_eq(kaddr_intern(t, 0x1000 + 100 * 64), 101, "known ones still resolve");
        kaddr_reset(t);
        cr_assert_eq(t->n, 0);
        cr_assert_eq(kaddr_intern(t, 0x42), 1, "numbering restarts");
        free(t);
}

Test(ftrace_encode, kernel_addresses_become_iids_when_symbolizing) {
        struct event_format f;
        uint8_t rec[256];
        struct kaddr_table *t = malloc(sizeof(*t));
        cr_assert_not_null(t);
        kaddr_reset(t);

        load_format("format-workqueue_execute_start", "workqueue", &f);
        size_t len = make_record(&f, rec, sizeof(rec), 77);
        set_int(&f, rec, "work", (int64_t) 0xffff888001234560ull);
        set_int(&f, rec, "function", (int64_t) 0xffffffff81002010ull);

        /* Without a table: the addresses as the kernel wrote them. */
        Perfetto__Protos__FtraceEventBundle *b;
        Perfetto__Protos__FtraceEvent *e = encode_one(&f, rec, len, &b);
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_EXECUTE_START);
        cr_assert_eq(e->workqueue_execute_start->work, 0xffff888001234560ull);
        cr_assert_eq(e->workqueue_execute_start->function, 0xffffffff81002010ull);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

        /* With one, twice: the same iids both times. */
        struct bundle_buf w;
        FtraceEventBundle *wm = bundle_begin(&w);
        ftrace_encode_event_ksyms(wm, &f, 1, rec, len, t);
        ftrace_encode_event_ksyms(wm, &f, 2, rec, len, t);
        b = bundle_decode(&w);
        cr_assert_not_null(b);
        cr_assert_eq(b->n_event, 2);
        for (size_t i = 0; i < 2; i++) {
                cr_assert_eq(b->event[i]->workqueue_execute_start->work, 1);
                cr_assert_eq(b->event[i]->workqueue_execute_start->function, 2);
        }
        cr_assert_eq(t->n, 2);
        cr_assert_eq(t->addrs[1], 0xffffffff81002010ull);
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
        bundle_done(&w);

        /* queue_work keeps its other fields. */
        load_format("format-workqueue_queue_work", "workqueue", &f);
        len = make_record(&f, rec, sizeof(rec), 77);
        set_int(&f, rec, "function", (int64_t) 0xffffffff81000040ull);
        set_int(&f, rec, "cpu", 1);
        set_int(&f, rec, "req_cpu", 8192);
        const struct format_field *wq = format_field(&f, "workqueue");
        uint32_t loc = (7u << 16) | (uint32_t) len;
        memcpy(rec + wq->offset, &loc, 4);
        memcpy(rec + len, "events", 7);
        ftrace_encode_event_ksyms(wm, &f, 3, rec, len + 7, t);
        b = bundle_decode(&w);
        cr_assert_not_null(b);
        e = b->event[0];
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_QUEUE_WORK);
        cr_assert_eq(e->workqueue_queue_work->function, 3);
        cr_assert_eq(e->workqueue_queue_work->work, 0, "a null pointer stays 0, not an iid");
        cr_assert_eq(e->workqueue_queue_work->cpu, 1);
        cr_assert_eq(e->workqueue_queue_work->req_cpu, 8192);
        cr_assert_str_eq(e->workqueue_queue_work->workqueue, "events");
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
        bundle_done(&w);

        /* A generic event's void * fields (4 or 8 bytes) too. */
        const char *text = "name: probe_x\nID: 900\nformat:\n"
                           "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                           "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
                           "\tfield:void * fn;\toffset:8;\tsize:8;\tsigned:0;\n"
                           "\tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n";
        cr_assert_eq(format_parse(text, "other", &f), 0);
        len = make_record(&f, rec, sizeof(rec), 77);
        set_int(&f, rec, "fn", (int64_t) 0xffffffff81002010ull);
        set_int(&f, rec, "ip", (int64_t) 0xffffffff81002010ull);
        ftrace_encode_event_ksyms(wm, &f, 4, rec, len, t);
        b = bundle_decode(&w);
        cr_assert_not_null(b);
        e = b->event[0];
        cr_assert_eq(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC);
        cr_assert_eq(e->generic->n_field, 2);
        cr_assert_str_eq(e->generic->field[0]->name, "fn");
        cr_assert_eq(e->generic->field[0]->uint_value, 2, "the address seen before keeps its iid");
        cr_assert_eq(e->generic->field[1]->uint_value, 0xffffffff81002010ull, "an unsigned long is not symbolized");
        perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
        bundle_done(&w);
        free(t);
}

Test(ftrace_syscalls, names_map_to_this_architecture) {
        cr_assert_eq(syscall_number("getpid"), SYS_getpid);
        cr_assert_eq(syscall_number("sys_getpid"), SYS_getpid);
        cr_assert_eq(syscall_number("read"), SYS_read);
        cr_assert_eq(syscall_number("openat"), SYS_openat);
        cr_assert_eq(syscall_number("sys_no_such_call"), -ENOENT);
        const char *names[] = { "sys_read", "bogus", "sys_getpid", "also_bogus" };
        char filter[128], first[32];
        size_t unknown;
        cr_assert_eq(syscall_filter(names, 4, filter, sizeof(filter), &unknown, first, sizeof(first)), 2);
        char expected[64];
        snprintf(expected, sizeof(expected), "id == %d || id == %d", SYS_read, SYS_getpid);
        cr_assert_str_eq(filter, expected);
        cr_assert_eq(unknown, 2);
        cr_assert_str_eq(first, "bogus");
        cr_assert_eq(syscall_filter(names, 4, filter, 8, &unknown, first, sizeof(first)), -ENOSPC);
}

static char *read_text(const char *path) {
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        char *buf = calloc(1, 8192);
        size_t n = fread(buf, 1, 8191, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* A test's fake tracefs or /proc tree: its .fini removes it, whether the
 * test passed or not. */
static char fake_root[256];

static const char *make_fake_root(const char *prefix) {
        int r = test_mkdtemp(fake_root, sizeof(fake_root), prefix);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        return fake_root;
}

static void remove_fake_root(void) {
        cr_expect_eq(test_scratch_remove(fake_root), 0, "could not remove %s", fake_root);
        fake_root[0] = '\0';
}

/* On a fake tracefs: kprobe_events is a plain file, so what traced
 * writes (appends, never truncates) stays there to be checked. */
Test(ftrace_kprobes, probes_are_appended_and_removed_by_group, .fini = remove_fake_root) {
        const char *root = make_fake_root("traced-fake-tracefs-");
        char path[512];
        snprintf(path, sizeof(path), "%s/kprobe_events", root);
        FILE *f = fopen(path, "w");
        /* Someone else's probe, and one of a process that is gone. */
        fprintf(f, "p:kprobes/theirs do_exit\np:traced_kp_999999999_4/old_entry vfs_read\n");
        fclose(f);

        char group[64], names[2][256];
        snprintf(group, sizeof(group), KPROBE_GROUP_PREFIX "%d_7", (int) getpid());
        cr_assert_eq(kprobe_add(root, group, "do_sys_openat2", KPROBE_BOTH, names), 2);
        char expected[512];
        snprintf(expected, sizeof(expected), "%s/do_sys_openat2_entry", group);
        cr_assert_str_eq(names[0], expected);
        snprintf(expected, sizeof(expected), "%s/do_sys_openat2_return", group);
        cr_assert_str_eq(names[1], expected);
        cr_assert_eq(kprobe_add(root, group, "vfs_write.isra.0", KPROBE_ENTRY, names), 1, "a local symbol");
        snprintf(expected, sizeof(expected), "%s/vfs_write_isra_0_entry", group);
        cr_assert_str_eq(names[0], expected, "dots are not allowed in event names");
        cr_assert_eq(kprobe_add(root, group, "evil/../name", KPROBE_ENTRY, names), -EINVAL);
        cr_assert_eq(kprobe_add(root, group, "x y", KPROBE_ENTRY, names), -EINVAL);

        char *text = read_text(path);
        snprintf(expected, sizeof(expected), "p:%s/do_sys_openat2_entry do_sys_openat2\nr:%s/do_sys_openat2_return "
                                             "do_sys_openat2\np:%s/vfs_write_isra_0_entry vfs_write.isra.0\n",
                 group, group, group);
        cr_assert_not_null(strstr(text, expected), "kprobe_events: %s", text);
        cr_assert_not_null(strstr(text, "p:kprobes/theirs do_exit\n"), "another tool's probe was lost");
        free(text);

        /* The stale group goes; ours (alive) and theirs stay. */
        cr_assert_eq(kprobe_remove_stale(root), 1);
        text = read_text(path);
        cr_assert_not_null(strstr(text, "-:traced_kp_999999999_4/old_entry\n"));
        snprintf(expected, sizeof(expected), "-:%s/", group);
        cr_assert_null(strstr(text, expected));
        free(text);

        cr_assert_eq(kprobe_remove_group(root, group), 3);
        text = read_text(path);
        snprintf(expected, sizeof(expected), "-:%s/do_sys_openat2_entry\n-:%s/do_sys_openat2_return\n", group, group);
        cr_assert_not_null(strstr(text, expected), "kprobe_events: %s", text);
        cr_assert_null(strstr(text, "-:kprobes/theirs"), "another tool's probe was removed");
        free(text);
}

static void put_file(const char *root, int pid, const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%d", root, pid);
        (void) mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/%d/%s", root, pid, name);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

Test(proc, status_stat_and_oom_on_a_fake_tree, .fini = remove_fake_root) {
        const char *root = make_fake_root("traced-fake-proc-");
        put_file(root, 42, "status",
                 "Name:\tweb server\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nNgid:\t0\nPid:\t42\nPPid:\t1\n"
                 "Uid:\t1000\t1000\t1000\t1000\nVmPeak:\t 20000 kB\nVmSize:\t   18000 kB\nVmLck:\t       0 kB\n"
                 "VmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\nRssAnon:\t    5000 kB\nRssFile:\t    2900 kB\n"
                 "RssShmem:\t     100 kB\nVmSwap:\t      12 kB\nThreads:\t3\n");
        /* A comm with spaces and parentheses: fields count from the last ')'. */
        put_file(root, 42, "stat", "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 900 ...\n");
        put_file(root, 42, "oom_score_adj", "-17\n");
        put_file(root, 42, "cmdline", "nginx\0-g\0daemon off;\0");
        struct proc_status st;
        cr_assert_eq(proc_read_status(root, 42, &st), 0);
        cr_assert_str_eq(st.name, "web server");
        cr_assert_eq(st.tgid, 42);
        cr_assert_eq(st.ppid, 1);
        cr_assert_eq(st.uid, 1000);
        cr_assert_eq(st.vm_size, 18000);
        cr_assert_eq(st.vm_rss, 8000);
        cr_assert_eq(st.rss_anon, 5000);
        cr_assert_eq(st.rss_file, 2900);
        cr_assert_eq(st.rss_shmem, 100);
        cr_assert_eq(st.vm_swap, 12);
        cr_assert_eq(st.vm_locked, 0);
        cr_assert_eq(st.vm_hwm, 9000);
        uint64_t ut = 0, stt = 0;
        cr_assert_eq(proc_read_times(root, 42, &ut, &stt), 0);
        cr_assert_eq(ut, 250);
        cr_assert_eq(stt, 75);
        int64_t oom;
        cr_assert_eq(proc_read_oom_score_adj(root, 42, &oom), 0);
        cr_assert_eq(oom, -17);

        /* A kernel thread: no memory lines, no cmdline. */
        put_file(root, 2, "status", "Name:\tkthreadd\nTgid:\t2\nPid:\t2\nPPid:\t0\nUid:\t0\t0\t0\t0\n");
        put_file(root, 2, "cmdline", "");
        cr_assert_eq(proc_read_status(root, 2, &st), 0);
        cr_assert_eq(st.vm_rss, PROC_NO_VALUE);
        char buf[64];
        cr_assert_eq(proc_read_cmdline(root, 2, buf, sizeof(buf)), 0);

        /* Truncated and garbage files are errors, not crashes. */
        put_file(root, 7, "stat", "7 (cut");
        cr_assert_eq(proc_read_times(root, 7, &ut, &stt), -EBADMSG);
        put_file(root, 8, "stat", "8 (short) S 1 2 3\n");
        cr_assert_eq(proc_read_times(root, 8, &ut, &stt), -EBADMSG);
        put_file(root, 8, "status", "Name:\tno tgid line\n");
        cr_assert_eq(proc_read_status(root, 8, &st), -EBADMSG);
        put_file(root, 8, "oom_score_adj", "lots\n");
        cr_assert_eq(proc_read_oom_score_adj(root, 8, &oom), -EBADMSG);
        /* A process that is gone. */
        cr_assert_eq(proc_read_status(root, 99999, &st), -ENOENT);
        cr_assert_eq(proc_read_times(root, 99999, &ut, &stt), -ENOENT);
}

Test(ftrace_tracefs, only_our_dead_instances_are_stale, .fini = remove_fake_root) {
        const char *root = make_fake_root("traced-tracefs-");
        char p[400];
        snprintf(p, sizeof(p), "%s/instances", root);
        cr_assert_eq(mkdir(p, 0700), 0);
        /* A dead pid of ours, a live one (this process), and names that
         * only start like ours: a user's instance_name. */
        char names[4][64];
        snprintf(names[0], sizeof(names[0]), "traced_999999999_1");
        snprintf(names[1], sizeof(names[1]), "traced_%d_2", (int) getpid());
        snprintf(names[2], sizeof(names[2]), "traced_mine");
        snprintf(names[3], sizeof(names[3]), "traced_12_x");
        for (size_t i = 0; i < 4; i++) {
                snprintf(p, sizeof(p), "%s/instances/%s", root, names[i]);
                cr_assert_eq(mkdir(p, 0700), 0);
        }
        cr_assert_eq(tracefs_remove_stale_instances(root), 1);
        struct stat st;
        snprintf(p, sizeof(p), "%s/instances/traced_999999999_1", root);
        cr_assert_neq(stat(p, &st), 0);
        for (size_t i = 1; i < 4; i++) {
                snprintf(p, sizeof(p), "%s/instances/%s", root, names[i]);
                cr_assert_eq(stat(p, &st), 0, "%s was removed", names[i]);
                cr_assert_eq(rmdir(p), 0);
        }
}
