/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client end to end: the example producer (a separate process
 * linked against the library) writes packets of every size class into the
 * real traced; the trace read back must hold each packet byte for byte,
 * in order. */

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

static pid_t spawn_producer(unsigned packets, size_t size, unsigned page_kb, unsigned smb_kb, bool stream) {
        char n[32], z[32], pk[32], sk[32];
        snprintf(n, sizeof(n), "%u", packets);
        snprintf(z, sizeof(z), "%zu", size);
        snprintf(pk, sizeof(pk), "%u", page_kb);
        snprintf(sk, sizeof(sk), "%u", smb_kb);
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", inst.producer_path, (char *) "--packets", n,
                         (char *) "--size", z, (char *) "--page-kb", pk, (char *) "--smb-kb", sk, (char *) "--once",
                         stream ? (char *) "--stream" : NULL, NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, NULL, NULL, argv, environ), 0);
        return pid;
}

/* Checks every for_testing packet: payload byte-exact, seq in order. */
static size_t check_packets(const uint8_t *buf, size_t len, size_t size) {
        static struct pbr_field pkts[100000];
        int n = pbr_split_trace(buf, len, pkts, 100000);
        cr_assert_geq(n, 0);
        size_t found = 0;
        char *expected = malloc(size + 1);
        for (int i = 0; i < n; i++) {
                struct pbr_field t, str, seq;
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t))
                        continue;
                cr_assert(pbr_get(t.data, t.len, 1, false, &str));
                if (found == 0)
                        cr_assert(!pbr_get(t.data, t.len, 2, false, &seq) || seq.varint == 0);
                else {
                        cr_assert(pbr_get(t.data, t.len, 2, false, &seq));
                        cr_assert_eq(seq.varint, found, "packet %zu out of order (got %llu)", found,
                                     (unsigned long long) seq.varint);
                }
                for (size_t k = 0; k < size; k++)
                        expected[k] = (char) ('a' + (found + k) % 26);
                cr_assert_eq(str.len, size, "packet %zu has %zu bytes, expected %zu", found, str.len, size);
                cr_assert_arr_eq(str.data, expected, size, "packet %zu corrupted", found);
                found++;
        }
        free(expected);
        return found;
}

struct size_case {
        unsigned packets;
        size_t size;
        unsigned page_kb;
        unsigned smb_kb;
        bool stream;
};

ParameterizedTestParameters(client, round_trip) {
        static struct size_case cases[] = {
                { 2000, 10, 4, 1024 },    /* many small packets per chunk */
                { 300, 1000, 4, 1024 },   /* about one 1 KiB chunk each */
                { 100, 5000, 4, 2048 },   /* across several chunks */
                { 20, 40000, 32, 4096 },  /* larger than a 32 KiB page */
                { 5, 300000, 4, 4096 },   /* far larger than a page */
                /* The same through the zero-copy streaming API: nested
                 * sizes of messages spanning chunks arrive as patches. */
                { 2000, 10, 4, 1024, true },
                { 100, 5000, 4, 2048, true },
                { 20, 40000, 32, 4096, true },
                { 5, 300000, 4, 4096, true },
        };
        return cr_make_param_array(struct size_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct size_case *c, client, round_trip, .init = setup, .fini = teardown, .timeout = 120) {
        struct test_consumer cons;
        pid_t pid = spawn_producer(c->packets, c->size, c->page_kb, c->smb_kb, c->stream);
        /* Wait for the producer's data source to show up. */
        spin_ms(ev, 300);
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(64 * 1024, "example.data", 0);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        spin_ms(ev, 1500);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        cr_assert_eq(test_consumer_read(&cons, 20000), 0);
        size_t got = check_packets(cons.data, cons.len, c->size);
        cr_assert_eq(got, c->packets, "%zu of %u packets of %zu bytes arrived", got, c->packets, c->size);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
        test_consumer_free(&cons);
}
