/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `tracectl query --json`: the service's state (QueryServiceState) as one
 * JSON object with stable keys (documented in tracectl(1)). */

#include <stdio.h>

#include "perfetto/common/tracing_service_state.pb-c.h"

/* Writes it and a newline: 0 or -ENOMEM. */
int query_print_json(FILE *f, const Perfetto__Protos__TracingServiceState *st);
