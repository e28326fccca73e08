/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pbtxt/pbtxt.h"
#include "query-json.h"
#include "tracectl.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

int cmd_query(struct tracectl *t, int argc, char **argv) {
        bool raw = false, json = false;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0) {
                        printf("Usage: tracectl query [--raw | --json]\n\nLists producers, data sources and tracing sessions\n"
                               "(QueryServiceState). --raw prints the reply in text format, --json\n"
                               "as one JSON object (keys in tracectl(1)).\n");
                        return EXIT_OK;
                }
                if (strcmp(argv[i], "--raw") == 0)
                        raw = true;
                else if (strcmp(argv[i], "--json") == 0)
                        json = true;
                else {
                        fprintf(stderr, "tracectl query: unknown argument \"%s\"\n", argv[i]);
                        return EXIT_USAGE;
                }
        }
        int r = tracectl_connect(t);
        if (r != 0)
                return r;
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        r = tracectl_call(t, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                          -EBADF, &reply, 5000);
        tracectl_disconnect(t);
        if (r < 0 || !reply) {
                fprintf(stderr, "tracectl: QueryServiceState failed: %s\n", strerror(r < 0 ? -r : EIO));
                return EXIT_OTHER;
        }
        const Perfetto__Protos__TracingServiceState *st = ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        if (json && st) {
                r = query_print_json(stdout, st);
                protobuf_c_message_free_unpacked(reply, NULL);
                if (r < 0)
                        fprintf(stderr, "tracectl: out of memory\n");
                return r < 0 ? EXIT_OTHER : EXIT_OK;
        }
        if (raw || !st) {
                pbtxt_print(stdout, reply, 0);
                protobuf_c_message_free_unpacked(reply, NULL);
                return EXIT_OK;
        }
        printf("Service: %s\n", st->tracing_service_version ? st->tracing_service_version : "?");
        printf("Producers (%zu):\n", st->n_producers);
        for (size_t i = 0; i < st->n_producers; i++) {
                const Perfetto__Protos__TracingServiceState__Producer *p = st->producers[i];
                printf("  %3d  %-32s pid %-7d uid %-6d %s", p->id, p->name ? p->name : "", p->pid, p->uid,
                       p->sdk_version ? p->sdk_version : "");
                if (p->has_machine_id && p->machine_id != 0)
                        printf("  machine %" PRIu32 " %s", p->machine_id, p->machine_name ? p->machine_name : "");
                printf("\n");
        }
        printf("Data sources (%zu):\n", st->n_data_sources);
        for (size_t i = 0; i < st->n_data_sources; i++) {
                const Perfetto__Protos__TracingServiceState__DataSource *d = st->data_sources[i];
                char producer[32];
                /* None: its plugin's host starts when a session names it. */
                if (d->has_producer_id)
                        snprintf(producer, sizeof(producer), "%d", d->producer_id);
                else
                        snprintf(producer, sizeof(producer), "-");
                printf("  %-36s producer %-4s descriptor %zu bytes%s\n",
                       d->ds_descriptor && d->ds_descriptor->name ? d->ds_descriptor->name : "?", producer,
                       d->ds_descriptor ? protobuf_c_message_get_packed_size(&d->ds_descriptor->base) : 0,
                       d->has_producer_id ? "" : "  (started when a session names it)");
        }
        printf("Tracing sessions (%d, %d started):\n", st->num_sessions, st->num_sessions_started);
        for (size_t i = 0; i < st->n_tracing_sessions; i++) {
                const Perfetto__Protos__TracingServiceState__TracingSession *s = st->tracing_sessions[i];
                uint64_t kb = 0;
                for (size_t k = 0; k < s->n_buffer_size_kb; k++)
                        kb += s->buffer_size_kb[k];
                printf("  %3llu  %-28s uid %-6d %4u data sources  %6llu KiB  %u ms", (unsigned long long) s->id,
                       s->state ? s->state : "?", s->consumer_uid, s->num_data_sources, (unsigned long long) kb,
                       s->duration_ms);
                if (s->unique_session_name)
                        printf("  name \"%s\"%s", s->unique_session_name, s->has_resident && s->resident ? " (resident)" : "");
                if (s->detach_key)
                        printf("  key \"%s\"", s->detach_key);
                if (s->output_path)
                        printf("  file %s", s->output_path);
                printf("\n");
        }
        protobuf_c_message_free_unpacked(reply, NULL);
        return EXIT_OK;
}

int cmd_capabilities(struct tracectl *t, int argc, char **argv) {
        if (argc > 1) {
                printf("Usage: tracectl capabilities\n\nShows what the service supports (QueryCapabilities).\n");
                return strcmp(argv[1], "--help") == 0 ? EXIT_OK : EXIT_USAGE;
        }
        int r = tracectl_connect(t);
        if (r != 0)
                return r;
        Perfetto__Protos__QueryCapabilitiesRequest rq = PERFETTO__PROTOS__QUERY_CAPABILITIES_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        r = tracectl_call(t, "QueryCapabilities", &rq.base, &perfetto__protos__query_capabilities_response__descriptor,
                          -EBADF, &reply, 5000);
        tracectl_disconnect(t);
        if (r < 0 || !reply) {
                fprintf(stderr, "tracectl: QueryCapabilities failed: %s\n", strerror(r < 0 ? -r : EIO));
                return EXIT_OTHER;
        }
        pbtxt_print(stdout, reply, 0);
        protobuf_c_message_free_unpacked(reply, NULL);
        return EXIT_OK;
}
