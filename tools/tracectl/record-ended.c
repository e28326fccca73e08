/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "record-ended.h"
#include "tracectl.h"

#include "perfetto/common/trace_stats.pb-c.h"

const char *trace_end_reason_text(int reason) {
        switch (reason) {
        case PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_SERVICE_STOPPED:
                return "the tracing service was stopped or restarted (systemctl stop or restart, a package upgrade)";
        case RECORD_SERVICE_GONE:
                return "the tracing service went away (its core crashed or was killed)";
        default:
                return "the tracing service ended it early, for a reason this tracectl does not know";
        }
}

const char *trace_end_reason_name(int reason) {
        switch (reason) {
        case PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_SERVICE_STOPPED:
                return "service_stopped";
        default:
                return "unknown";
        }
}

/* "4.1 s of the 30 s asked", or "4.1 s" with no duration asked. */
static void describe_time(char *buf, size_t size, uint64_t recorded_usec, uint32_t asked_ms) {
        if (asked_ms)
                snprintf(buf, size, "%.1f s of the %.3g s asked", (double) recorded_usec / 1e6, (double) asked_ms / 1e3);
        else
                snprintf(buf, size, "%.1f s", (double) recorded_usec / 1e6);
}

int record_ended_early(struct record_output *file, const char *out, bool service_opens, int reason,
                       uint64_t recorded_usec, uint32_t asked_ms) {
        uint64_t packets = 0, cut = 0;
        char took[96];
        int r;

        describe_time(took, sizeof(took), recorded_usec, asked_ms);
        if (reason == RECORD_SERVICE_GONE && !service_opens && file->tmp_path) {
                /* Nobody finished the file: it holds what the service had
                 * written by its last write, and maybe a torn packet. */
                r = record_output_trim(file, &packets, &cut);
                if (r < 0) {
                        fprintf(stderr, "tracectl: %s after %s; what it wrote cannot be read back: %s\n",
                                trace_end_reason_text(reason), took, strerror(-r));
                        return EXIT_SESSION_FAILED;
                }
                if (packets == 0) {
                        fprintf(stderr, "tracectl: %s after %s, before it wrote anything into the trace\n",
                                trace_end_reason_text(reason), took);
                        return EXIT_SESSION_FAILED;
                }
        }
        r = record_output_commit(file);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot rename the trace to %s: %s\n", out, strerror(-r));
                return EXIT_OTHER;
        }
        if (reason == RECORD_SERVICE_GONE) {
                fprintf(stderr, "tracectl: the recording ended early: %s after %s; %s holds what it had written "
                                "into it by then",
                        trace_end_reason_text(reason), took, out);
                if (packets)
                        fprintf(stderr, " (%" PRIu64 " packets%s)", packets, cut ? ", a torn last one cut off" : "");
                fputs(", without the service's closing statistics\n", stderr);
        } else
                fprintf(stderr, "tracectl: the recording ended early: %s after %s; %s holds what was recorded until "
                                "then\n",
                        trace_end_reason_text(reason), took, out);
        return EXIT_ENDED_EARLY;
}
