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
#include "example-payload.h"
#include "test-consumer.h"
#include "test-scratch.h"
#include "traced-instance.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;
/* Where producers connect: the UNIX socket, or a TCP one. */
static const char *producer_address;
static char tcp_address[64];

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
        producer_address = inst.producer_path;
}

/* Producers connect over TCP, where no fd crosses: the service asks for
 * shared memory emulation, and the library must send its chunks' bytes
 * in CommitData (and scrape itself on Flush). */
static void setup_tcp(void) {
        unsigned port = 0;
        cr_assert_eq(sd_event_new(&ev), 0);
        int r = traced_instance_start_tcp(&inst, &port);
        cr_assert_eq(r, 0, "could not start traced with a TCP producer socket: %s", strerror(-r));
        snprintf(tcp_address, sizeof(tcp_address), "127.0.0.1:%u", port);
        producer_address = tcp_address;
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
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets", n,
                         (char *) "--size", z, (char *) "--page-kb", pk, (char *) "--smb-kb", sk, (char *) "--once",
                         stream ? (char *) "--stream" : NULL, NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, NULL, NULL, argv, environ), 0);
        return pid;
}

struct size_case {
        unsigned packets;
        size_t size;
        unsigned page_kb;
        unsigned smb_kb;
        bool stream;
};

static struct size_case size_cases[] = {
                { 2000, 10, 4, 1024 },    /* many small packets per chunk */
                { 300, 1000, 4, 1024 },   /* about one 1 KiB chunk each */
                { 100, 5000, 4, 2048 },   /* across several chunks */
                { 20, 40000, 32, 4096 },  /* larger than a 32 KiB page */
                { 5, 300000, 4, 4096 },   /* far larger than a page */
                /* 12 MB read back with ReadBuffers: more than the IPC send
                 * queue holds, so the service must pace its replies. */
                { 1200, 10000, 32, 8192 },
                /* The same through the zero-copy streaming API: nested
                 * sizes of messages spanning chunks arrive as patches. */
                { 2000, 10, 4, 1024, true },
                { 100, 5000, 4, 2048, true },
                { 20, 40000, 32, 4096, true },
                { 5, 300000, 4, 4096, true },
};

ParameterizedTestParameters(client, round_trip) {
        return cr_make_param_array(struct size_case, size_cases, sizeof(size_cases) / sizeof(size_cases[0]));
}

static void round_trip(const struct size_case *c) {
        struct test_consumer cons;
        pid_t pid = spawn_producer(c->packets, c->size, c->page_kb, c->smb_kb, c->stream);
        /* Wait for the producer's data source to show up. */
        spin_ms(ev, 300);
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(64 * 1024, "example.data", 0);
        /* Every packet must arrive: on a loaded machine the writer waits
         * for the service rather than drop. */
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        spin_ms(ev, 1500);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        cr_assert_eq(test_consumer_read(&cons, 60000), 0);
        size_t got = example_check_packets(cons.data, cons.len, c->size);
        cr_assert_eq(got, c->packets, "%zu of %u packets of %zu bytes arrived", got, c->packets, c->size);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
        test_consumer_free(&cons);
}

ParameterizedTest(struct size_case *c, client, round_trip, .init = setup, .fini = teardown, .timeout = 120) {
        round_trip(c);
}

ParameterizedTestParameters(client, round_trip_over_tcp) {
        return cr_make_param_array(struct size_case, size_cases, sizeof(size_cases) / sizeof(size_cases[0]));
}

ParameterizedTest(struct size_case *c, client, round_trip_over_tcp, .init = setup_tcp, .fini = teardown,
                  .timeout = 120) {
        round_trip(c);
}

/* Runs the example producer with argv, records example.data for
 * duration_ms (stall policy when stall), and returns how many of its
 * sequences arrived with packets 0..n-1 of size bytes in order. */
static unsigned record_sequences(char **argv, uint32_t duration_ms, bool stall, size_t size, unsigned long n) {
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, NULL, NULL, argv, environ), 0);
        spin_ms(ev, 300);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(64 * 1024, "example.data", duration_ms);
        if (stall) {
                cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
                cfg->data_sources[0]->config->buffer_exhausted_policy =
                        PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        }
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        /* Generous: under ASan on a loaded machine the stalls add up. */
        cr_assert(test_consumer_wait_disabled(&cons, 90000), "the session did not end");
        cr_assert_eq(test_consumer_read(&cons, 60000), 0);
        unsigned good = example_check_sequences(cons.data, cons.len, size, n);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
        test_consumer_free(&cons);
        return good;
}

