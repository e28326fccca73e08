/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What in a TraceConfig makes trace_processor report an error or data
 * loss in its stats table for every trace recorded with it. */

#include <stdbool.h>
#include <stdio.h>

#include "perfetto/config/trace_config.pb-c.h"

/* The flush period tracectl sets when it turns write_into_file on. */
#define CONFIG_LINT_FLUSH_PERIOD_MS 5000u

/* Prints one warning line per finding to out, each naming the stat
 * trace_processor would report; returns how many. write_into_file says
 * whether the session writes into a file (tracectl always does). */
unsigned config_lint(const Perfetto__Protos__TraceConfig *cfg, bool write_into_file, const char *name, FILE *out);
