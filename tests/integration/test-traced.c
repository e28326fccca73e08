/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The real traced, started through systemd-socket-activate, driven by a
 * producer and a consumer over its sockets; the written traces are
 * decoded and checked field by field. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/macro.h"
#include "ipc/ipc-frame.h"
#include "basic/pbr.h"
#include "raw-producer.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/common/trace_stats.pb-c.h"
#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"

/* TracePacket fields checked here (Perfetto ABI numbers). */
enum {
        F_TRUSTED_UID = 3,
        F_CLOCK_SNAPSHOT = 6,
        F_TIMESTAMP = 8,
        F_TRUSTED_SEQ = 10,
        F_TRACE_CONFIG = 33,
        F_TRACE_STATS = 35,
        F_SYNC_MARKER = 36,
        F_SYSTEM_INFO = 45,
        F_SERVICE_EVENT = 69,
        F_TRUSTED_PID = 79,
        F_FIRST_ON_SEQ = 87,
        F_TRACE_UUID = 89,
        F_FOR_TESTING = 900,
};

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(sd_event_new(&ev), 0);
        int r = traced_instance_start(&inst, true);
        cr_assert_eq(r, 0, "could not start traced: %s", strerror(-r));
}

static void teardown(void) {
        int st = traced_instance_destroy(&inst);
        cr_expect_eq(st, 0, "traced exited with status %d", st);
        ev = sd_event_unref(ev);
}

TestSuite(traced, .init = setup, .fini = teardown, .timeout = 60);

struct trace_check {
        size_t n_packets;
        size_t n_clock, n_config, n_sysinfo, n_stats, n_sync, n_uuid, n_events;
        size_t n_test;
        uint32_t seq_of_test;
        bool seqs_ok;
        bool payload_ok;
        bool trusted_ok;
        size_t n_first;
        uint32_t next_expected;
        size_t payload_size;
        int32_t test_pid;
        uint64_t invalid_packets;
};

static void check_trace(const uint8_t *buf, size_t len, size_t payload_size, struct trace_check *k) {
        static struct pbr_field pkts[200000];
        memset(k, 0, sizeof(*k));
        k->seqs_ok = k->payload_ok = k->trusted_ok = true;
        k->payload_size = payload_size;
        int n = pbr_split_trace(buf, len, pkts, ELEMENTSOF(pkts));
        cr_assert_geq(n, 0, "the trace does not parse as a Trace");
        k->n_packets = (size_t) n;
        char *expected = malloc(payload_size + 1);
        for (int i = 0; i < n && (size_t) i < ELEMENTSOF(pkts); i++) {
                const uint8_t *p = pkts[i].data;
                size_t l = pkts[i].len;
                struct pbr_field f, g;
                /* Producer packets carry the producer's uid (ours); the
                 * service's own packets the service core's, which is not
                 * root when traced started as root. */
                if (!pbr_get(p, l, F_TRUSTED_SEQ, false, &f) || !pbr_get(p, l, F_TRUSTED_UID, false, &g) ||
                    (f.varint == 1 ? (getuid() == 0 && g.varint == 0) : g.varint != (uint64_t) getuid()))
                        k->trusted_ok = false;
                if (pbr_count(p, l, F_TRUSTED_SEQ) != 1 || pbr_count(p, l, F_TRUSTED_UID) != 1)
                        k->trusted_ok = false;
                k->n_clock += pbr_count(p, l, F_CLOCK_SNAPSHOT);
                k->n_config += pbr_count(p, l, F_TRACE_CONFIG);
                k->n_sysinfo += pbr_count(p, l, F_SYSTEM_INFO);
                k->n_stats += pbr_count(p, l, F_TRACE_STATS);
                k->n_sync += pbr_count(p, l, F_SYNC_MARKER);
                k->n_uuid += pbr_count(p, l, F_TRACE_UUID);
                k->n_events += pbr_count(p, l, F_SERVICE_EVENT);
                k->n_first += pbr_count(p, l, F_FIRST_ON_SEQ);
                if (pbr_get(p, l, F_TRACE_STATS, false, &f)) {
                        Perfetto__Protos__TraceStats *st = perfetto__protos__trace_stats__unpack(NULL, f.len, f.data);
                        cr_assert_not_null(st, "TraceStats does not decode");
                        k->invalid_packets = st->invalid_packets;
                        cr_assert_geq(st->n_buffer_stats, 1);
                        perfetto__protos__trace_stats__free_unpacked(st, NULL);
                }
                if (pbr_get(p, l, F_FOR_TESTING, false, &f)) {
                        struct pbr_field str, seq, seqid, pid;
                        k->n_test++;
                        cr_assert(pbr_get(f.data, f.len, 1, false, &str));
                        cr_assert(pbr_get(f.data, f.len, 2, false, &seq));
                        if (seq.varint != k->next_expected)
                                k->seqs_ok = false;
                        k->next_expected = (uint32_t) seq.varint + 1;
                        raw_producer_payload((uint32_t) seq.varint, payload_size, expected);
                        if (str.len != payload_size || memcmp(str.data, expected, payload_size) != 0)
                                k->payload_ok = false;
                        cr_assert(pbr_get(p, l, F_TRUSTED_SEQ, false, &seqid));
                        k->seq_of_test = (uint32_t) seqid.varint;
                        if (!pbr_get(p, l, F_TRUSTED_PID, false, &pid) || pid.varint != (uint64_t) getpid())
                                k->trusted_ok = false;
                }
        }
        free(expected);
}

