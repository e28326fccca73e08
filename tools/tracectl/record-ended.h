/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A recording that ended before its time because the service stopped
 * (traced_end_reason in the EnableTracing answer and the trace's last
 * TraceStats) or went away (its core crashed or was killed): what was
 * recorded until then is kept and the user told so. */

#include <stdbool.h>
#include <stdint.h>

#include "record-output.h"

/* The service went away without finishing the session (no end reason). */
#define RECORD_SERVICE_GONE (-1)

/* Words for a TraceStats.TracedEndReason (tracectl's messages, summary),
 * and its name in JSON. */
const char *trace_end_reason_text(int reason);
const char *trace_end_reason_name(int reason);

/* Keeps what file holds (for RECORD_SERVICE_GONE cut after its last whole
 * packet) as out and says why the recording ended after recorded_usec of
 * asked_ms (0: no duration). service_opens: the service wrote out itself
 * (output_path), there is nothing of ours to keep. Returns
 * EXIT_ENDED_EARLY, or the exit code of a recording that failed (nothing
 * was written, or the file cannot be kept: out is then left as it was). */
int record_ended_early(struct record_output *file, const char *out, bool service_opens, int reason,
                       uint64_t recorded_usec, uint32_t asked_ms);
