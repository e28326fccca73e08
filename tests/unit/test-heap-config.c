/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "heap/heap-config.h"
#include "perfetto/config/profiling/heapprofd_config.pb-c.h"

/* A DataSourceConfig holding h as heapprofd_config (field 105). */
static size_t wrap(const Perfetto__Protos__HeapprofdConfig *h, uint8_t *out, size_t size) {
        size_t n = perfetto__protos__heapprofd_config__get_packed_size(h);
        cr_assert_lt(n + 8, size);
        size_t k = 0;
        out[k++] = (uint8_t) ((105 << 3 | 2) & 0x7f) | 0x80;
        out[k++] = (uint8_t) ((105 << 3 | 2) >> 7);
        size_t v = n;
        do {
                out[k++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
        perfetto__protos__heapprofd_config__pack(h, out + k);
        return k + n;
}

static int parse(const Perfetto__Protos__HeapprofdConfig *h, struct heap_config *c, char *err, size_t en) {
        uint8_t buf[4096];
        size_t n = wrap(h, buf, sizeof(buf));
        return heap_config_parse(buf, n, c, err, en);
}

Test(heap_config, defaults_and_targets) {
        Perfetto__Protos__HeapprofdConfig h = PERFETTO__PROTOS__HEAPPROFD_CONFIG__INIT;
        uint64_t pids[] = { 42 };
        char *cmds[] = { (char *) "myd", (char *) "/opt/*/bin/srv*" };
        h.n_pid = 1;
        h.pid = pids;
        h.n_process_cmdline = 2;
        h.process_cmdline = cmds;
        struct heap_config c;
        char err[256] = "";
        cr_assert_eq(parse(&h, &c, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(c.interval, HEAP_DEFAULT_INTERVAL);
        cr_assert_eq(c.shmem_size, HEAP_DEFAULT_SHMEM);
        cr_assert_not(c.block_client);
        cr_assert(heap_config_targets(&c, 42, NULL, 0));
        cr_assert_not(heap_config_targets(&c, 43, "other\0arg", 10));
        cr_assert(heap_config_targets(&c, 43, "/usr/sbin/myd\0-f", 17), "by the last component");
        cr_assert_not(heap_config_targets(&c, 43, "/usr/sbin/myd2", 14));
        cr_assert(heap_config_targets(&c, 43, "/opt/x/bin/srv-1\0", 17), "a glob with a / matches argv[0]");
        cr_assert_not(heap_config_targets(&c, 43, "srv-1", 5));
        heap_config_done(&c);
}

Test(heap_config, settings_taken) {
        Perfetto__Protos__HeapprofdConfig h = PERFETTO__PROTOS__HEAPPROFD_CONFIG__INIT;
        Perfetto__Protos__HeapprofdConfig__ContinuousDumpConfig d =
                PERFETTO__PROTOS__HEAPPROFD_CONFIG__CONTINUOUS_DUMP_CONFIG__INIT;
        h.has_all = h.all = true;
        h.has_sampling_interval_bytes = true;
        h.sampling_interval_bytes = 524288;
        h.has_shmem_size_bytes = true;
        h.shmem_size_bytes = 1 << 20;
        h.has_block_client = h.block_client = true;
        h.has_block_client_timeout_us = true;
        h.block_client_timeout_us = 5000;
        d.has_dump_phase_ms = d.has_dump_interval_ms = true;
        d.dump_phase_ms = 1000;
        d.dump_interval_ms = 2000;
        h.continuous_dump_config = &d;
        struct heap_config c;
        char err[256] = "";
        cr_assert_eq(parse(&h, &c, err, sizeof(err)), 0, "%s", err);
        cr_assert(c.all);
        cr_assert_eq(c.interval, 524288);
        cr_assert_eq(c.shmem_size, 1 << 20);
        cr_assert(c.block_client);
        cr_assert_eq(c.block_timeout_us, 5000);
        cr_assert_eq(c.dump_phase_ms, 1000);
        cr_assert_eq(c.dump_interval_ms, 2000);
        cr_assert(heap_config_targets(&c, 1, "anything", 8));
        heap_config_done(&c);
}

static void refused(Perfetto__Protos__HeapprofdConfig *h, const char *field) {
        struct heap_config c;
        char err[256] = "";
        cr_assert_eq(parse(h, &c, err, sizeof(err)), -EINVAL, "refused: %s", field);
        cr_assert(strncmp(err, field, strlen(field)) == 0, "the error names %s: %s", field, err);
}

Test(heap_config, what_is_not_done_is_refused_by_name) {
        uint64_t pids[] = { 42 };
        char *heaps[] = { (char *) "com.android.art" };
        Perfetto__Protos__HeapprofdConfig h = PERFETTO__PROTOS__HEAPPROFD_CONFIG__INIT;
        refused(&h, "pid");
        h.n_pid = 1;
        h.pid = pids;
        h.n_heaps = 1;
        h.heaps = heaps;
        refused(&h, "heaps");
        h.n_heaps = 0;
        h.has_dump_at_max = h.dump_at_max = true;
        refused(&h, "dump_at_max");
        h.has_dump_at_max = h.dump_at_max = false;
        h.has_stream_allocations = h.stream_allocations = true;
        refused(&h, "stream_allocations");
        h.has_stream_allocations = h.stream_allocations = false;
        h.n_target_installed_by = 1;
        h.target_installed_by = heaps;
        refused(&h, "target_installed_by");
        h.n_target_installed_by = 0;
        h.has_shmem_size_bytes = true;
        h.shmem_size_bytes = 100;
        refused(&h, "shmem_size_bytes");
        h.has_shmem_size_bytes = false;
        h.has_no_running = h.no_running = h.has_no_startup = h.no_startup = true;
        refused(&h, "no_running");
        h.has_no_running = h.no_running = h.has_no_startup = h.no_startup = false;
        pids[0] = 0;
        refused(&h, "pid");
        pids[0] = 42;
        struct heap_config c;
        char err[256] = "";
        cr_assert_eq(parse(&h, &c, err, sizeof(err)), 0, "%s", err);
        heap_config_done(&c);
}

Test(heap_config, no_heapprofd_config_and_garbage) {
        struct heap_config c;
        char err[256] = "";
        const uint8_t empty[] = { 0x0a, 0x01, 'x' }; /* name: "x" */
        cr_assert_eq(heap_config_parse(empty, sizeof(empty), &c, err, sizeof(err)), -EINVAL);
        cr_assert(strstr(err, "heapprofd_config"), "%s", err);
        const uint8_t bad[] = { 0xca, 0x06, 0x7f, 0x01 };
        cr_assert_eq(heap_config_parse(bad, sizeof(bad), &c, err, sizeof(err)), -EINVAL);
}