static bool ds_started(struct raw_producer *p) {
        return p->n_start > 0;
}

static bool registered(struct raw_producer *p) {
        return p->registered;
}

static void run_session(size_t n_packets, size_t payload_size, uint32_t page_size, bool to_file,
                        struct trace_check *k) {
        struct raw_producer prod;
        struct test_consumer cons;
        int fd = -EBADF;
        char path[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "test-producer", "test.data", 2 * 1024 * 1024,
                                          page_size),
                     0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000), "data source not registered");
        prod.packets_at_start = (unsigned) n_packets;
        prod.payload_size = payload_size;

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(16 * 1024, "test.data", 1000);
        if (to_file) {
                snprintf(path, sizeof(path), "%s/trace.pftrace", inst.dir);
                fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                cr_assert_geq(fd, 0);
                cfg->has_write_into_file = true;
                cfg->write_into_file = true;
                cfg->has_file_write_period_ms = true;
                cfg->file_write_period_ms = 100;
        }
        cr_assert_eq(test_consumer_enable(&cons, cfg, fd), 0);
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000), "data source never started");
        cr_assert_eq(prod.n_setup_tracing, 1, "SetupTracing (with the SMB fd) not received once");
        cr_assert_eq(prod.n_setup, 1);
        cr_assert(test_consumer_wait_disabled(&cons, 10000), "EnableTracing was never answered");
        cr_assert(cons.disabled, "EnableTracing reply does not say disabled");
        cr_assert_str_eq(cons.error, "");
        cr_assert_geq(prod.n_flush, 1, "no flush before stop");
        spin_ms(ev, 50);
        cr_assert_eq(prod.n_stop, 1);

        if (to_file) {
                struct stat st;
                cr_assert_eq(fstat(fd, &st), 0);
                uint8_t *buf = malloc((size_t) st.st_size + 1);
                cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
                check_trace(buf, (size_t) st.st_size, payload_size, k);
                free(buf);
                close(fd);
                /* Reading a file session's buffers is refused. */
                cr_assert_neq(test_consumer_read(&cons, 5000), 0);
        } else {
                cr_assert_eq(test_consumer_read(&cons, 10000), 0);
                check_trace(cons.data, cons.len, payload_size, k);
        }
        Perfetto__Protos__FreeBuffersRequest fr = PERFETTO__PROTOS__FREE_BUFFERS_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "FreeBuffers", &fr.base, &perfetto__protos__free_buffers_response__descriptor,
                                        NULL, 5000),
                     0);
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

