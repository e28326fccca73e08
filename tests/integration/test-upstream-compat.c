/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What upstream Perfetto's own clients expect of the service, checked
 * against the real traced (socket-activated): bugreport snapshots,
 * clones of write_into_file sessions, sessions without buffers, detached
 * sessions that end, trigger packets, START_TRACING durations and
 * CLONE_SNAPSHOT triggers. Each test decodes the trace it gets. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "raw-producer.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/common/observable_events.pb-c.h"
#include "perfetto/common/tracing_service_capabilities.pb-c.h"
#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/config/trace_config.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"

/* TracePacket fields (Perfetto ABI numbers). */
enum {
        F_TIMESTAMP = 8,
        F_TRACE_CONFIG = 33,
        F_TRIGGER = 46,
        F_CLONE_SNAPSHOT_TRIGGER = 113,
        F_FOR_TESTING = 900,
};

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev));
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev));
}

TestSuite(upstream_compat, .init = setup, .fini = teardown, .timeout = 90);

static bool registered(struct raw_producer *p) {
        return p->registered;
}

static bool ds_started(struct raw_producer *p) {
        return p->n_start > 0;
}

static uint8_t *read_file(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "cannot open %s: %m", path);
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                if (len == cap) {
                        cap = cap ? cap * 2 : 65536;
                        buf = realloc(buf, cap);
                        cr_assert_not_null(buf);
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                if (n == 0)
                        break;
                len += n;
        }
        fclose(f);
        *ret_len = len;
        return buf;
}

struct trace_info {
        size_t n_packets;
        size_t n_test;
        unsigned seq_count[256]; /* for_testing packets by seq_value */
        size_t n_config;
        size_t n_trigger, n_clone_trigger;
        char trigger_name[8][64];
        char trigger_producer[8][64];
        int64_t trigger_uid[8];
        char clone_trigger_name[64];
        uint32_t config_duration_ms;
        int32_t config_bugreport_score;
        char config_session_name[64];
};

static void copy_str(char *dst, size_t n, const struct pbr_field *f) {
        size_t l = MIN(f->len, n - 1);
        memcpy(dst, f->data, l);
        dst[l] = '\0';
}

static void decode_trace(const uint8_t *buf, size_t len, struct trace_info *k) {
        static struct pbr_field pkts[100000];
        memset(k, 0, sizeof(*k));
        int n = pbr_split_trace(buf, len, pkts, ELEMENTSOF(pkts));
        cr_assert_geq(n, 0, "the trace does not parse as a Trace");
        k->n_packets = (size_t) n;
        for (int i = 0; i < n; i++) {
                const uint8_t *p = pkts[i].data;
                size_t l = pkts[i].len;
                struct pbr_field f, g;
                if (pbr_get(p, l, F_FOR_TESTING, false, &f)) {
                        k->n_test++;
                        if (pbr_get(f.data, f.len, 2, false, &g) && g.varint < ELEMENTSOF(k->seq_count))
                                k->seq_count[g.varint]++;
                }
                if (pbr_get(p, l, F_TRACE_CONFIG, false, &f)) {
                        k->n_config++;
                        Perfetto__Protos__TraceConfig *cfg = perfetto__protos__trace_config__unpack(NULL, f.len, f.data);
                        cr_assert_not_null(cfg, "the trace_config packet does not decode");
                        k->config_duration_ms = cfg->duration_ms;
                        k->config_bugreport_score = cfg->bugreport_score;
                        snprintf(k->config_session_name, sizeof(k->config_session_name), "%s",
                                 cfg->unique_session_name ? cfg->unique_session_name : "");
                        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                }
                if (pbr_get(p, l, F_TRIGGER, false, &f)) {
                        size_t t = k->n_trigger++;
                        cr_assert(pbr_get(p, l, F_TIMESTAMP, false, &g), "a trigger packet has no timestamp");
                        if (t < 8) {
                                if (pbr_get(f.data, f.len, 1, false, &g))
                                        copy_str(k->trigger_name[t], sizeof(k->trigger_name[t]), &g);
                                if (pbr_get(f.data, f.len, 2, false, &g))
                                        copy_str(k->trigger_producer[t], sizeof(k->trigger_producer[t]), &g);
                                k->trigger_uid[t] = pbr_get(f.data, f.len, 3, false, &g) ? (int64_t) g.varint : -1;
                        }
                }
                if (pbr_get(p, l, F_CLONE_SNAPSHOT_TRIGGER, false, &f)) {
                        k->n_clone_trigger++;
                        if (pbr_get(f.data, f.len, 1, false, &g))
                                copy_str(k->clone_trigger_name, sizeof(k->clone_trigger_name), &g);
                }
        }
}