static void record_and_check_threads(bool stream) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "2000", (char *) "--size", (char *) "300", (char *) "--smb-kb", (char *) "256",
                         (char *) "--threads", (char *) "4", (char *) "--once", stream ? (char *) "--stream" : NULL,
                         NULL };
        /* A 256 KiB SMB cannot hold 4 x 600 KB: the writers stall until
         * the service has taken chunks, and nothing is lost. */
        unsigned good = record_sequences(argv, 6000, true, 300, 2000);
        cr_assert_eq(good, 4, "%u of 4 thread sequences arrived whole and in order", good);
}

Test(client, writers_on_four_threads, .init = setup, .fini = teardown, .timeout = 120) {
        record_and_check_threads(false);
}

Test(client, streaming_writers_on_four_threads, .init = setup, .fini = teardown, .timeout = 120) {
        record_and_check_threads(true);
}

Test(client, writers_on_four_threads_over_tcp, .init = setup_tcp, .fini = teardown, .timeout = 120) {
        record_and_check_threads(false);
}

Test(client, streaming_writers_on_four_threads_over_tcp, .init = setup_tcp, .fini = teardown, .timeout = 120) {
        record_and_check_threads(true);
}

/* Two threads write 53 packets each and never finish their last chunk.
 * A local service scrapes that chunk from the shared memory; over TCP
 * only the producer can, on Flush. Either way every packet is in the
 * trace: once the session has stopped, the service reads the last
 * fragment of a scraped chunk too when its size says it is whole. */
static void record_held_writers(void) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "53", (char *) "--size", (char *) "100", (char *) "--threads", (char *) "2",
                         (char *) "--hold", (char *) "--once", NULL };
        unsigned good = record_sequences(argv, 2000, false, 100, 53);
        cr_assert_eq(good, 2, "%u of 2 held sequences arrived with packets 0..52 in order", good);
}

Test(client, unfinished_chunks_are_scraped, .init = setup, .fini = teardown, .timeout = 120) {
        record_held_writers();
}

Test(client, unfinished_chunks_are_scraped_over_tcp, .init = setup_tcp, .fini = teardown, .timeout = 120) {
        record_held_writers();
}

static bool has_data_source(struct test_consumer *c, const char *name) {
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        bool found = false;
        if (test_consumer_call(c, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                               &reply, 5000) != 0 || !reply)
                return false;
        const Perfetto__Protos__TracingServiceState *st = ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        for (size_t k = 0; st && k < st->n_data_sources; k++)
                if (st->data_sources[k]->ds_descriptor && strcmp(st->data_sources[k]->ds_descriptor->name, name) == 0)
                        found = true;
        protobuf_c_message_free_unpacked(reply, NULL);
        return found;
}

static pid_t logged_pid;

/* Does not leave the producer behind when a test fails. */
static void teardown_logged(void) {
        if (logged_pid > 0) {
                (void) kill(logged_pid, SIGKILL);
                (void) waitpid(logged_pid, NULL, 0);
        }
        teardown();
}

/* Spawns example-producer with its stderr in a file of no name. */
static pid_t spawn_logged(char *const argv[], int *ret_fd) {
        int fd = test_tmpfile();
        cr_assert_geq(fd, 0, "no file for the producer's stderr: %s", strerror(-fd));
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, STDERR_FILENO);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        *ret_fd = fd;
        logged_pid = pid;
        return pid;
}

static void read_log(int fd, char *out, size_t size) {
        ssize_t n = pread(fd, out, size - 1, 0);
        out[n > 0 ? n : 0] = '\0';
}

/* The producer reconnects for ever: teardown_logged ends it if the test
 * fails before it does. */
