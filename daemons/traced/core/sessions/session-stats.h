/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "perfetto/common/trace_stats.pb-c.h"
#include "perfetto/common/tracing_service_state.pb-c.h"

struct session;
struct traced_service;

/* TraceStats of a session, heap-allocated; free with the function below. */
Perfetto__Protos__TraceStats *session_build_trace_stats(struct session *s);
void session_free_trace_stats(Perfetto__Protos__TraceStats *st);

/* Keeps a producer's report on one of s's data sources for its TraceStats
 * (the first SERVICE_MAX_DS_ERRORS, each string cut to
 * SERVICE_MAX_DS_ERROR_LEN; the same report twice is kept once). True if
 * kept (new). */
bool session_add_ds_error(struct session *s, const char *producer, const char *data_source, const char *field,
                          const char *message);
/* The same for an instance lost with its producer (kind
 * KIND_INSTANCE_LOST; message says how, host-exits.c). */
bool session_add_ds_loss(struct session *s, const char *producer, const char *data_source, const char *message);
void session_free_ds_errors(struct session *s);

/* TracingServiceState as a consumer of viewer_uid may see it: producers
 * and data sources always, sessions of its uid (all for root). */
Perfetto__Protos__TracingServiceState *service_build_state(struct traced_service *svc, bool sessions_only,
                                                           uid_t viewer_uid);
void service_free_state(Perfetto__Protos__TracingServiceState *st);
