/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What in a TraceConfig makes a recording that holds nothing, refused
 * before anything is recorded: data sources with no buffer to write into,
 * a target_buffer past the last buffer, a buffer without a size. Each
 * error names the file and, for a text config, the line and column of the
 * field at fault (FILE:LINE:COL: field: what), as parse errors do. */

#include <stdio.h>

#include "pbtxt/pbtxt.h"

#include "perfetto/config/trace_config.pb-c.h"

/* Prints one line per error to out; returns how many. pos may be NULL (a
 * binary config: the field is named by its path). */
unsigned config_check(const Perfetto__Protos__TraceConfig *cfg, const struct pbtxt_positions *pos, const char *name,
                      FILE *out);