Test(client, producer_reconnects_when_the_service_restarts, .init = setup, .fini = teardown_logged, .timeout = 120) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "50", (char *) "--size", (char *) "200", (char *) "--reconnect", NULL };
        int fd;
        pid_t pid = spawn_logged(argv, &fd);

        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        bool seen = false;
        for (int i = 0; i < 100 && !seen; i++) {
                seen = has_data_source(&cons, "example.data");
                if (!seen)
                        spin_ms(ev, 50);
        }
        cr_assert(seen, "the producer never registered");
        test_consumer_free(&cons);

        /* The service goes away and comes back on the same socket. */
        cr_assert_eq(traced_instance_stop(&inst), 0);
        spin_ms(ev, 300);
        cr_assert_eq(traced_instance_restart(&inst, false, NULL), 0);
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        seen = false;
        for (int i = 0; i < 200 && !seen; i++) {
                seen = has_data_source(&cons, "example.data");
                if (!seen)
                        spin_ms(ev, 50);
        }
        cr_assert(seen, "the producer did not register again with the new service");

        /* And it records through the new connection. */
        Perfetto__Protos__TraceConfig *cfg = test_config_new(4096, "example.data", 800);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        cr_assert_eq(test_consumer_read(&cons, 60000), 0);
        cr_assert_eq(example_check_packets(cons.data, cons.len, 200), 50);
        test_consumer_free(&cons);

        cr_assert_eq(kill(pid, SIGTERM), 0);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        logged_pid = 0;
        char out[4096];
        read_log(fd, out, sizeof(out));
        close(fd);
        cr_assert(strstr(out, "the service went away") && strstr(out, "connected again (1)"),
                  "producer log: %s", out);
}


/* Waits (up to timeout_ms) until the log holds `what` `count` times. */
static bool wait_log(int fd, const char *what, unsigned count, unsigned timeout_ms) {
        static char out[65536];
        for (unsigned waited = 0;; waited += 20) {
                read_log(fd, out, sizeof(out));
                unsigned seen = 0;
                for (const char *s = strstr(out, what); s; s = strstr(s + 1, what))
                        seen++;
                if (seen >= count)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                spin_ms(ev, 20);
        }
}

/* A writer on the loop thread (the start callback writes everything) with
 * a 64 KiB SMB and 2 MB to write, STALL_THEN_DROP: the loop cannot run
 * meanwhile, so its CommitData must leave synchronously from the writer
 * (once half the SMB waits, and on each retry of a stall). With DROP, or
 * without the stall, some 1,300 of the 2,000 packets are lost. */
Test(client, loop_thread_writer_stalls_without_loss, .init = setup, .fini = teardown_logged, .timeout = 120) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "2000", (char *) "--size", (char *) "1000", (char *) "--smb-kb", (char *) "64",
                         (char *) "--once", NULL };
        int fd;
        pid_t pid = spawn_logged(argv, &fd);
        cr_assert(wait_log(fd, "ready", 1, 10000), "the producer did not start");
        spin_ms(ev, 200);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(16 * 1024, "example.data", 3000);
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 30000));
        cr_assert_eq(test_consumer_read(&cons, 60000), 0);
        char out[4096];
        read_log(fd, out, sizeof(out));
        cr_assert(strstr(out, "wrote 2000 packets of 1000 bytes, dropped 0"), "producer log: %s", out);
        cr_assert_eq(example_check_packets(cons.data, cons.len, 1000), 2000);
        test_consumer_free(&cons);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        logged_pid = 0;
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
        close(fd);
}

/* A writer on the loop thread (writing without end once its start was
 * acknowledged),
 * STALL_THEN_DROP through a 64 KiB SMB, when the session ends: the loop
 * cannot handle the service's StopDataSource meanwhile, so the writer
 * looks for it in what the service sent each time it needs a chunk. From
 * then on its writes are refused (-ESHUTDOWN), at once, instead of going
 * on reported as written into a session that is gone: the producer gives
 * up long before its million packets. */
