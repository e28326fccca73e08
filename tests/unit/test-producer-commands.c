/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's command handling without a service: the commands of
 * the GetAsyncCommand stream are handed to the handler as the IPC client
 * would, and the instances they make, the callbacks they call and the
 * instances they end are checked. Nothing is connected, so the commits a
 * stop asks for find no connection and send nothing. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "producer-internal.h"

#include "perfetto/ipc/producer_port.pb-c.h"
#include "traced/ipc/producer_command_view.pb-c.h"

struct calls {
        unsigned starts, stops, clears;
        uint64_t cleared[8];
        uint64_t last_id;
        char data_source[32];
        size_t config_size;
        uint8_t config[512];
};

static void on_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t size, void *ud) {
        struct calls *c = ud;
        c->starts++;
        c->last_id = id;
        snprintf(c->data_source, sizeof(c->data_source), "%s", ds);
        c->config_size = size;
        if (size <= sizeof(c->config))
                memcpy(c->config, cfg, size);
}

static void on_stop(traced_producer *p, uint64_t id, void *ud) {
        struct calls *c = ud;
        c->stops++;
        c->last_id = id;
}

static void on_clear(traced_producer *p, uint64_t id, void *ud) {
        struct calls *c = ud;
        if (c->clears < ELEMENTSOF(c->cleared))
                c->cleared[c->clears] = id;
        c->clears++;
}

static traced_producer *producer;
static struct calls calls;

static void setup(void) {
        producer = calloc(1, sizeof(*producer));
        cr_assert_not_null(producer);
        cr_assert_eq(producer_init(producer), 0);
        calls = (struct calls) {};
        producer->userdata = &calls;
        producer->ops = (struct traced_producer_ops) {
                .struct_size = sizeof(struct traced_producer_ops),
                .start = on_start,
                .stop = on_stop,
                .clear_incremental_state = on_clear,
        };
}

static void teardown(void) {
        while (producer->instances)
                producer_remove_instance(producer, producer->instances->id);
        for (size_t i = 0; i < producer->n_ds; i++)
                free(producer->ds[i].name);
        pthread_mutex_destroy(&producer->lock);
        free(producer);
}

static void add_ds(const char *name, uint32_t flags) {
        producer->ds[producer->n_ds].name = strdup(name);
        producer->ds[producer->n_ds].flags = flags;
        producer->n_ds++;
}

/* The command as the client gets it: the service's message on the wire,
 * read back as the client's view of it. */
static ProtobufCMessage *as_received(Perfetto__Protos__GetAsyncCommandResponse *cmd) {
        size_t n = perfetto__protos__get_async_command_response__get_packed_size(cmd);
        uint8_t *buf = malloc(n ? n : 1);
        cr_assert_not_null(buf);
        perfetto__protos__get_async_command_response__pack(cmd, buf);
        Traced__View__GetAsyncCommandResponseView *v =
                traced__view__get_async_command_response_view__unpack(NULL, n, buf);
        free(buf);
        cr_assert_not_null(v);
        return &v->base;
}

static void send_cmd(Perfetto__Protos__GetAsyncCommandResponse *cmd) {
        ProtobufCMessage *m = as_received(cmd);
        producer_on_async_command(NULL, 0, m, true, -EBADF, producer);
        protobuf_c_message_free_unpacked(m, NULL);
}

/* A SetupDataSource or StartDataSource command, built in b. */
struct ds_cmd {
        Perfetto__Protos__DataSourceConfig cfg;
        Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource setup;
        Perfetto__Protos__GetAsyncCommandResponse__StartDataSource start;
        Perfetto__Protos__GetAsyncCommandResponse cmd;
};

