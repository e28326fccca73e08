/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The perf plugin's config parsing and ring record parsing. */

#include <criterion/criterion.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>

#include "pbtxt/pbtxt.h"
#include "perf-config.h"
#include "profiling/perf-record.h"

#include "perfetto/config/data_source_config.pb-c.h"

/* DataSourceConfig text -> perf_config; returns the parse result. */
static int parse_text(const char *text, struct perf_config *c, char *err, size_t n) {
        ProtobufCMessage *m = NULL;
        char *perr = NULL;
        cr_assert_eq(pbtxt_parse(&perfetto__protos__data_source_config__descriptor, text, strlen(text), "t", &m,
                                 &perr),
                     0, "%s", perr);
        size_t size = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(size + 1);
        protobuf_c_message_pack(m, buf);
        protobuf_c_message_free_unpacked(m, NULL);
        int r = perf_config_parse(buf, size, c, err, n);
        free(buf);
        return r;
}

Test(perf_config, upstream_style_config) {
        struct perf_config c;
        char err[256] = "";
        int r = parse_text("name: \"linux.perf\" perf_event_config {"
                           " timebase { frequency: 999 counter: SW_CPU_CLOCK timestamp_clock: PERF_CLOCK_MONOTONIC }"
                           " callstack_sampling { scope { target_cmdline: \"python3*\" exclude_pid: 1 }"
                           "   kernel_frames: true user_frames: UNWIND_FRAME_POINTER }"
                           " target_cpu: 0 ring_buffer_pages: 64 ring_buffer_read_period_ms: 50"
                           " max_enqueued_footprint_kb: 1024 unwind_state_clear_period_ms: 5000 }",
                           &c, err, sizeof(err));
        cr_assert_eq(r, 0, "%s", err);
        cr_assert(c.attr.freq);
        cr_assert_eq(c.attr.sample_freq, 999);
        cr_assert_eq(c.attr.type, PERF_TYPE_SOFTWARE);
        cr_assert_eq(c.attr.config, PERF_COUNT_SW_CPU_CLOCK);
        cr_assert_eq(c.clock_id, 3, "BuiltinClock MONOTONIC");
        cr_assert(c.callstacks && c.kernel_frames);
        cr_assert_eq(c.user_frames, PERF_UNWIND_FP);
        cr_assert_eq(c.n_target_cmdline, 1);
        cr_assert_eq(c.n_cpus, 1);
        cr_assert_eq(c.ring_buffer_pages, 64);
        cr_assert_eq(c.read_period_ms, 50);
        cr_assert_eq(c.max_enqueued_bytes, 1024 * 1024);
        cr_assert_eq(c.unwind_state_clear_period_ms, 5000);
        cr_assert(c.python_frames, "CPython's frames: on unless said otherwise");
        cr_assert_gt(c.timebase_size, 0, "the timebase goes into PerfSampleDefaults");
        cr_assert(perf_config_in_scope(&c, 100, "/usr/bin/python3.11", NULL), "basename matches");
        cr_assert(perf_config_in_scope(&c, 100, "python3", NULL));
        cr_assert_not(perf_config_in_scope(&c, 100, "/bin/sh", NULL));
        cr_assert_not(perf_config_in_scope(&c, 1, "python3", NULL), "excluded by pid");
        perf_config_done(&c);
}

Test(perf_config, python_frames_off) {
        struct perf_config c;
        char err[256] = "";
        cr_assert_eq(parse_text("perf_event_config { callstack_sampling { traced_python_frames: false } }", &c, err,
                                sizeof(err)),
                     0, "%s", err);
        cr_assert(c.callstacks);
        cr_assert_not(c.python_frames);
        perf_config_done(&c);
        cr_assert_eq(parse_text("perf_event_config { callstack_sampling { traced_python_frames: true } }", &c, err,
                                sizeof(err)),
                     0, "%s", err);
        cr_assert(c.python_frames);
        perf_config_done(&c);
}