Test(client, loop_thread_writer_is_refused_once_its_session_ended, .init = setup, .fini = teardown_logged,
     .timeout = 120) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "1000000", (char *) "--size", (char *) "1000", (char *) "--smb-kb", (char *) "64",
                         (char *) "--after-start", (char *) "--once", NULL };
        int fd;
        pid_t pid = spawn_logged(argv, &fd);
        cr_assert(wait_log(fd, "ready", 1, 10000), "the producer did not start");
        spin_ms(ev, 200);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(4 * 1024, "example.data", 500);
        /* The flush before the end times out: the producer's loop is busy. */
        cfg->has_flush_timeout_ms = true;
        cfg->flush_timeout_ms = 200;
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 30000));
        test_consumer_free(&cons);
        if (!wait_log(fd, "packets of 1000 bytes, dropped", 1, 60000)) {
                char log[4096];
                read_log(fd, log, sizeof(log));
                int wst = 0;
                pid_t wp = waitpid(pid, &wst, WNOHANG);
                cr_assert_fail("the producer did not finish (%s, status 0x%x):\n%s", wp == pid ? "exited" : "running",
                               wst, log);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        logged_pid = 0;
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
        char out[4096];
        read_log(fd, out, sizeof(out));
        close(fd);
        const char *w = strstr(out, "wrote ");
        unsigned long written = 0, dropped = 0;
        cr_assert(w && sscanf(w, "wrote %lu packets of 1000 bytes, dropped %lu", &written, &dropped) == 2,
                  "producer log: %s", out);
        cr_assert_eq(written + dropped, 1000000);
        cr_assert_gt(written, 0, "producer log: %s", out);
        cr_assert_gt(dropped, 0, "every packet was reported written, the session long gone: %s", out);
        cr_log_info("written %lu, refused %lu", written, dropped);
}

/* The service goes away while four threads write (and stall on a small
 * SMB): the instance gets its stop, the writers drop what follows without
 * touching the old SMB, the producer connects again, and a new session
 * records every packet of every thread whole and in order. */
Test(client, service_restart_while_threads_write, .init = setup, .fini = teardown_logged, .timeout = 120) {
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "3000", (char *) "--size", (char *) "300", (char *) "--smb-kb", (char *) "64",
                         (char *) "--threads", (char *) "4", (char *) "--reconnect", NULL };
        int fd;
        pid_t pid = spawn_logged(argv, &fd);
        cr_assert(wait_log(fd, "ready", 1, 10000), "the producer did not start");
        spin_ms(ev, 200);

        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(64 * 1024, "example.data", 60000);
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(wait_log(fd, "4 threads writing", 1, 10000), "the instance did not start");
        /* In the middle of writing. */
        cr_assert_eq(traced_instance_stop(&inst), 0, "traced did not stop cleanly");
        test_consumer_free(&cons);
        cr_assert(wait_log(fd, "the service went away", 1, 10000));
        /* The stop callback ran: the threads finished and were reaped. */
        cr_assert(wait_log(fd, "packets of 300 bytes, dropped", 1, 20000), "the instance was not stopped");
        cr_assert_eq(traced_instance_restart(&inst, false, NULL), 0);
        cr_assert(wait_log(fd, "connected again (1)", 1, 20000), "the producer did not connect again");
        spin_ms(ev, 200);

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        /* Long enough for 3.6 MB through the small SMB (and under the
         * service's 8 MiB send queue for ReadBuffers). */
        cfg = test_config_new(64 * 1024, "example.data", 15000);
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(wait_log(fd, "4 threads writing", 2, 10000), "no instance on the new connection");
        cr_assert(test_consumer_wait_disabled(&cons, 60000));
        int rr = test_consumer_read(&cons, 90000);
        if (rr != 0)
                traced_instance_dump_log(&inst);
        cr_assert_eq(rr, 0, "ReadBuffers: %s", strerror(-rr));
        unsigned good = example_check_sequences(cons.data, cons.len, 300, 3000);
        cr_assert_eq(good, 4, "%u of 4 thread sequences arrived whole and in order", good);
        test_consumer_free(&cons);

        cr_assert_eq(kill(pid, SIGTERM), 0);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        logged_pid = 0;
        cr_assert(WIFEXITED(st), "example-producer crashed");
        char out[4096];
        read_log(fd, out, sizeof(out));
        cr_log_info("producer log: %s", out);
        close(fd);
}

/* One writer thread outruns the service through a 64 KiB SMB with the
 * DROP policy: most 20 KB packets are given up part-way, their first
 * fragments already handed over. Every packet the producer reports as
 * written must be in the trace, in order and whole, each one after a loss
 * must say so (previous_packet_dropped), and the service must have seen
 * the drops as the ABI writes them (fragments with the drop-packet size),
 * not as chains that break or chunk ids that skip: a strict service
 * (upstream Perfetto's) stops reading a sequence at either. */
