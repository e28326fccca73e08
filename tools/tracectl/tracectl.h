/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "consumer/consumer-client.h"
#include "ipc/ipc.h"

/* Exit codes. */
enum {
        EXIT_OK = 0,
        EXIT_OTHER = 1,
        EXIT_USAGE = 2,
        EXIT_CONFIG = 3,
        EXIT_UNREACHABLE = 4,
        EXIT_SESSION_FAILED = 5,
        /* The recording ended before its time because the service stopped
         * or went away: the file holds what was recorded until then. 75 is
         * sysexits' EX_TEMPFAIL (try again later). */
        EXIT_ENDED_EARLY = 75,
};

struct tracectl {
        const char *socket;
        sd_event *event;
        ipc_client *client;
};

/* Connects and binds ConsumerPort; prints why not and returns
 * EXIT_UNREACHABLE on failure. */
int tracectl_connect(struct tracectl *t);
/* The same on another socket and port ("ProducerPort"). */
int tracectl_connect_port(struct tracectl *t, const char *path, const char *port);
void tracectl_disconnect(struct tracectl *t);
/* How long tracectl waits for the service's socket to appear and accept. */
#define TRACECTL_CONNECT_WAIT_MS 10000u
/* The longest session traced accepts (its limits.h, SERVICE_MAX_DURATION_MS):
 * checked before asking. */
#define TRACECTL_MAX_DURATION_MS (7.0 * 24 * 3600 * 1000)
/* How long record waits for the data sources its config names. */
#define TRACECTL_DATA_SOURCE_WAIT_MS 10000u
/* A QueryServiceState while the service starts: traced holds it until its
 * plugins registered their data sources (start_timeout_sec, 10 s by
 * default). */
#define TRACECTL_QUERY_AT_START_MS 15000u

/* consumer_call() on t's connection: 0, or -errno. */
int tracectl_call(struct tracectl *t, const char *method, const ProtobufCMessage *args,
                  const ProtobufCMessageDescriptor *reply_desc, int fd, ProtobufCMessage **ret_reply, unsigned timeout_ms);

int cmd_record(struct tracectl *t, int argc, char **argv);
int cmd_attach(struct tracectl *t, int argc, char **argv);
int cmd_stop(struct tracectl *t, int argc, char **argv);
int cmd_query(struct tracectl *t, int argc, char **argv);
int cmd_trigger(struct tracectl *t, int argc, char **argv);
int cmd_snapshot(struct tracectl *t, int argc, char **argv);
/* Whether the trace at path records trigger name firing (true when the
 * file cannot be read: nothing is known then). */
bool trace_trigger_fired(const char *path, const char *name);
int cmd_capabilities(struct tracectl *t, int argc, char **argv);
int cmd_print(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_report(int argc, char **argv);
/* Prints the summary of a trace file; returns an exit code. */
int print_trace_summary(const char *path, unsigned top_n);