static void assert_complete_trace(const struct trace_check *k, size_t n_packets) {
        cr_assert_geq(k->n_clock, 1, "no ClockSnapshot");
        cr_assert_eq(k->n_config, 1, "no TraceConfig");
        cr_assert_eq(k->n_sysinfo, 1, "no SystemInfo");
        cr_assert_eq(k->n_uuid, 1, "no TraceUuid");
        cr_assert_geq(k->n_sync, 1, "no synchronization marker");
        cr_assert_geq(k->n_stats, 1, "no TraceStats");
        cr_assert_geq(k->n_events, 2, "no service events");
        cr_assert_eq(k->n_test, n_packets, "got %zu of %zu producer packets", k->n_test, n_packets);
        cr_assert(k->seqs_ok, "producer packets out of order or missing");
        cr_assert(k->payload_ok, "producer packet payload corrupted");
        cr_assert(k->trusted_ok, "trusted fields missing or wrong");
        cr_assert_geq(k->seq_of_test, 2, "producer sequence id must differ from the service's");
        cr_assert_eq(k->n_first, 1, "first_packet_on_sequence must mark exactly one packet");
}

Test(traced, socket_activated_session_read_back) {
        struct trace_check k;
        run_session(200, 100, 4096, false, &k);
        assert_complete_trace(&k, 200);
}

Test(traced, write_into_file_small_packets) {
        struct trace_check k;
        run_session(500, 64, 4096, true, &k);
        assert_complete_trace(&k, 500);
}

Test(traced, packets_spanning_many_chunks) {
        struct trace_check k;
        /* 4 KiB pages cut in 4: ~1 KiB chunks; 20 KiB packets span ~20. */
        run_session(20, 20000, 4096, true, &k);
        assert_complete_trace(&k, 20);
}

Test(traced, large_pages) {
        struct trace_check k;
        run_session(300, 3000, 32768, false, &k);
        assert_complete_trace(&k, 300);
}

Test(traced, config_errors_are_reported) {
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 100);
        /* More buffers than upstream allows (128); none is fine. */
        Perfetto__Protos__TraceConfig__BufferConfig **one = cfg->buffers;
        cfg->n_buffers = 129;
        cfg->buffers = calloc(129, sizeof(void *));
        for (size_t i = 0; i < 129; i++)
                cfg->buffers[i] = one[0];
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        free(cfg->buffers);
        cfg->buffers = one;
        cfg->n_buffers = 1;
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 5000));
        cr_assert(strstr(cons.error, "buffers") != NULL, "error was \"%s\"", cons.error);

        cfg = test_config_new(1024, "test.data", 100);
        cfg->has_write_into_file = true;
        cfg->write_into_file = true;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 5000));
        cr_assert(strstr(cons.error, "file descriptor") != NULL, "error was \"%s\"", cons.error);
        test_consumer_free(&cons);
}

Test(traced, unsupported_methods_answer_not_hang) {
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__ChangeTraceConfigRequest req = PERFETTO__PROTOS__CHANGE_TRACE_CONFIG_REQUEST__INIT;
        int r = test_consumer_call(&cons, "ChangeTraceConfig", &req.base,
                                   &perfetto__protos__change_trace_config_response__descriptor, NULL, 5000);
        cr_assert_eq(r, -EREMOTEIO, "ChangeTraceConfig answered %d", r);

        /* Cloning a session that does not exist. */
        Perfetto__Protos__CloneSessionRequest cl = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
        cl.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
        cl.session_id = 424242;
        ProtobufCMessage *reply = NULL;
        r = test_consumer_call(&cons, "CloneSession", &cl.base, &perfetto__protos__clone_session_response__descriptor,
                               &reply, 5000);
        cr_assert_eq(r, 0);
        const Perfetto__Protos__CloneSessionResponse *cr = (const void *) reply;
        cr_assert(cr->has_success && !cr->success);
        cr_assert_not_null(cr->error);
        protobuf_c_message_free_unpacked(reply, NULL);
        test_consumer_free(&cons);
}