static Perfetto__Protos__TracingServiceState *query_state(struct test_consumer *c) {
        Perfetto__Protos__QueryServiceStateRequest req = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(c, "QueryServiceState", &req.base,
                                        &perfetto__protos__query_service_state_response__descriptor, &reply, 5000),
                     0);
        Perfetto__Protos__QueryServiceStateResponse *r = (void *) reply;
        Perfetto__Protos__TracingServiceState *st = r->service_state;
        r->service_state = NULL;
        protobuf_c_message_free_unpacked(reply, NULL);
        cr_assert_not_null(st);
        return st;
}

static Perfetto__Protos__CloneSessionResponse *clone_session(struct test_consumer *c, uint64_t id, int fd,
                                                             const char *trigger_name) {
        Perfetto__Protos__CloneSessionRequest cl = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
        cl.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
        cl.session_id = id;
        cl.clone_trigger_name = (char *) trigger_name;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call_fd(c, "CloneSession", &cl.base, fd,
                                           &perfetto__protos__clone_session_response__descriptor, &reply, 15000),
                     0);
        return (void *) reply;
}

static void disable(struct test_consumer *c) {
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(c, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(c, 15000), "the session did not end");
}

static Perfetto__Protos__TraceConfig__TriggerConfig *trigger_config(int mode, const char *name, uint32_t stop_delay_ms,
                                                                    uint32_t timeout_ms) {
        Perfetto__Protos__TraceConfig__TriggerConfig *tc = calloc(1, sizeof(*tc));
        Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t = calloc(1, sizeof(*t));
        perfetto__protos__trace_config__trigger_config__init(tc);
        perfetto__protos__trace_config__trigger_config__trigger__init(t);
        t->name = strdup(name);
        t->has_stop_delay_ms = true;
        t->stop_delay_ms = stop_delay_ms;
        tc->has_trigger_mode = true;
        tc->trigger_mode = mode;
        tc->has_trigger_timeout_ms = true;
        tc->trigger_timeout_ms = timeout_ms;
        tc->n_triggers = 1;
        tc->triggers = calloc(1, sizeof(void *));
        tc->triggers[0] = t;
        return tc;
}

static void trigger_config_free(Perfetto__Protos__TraceConfig__TriggerConfig *tc) {
        for (size_t i = 0; i < tc->n_triggers; i++) {
                free(tc->triggers[i]->name);
                free(tc->triggers[i]);
        }
        free(tc->triggers);
        free(tc);
}

/* ---- sessions ------------------------------------------------------------ */

