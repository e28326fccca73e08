/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack's config parsing (from text configs, as tracectl sends
 * them) and ring buffer record decoding. */

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "bpfstack-config.h"
#include "pbtxt/pbtxt.h"

#include "perfetto/config/data_source_config.pb-c.h"

/* Parses a text DataSourceConfig and hands its bytes to the plugin's parser. */
static int parse(const char *text, struct bpfstack_config *c, char *err, size_t en) {
        ProtobufCMessage *m = NULL;
        char *perr = NULL;
        int r = pbtxt_parse(&perfetto__protos__data_source_config__descriptor, text, strlen(text), "<test>", &m, &perr);
        cr_assert_eq(r, 0, "text config: %s", perr ? perr : "?");
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(n + 1);
        protobuf_c_message_pack(m, buf);
        protobuf_c_message_free_unpacked(m, NULL);
        r = bpfstack_config_parse(buf, n, c, err, en);
        free(buf);
        return r;
}

static void refused(const char *text, const char *expect) {
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(parse(text, &c, err, sizeof(err)), -EINVAL, "%s is refused", text);
        cr_assert(strstr(err, expect), "error \"%s\" says \"%s\"", err, expect);
}

Test(bpfstack_config, defaults) {
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(parse("name: \"linux.bpf_stack\"", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(c.frequency, 99);
        cr_assert(c.on_cpu && c.off_cpu && c.kernel_frames && c.user_frames);
        cr_assert_eq(c.max_depth, 127);
        cr_assert_eq(c.min_blocked_ns, 0);
        cr_assert_eq(c.drain_period_ms, 100);
        cr_assert_eq(c.ring_buffer_kb, 4096);
        cr_assert_str_eq(c.btf_path, "/sys/kernel/btf/vmlinux");
        cr_assert_eq(c.n_pids + c.n_tids + c.n_comms, 0);
}

Test(bpfstack_config, every_field) {
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(parse("bpf_stack_config { frequency: 100000 on_cpu: false min_blocked_us: 250 "
                           "filter: \"pid=12\" filter: \"pid=13\" filter: \"tid=7\" filter: \"comm=bash\" "
                           "filter: \"cgroup=/sys/fs/cgroup/x\" kernel_frames: false max_depth: 1 "
                           "drain_period_ms: 10000 ring_buffer_kb: 64 stack_map_entries: 256 btf_path: \"/b\" }",
                           &c, err, sizeof(err)),
                     0, "%s", err);
        cr_assert_eq(c.frequency, 100000);
        cr_assert(!c.on_cpu && c.off_cpu && !c.kernel_frames && c.user_frames);
        cr_assert_eq(c.min_blocked_ns, 250000);
        cr_assert_eq(c.n_pids, 2);
        cr_assert_eq(c.pids[1], 13);
        cr_assert_eq(c.n_tids, 1);
        cr_assert_eq(c.tids[0], 7);
        cr_assert_eq(c.n_comms, 1);
        cr_assert_str_eq(c.comms[0], "bash");
        cr_assert_str_eq(c.cgroup, "/sys/fs/cgroup/x");
        cr_assert_eq(c.max_depth, 1);
        cr_assert_eq(c.drain_period_ms, 10000);
        cr_assert_eq(c.ring_buffer_kb, 64);
        cr_assert_eq(c.stack_map_entries, 256);
        cr_assert_str_eq(c.btf_path, "/b");
}

Test(bpfstack_config, refusals) {
        refused("bpf_stack_config { frequency: 0 }", "frequency: 0 Hz is out of range (1..100000)");
        refused("bpf_stack_config { frequency: 100001 }", "frequency: 100001 Hz is out of range");
        refused("bpf_stack_config { max_depth: 128 }", "max_depth: 128 is out of range (1..127)");
        refused("bpf_stack_config { max_depth: 0 }", "max_depth: 0 is out of range");
        refused("bpf_stack_config { filter: \"color=red\" }", "filter: unknown filter \"color\"");
        refused("bpf_stack_config { filter: \"pid\" }", "is not KEY=VALUE");
        refused("bpf_stack_config { filter: \"pid=x\" }", "not a process id");
        refused("bpf_stack_config { filter: \"pid=-1\" }", "not a process id");
        refused("bpf_stack_config { filter: \"comm=0123456789abcdef\" }", "at most 15 characters");
        refused("bpf_stack_config { filter: \"cgroup=/a\" filter: \"cgroup=/b\" }", "only one cgroup");
        refused("bpf_stack_config { ring_buffer_kb: 100 }", "ring_buffer_kb: 100 is not a power of two");
        refused("bpf_stack_config { drain_period_ms: 0 }", "drain_period_ms: 0 is out of range");
        refused("bpf_stack_config { stack_map_entries: 1 }", "stack_map_entries: 1 is out of range");
        refused("bpf_stack_config { on_cpu: false off_cpu: false }", "nothing to record");
        refused("bpf_stack_config { kernel_frames: false user_frames: false }", "no stacks");
        refused("bpf_stack_config { btf_path: \"\" }", "btf_path");
}

Test(bpfstack_config, more_than_sixteen_pids) {
        char text[1024] = "bpf_stack_config {";
        for (int k = 1; k <= 17; k++)
                snprintf(text + strlen(text), sizeof(text) - strlen(text), " filter: \"pid=%d\"", k);
        strcat(text, " }");
        refused(text, "more than 16 pid= entries");
}

Test(bpfstack_config, unknown_field_inside_the_message) {
        /* DataSourceConfig { bpf_stack_config (7013) { field 99: 1 } } */
        const uint8_t bytes[] = { 0xaa, 0xb6, 0x03, 0x03, 0x98, 0x06, 0x01 };
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(bpfstack_config_parse(bytes, sizeof(bytes), &c, err, sizeof(err)), -EINVAL);
        cr_assert(strstr(err, "field 99: not a field of BpfStackConfig"), "%s", err);
}

Test(bpfstack_config, garbage) {
        const uint8_t bytes[] = { 0xff, 0xff, 0xff };
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(bpfstack_config_parse(bytes, sizeof(bytes), &c, err, sizeof(err)), -EINVAL);
        cr_assert(strstr(err, "does not decode"), "%s", err);
}

Test(bpfstack_record, decode) {
        struct bpfstack_record in = {
                .ts = 123, .blocked_ns = 5000, .pid = 10, .tid = 11, .cpu = 1, .kstack_id = 4, .ustack_id = -14,
                .kind = BPFSTACK_OFF_CPU,
        };
        memcpy(in.comm, "0123456789abcdefXYZ", sizeof(in.comm)); /* not terminated */
        struct bpfstack_record out;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), 0);
        cr_assert_eq(out.ts, 123);
        cr_assert_eq(out.blocked_ns, 5000);
        cr_assert_eq(out.kstack_id, 4);
        cr_assert_eq(out.ustack_id, -14);
        cr_assert_eq(strlen(out.comm), 15, "comm terminated");
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in) - 1, &out), -EBADMSG, "short");
        in.kind = 7;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "kind");
        in.kind = BPFSTACK_ON_CPU;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "on-CPU with blocked time");
        in.blocked_ns = 0;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), 0);
        in.tid = 0;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "idle task");
}