Test(traced, query_service_state_lists_producers) {
        struct raw_producer prod;
        struct test_consumer cons;
        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "qss-producer", "qss.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__QueryServiceStateRequest req = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(&cons, "QueryServiceState", &req.base,
                                        &perfetto__protos__query_service_state_response__descriptor, &reply, 5000),
                     0);
        const Perfetto__Protos__QueryServiceStateResponse *r = (const void *) reply;
        cr_assert_not_null(r->service_state);
        bool found_p = false, found_ds = false;
        for (size_t i = 0; i < r->service_state->n_producers; i++)
                if (r->service_state->producers[i]->name &&
                    strcmp(r->service_state->producers[i]->name, "qss-producer") == 0) {
                        found_p = true;
                        cr_assert_eq(r->service_state->producers[i]->pid, getpid());
                }
        for (size_t i = 0; i < r->service_state->n_data_sources; i++)
                if (r->service_state->data_sources[i]->ds_descriptor &&
                    strcmp(r->service_state->data_sources[i]->ds_descriptor->name, "qss.data") == 0)
                        found_ds = true;
        cr_assert(found_p, "producer not listed");
        cr_assert(found_ds, "data source not listed");
        protobuf_c_message_free_unpacked(reply, NULL);
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

static bool lost(struct raw_producer *p) {
        return p->connection_lost;
}

Test(traced, malformed_producer_only_loses_its_connection) {
        struct raw_producer good, bad;
        struct test_consumer cons;

        cr_assert_eq(raw_producer_connect(&good, ev, inst.producer_path, "good", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&good, registered, 5000));
        cr_assert_eq(raw_producer_connect(&bad, ev, inst.producer_path, "bad", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&bad, registered, 5000));
        good.packets_at_start = 50;
        good.payload_size = 10;

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(4096, "test.data", 1500);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&bad, ds_started, 5000));

        /* A chunk far outside its SMB. */
        Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
        Perfetto__Protos__CommitDataRequest__ChunksToMove mv = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
        Perfetto__Protos__CommitDataRequest__ChunksToMove *mvp = &mv;
        mv.has_page = mv.has_chunk = mv.has_target_buffer = true;
        mv.page = 100000;
        mv.chunk = 0;
        mv.target_buffer = bad.target_buffer;
        req.n_chunks_to_move = 1;
        req.chunks_to_move = &mvp;
        cr_assert_gt(ipc_client_invoke(bad.client, "CommitData", &req.base, NULL, -EBADF, NULL, NULL), 0);
        cr_assert(raw_producer_spin_until(&bad, lost, 5000), "the misbehaving producer kept its connection");

        cr_assert(test_consumer_wait_disabled(&cons, 10000));
        cr_assert(cons.disabled);
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        struct trace_check k;
        check_trace(cons.data, cons.len, 10, &k);
        cr_assert_eq(k.n_test, 50, "the good producer's packets were lost");
        cr_assert(k.payload_ok);
        cr_assert(traced_instance_alive(&inst));
        test_consumer_free(&cons);
        raw_producer_free(&bad);
        raw_producer_free(&good);
}

Test(traced, garbage_frames_cost_only_that_connection) {
        struct raw_producer good;
        cr_assert_eq(raw_producer_connect(&good, ev, inst.producer_path, "good", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&good, registered, 5000));

        for (int variant = 0; variant < 3; variant++) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                const char *target = variant == 1 ? inst.consumer_path : inst.producer_path;
                cr_assert_lt(strlen(target), sizeof(sa.sun_path));
                memcpy(sa.sun_path, target, strlen(target) + 1);
                cr_assert_eq(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
                static const uint8_t huge[] = { 0xff, 0xff, 0xff, 0x7f };
                static const uint8_t junk[] = { 6, 0, 0, 0, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff };
                if (variant == 2)
                        cr_assert_eq(write(fd, junk, sizeof(junk)), (ssize_t) sizeof(junk));
                else
                        cr_assert_eq(write(fd, huge, sizeof(huge)), (ssize_t) sizeof(huge));
                char c;
                struct timeval tv = { .tv_sec = 5 };
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                cr_assert_eq(read(fd, &c, 1), 0, "variant %d: connection not closed", variant);
                close(fd);
        }
        spin_ms(ev, 50);
        cr_assert(traced_instance_alive(&inst));
        cr_assert_not(good.connection_lost, "an innocent producer was disconnected");
        raw_producer_free(&good);
}