Test(perf_config, defaults) {
        struct perf_config c;
        char err[256] = "";
        cr_assert_eq(parse_text("name: \"linux.perf\"", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(c.attr.sample_freq, PERF_DEFAULT_FREQUENCY);
        cr_assert(c.callstacks);
        cr_assert_eq(c.user_frames, PERF_UNWIND_DWARF);
        cr_assert_not(c.kernel_frames);
        cr_assert_eq(c.ring_buffer_pages, PERF_DEFAULT_RING_PAGES_DWARF, "DWARF stacks: room for their copies");
        cr_assert_eq(c.clock_id, 6, "BOOTTIME");
        cr_assert(perf_config_in_scope(&c, 5, "anything", NULL), "no scope: everything");
        perf_config_done(&c);
        /* A timebase without callstack_sampling: counting only. */
        cr_assert_eq(parse_text("perf_event_config { timebase { period: 100000 counter: SW_PAGE_FAULTS } }", &c, err,
                                sizeof(err)),
                     0, "%s", err);
        cr_assert_not(c.callstacks);
        cr_assert_not(c.attr.freq);
        cr_assert_eq(c.attr.sample_period, 100000);
        cr_assert_eq(c.attr.config, PERF_COUNT_SW_PAGE_FAULTS);
        perf_config_done(&c);
        /* The older flat form. */
        cr_assert_eq(parse_text("perf_event_config { sampling_frequency: 50 kernel_frames: true target_pid: 7"
                                " additional_cmdline_count: 1 }",
                                &c, err, sizeof(err)),
                     0, "%s", err);
        cr_assert_eq(c.attr.sample_freq, 50);
        cr_assert(c.callstacks && c.kernel_frames);
        uint32_t left = c.additional_cmdline_count;
        cr_assert(perf_config_in_scope(&c, 7, "x", &left));
        cr_assert(perf_config_in_scope(&c, 8, "other", &left), "one additional process");
        cr_assert_not(perf_config_in_scope(&c, 9, "another", &left));
        perf_config_done(&c);
}

/* Each unsupported or bad option: refused, naming its field. */
Test(perf_config, refusals_name_the_field) {
        static const struct {
                const char *text, *field;
        } cases[] = {
                { "perf_event_config { followers { counter: SW_PAGE_FAULTS } }", "followers" },
                { "perf_event_config { timebase { poll_period_ms: 100 } }", "poll_period_ms" },
                { "perf_event_config { timebase { frequency: 0 } }", "timebase.frequency" },
                { "perf_event_config { timebase { frequency: 1000000 } }", "timebase.frequency" },
                { "perf_event_config { timebase { tracepoint { name: \"nocolon\" } } }", "tracepoint.name" },
                { "perf_event_config { timebase { raw_event { type: 4 pmu_name: \"cpu\" } } }", "pmu_name" },
                { "perf_event_config { ring_buffer_pages: 3 }", "ring_buffer_pages" },
                { "perf_event_config { ring_buffer_read_period_ms: 100000 }", "ring_buffer_read_period_ms" },
                { "perf_event_config { cpuid: \"x\" }", "cpuid" },
                { "perf_event_config { target_installed_by: \"x\" }", "target_installed_by" },
                { "perf_event_config { max_daemon_memory_kb: 100 }", "max_daemon_memory_kb" },
                { "perf_event_config { remote_descriptor_timeout_ms: 100 }", "remote_descriptor_timeout_ms" },
                { "perf_event_config { callstack_sampling { user_frames: UNWIND_KERNEL_FRAME_POINTER } }",
                  "user_frames" },
                { "perf_event_config { callstack_sampling { scope { process_shard_count: 2 } } }",
                  "process_shard_count" },
                { "perf_event_config { callstack_sampling { scope { target_pid: -3 } } }", "target_pid" },
                { "perf_event_config { callstack_sampling { } target_pid: 4 }", "callstack_sampling" },
                { "perf_event_config { all_cpus: false }", "all_cpus" },
        };
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                struct perf_config c;
                char err[256] = "";
                int r = parse_text(cases[k].text, &c, err, sizeof(err));
                cr_assert_eq(r, -EINVAL, "%s: accepted", cases[k].text);
                cr_assert_not_null(strstr(err, cases[k].field), "%s: \"%s\" does not name %s", cases[k].text, err,
                                   cases[k].field);
        }
}

static size_t put_header(uint8_t *p, uint32_t type, uint16_t misc, uint16_t size) {
        struct perf_event_header h = { .type = type, .misc = misc, .size = size };
        memcpy(p, &h, sizeof(h));
        return sizeof(h);
}

static size_t put64(uint8_t *p, uint64_t v) {
        memcpy(p, &v, 8);
        return 8;
}

static const struct perf_layout dwarf = {
        .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                       PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
        .n_user_regs = 3,
        .sample_id_all = true,
};

static size_t build_sample(uint8_t *rec) {
        size_t n = sizeof(struct perf_event_header);
        n += put64(rec + n, 0x401234);                      /* ip */
        n += put64(rec + n, 42ull | (43ull << 32));         /* pid, tid */
        n += put64(rec + n, 1000);                          /* time */
        n += put64(rec + n, 1);                             /* cpu */
        n += put64(rec + n, 250000);                        /* period */
        n += put64(rec + n, 2);                             /* callchain */
        n += put64(rec + n, (uint64_t) PERF_CONTEXT_KERNEL);
        n += put64(rec + n, 0xffffffff81000010ull);
        n += put64(rec + n, PERF_SAMPLE_REGS_ABI_64);       /* regs */
        n += put64(rec + n, 1), n += put64(rec + n, 2), n += put64(rec + n, 3);
        n += put64(rec + n, 16);                            /* stack size */
        memset(rec + n, 0xab, 16);
        n += 16;
        n += put64(rec + n, 8);                             /* dyn size */
        put_header(rec, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, (uint16_t) n);
        return n;
}

Test(perf_record, sample_with_stack) {
        uint8_t rec[512];
        size_t n = build_sample(rec);
        struct perf_record r;
        cr_assert_eq(perf_record_parse(rec, n, &dwarf, &r), 0);
        cr_assert_eq(r.kind, PERF_REC_SAMPLE);
        cr_assert_eq(r.u.sample.ip, 0x401234);
        cr_assert_eq(r.u.sample.pid, 42);
        cr_assert_eq(r.u.sample.tid, 43);
        cr_assert_eq(r.u.sample.cpu, 1);
        cr_assert_eq(r.u.sample.period, 250000);
        cr_assert_eq(r.u.sample.callchain_len, 2);
        cr_assert_eq(r.u.sample.regs[2], 3);
        cr_assert_eq(r.u.sample.stack_size, 8, "dyn_size bounds the stack");
        cr_assert_eq(r.u.sample.stack[0], 0xab);
        cr_assert_eq(r.time, 1000);
        /* Every shorter length is refused, never read past. */
        for (size_t k = 0; k < n; k++) {
                uint8_t *cut = malloc(k ? k : 1);
                memcpy(cut, rec, k);
                if (k >= sizeof(struct perf_event_header)) {
                        struct perf_event_header h;
                        memcpy(&h, cut, sizeof(h));
                        h.size = (uint16_t) k;
                        memcpy(cut, &h, sizeof(h));
                }
                cr_assert_lt(perf_record_parse(cut, k, &dwarf, &r), 0, "%zu bytes accepted", k);
                free(cut);
        }
}

/* Two events writing into one ring (linux.perf's sampling event and the
 * BPF output event of its Python frames): each record starts with its
 * event's id, and the BPF record carries its data as PERF_SAMPLE_RAW. */
Test(perf_record, identifier_and_raw) {
        const struct perf_layout raw = {
                .sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                               PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_RAW,
                .sample_id_all = true,
        };
        uint8_t rec[128];
        size_t n = sizeof(struct perf_event_header);
        n += put64(rec + n, 77);                    /* identifier */
        n += put64(rec + n, 0x401234);              /* ip */
        n += put64(rec + n, 42ull | (43ull << 32)); /* pid, tid */
        n += put64(rec + n, 5000);                  /* time */
        n += put64(rec + n, 1);                     /* cpu */
        n += put64(rec + n, 1);                     /* period */
        uint32_t size = 20;                         /* 4 + 20: a multiple of 8 */
        memcpy(rec + n, &size, 4);
        n += 4;
        for (uint32_t k = 0; k < size; k++)
                rec[n + k] = (uint8_t) k;
        n += size;
        put_header(rec, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, (uint16_t) n);
        uint64_t id = 0;
        cr_assert(perf_record_sample_id(rec, n, &raw, &id));
        cr_assert_eq(id, 77);
        cr_assert_not(perf_record_sample_id(rec, n, &dwarf, &id), "a layout without the identifier has no id");
        struct perf_record r;
        cr_assert_eq(perf_record_parse(rec, n, &raw, &r), 0);
        cr_assert_eq(r.u.sample.tid, 43);
        cr_assert_eq(r.time, 5000);
        cr_assert_eq(r.u.sample.raw_size, 20);
        cr_assert_eq(r.u.sample.raw[0], 0);
        cr_assert_eq(r.u.sample.raw[19], 19);
        size_t off;
        cr_assert(perf_record_time_offset(&raw, PERF_RECORD_SAMPLE, n, &off));
        uint64_t t;
        memcpy(&t, rec + off, 8);
        cr_assert_eq(t, 5000, "the time is found past the identifier");
        /* A raw size past the record's end is refused, as is every cut. */
        size = 28;
        memcpy(rec + n - 24, &size, 4);
        cr_assert_lt(perf_record_parse(rec, n, &raw, &r), 0);
        size = 20;
        memcpy(rec + n - 24, &size, 4);
        for (size_t k = sizeof(struct perf_event_header); k < n; k++) {
                struct perf_event_header h;
                memcpy(&h, rec, sizeof(h));
                h.size = (uint16_t) k;
                uint8_t cut[128];
                memcpy(cut, rec, k);
                memcpy(cut, &h, sizeof(h));
                cr_assert_lt(perf_record_parse(cut, k, &raw, &r), 0, "%zu bytes accepted", k);
        }
        /* A record of another type has no sample id. */
        put_header(rec, PERF_RECORD_COMM, 0, (uint16_t) n);
        cr_assert_not(perf_record_sample_id(rec, n, &raw, &id));
}

Test(perf_record, compact_cuts_the_unfilled_stack) {
        uint8_t rec[512], out[512];
        size_t n = build_sample(rec);
        struct perf_record a, b;
        cr_assert_eq(perf_record_parse(rec, n, &dwarf, &a), 0);
        /* 16 bytes reserved, 8 filled: 8 bytes fewer, same sample. */
        memset(out, 0x5a, sizeof(out));
        int m = perf_record_compact(rec, n, &dwarf, out);
        cr_assert_eq(m, (int) n - 8);
        cr_assert_eq(perf_record_compact(rec, n, &dwarf, NULL), m, "the length alone differs from the copy's");
        cr_assert_eq(perf_record_parse(out, (size_t) m, &dwarf, &b), 0, "the compacted record does not parse");
        cr_assert_eq(b.u.sample.ip, a.u.sample.ip);
        cr_assert_eq(b.u.sample.pid, a.u.sample.pid);
        cr_assert_eq(b.time, a.time);
        cr_assert_eq(b.u.sample.callchain_len, a.u.sample.callchain_len);
        cr_assert_eq(b.u.sample.regs[2], a.u.sample.regs[2]);
        cr_assert_eq(b.u.sample.stack_size, 8);
        cr_assert_eq(memcmp(b.u.sample.stack, a.u.sample.stack, 8), 0);
        /* A compacted record has nothing more to cut. */
        uint8_t again[512];
        cr_assert_eq(perf_record_compact(out, (size_t) m, &dwarf, again), m);
        cr_assert_eq(memcmp(again, out, (size_t) m), 0);
        /* A filled stack (dyn 16) and a record that does not parse. */
        uint64_t dyn = 16;
        memcpy(rec + n - 8, &dyn, 8);
        cr_assert_eq(perf_record_compact(rec, n, &dwarf, out), (int) n);
        cr_assert_eq(memcmp(out, rec, n), 0);
        cr_assert_lt(perf_record_compact(rec, n - 1, &dwarf, out), 0);
}

Test(perf_record, side_band_records) {
        uint8_t rec[256];
        struct perf_record r;
        /* COMM with the exec flag, and the sample_id trailer's time. */
        size_t n = sizeof(struct perf_event_header);
        n += put64(rec + n, 7ull | (7ull << 32));
        memcpy(rec + n, "newprog\0", 8);
        n += 8;
        n += put64(rec + n, 7ull | (7ull << 32)); /* trailer: tid */
        n += put64(rec + n, 5555);               /* time */
        n += put64(rec + n, 0);                  /* cpu */
        put_header(rec, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, (uint16_t) n);
        cr_assert_eq(perf_record_parse(rec, n, &dwarf, &r), 0);
        cr_assert_eq(r.kind, PERF_REC_COMM);
        cr_assert(r.u.comm.exec);
        cr_assert_str_eq(r.u.comm.comm, "newprog");
        cr_assert_eq(r.time, 5555);
        /* A COMM whose name is not terminated inside the record. */
        memset(rec + 16, 'x', 8);
        put_header(rec, PERF_RECORD_COMM, 0, 24);
        cr_assert_lt(perf_record_parse(rec, 24, &dwarf, &r), 0);
        /* LOST */
        n = sizeof(struct perf_event_header);
        n += put64(rec + n, 1);
        n += put64(rec + n, 99);
        put_header(rec, PERF_RECORD_LOST, 0, (uint16_t) n);
        cr_assert_eq(perf_record_parse(rec, n, &dwarf, &r), 0);
        cr_assert_eq(r.kind, PERF_REC_LOST);
        cr_assert_eq(r.u.lost.lost, 99);
        /* An unknown type is skipped, not an error. */
        put_header(rec, 200, 0, 16);
        cr_assert_eq(perf_record_parse(rec, 16, &dwarf, &r), 0);
        cr_assert_eq(r.kind, PERF_REC_OTHER);
}

Test(perf_record, ring_copy_wraps) {
        uint8_t rec[512], ring[256], out[512];
        size_t n = build_sample(rec);
        cr_assert_lt(n, sizeof(ring));
        /* Place the record so that it wraps around the ring's end, header
         * included. */
        uint64_t tail = 256 - 4;
        for (size_t k = 0; k < n; k++)
                ring[(tail + k) % 256] = rec[k];
        int len = perf_ring_copy(ring, 256, tail, tail + n, out, sizeof(out));
        cr_assert_eq(len, (int) n);
        cr_assert_eq(memcmp(out, rec, n), 0);
        cr_assert_eq(perf_ring_copy(ring, 256, tail, tail + 4, out, sizeof(out)), 0, "not a whole header yet");
        cr_assert_eq(perf_ring_copy(ring, 256, tail, tail + n - 1, out, sizeof(out)), -EBADMSG,
                     "a record past the head");
        cr_assert_eq(perf_ring_copy(ring, 256, tail, tail + n, out, 16), -EBADMSG, "a record larger than the buffer");
}

/* Upstream traced_perf's own trace: the layout the plugin copies (a
 * defaults packet with the timebase and SEQ_INCREMENTAL_STATE_CLEARED,
 * then samples needing the sequence's state, callstacks root first made of
 * interned frames named by interned function names) reads back with our
 * protos as upstream wrote it. */
#include "perfetto/trace/trace.pb-c.h"

Test(perf_upstream, traced_perf_trace_layout) {
        FILE *f = fopen(TEST_DATA_DIR "/upstream/trace-perf-python3.pftrace", "rb");
        cr_assert_not_null(f);
        static uint8_t buf[4 << 20];
        size_t len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, len, buf);
        cr_assert_not_null(t);
        uint32_t seq = 0;
        bool defaults = false, saw_builtin_sum = false;
        size_t samples = 0, with_stack = 0, resolved = 0;
        /* iid -> name, frame -> name iid, callstack -> its innermost frame */
        static char names[4096][64];
        static uint64_t frame_fn[4096], cs_leaf[4096];
        for (size_t k = 0; k < t->n_packet; k++) {
                const Perfetto__Protos__TracePacket *p = t->packet[k];
                if (p->trace_packet_defaults && p->trace_packet_defaults->perf_sample_defaults) {
                        cr_assert(p->has_sequence_flags && p->sequence_flags == 1);
                        cr_assert_not_null(p->trace_packet_defaults->perf_sample_defaults->timebase);
                        cr_assert_eq(p->trace_packet_defaults->perf_sample_defaults->timebase->frequency, 99);
                        defaults = true;
                        seq = p->trusted_packet_sequence_id;
                }
                const Perfetto__Protos__InternedData *d = p->interned_data;
                for (size_t j = 0; d && j < d->n_function_names; j++)
                        if (d->function_names[j]->iid < 4096)
                                snprintf(names[d->function_names[j]->iid], 64, "%.*s",
                                         (int) d->function_names[j]->str.len,
                                         (const char *) d->function_names[j]->str.data);
                for (size_t j = 0; d && j < d->n_frames; j++)
                        if (d->frames[j]->iid < 4096)
                                frame_fn[d->frames[j]->iid] = d->frames[j]->function_name_id;
                for (size_t j = 0; d && j < d->n_callstacks; j++)
                        if (d->callstacks[j]->iid < 4096 && d->callstacks[j]->n_frame_ids)
                                cs_leaf[d->callstacks[j]->iid] =
                                        d->callstacks[j]->frame_ids[d->callstacks[j]->n_frame_ids - 1];
                for (size_t j = 0; d && j < d->n_mappings; j++)
                        cr_assert(d->mappings[j]->has_build_id, "mappings name their build id");
                if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE)
                        continue;
                cr_assert(defaults, "the defaults come first");
                cr_assert_eq(p->trusted_packet_sequence_id, seq);
                cr_assert_eq(p->sequence_flags, 2, "SEQ_NEEDS_INCREMENTAL_STATE");
                samples++;
                if (!p->perf_sample->has_callstack_iid)
                        continue;
                with_stack++;
                uint64_t leaf = cs_leaf[p->perf_sample->callstack_iid];
                const char *name = names[frame_fn[leaf]];
                resolved += name[0] != '\0';
                saw_builtin_sum |= strcmp(name, "builtin_sum") == 0;
        }
        cr_assert_eq(samples, 213);
        cr_assert_eq(with_stack, 196);
        cr_assert_gt(resolved, 150, "leaf frames are named: %zu", resolved);
        cr_assert(saw_builtin_sum);
        perfetto__protos__trace__free_unpacked(t, NULL);
}