Test(upstream_compat, config_without_buffers_is_a_session) {
        struct test_consumer cons;
        char path[512];
        snprintf(path, sizeof(path), "%s/nobuf.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);

        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        /* What `perfetto --detach` users start: duration_ms: 10000
         * write_into_file: true, here shorter. */
        Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
        cfg.has_duration_ms = cfg.has_write_into_file = true;
        cfg.duration_ms = 300;
        cfg.write_into_file = true;
        cr_assert_eq(test_consumer_enable(&cons, &cfg, fd), 0);
        close(fd);
        cr_assert(test_consumer_wait_disabled(&cons, 15000));
        cr_assert_str_empty(cons.error, "refused: %s", cons.error);
        test_consumer_free(&cons);

        size_t len;
        _cleanup_free_ uint8_t *buf = read_file(path, &len);
        struct trace_info k;
        decode_trace(buf, len, &k);
        cr_assert_eq(k.n_config, 1, "the trace has %zu trace_config packets", k.n_config);
        cr_assert_eq(k.config_duration_ms, 300);
}

Test(upstream_compat, detached_session_is_freed_when_its_duration_ends) {
        struct test_consumer a, b;

        cr_assert_eq(test_consumer_connect(&a, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(256, "nobody.data", 400);
        cr_assert_eq(test_consumer_enable(&a, cfg, -EBADF), 0);
        test_config_free(cfg);
        Perfetto__Protos__DetachRequest dr = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
        dr.key = (char *) "ends-while-detached";
        cr_assert_eq(test_consumer_call(&a, "Detach", &dr.base, &perfetto__protos__detach_response__descriptor, NULL,
                                        5000),
                     0);
        test_consumer_free(&a);

        cr_assert_eq(test_consumer_connect(&b, ev, inst.consumer_path), 0);
        /* Until the duration ends nothing happens; afterwards the session
         * goes away, however long that takes on a loaded machine. */
        bool gone = false;
        for (int i = 0; i < 150 && !gone; i++) {
                spin_ms(ev, 100);
                Perfetto__Protos__TracingServiceState *st = query_state(&b);
                gone = st->n_tracing_sessions == 0;
                perfetto__protos__tracing_service_state__free_unpacked(st, NULL);
        }
        cr_assert(gone, "the detached session is still there after its duration");

        Perfetto__Protos__AttachRequest ar = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
        ar.key = (char *) "ends-while-detached";
        int r = test_consumer_call(&b, "Attach", &ar.base, &perfetto__protos__attach_response__descriptor, NULL, 5000);
        cr_assert_eq(r, -EREMOTEIO, "Attach to an ended detached session answered %d", r);
        test_consumer_free(&b);
}

/* ---- bugreports ------------------------------------------------------- */

static void start_scored(struct test_consumer *c, const char *name, int32_t score, const char *filename) {
        cr_assert_eq(test_consumer_connect(c, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(256, "nobody.data", 0);
        cfg->unique_session_name = (char *) name;
        cfg->has_bugreport_score = true;
        cfg->bugreport_score = score;
        cfg->bugreport_filename = (char *) filename;
        cr_assert_eq(test_consumer_enable(c, cfg, -EBADF), 0);
        cfg->unique_session_name = NULL;
        cfg->bugreport_filename = NULL;
        test_config_free(cfg);
}

Test(upstream_compat, bugreport_clone_takes_the_highest_score) {
        struct test_consumer lo, hi, none, br;

        cr_assert_eq(test_consumer_connect(&br, ev, inst.consumer_path), 0);
        /* Nothing eligible yet: the clone says so. */
        start_scored(&none, "unscored", 0, NULL);
        spin_ms(ev, 100);
        Perfetto__Protos__CloneSessionResponse *cr = clone_session(&br, UINT64_MAX, -EBADF, NULL);
        cr_assert(cr->has_success && !cr->success);
        cr_assert_not_null(cr->error);
        cr_assert(strstr(cr->error, "bugreport") != NULL, "error: %s", cr->error);
        protobuf_c_message_free_unpacked(&cr->base, NULL);

        start_scored(&lo, "low", 5, "low.pftrace");
        start_scored(&hi, "high", 10, "high.pftrace");
        spin_ms(ev, 200);

        /* perfetto --save-all-for-bugreport reads these. */
        Perfetto__Protos__TracingServiceState *st = query_state(&br);
        size_t seen = 0;
        for (size_t i = 0; i < st->n_tracing_sessions; i++) {
                const Perfetto__Protos__TracingServiceState__TracingSession *t = st->tracing_sessions[i];
                const char *name = t->unique_session_name ? t->unique_session_name : "";
                if (strcmp(name, "high") == 0) {
                        cr_assert(t->has_bugreport_score && t->bugreport_score == 10);
                        cr_assert_str_eq(t->bugreport_filename, "high.pftrace");
                        cr_assert(t->is_started);
                        seen++;
                } else if (strcmp(name, "low") == 0) {
                        cr_assert(t->has_bugreport_score && t->bugreport_score == 5);
                        cr_assert_str_eq(t->bugreport_filename, "low.pftrace");
                        seen++;
                } else if (strcmp(name, "unscored") == 0) {
                        cr_assert(!t->has_bugreport_score || t->bugreport_score == 0);
                        seen++;
                }
        }
        cr_assert_eq(seen, 3);
        perfetto__protos__tracing_service_state__free_unpacked(st, NULL);

        /* perfetto --clone -1 / --save-for-bugreport. */
        cr = clone_session(&br, UINT64_MAX, -EBADF, NULL);
        cr_assert(cr->success, "bugreport clone failed: %s", cr->error ? cr->error : "");
        cr_assert(!cr->was_write_into_file);
        protobuf_c_message_free_unpacked(&cr->base, NULL);
        cr_assert_eq(test_consumer_read(&br, 10000), 0);
        struct trace_info k;
        decode_trace(br.data, br.len, &k);
        cr_assert_eq(k.n_config, 1);
        cr_assert_str_eq(k.config_session_name, "high", "the clone is of \"%s\"", k.config_session_name);
        cr_assert_eq(k.config_bugreport_score, 10);

        /* The older SaveTraceForBugreport: the snapshot in a file whose
         * path comes back in msg; the sessions keep running. */
        struct test_consumer old;
        cr_assert_eq(test_consumer_connect(&old, ev, inst.consumer_path), 0);
        Perfetto__Protos__SaveTraceForBugreportRequest sreq = PERFETTO__PROTOS__SAVE_TRACE_FOR_BUGREPORT_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(&old, "SaveTraceForBugreport", &sreq.base,
                                        &perfetto__protos__save_trace_for_bugreport_response__descriptor, &reply,
                                        15000),
                     0);
        Perfetto__Protos__SaveTraceForBugreportResponse *sr = (void *) reply;
        cr_assert(sr->success, "SaveTraceForBugreport: %s", sr->msg ? sr->msg : "");
        char expect[400];
        snprintf(expect, sizeof(expect), "%s/bugreport.pftrace", inst.tmp_dir);
        cr_assert_str_eq(sr->msg, expect);
        size_t len;
        _cleanup_free_ uint8_t *buf = read_file(sr->msg, &len);
        protobuf_c_message_free_unpacked(reply, NULL);
        decode_trace(buf, len, &k);
        cr_assert_eq(k.n_config, 1);
        cr_assert_str_eq(k.config_session_name, "high");
        test_consumer_free(&old);

        st = query_state(&br);
        size_t started = 0;
        for (size_t i = 0; i < st->n_tracing_sessions; i++)
                started += st->tracing_sessions[i]->is_started;
        cr_assert_eq(started, 3, "saving for a bugreport must not stop the sessions");
        perfetto__protos__tracing_service_state__free_unpacked(st, NULL);

        /* A bugreport_filename is a file name, nothing more. */
        struct test_consumer bad;
        start_scored(&bad, "bad", 1, "../escape");
        cr_assert(test_consumer_wait_disabled(&bad, 5000));
        cr_assert(strstr(bad.error, "bugreport_filename") != NULL, "error: \"%s\"", bad.error);
        test_consumer_free(&bad);

        test_consumer_free(&br);
        test_consumer_free(&hi);
        test_consumer_free(&lo);
        test_consumer_free(&none);
}

Test(upstream_compat, clone_of_write_into_file_session_continues_its_file) {
        struct raw_producer prod;
        struct test_consumer a, b;
        char src_path[512], out_path[512];

        snprintf(src_path, sizeof(src_path), "%s/wif-src.pftrace", inst.dir);
        snprintf(out_path, sizeof(out_path), "%s/wif-clone.pftrace", inst.dir);
        int src_fd = open(src_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int out_fd = open(out_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(src_fd, 0);
        cr_assert_geq(out_fd, 0);

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "wif-producer", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 20;
        prod.payload_size = 16;

        cr_assert_eq(test_consumer_connect(&a, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cfg->has_write_into_file = cfg->has_file_write_period_ms = true;
        cfg->write_into_file = true;
        cfg->file_write_period_ms = 200;
        cr_assert_eq(test_consumer_enable(&a, cfg, src_fd), 0);
        test_config_free(cfg);
        close(src_fd);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));

        /* Wait until the first 20 packets reached the source's file. */
        struct trace_info k = {};
        for (int i = 0; i < 200 && k.n_test < 20; i++) {
                spin_ms(ev, 50);
                size_t len;
                _cleanup_free_ uint8_t *buf = read_file(src_path, &len);
                decode_trace(buf, len, &k);
        }
        cr_assert_eq(k.n_test, 20, "the source's file holds %zu of 20 packets", k.n_test);

        /* Ten more, in the buffer (or the file: either way once). */
        for (int i = 0; i < 10; i++)
                cr_assert_eq(raw_producer_write_packet(&prod, 16), 0);
        cr_assert_eq(raw_producer_commit(&prod, 0), 0);

        cr_assert_eq(test_consumer_connect(&b, ev, inst.consumer_path), 0);
        Perfetto__Protos__TracingServiceState *st = query_state(&b);
        cr_assert_eq(st->n_tracing_sessions, 1);
        uint64_t id = st->tracing_sessions[0]->id;
        perfetto__protos__tracing_service_state__free_unpacked(st, NULL);

        Perfetto__Protos__CloneSessionResponse *cr = clone_session(&b, id, out_fd, NULL);
        cr_assert(cr->success, "clone failed: %s", cr->error ? cr->error : "");
        cr_assert(cr->has_was_write_into_file && cr->was_write_into_file);
        protobuf_c_message_free_unpacked(&cr->base, NULL);
        close(out_fd);

        size_t len;
        _cleanup_free_ uint8_t *buf = read_file(out_path, &len);
        decode_trace(buf, len, &k);
        cr_assert_eq(k.n_test, 30, "the clone's file holds %zu of 30 packets", k.n_test);
        for (unsigned i = 0; i < 30; i++)
                cr_assert_eq(k.seq_count[i], 1, "packet %u appears %u times", i, k.seq_count[i]);
        cr_assert_eq(prod.n_stop, 0, "cloning must not stop the source");

        disable(&a);
        test_consumer_free(&a);
        test_consumer_free(&b);
        raw_producer_free(&prod);
}

/* ---- triggers ------------------------------------------------------------ */

Test(upstream_compat, matching_triggers_are_written_into_the_trace) {
        struct raw_producer prod;
        struct test_consumer cons;

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "trig-producer", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 5;
        prod.payload_size = 8;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cfg->trigger_config = trigger_config(PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING,
                                             "stop-now", 200, 30000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        trigger_config_free(cfg->trigger_config);
        cfg->trigger_config = NULL;
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));

        static const char *const names[] = { "unrelated", "stop-now" };
        cr_assert_eq(raw_producer_activate_triggers(&prod, names, 2), 0);
        cr_assert(test_consumer_wait_disabled(&cons, 15000), "the stop trigger did not end the session");
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        struct trace_info k;
        decode_trace(cons.data, cons.len, &k);
        cr_assert_eq(k.n_test, 5);
        cr_assert_eq(k.n_trigger, 1, "%zu trigger packets", k.n_trigger);
        cr_assert_str_eq(k.trigger_name[0], "stop-now");
        cr_assert_str_eq(k.trigger_producer[0], "trig-producer");
        cr_assert_eq(k.trigger_uid[0], (int64_t) getuid());
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

Test(upstream_compat, start_trigger_sets_the_duration_to_its_stop_delay) {
        struct raw_producer prod;
        struct test_consumer cons;

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "start-producer", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 3;
        prod.payload_size = 8;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        /* No duration_ms: only the trigger's stop_delay_ms ends it (the
         * trigger timeout is far beyond the test's wait). */
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cfg->trigger_config = trigger_config(PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING,
                                             "go", 300, 600000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        trigger_config_free(cfg->trigger_config);
        cfg->trigger_config = NULL;
        test_config_free(cfg);
        spin_ms(ev, 200);
        cr_assert_eq(prod.n_start, 0, "started before its trigger");

        static const char *const names[] = { "go" };
        cr_assert_eq(raw_producer_activate_triggers(&prod, names, 1), 0);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));
        cr_assert(test_consumer_wait_disabled(&cons, 30000), "the session did not end after the trigger's stop_delay_ms");
        cr_assert_str_empty(cons.error);
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        struct trace_info k;
        decode_trace(cons.data, cons.len, &k);
        cr_assert_eq(k.n_test, 3);
        cr_assert_eq(k.config_duration_ms, 300, "trace_config says duration_ms %u", k.config_duration_ms);
        cr_assert_eq(k.n_trigger, 1);
        cr_assert_str_eq(k.trigger_name[0], "go");
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

struct observed {
        bool got;
        Perfetto__Protos__ObservableEvents__CloneTriggerHit hit;
        char name[64], producer[64];
};

static void on_events(ipc_client *cl, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        struct observed *o = ud;
        const Perfetto__Protos__ObserveEventsResponse *r = (const void *) reply;
        if (fd >= 0)
                close(fd);
        if (error < 0 || !r || !r->events || !r->events->clone_trigger_hit || o->got)
                return;
        o->got = true;
        o->hit = *r->events->clone_trigger_hit;
        snprintf(o->name, sizeof(o->name), "%s", o->hit.trigger_name ? o->hit.trigger_name : "");
        snprintf(o->producer, sizeof(o->producer), "%s", o->hit.producer_name ? o->hit.producer_name : "");
        o->hit.trigger_name = o->hit.producer_name = NULL;
}

Test(upstream_compat, clone_snapshot_trigger_tells_the_consumer) {
        struct raw_producer prod;
        struct test_consumer cons, snap;
        struct observed o = {};

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "snap-producer", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));
        prod.packets_at_start = 7;
        prod.payload_size = 8;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);

        /* Advertised, so perfetto knows to wait for it. */
        Perfetto__Protos__QueryCapabilitiesRequest qc = PERFETTO__PROTOS__QUERY_CAPABILITIES_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        cr_assert_eq(test_consumer_call(&cons, "QueryCapabilities", &qc.base,
                                        &perfetto__protos__query_capabilities_response__descriptor, &reply, 5000),
                     0);
        const Perfetto__Protos__QueryCapabilitiesResponse *caps = (void *) reply;
        bool advertised = false;
        for (size_t i = 0; caps->capabilities && i < caps->capabilities->n_observable_events; i++)
                advertised |= caps->capabilities->observable_events[i] ==
                              PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT;
        cr_assert(advertised, "QueryCapabilities does not list TYPE_CLONE_TRIGGER_HIT");
        protobuf_c_message_free_unpacked(reply, NULL);

        Perfetto__Protos__ObserveEventsRequest oe = PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
        Perfetto__Protos__ObservableEvents__Type types[] = {
                PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT };
        oe.n_events_to_observe = 1;
        oe.events_to_observe = types;
        cr_assert_gt(ipc_client_invoke(cons.client, "ObserveEvents", &oe.base,
                                       &perfetto__protos__observe_events_response__descriptor, -EBADF, on_events, &o),
                     0);

        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.data", 0);
        cfg->trigger_config = trigger_config(PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT,
                                             "snap", 100, 60000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        trigger_config_free(cfg->trigger_config);
        cfg->trigger_config = NULL;
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&prod, ds_started, 5000));
        spin_ms(ev, 100);

        static const char *const names[] = { "snap" };
        cr_assert_eq(raw_producer_activate_triggers(&prod, names, 1), 0);
        for (int i = 0; i < 300 && !o.got; i++)
                spin_ms(ev, 50);
        cr_assert(o.got, "no clone_trigger_hit arrived");
        cr_assert_str_eq(o.name, "snap");
        cr_assert_str_eq(o.producer, "snap-producer");
        cr_assert_eq(o.hit.producer_uid, (uint32_t) getuid());
        cr_assert_gt(o.hit.boot_time_ns, 0);
        cr_assert_eq(o.hit.trigger_delay_ms, 100);

        cr_assert_eq(test_consumer_connect(&snap, ev, inst.consumer_path), 0);
        Perfetto__Protos__TracingServiceState *st = query_state(&snap);
        cr_assert_eq(st->n_tracing_sessions, 1);
        cr_assert_eq((uint64_t) o.hit.tracing_session_id, st->tracing_sessions[0]->id);
        perfetto__protos__tracing_service_state__free_unpacked(st, NULL);

        /* What perfetto does next: clone the session for this trigger. */
        Perfetto__Protos__CloneSessionResponse *cr = clone_session(&snap, (uint64_t) o.hit.tracing_session_id, -EBADF,
                                                                   "snap");
        cr_assert(cr->success, "clone failed: %s", cr->error ? cr->error : "");
        protobuf_c_message_free_unpacked(&cr->base, NULL);
        cr_assert_eq(test_consumer_read(&snap, 10000), 0);
        struct trace_info k;
        decode_trace(snap.data, snap.len, &k);
        cr_assert_eq(k.n_test, 7);
        cr_assert_eq(k.n_clone_trigger, 1);
        cr_assert_str_eq(k.clone_trigger_name, "snap");
        cr_assert_eq(k.n_trigger, 1);

        /* The main session is read only through clones. */
        disable(&cons);
        cr_assert_eq(test_consumer_read(&cons, 10000), 0);
        cr_assert_eq(cons.n_packets, 0, "ReadBuffers of a CLONE_SNAPSHOT session returned %zu packets",
                     cons.n_packets);
        test_consumer_free(&snap);
        test_consumer_free(&cons);
        raw_producer_free(&prod);
}

Test(upstream_compat, clone_snapshot_with_write_into_file_is_refused) {
        struct test_consumer cons;
        char path[512];
        snprintf(path, sizeof(path), "%s/refused.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(256, "nobody.data", 0);
        cfg->has_write_into_file = true;
        cfg->write_into_file = true;
        cfg->trigger_config = trigger_config(PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT,
                                             "snap", 0, 10000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, fd), 0);
        close(fd);
        trigger_config_free(cfg->trigger_config);
        cfg->trigger_config = NULL;
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 5000));
        cr_assert(strstr(cons.error, "CLONE_SNAPSHOT") != NULL, "error: \"%s\"", cons.error);
        test_consumer_free(&cons);
}

