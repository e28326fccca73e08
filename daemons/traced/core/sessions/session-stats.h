/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "perfetto/common/trace_stats.pb-c.h"
#include "perfetto/common/tracing_service_state.pb-c.h"

struct session;
struct traced_service;

/* TraceStats of a session, heap-allocated; free with the function below. */
Perfetto__Protos__TraceStats *session_build_trace_stats(struct session *s);
void session_free_trace_stats(Perfetto__Protos__TraceStats *st);

/* TracingServiceState as a consumer of viewer_uid may see it: producers
 * and data sources always, sessions of its uid (all for root). */
Perfetto__Protos__TracingServiceState *service_build_state(struct traced_service *svc, bool sessions_only,
                                                           uid_t viewer_uid);
void service_free_state(Perfetto__Protos__TracingServiceState *st);