static Perfetto__Protos__GetAsyncCommandResponse *ds_cmd(struct ds_cmd *b, bool start, uint64_t id, const char *name) {
        *b = (struct ds_cmd) {
                .cfg = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT,
                .setup = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_DATA_SOURCE__INIT,
                .start = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT,
                .cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT,
        };
        b->cfg.name = (char *) name;
        b->cfg.has_target_buffer = true;
        b->cfg.target_buffer = 3;
        if (start) {
                b->start.has_new_instance_id = true;
                b->start.new_instance_id = id;
                b->start.config = &b->cfg;
                b->cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
                b->cmd.start_data_source = &b->start;
        } else {
                b->setup.has_new_instance_id = true;
                b->setup.new_instance_id = id;
                b->setup.config = &b->cfg;
                b->cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
                b->cmd.setup_data_source = &b->setup;
        }
        return &b->cmd;
}

static void setup_ds(uint64_t id, const char *name, int policy) {
        struct ds_cmd b;
        Perfetto__Protos__GetAsyncCommandResponse *cmd = ds_cmd(&b, false, id, name);
        if (policy >= 0) {
                b.cfg.has_buffer_exhausted_policy = true;
                b.cfg.buffer_exhausted_policy = policy;
        }
        send_cmd(cmd);
}

static void stop_ds(uint64_t id) {
        Perfetto__Protos__GetAsyncCommandResponse__StopDataSource st =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__STOP_DATA_SOURCE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        st.has_instance_id = true;
        st.instance_id = id;
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE;
        cmd.stop_data_source = &st;
        send_cmd(&cmd);
}

TestSuite(producer_commands, .init = setup, .fini = teardown);

Test(producer_commands, setup_makes_one_instance) {
        setup_ds(11, "test.ds", -1);
        struct producer_instance *i = producer_find_instance(producer, 11);
        cr_assert_not_null(i);
        cr_assert_str_eq(i->data_source, "test.ds");
        cr_assert_eq(i->target_buffer, 3);
        cr_assert_eq(i->exhausted_policy, TRACED_BUFFER_EXHAUSTED_DROP);
        /* The same id again, or a config without a name: nothing new. */
        setup_ds(11, "other.ds", -1);
        setup_ds(12, NULL, -1);
        cr_assert_str_eq(producer_find_instance(producer, 11)->data_source, "test.ds");
        cr_assert_null(producer_find_instance(producer, 12));
        cr_assert_null(producer->instances->next);
}

Test(producer_commands, the_session_policy_wins_over_the_data_source_default) {
        add_ds("stalls", TRACED_DS_STALL_WHEN_FULL);
        setup_ds(1, "stalls", -1);
        setup_ds(2, "stalls",
                 PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_DROP);
        setup_ds(3, "plain",
                 PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_ABORT);
        cr_assert_eq(producer_find_instance(producer, 1)->exhausted_policy, TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP);
        cr_assert_eq(producer_find_instance(producer, 2)->exhausted_policy, TRACED_BUFFER_EXHAUSTED_DROP);
        cr_assert_eq(producer_find_instance(producer, 3)->exhausted_policy, TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT);
}

Test(producer_commands, start_calls_back_with_the_config) {
        struct ds_cmd b;
        send_cmd(ds_cmd(&b, true, 21, "started.ds"));
        cr_assert_eq(calls.starts, 1);
        cr_assert_eq(calls.last_id, 21);
        cr_assert_str_eq(calls.data_source, "started.ds");
        cr_assert_eq(calls.config_size, perfetto__protos__data_source_config__get_packed_size(&b.cfg));
        cr_assert_not_null(producer_find_instance(producer, 21));
}

Test(producer_commands, stop_ends_the_instance_unless_it_notifies_itself) {
        add_ds("notifies", TRACED_DS_WILL_NOTIFY_ON_STOP);
        setup_ds(1, "plain", -1);
        setup_ds(2, "notifies", -1);
        stop_ds(1);
        cr_assert_eq(calls.stops, 1);
        cr_assert_null(producer_find_instance(producer, 1));
        stop_ds(2);
        cr_assert_eq(calls.stops, 2);
        struct producer_instance *i = producer_find_instance(producer, 2);
        cr_assert_not_null(i, "an instance that acknowledges its stop itself was forgotten");
        cr_assert(i->stopped);
        /* Stopping an unknown instance calls nobody. */
        stop_ds(99);
        cr_assert_eq(calls.stops, 2);
}