Test(traced, detach_and_attach) {
        struct raw_producer prod;
        struct test_consumer a, b;

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 30;
        prod.payload_size = 20;
        cr_assert_eq(test_consumer_connect(&a, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cr_assert_eq(test_consumer_enable(&a, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));

        Perfetto__Protos__DetachRequest dr = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
        dr.key = (char *) "my-key";
        cr_assert_eq(test_consumer_call(&a, "Detach", &dr.base, &perfetto__protos__detach_response__descriptor, NULL,
                                        5000),
                     0);
        test_consumer_free(&a);
        spin_ms(ev, 100);
        cr_assert_eq(prod.n_stop, 0, "a detached session must keep running");

        cr_assert_eq(test_consumer_connect(&b, ev, inst.consumer_path), 0);
        Perfetto__Protos__AttachRequest ar = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
        ar.key = (char *) "my-key";
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(&b, "Attach", &ar.base, &perfetto__protos__attach_response__descriptor, &reply,
                                        5000),
                     0);
        const Perfetto__Protos__AttachResponse *at = (const void *) reply;
        cr_assert_not_null(at->trace_config);
        cr_assert_eq(at->trace_config->n_buffers, 1);
        protobuf_c_message_free_unpacked(reply, NULL);

        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        Perfetto__Protos__EnableTracingRequest en = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
        en.has_attach_notification_only = true;
        en.attach_notification_only = true;
        b.enable_replied = false;
        cr_assert_gt(ipc_client_invoke(b.client, "EnableTracing", &en.base,
                                       &perfetto__protos__enable_tracing_response__descriptor, -EBADF, NULL, NULL),
                     0);
        cr_assert_eq(test_consumer_call(&b, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        spin_ms(ev, 300);
        cr_assert_eq(test_consumer_read(&b, 10000), 0);
        struct trace_check k;
        check_trace(b.data, b.len, 20, &k);
        cr_assert_eq(k.n_test, 30);
        test_consumer_free(&b);
        raw_producer_free(&prod);
}

Test(traced, sigterm_finishes_trace_file) {
        struct raw_producer prod;
        struct test_consumer cons;
        char path[512];

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 40;
        prod.payload_size = 50;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        snprintf(path, sizeof(path), "%s/term.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cfg->has_write_into_file = true;
        cfg->write_into_file = true;
        cr_assert_eq(test_consumer_enable(&cons, cfg, fd), 0);
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));
        spin_ms(ev, 100);
        int status = traced_instance_stop(&inst);
        if (status != 0)
                traced_instance_dump_log(&inst);
        cr_assert_eq(status, 0, "traced exited with %d", status);

        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t) st.st_size + 1);
        cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        struct trace_check k;
        check_trace(buf, (size_t) st.st_size, 50, &k);
        cr_assert_eq(k.n_test, 40, "committed packets lost at shutdown");
        cr_assert_eq(k.n_config, 1);
        free(buf);
        close(fd);
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

Test(traced, late_data_source_joins_running_session) {
        struct raw_producer late;
        struct test_consumer cons;

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "late.data", 0);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        spin_ms(ev, 100);
        /* The producer appears after the session started. */
        cr_assert_eq(raw_producer_connect(&late, ev, inst.producer_path, "late", "late.data", 0, 0), 0);
        late.packets_at_start = 10;
        late.payload_size = 8;
        cr_assert(raw_producer_spin_until(&late, ds_started, 5000), "late data source was not started");
        spin_ms(ev, 100);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 10000));
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        struct trace_check k;
        check_trace(cons.data, cons.len, 8, &k);
        if (k.n_test != 10)
                traced_instance_dump_log(&inst);
        cr_assert_eq(k.n_test, 10, "got %zu packets; producer saw setup_tracing=%d setup=%d start=%d flush=%d stop=%d",
                     k.n_test, late.n_setup_tracing, late.n_setup, late.n_start, late.n_flush, late.n_stop);
        test_consumer_free(&cons);
        raw_producer_free(&late);
}