Test(bpfstack_config, user_unwind) {
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(parse("name: \"linux.bpf_stack\"", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert(c.walk_tables, "unwind tables by default");
        cr_assert_eq(c.unwind_rows, 1u << 20);
        cr_assert_eq(c.unwind_procs, 1024);
        cr_assert_eq(parse("bpf_stack_config { user_unwind: FRAME_POINTER }", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert(!c.walk_tables);
        cr_assert_eq(parse("bpf_stack_config { user_unwind: DWARF_TABLES unwind_table_rows: 65536 "
                           "unwind_processes: 16 }",
                           &c, err, sizeof(err)),
                     0, "%s", err);
        cr_assert(c.walk_tables);
        cr_assert_eq(c.unwind_rows, 65536);
        cr_assert_eq(c.unwind_procs, 16);
        refused("bpf_stack_config { unwind_table_rows: 65535 }", "unwind_table_rows: 65535 is out of range");
        refused("bpf_stack_config { unwind_table_rows: 16777217 }", "unwind_table_rows: 16777217 is out of range");
        refused("bpf_stack_config { unwind_processes: 15 }", "unwind_processes: 15 is out of range");
}

/* A record with its walked user frames after it. */
Test(bpfstack_record, walked_frames) {
        struct {
                struct bpfstack_record r;
                uint64_t f[3];
        } in = { .r = { .ts = 1, .pid = 10, .tid = 10, .kind = BPFSTACK_ON_CPU, .kstack_id = -14,
                        .ustack_id = BPFSTACK_USTACK_WALKED, .ustop = BPFSTACK_STOP_END, .n_uframes = 3 },
                 .f = { 0x1000, 0x2000, 0x3000 } };
        struct bpfstack_record out;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), 0);
        cr_assert_eq(out.n_uframes, 3);
        cr_assert_eq(out.ustop, BPFSTACK_STOP_END);
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in) - 8, &out), -EBADMSG, "a frame short");
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in.r), &out), -EBADMSG, "frames missing");
        in.r.ustack_id = 5;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "frames with a stack id");
        in.r.ustack_id = BPFSTACK_USTACK_WALKED;
        in.r.ustop = BPFSTACK_STOP_MAX;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "unknown stop");
        in.r.ustop = BPFSTACK_STOP_DEPTH;
        in.r.n_uframes = BPFSTACK_MAX_DEPTH + 1;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "too many frames");
}