static void start_with_trigger(struct test_consumer *c, Perfetto__Protos__TraceConfig__TriggerConfig *tc) {
        cr_assert_eq(test_consumer_connect(c, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(256, "nobody.data", 0);
        cfg->trigger_config = tc;
        cr_assert_eq(test_consumer_enable(c, cfg, -EBADF), 0);
        cfg->trigger_config = NULL;
        test_config_free(cfg);
        spin_ms(ev, 100);
}

Test(upstream_compat, max_per_24_h_and_skip_probability_hold_triggers_back) {
        struct raw_producer prod;
        struct test_consumer first, second, skipped;
        static const char *const lim[] = { "lim" }, *const never[] = { "never" };

        cr_assert_eq(raw_producer_connect(&prod, ev, inst.producer_path, "limits", "test.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&prod, registered, 5000));

        Perfetto__Protos__TraceConfig__TriggerConfig *tc =
                trigger_config(PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING, "lim", 0, 60000);
        tc->triggers[0]->has_max_per_24_h = true;
        tc->triggers[0]->max_per_24_h = 1;
        start_with_trigger(&first, tc);
        cr_assert_eq(raw_producer_activate_triggers(&prod, lim, 1), 0);
        cr_assert(test_consumer_wait_disabled(&first, 10000), "the first trigger did not stop the session");
        test_consumer_free(&first);

        /* A second session with the same limit: the day's one is used up. */
        start_with_trigger(&second, tc);
        cr_assert_eq(raw_producer_activate_triggers(&prod, lim, 1), 0);
        spin_ms(ev, 1000);
        cr_assert(!second.enable_replied, "a trigger over max_per_24_h stopped the session");

        /* skip_probability 1: never taken. */
        trigger_config_free(tc);
        tc = trigger_config(PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING, "never", 0, 60000);
        tc->triggers[0]->has_skip_probability = true;
        tc->triggers[0]->skip_probability = 1.0;
        start_with_trigger(&skipped, tc);
        cr_assert_eq(raw_producer_activate_triggers(&prod, never, 1), 0);
        spin_ms(ev, 1000);
        cr_assert(!skipped.enable_replied, "a trigger with skip_probability 1 stopped the session");
        trigger_config_free(tc);

        /* Neither saw a trigger: nothing to read, as upstream. */
        disable(&second);
        cr_assert_eq(test_consumer_read(&second, 10000), 0);
        cr_assert_eq(second.n_packets, 0);
        disable(&skipped);
        cr_assert_eq(test_consumer_read(&skipped, 10000), 0);
        cr_assert_eq(skipped.n_packets, 0);
        test_consumer_free(&second);
        test_consumer_free(&skipped);
        raw_producer_free(&prod);
}