Test(traced, producer_written_trusted_fields_are_rejected) {
        struct raw_producer prod;
        struct test_consumer cons;

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "spoofer", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 5;
        prod.payload_size = 4;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 1500);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));
        /* A packet claiming trusted_uid = 0 (field 3) must be dropped. */
        uint8_t spoof[] = { 0x18, 0x00, 0x50, 0x01 };
        struct smb_chunk c;
        bool ok = false;
        for (size_t page = 0; page < prod.abi.num_pages && !ok; page++) {
                if (smb_page_bitmap(&prod.abi, page) == 0)
                        (void) smb_try_partition_page(&prod.abi, page, SMB_PAGE_DIV4);
                for (size_t i = 0; i < 4 && !ok; i++) {
                        c = smb_try_acquire_chunk_for_writing(&prod.abi, page, i, 2, 0);
                        ok = smb_chunk_is_valid(&c);
                }
        }
        cr_assert(ok);
        uint8_t *d = smb_chunk_payload(&c);
        d[0] = 0x84;
        d[1] = 0x80;
        d[2] = 0x80;
        d[3] = 0x00;
        memcpy(d + 4, spoof, sizeof(spoof));
        atomic_store(&smb_chunk_header(&c)->packets, smb_packets_pack(1, 0));
        size_t page, idx;
        cr_assert_eq(smb_chunk_location(&prod.abi, &c, &page, &idx), 0);
        cr_assert_geq(smb_release_chunk_as_complete(&prod.abi, &c), 0);
        prod.pending[prod.n_pending].page = (uint32_t) page;
        prod.pending[prod.n_pending].chunk = (uint32_t) idx;
        prod.n_pending++;
        cr_assert_eq(raw_producer_commit(&prod, 0), 0);

        cr_assert(test_consumer_wait_disabled(&cons, 10000));
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        struct trace_check k;
        check_trace(cons.data, cons.len, 4, &k);
        cr_assert_eq(k.n_test, 5);
        cr_assert(k.trusted_ok, "a spoofed trusted field reached the trace");
        cr_assert_eq(k.invalid_packets, 1, "the spoofed packet was not counted as invalid");
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

Test(traced, clone_session_snapshots_a_running_session) {
        struct raw_producer prod;
        struct test_consumer a, b;

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "p", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 25;
        prod.payload_size = 12;
        cr_assert_eq(test_consumer_connect(&a, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cfg->unique_session_name = strdup("clone-me");
        cr_assert_eq(test_consumer_enable(&a, cfg, -EBADF), 0);
        free(cfg->unique_session_name);
        cfg->unique_session_name = NULL;
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));
        spin_ms(ev, 100);

        cr_assert_eq(test_consumer_connect(&b, ev, inst.consumer_path), 0);
        Perfetto__Protos__CloneSessionRequest cl = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
        cl.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
        cl.unique_session_name = (char *) "clone-me";
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(&b, "CloneSession", &cl.base,
                                        &perfetto__protos__clone_session_response__descriptor, &reply, 10000),
                     0);
        const Perfetto__Protos__CloneSessionResponse *cr = (const void *) reply;
        cr_assert(cr->success, "clone failed: %s", cr->error ? cr->error : "");
        protobuf_c_message_free_unpacked(reply, NULL);
        cr_assert_geq(prod.n_flush, 1, "the source was not flushed before cloning");

        cr_assert_eq(test_consumer_read(&b, 10000), 0);
        struct trace_check k;
        check_trace(b.data, b.len, 12, &k);
        cr_assert_eq(k.n_test, 25, "the clone holds %zu of 25 packets", k.n_test);
        cr_assert_eq(prod.n_stop, 0, "cloning must not stop the source session");

        /* The source still has its own copy. */
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&a, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&a, 10000));
        cr_assert_eq(test_consumer_read(&a, 10000), 0);
        check_trace(a.data, a.len, 12, &k);
        cr_assert_eq(k.n_test, 25);
        test_consumer_free(&a);
        test_consumer_free(&b);
        raw_producer_free(&prod);
}

