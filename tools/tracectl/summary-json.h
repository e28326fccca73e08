/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `tracectl summary --json`: what summary_print says, as one JSON object
 * with stable keys (documented in tracectl(1)), for scripts. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "summary.h"

/* Writes the object for the trace file path (file_bytes long, of which
 * readable_bytes hold whole packets; complete: whether it was read to its
 * end) and a newline. 0 or -ENOMEM. */
int summary_print_json(FILE *f, const struct summary *s, const char *path, uint64_t file_bytes,
                       uint64_t readable_bytes, bool complete, size_t top_n);
