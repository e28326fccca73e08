/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The service's data path under load, end to end with the real traced and
 * example-producer processes: a buffer far smaller than what is written
 * and streamed into a file (ring and discard policy), and 64 producer
 * processes committing at once. Nothing may be lost in either. */

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "example-payload.h"
#include "test-consumer.h"
#include "traced-instance.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

static pid_t spawn_writer(const char *packets, const char *size, const char *smb_kb, const char *page_kb) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", inst.producer_path, (char *) "--packets",
                         (char *) packets, (char *) "--size", (char *) size, (char *) "--smb-kb", (char *) smb_kb,
                         (char *) "--page-kb", (char *) page_kb, (char *) "--once", NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, NULL, NULL, argv, environ), 0);
        return pid;
}

static void reap(pid_t pid) {
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer %d failed", (int) pid);
}

static Perfetto__Protos__TraceConfig *stall_config(uint32_t buffer_kb, uint32_t duration_ms, bool discard) {
        Perfetto__Protos__TraceConfig *cfg = test_config_new(buffer_kb, "example.data", duration_ms);
        cfg->buffers[0]->has_fill_policy = true;
        cfg->buffers[0]->fill_policy = discard ? PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD
                                               : PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER;
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        return cfg;
}

static uint8_t *read_file(int fd, size_t *ret_len) {
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t) st.st_size + 1);
        cr_assert_not_null(buf);
        cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        *ret_len = (size_t) st.st_size;
        return buf;
}

/* A trace_stats field of buffer 0 (BufferStats field number). */
static uint64_t buffer_stat(const uint8_t *trace, size_t len, uint32_t field) {
        static struct pbr_field pkts[100000];
        int n = pbr_split_trace(trace, len, pkts, 100000);
        uint64_t value = 0;
        for (int i = 0; i < n; i++) {
                struct pbr_field ts, bs, v;
                if (!pbr_get(pkts[i].data, pkts[i].len, 35, false, &ts))
                        continue;
                if (pbr_get(ts.data, ts.len, 1, false, &bs) && pbr_get(bs.data, bs.len, field, true, &v))
                        value = v.varint; /* the last trace_stats wins */
        }
        return value;
}

/* A write_into_file session of the stall config into fd, run to its end. */
static void record_into_file(struct test_consumer *cons, int fd, uint32_t buffer_kb, uint32_t duration_ms,
                             bool discard, uint32_t period_ms) {
        Perfetto__Protos__TraceConfig *cfg = stall_config(buffer_kb, duration_ms, discard);
        cfg->has_write_into_file = true;
        cfg->write_into_file = true;
        cfg->has_file_write_period_ms = true;
        cfg->file_write_period_ms = period_ms;
        cr_assert_eq(test_consumer_enable(cons, cfg, fd), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(cons, 90000), "the session did not end");
        cr_assert_str_eq(cons->error, "");
}

/* The figures of traced's log line at the end of a session written into a
 * file: chunks that went straight into it at commit (and of those, held
 * for the next chunk of their commit), and through the buffers. False when
 * the line is missing. */
static bool chunk_paths(unsigned long long *ret_taken, unsigned long long *ret_held, unsigned long long *ret_stored) {
        char line[1024];
        bool found = false;
        FILE *f = fopen(inst.log_path, "r");
        cr_assert_not_null(f);
        while (fgets(line, sizeof(line), f)) {
                const char *p = strstr(line, "Session ");
                unsigned long long id, waits;
                if (p && sscanf(p,
                                "Session %llu: %llu chunks went straight into the file (%llu waits for the disk, "
                                "%llu held for the next chunk of their commit), %llu through the buffers",
                                &id, ret_taken, &waits, ret_held, ret_stored) == 5)
                        found = true;
        }
        fclose(f);
        return found;
}

/* Stops traced and requires committed chunks to have gone straight into
 * the file (its log line says how many went each way), and the chunks that
 * end with the start of a packet to have been held for the next one, so
 * that the packet went from the producer's memory into the file, copied
 * once. */
static void expect_chunks_taken(void) {
        cr_assert(traced_instance_stop(&inst) == 0, "traced did not exit cleanly");
        unsigned long long taken = 0, held = 0, stored = 0;
        cr_assert(chunk_paths(&taken, &held, &stored), "no log line with the chunks' paths");
        cr_log_info("%llu chunks straight into the file (%llu held), %llu through the buffer", taken, held, stored);
        cr_assert_gt(taken, 0, "no chunk went straight into the file (%llu through the buffer)", stored);
        cr_assert_gt(held, 0, "no chunk was held for the rest of a packet (%llu taken)", taken);
}

/* 24 MB in packets of size bytes through a 1 MiB buffer into a file whose
 * write period (60 s) never comes during the session: only the drain a
 * filling buffer starts can keep up. The writer stalls on its SMB while
 * the service writes, and every packet reaches the file. */