Test(producer_commands, failed_replies_and_other_clients_are_ignored) {
        struct ds_cmd b;
        Perfetto__Protos__GetAsyncCommandResponse *cmd = ds_cmd(&b, false, 5, "x");
        ProtobufCMessage *m = as_received(cmd);
        producer_on_async_command(NULL, -ECONNRESET, m, false, -EBADF, producer);
        producer_on_async_command((ipc_client *) &calls, 0, m, true, -EBADF, producer);
        producer_on_async_command(NULL, 0, NULL, true, -EBADF, producer);
        protobuf_c_message_free_unpacked(m, NULL);
        cr_assert_null(producer->instances);
}

static void clear_ids(const uint64_t *ids, size_t n) {
        Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState cl =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CLEAR_INCREMENTAL_STATE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        cl.n_data_source_ids = n;
        cl.data_source_ids = (uint64_t *) ids;
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE;
        cmd.clear_incremental_state = &cl;
        send_cmd(&cmd);
}

/* ClearIncrementalState reaches the running instances of data sources that
 * said they handle it, and nobody else. */
Test(producer_commands, clear_incremental_state_reaches_who_handles_it) {
        add_ds("interns", TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR | TRACED_DS_WILL_NOTIFY_ON_STOP);
        add_ds("plain", 0);
        setup_ds(1, "interns", -1);
        setup_ds(2, "plain", -1);
        setup_ds(3, "interns", -1);
        static const uint64_t ids[] = { 1, 2, 3, 99 };
        clear_ids(ids, ELEMENTSOF(ids));
        cr_assert_eq(calls.clears, 2);
        cr_assert(calls.cleared[0] + calls.cleared[1] == 4 && calls.cleared[0] != calls.cleared[1],
                  "instances 1 and 3 cleared, not %llu and %llu", (unsigned long long) calls.cleared[0],
                  (unsigned long long) calls.cleared[1]);
        /* A stopped instance (waiting to notify) is not asked any more. */
        stop_ds(3);
        clear_ids(ids, ELEMENTSOF(ids));
        cr_assert_eq(calls.clears, 3);
        cr_assert_eq(calls.cleared[2], 1);
        /* Without the callback (an older caller's ops), nothing is called. */
        producer->ops.clear_incremental_state = NULL;
        clear_ids(ids, ELEMENTSOF(ids));
        cr_assert_eq(calls.clears, 3);
}

/* A data source gets its DataSourceConfig as the service sent it, fields
 * the client itself never decodes (a plugin's own config) included; the
 * client reads the head: name, target buffer, buffer exhausted policy. */
Test(producer_commands, start_hands_over_the_config_bytes_as_sent) {
        add_ds("x", 0);
        struct ds_cmd b;
        Perfetto__Protos__GetAsyncCommandResponse *cmd = ds_cmd(&b, true, 8, "x");
        b.cfg.has_target_buffer = true;
        b.cfg.target_buffer = 2;
        b.cfg.has_buffer_exhausted_policy = true;
        b.cfg.buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_ABORT;
        b.cfg.legacy_config = (char *) "a plugin's own words";
        b.cfg.has_trace_duration_ms = true;
        b.cfg.trace_duration_ms = 1234;
        uint8_t want[512];
        size_t n = perfetto__protos__data_source_config__get_packed_size(&b.cfg);
        cr_assert_leq(n, sizeof(want));
        perfetto__protos__data_source_config__pack(&b.cfg, want);
        send_cmd(cmd);
        cr_assert_eq(calls.starts, 1);
        cr_assert_eq(calls.config_size, n);
        cr_assert_arr_eq(calls.config, want, n, "the config's bytes are not the service's");
        struct producer_instance *i = producer_find_instance(producer, 8);
        cr_assert_not_null(i);
        cr_assert_eq(i->target_buffer, 2);
        cr_assert_eq(i->exhausted_policy, TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT);
        cr_assert_str_eq(i->data_source, "x");
}
