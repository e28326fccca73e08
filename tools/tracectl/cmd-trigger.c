/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl trigger: activates triggers over the producer port, as a
 * producer does (upstream's `perfetto --trigger` does the same). */

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "trace-reader.h"
#include "tracectl.h"

#include "perfetto/ipc/producer_port.pb-c.h"

static void trigger_help(void) {
        printf("Usage: tracectl trigger [--producer-socket PATH] NAME...\n"
               "\n"
               "Activates the triggers NAME... in the tracing service: every session\n"
               "whose trigger_config names one of them reacts (a STOP_TRACING session\n"
               "stops, e.g. one recorded with --stop-on-trigger NAME; START_TRACING\n"
               "starts; CLONE_SNAPSHOT clones). Triggers go over the producer socket:\n"
               "--producer-socket, else $PERFETTO_PRODUCER_SOCK_NAME, else producer.sock\n"
               "in the directory of the consumer socket (/run/traced/producer.sock).\n");
}

/* TracePacket.trigger, Trigger.trigger_name */
#define TRACE_PACKET_TRIGGER 46
#define TRIGGER_NAME 1

bool trace_trigger_fired(const char *path, const char *name) {
        struct trace_reader r;
        if (trace_reader_open(&r, path) < 0)
                return true; /* nothing to say about it */
        bool fired = false;
        const uint8_t *data;
        size_t len;
        while (!fired && trace_reader_next(&r, &data, &len) > 0) {
                struct pbr_field f, n;
                fired = pbr_get(data, len, TRACE_PACKET_TRIGGER, false, &f) && f.wire_type == 2 &&
                        pbr_get(f.data, f.len, TRIGGER_NAME, false, &n) && n.wire_type == 2 &&
                        n.len == strlen(name) && memcmp(n.data, name, n.len) == 0;
        }
        trace_reader_close(&r);
        return fired;
}

/* producer.sock beside the consumer socket. */
static char *sibling_producer_socket(const char *consumer) {
        _cleanup_free_ char *copy = strdup(consumer);
        char *ret = NULL;
        if (!copy || asprintf(&ret, "%s/producer.sock", dirname(copy)) < 0)
                return NULL;
        return ret;
}

int cmd_trigger(struct tracectl *t, int argc, char **argv) {
        static const struct option opts[] = {
                { "producer-socket", required_argument, NULL, 'p' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *path = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 'p':
                        path = optarg;
                        break;
                case 'h':
                        trigger_help();
                        return EXIT_OK;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                fprintf(stderr, "tracectl trigger: name at least one trigger\n");
                return EXIT_USAGE;
        }
        _cleanup_free_ char *sibling = NULL;
        if (!path)
                path = getenv("PERFETTO_PRODUCER_SOCK_NAME");
        if (!path)
                path = sibling = sibling_producer_socket(t->socket);
        if (!path)
                return EXIT_OTHER;

        int r = tracectl_connect_port(t, path, "ProducerPort");
        if (r != 0)
                return r;
        Perfetto__Protos__InitializeConnectionRequest init = PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
        init.producer_name = (char *) "tracectl";
        r = tracectl_call(t, "InitializeConnection", &init.base,
                          &perfetto__protos__initialize_connection_response__descriptor, -EBADF, NULL, 5000);
        Perfetto__Protos__ActivateTriggersRequest at = PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
        at.n_trigger_names = (size_t) (argc - optind);
        at.trigger_names = argv + optind;
        if (r >= 0)
                r = tracectl_call(t, "ActivateTriggers", &at.base,
                                  &perfetto__protos__activate_triggers_response__descriptor, -EBADF, NULL, 5000);
        tracectl_disconnect(t);
        if (r < 0) {
                fprintf(stderr, "tracectl: the service at %s did not take the triggers: %s\n", path, strerror(-r));
                return EXIT_SESSION_FAILED;
        }
        for (int i = optind; i < argc; i++)
                printf("Activated trigger \"%s\".\n", argv[i]);
        return EXIT_OK;
}