static void stream_through_small_buffer(bool discard, unsigned size) {
        char path[512];
        snprintf(path, sizeof(path), "%s/stream.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);

        unsigned n = 24000000u / size;
        char packets[16], size_s[16];
        snprintf(packets, sizeof(packets), "%u", n);
        snprintf(size_s, sizeof(size_s), "%u", size);
        pid_t pid = spawn_writer(packets, size_s, "4096", "64");
        spin_ms(ev, 300);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        record_into_file(&cons, fd, 1024, 15000, discard, 60000);
        reap(pid);

        size_t len;
        uint8_t *trace = read_file(fd, &len);
        size_t got = example_check_packets(trace, len, size);
        cr_assert_eq(got, n, "%zu of %u packets of %u bytes reached the file through a 1 MiB %s buffer", got, n, size,
                     discard ? "DISCARD" : "RING_BUFFER");
        /* BufferStats: bytes_written (1) is 24 MB and more, and no chunk was
         * overwritten (3) or discarded (18) on the way. */
        cr_assert_geq(buffer_stat(trace, len, 1), (uint64_t) n * size, "no trace_stats with the buffer's figures");
        cr_assert_eq(buffer_stat(trace, len, 3), 0, "chunks were overwritten");
        cr_assert_eq(buffer_stat(trace, len, 18), 0, "chunks were discarded");
        free(trace);
        close(fd);
        test_consumer_free(&cons);
        /* Packets go from the producer's memory straight into the file,
         * copied once (the start of each packet that continues in the
         * next chunk stays in its chunk while the commit goes on): the
         * buffer only takes chunks while the session starts or the disk is
         * far behind. */
        expect_chunks_taken();
}

Test(data_path, ring_buffer_smaller_than_the_trace_streams_without_loss, .init = setup, .fini = teardown,
     .timeout = 180) {
        stream_through_small_buffer(false, 1000);
}

Test(data_path, discard_buffer_smaller_than_the_trace_streams_without_loss, .init = setup, .fini = teardown,
     .timeout = 180) {
        stream_through_small_buffer(true, 1000);
}

/* Packets of 60000 bytes, each across four or five chunks of 16 KiB: read
 * from chunks held in the producer's memory through a whole commit. */
Test(data_path, large_packets_stream_through_a_small_buffer, .init = setup, .fini = teardown, .timeout = 180) {
        stream_through_small_buffer(false, 60000);
}

/* n producer processes writing 400 packets of 700 bytes each, and a
 * consumer; they all register before it starts a session (a data source
 * that comes late still joins the running session, but the session must
 * outlast it). */
static void start_writers(pid_t *pids, unsigned n, struct test_consumer *cons) {
        for (unsigned i = 0; i < n; i++)
                pids[i] = spawn_writer("400", "700", "256", "4");
        cr_assert_eq(test_consumer_connect(cons, ev, inst.consumer_path), 0);
        spin_ms(ev, 1000);
}

/* 64 producer processes, each its own SMB and sequence, commit 400 packets
 * of 700 bytes at the same time into one session: each sequence arrives
 * whole and in order. */
Test(data_path, sixty_four_producers_commit_concurrently, .init = setup, .fini = teardown, .timeout = 180) {
        enum { N = 64 };
        pid_t pids[N];
        struct test_consumer cons;
        start_writers(pids, N, &cons);
        Perfetto__Protos__TraceConfig *cfg = stall_config(32 * 1024, 8000, false);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 90000), "the session did not end");
        cr_assert_eq(test_consumer_read(&cons, 60000), 0);
        unsigned good = example_check_sequences(cons.data, cons.len, 700, 400);
        for (unsigned i = 0; i < N; i++)
                reap(pids[i]);
        cr_assert_eq(good, N, "%u of %d producers' sequences arrived whole and in order", good, N);
        test_consumer_free(&cons);
}

/* The same into a file: each producer's chunks are taken at commit, 64
 * sequences interleaved in the file's blocks, every one whole and in
 * order. */
Test(data_path, sixty_four_producers_stream_into_a_file, .init = setup, .fini = teardown, .timeout = 180) {
        enum { N = 64 };
        char path[512];
        snprintf(path, sizeof(path), "%s/sixty-four.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        pid_t pids[N];
        struct test_consumer cons;
        start_writers(pids, N, &cons);
        record_into_file(&cons, fd, 4 * 1024, 8000, false, 200);
        for (unsigned i = 0; i < N; i++)
                reap(pids[i]);
        size_t len;
        uint8_t *trace = read_file(fd, &len);
        unsigned good = example_check_sequences(trace, len, 700, 400);
        cr_assert_eq(good, N, "%u of %d producers' sequences reached the file whole and in order", good, N);
        free(trace);
        close(fd);
        test_consumer_free(&cons);
        expect_chunks_taken();
}