Test(bpfstack_config, python_frames) {
        struct bpfstack_config c;
        char err[256];
        cr_assert_eq(parse("name: \"linux.bpf_stack\"", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert(c.python_frames, "Python frames by default");
        cr_assert_eq(parse("bpf_stack_config { python_frames: false }", &c, err, sizeof(err)), 0, "%s", err);
        cr_assert(!c.python_frames);
        cr_assert_eq(parse("bpf_stack_config { python_frames: true user_frames: false }", &c, err, sizeof(err)), 0,
                     "%s", err);
        cr_assert(!c.python_frames, "no Python frames without user frames");
}

/* A record with walked user frames and Python frames after them. */
Test(bpfstack_record, python_frames) {
        struct {
                struct bpfstack_record r;
                uint64_t f[2];
                struct bpfstack_pyframe py[2];
        } in = {.r = {.ts = 1, .pid = 10, .tid = 10, .kind = BPFSTACK_ON_CPU, .kstack_id = -14,
                      .ustack_id = BPFSTACK_USTACK_WALKED, .ustop = BPFSTACK_STOP_END, .n_uframes = 2,
                      .n_pyframes = 2, .pystop = BPFSTACK_PY_END},
                .f = {0x1000, 0x2000},
                .py = {{0x7000, 0x70c0}, {0x8000 | BPFSTACK_PY_ENTRY, 0x80c0}}};
        struct bpfstack_record out;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), 0);
        cr_assert_eq(out.n_pyframes, 2);
        cr_assert_eq(out.pystop, BPFSTACK_PY_END);
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in) - sizeof(in.py[0]), &out), -EBADMSG, "a frame short");
        in.r.pystop = BPFSTACK_PY_MAX;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "unknown stop");
        in.r.pystop = BPFSTACK_PY_DEPTH;
        in.r.n_pyframes = BPFSTACK_MAX_PYFRAMES + 1;
        cr_assert_eq(bpfstack_record_decode(&in, sizeof(in), &out), -EBADMSG, "too many frames");
        /* Python frames without walked user frames (a frame-pointer stack). */
        struct {
                struct bpfstack_record r;
                struct bpfstack_pyframe py[1];
        } fp = {.r = {.ts = 1, .pid = 10, .tid = 10, .kind = BPFSTACK_OFF_CPU, .blocked_ns = 9, .kstack_id = 3,
                      .ustack_id = 4, .n_pyframes = 1, .pystop = BPFSTACK_PY_END},
                .py = {{0x7000 | BPFSTACK_PY_ENTRY, 0x70c0}}};
        cr_assert_eq(bpfstack_record_decode(&fp, sizeof(fp), &out), 0);
        cr_assert_eq(out.n_pyframes, 1);
        cr_assert_eq(out.n_uframes, 0);
}