Test(client, drops_mid_fragment_lose_nothing_after_them, .init = setup, .fini = teardown_logged, .timeout = 120) {
        /* Bursts of 50 packets (1 MB) with a pause after each, in which the
         * service empties the SMB: drops then fall between packets that
         * are written, however fast the writer is. */
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", (char *) producer_address, (char *) "--packets",
                         (char *) "1500", (char *) "--size", (char *) "20000", (char *) "--smb-kb", (char *) "64",
                         (char *) "--threads", (char *) "1", (char *) "--burst", (char *) "50", (char *) "--pause-ms",
                         (char *) "20", (char *) "--once", NULL };
        int fd;
        pid_t pid = spawn_logged(argv, &fd);
        cr_assert(wait_log(fd, "ready", 1, 10000), "the producer did not start");
        spin_ms(ev, 200);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(64 * 1024, "example.data", 4000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 60000), "the session did not end");
        cr_assert_eq(test_consumer_read(&cons, 60000), 0);
        cr_assert(wait_log(fd, "wrote ", 1, 20000), "the producer did not report");
        char out[4096];
        read_log(fd, out, sizeof(out));
        const char *w = strstr(out, "wrote ");
        unsigned long written = 0, dropped = 0;
        cr_assert(w && sscanf(w, "wrote %lu packets of 20000 bytes, dropped %lu", &written, &dropped) == 2,
                  "producer log: %s", out);
        cr_assert_gt(dropped, 0, "nothing was dropped: the SMB never filled (%s)", out);
        cr_assert_gt(written, 0);

        static struct pbr_field pkts[100000];
        int n = pbr_split_trace(cons.data, cons.len, pkts, 100000);
        cr_assert_geq(n, 0);
        char *expected = malloc(20000);
        unsigned long found = 0, after_gap = 0;
        uint64_t next = 0;
        struct pbr_field stats = {};
        bool have_stats = false;
        for (int i = 0; i < n; i++) {
                struct pbr_field t, str, seq, lost;
                if (pbr_get(pkts[i].data, pkts[i].len, 35, false, &stats))
                        have_stats = true;
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t))
                        continue;
                cr_assert(pbr_get(t.data, t.len, 1, false, &str));
                uint64_t v = pbr_get(t.data, t.len, 2, false, &seq) ? seq.varint : 0;
                cr_assert_geq(v, next, "packet %llu after %llu: out of order", (unsigned long long) v,
                              (unsigned long long) next);
                if (v > next) {
                        after_gap++;
                        cr_assert(pbr_get(pkts[i].data, pkts[i].len, 42, true, &lost) && lost.varint != 0,
                                  "packet %llu follows lost ones but does not say so", (unsigned long long) v);
                }
                for (size_t k = 0; k < 20000; k++)
                        expected[k] = (char) ('a' + (v + k) % 26);
                cr_assert_eq(str.len, 20000);
                cr_assert_arr_eq(str.data, expected, 20000, "packet %llu corrupted", (unsigned long long) v);
                next = v + 1;
                found++;
        }
        free(expected);
        cr_assert_eq(found, written, "%lu packets in the trace, the producer wrote %lu (dropped %lu)", found, written,
                     dropped);
        cr_assert_gt(after_gap, 0);

        /* The service's view, from the trace's TraceStats. */
        cr_assert(have_stats, "no trace_stats packet");
        struct pbr_field buf, v;
        cr_assert(pbr_get(stats.data, stats.len, 1, false, &buf), "no buffer_stats");
        cr_assert(pbr_get(buf.data, buf.len, 19, true, &v) && v.varint > 0,
                  "no fragment with the drop-packet size reached the service");
        cr_assert(!pbr_get(buf.data, buf.len, 8, true, &v) || v.varint == 0,
                  "%llu readaheads failed: a fragment chain was left dangling", (unsigned long long) v.varint);
        cr_assert(!pbr_get(buf.data, buf.len, 9, true, &v) || v.varint == 0, "%llu ABI violations",
                  (unsigned long long) v.varint);

        test_consumer_free(&cons);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        logged_pid = 0;
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
        close(fd);
}