Test(traced, change_trace_config_adds_producers) {
        struct raw_producer p1, p2;
        struct test_consumer cons;

        cr_assert_eq(raw_producer_connect(&p1, ev, inst.producer_path, "first", "test.data", 0, 0), 0);
        cr_assert_eq(raw_producer_connect(&p2, ev, inst.producer_path, "second", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&p1, registered, 5000));
        cr_assert(raw_producer_spin_until(&p2, registered, 5000));
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        char *only_first[] = { (char *) "first" };
        cfg->data_sources[0]->n_producer_name_filter = 1;
        cfg->data_sources[0]->producer_name_filter = only_first;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        cr_assert(raw_producer_spin_until(&p1, ds_started, 5000));
        spin_ms(ev, 100);
        cr_assert_eq(p2.n_start, 0, "the filter let the second producer in");

        char *both[] = { (char *) "first", (char *) "second" };
        cfg->data_sources[0]->n_producer_name_filter = 2;
        cfg->data_sources[0]->producer_name_filter = both;
        Perfetto__Protos__ChangeTraceConfigRequest ch = PERFETTO__PROTOS__CHANGE_TRACE_CONFIG_REQUEST__INIT;
        ch.trace_config = cfg;
        cr_assert_eq(test_consumer_call(&cons, "ChangeTraceConfig", &ch.base,
                                        &perfetto__protos__change_trace_config_response__descriptor, NULL, 5000),
                     0);
        cr_assert(raw_producer_spin_until(&p2, ds_started, 5000), "the new filter did not start the second producer");
        cfg->data_sources[0]->n_producer_name_filter = 0;
        cfg->data_sources[0]->producer_name_filter = NULL;
        test_config_free(cfg);
        test_consumer_free(&cons);
        raw_producer_free(&p1);
        raw_producer_free(&p2);
}

/* TraceConfig.producers sizes the shared memory of the producer it names
 * (over that producer's own hints); a producer it does not name keeps its
 * hints. */
Test(traced, producer_config_sizes_shared_memory) {
        struct raw_producer named, other;
        struct test_consumer cons;

        cr_assert_eq(raw_producer_connect(&named, ev, inst.producer_path, "named", "test.data", 2 * 1024 * 1024, 4096),
                     0);
        cr_assert_eq(raw_producer_connect(&other, ev, inst.producer_path, "other", "test.data", 512 * 1024, 4096), 0);
        cr_assert(raw_producer_spin_until(&named, registered, 5000));
        cr_assert(raw_producer_spin_until(&other, registered, 5000));
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        Perfetto__Protos__TraceConfig__ProducerConfig pc = PERFETTO__PROTOS__TRACE_CONFIG__PRODUCER_CONFIG__INIT;
        pc.producer_name = (char *) "named";
        pc.has_shm_size_kb = pc.has_page_size_kb = true;
        pc.shm_size_kb = 64;
        pc.page_size_kb = 8;
        Perfetto__Protos__TraceConfig__ProducerConfig *pcs[] = { &pc };
        cfg->n_producers = 1;
        cfg->producers = pcs;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        cr_assert(raw_producer_spin_until(&named, ds_started, 5000));
        cr_assert(raw_producer_spin_until(&other, ds_started, 5000));
        cr_assert(named.smb_ready && other.smb_ready, "a shared memory buffer was not set up");
        cr_assert_eq(named.smb_size, 64 * 1024, "the named producer's buffer: %zu bytes", named.smb_size);
        cr_assert_eq(named.abi.page_size, 8192, "the named producer's pages: %zu bytes", named.abi.page_size);
        cr_assert_eq(other.smb_size, 512 * 1024, "the other producer's buffer: %zu bytes", other.smb_size);
        cr_assert_eq(other.abi.page_size, 4096);
        cfg->n_producers = 0;
        cfg->producers = NULL;
        test_config_free(cfg);
        test_consumer_free(&cons);
        raw_producer_free(&named);
        raw_producer_free(&other);
}
