/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What a summary says of the session itself: when its data sources
 * started, the service's statistics, what was not recorded. */

#include <inttypes.h>

#include "record-ended.h"
#include "summary.h"

void summary_print_start(FILE *f, const struct summary *s) {
        if (!s->tracing_started_ts)
                return;
        if (s->all_started_ts >= s->tracing_started_ts)
                fprintf(f, "Started:        every data source %.3f s after tracing started%s\n",
                        (double) (s->all_started_ts - s->tracing_started_ts) / 1e9,
                        s->slow_starting ? " (some late: see Not recorded)" : "");
        else
                fprintf(f, "Started:        not every data source started%s\n",
                        s->slow_starting ? " (see Not recorded)" : "");
}

void summary_print_session(FILE *f, const struct summary *s) {
        if (s->have_stats)
                fprintf(f,
                        "Service stats:  %" PRIu64 " chunks (%" PRIu64 " bytes, headers and padding included) "
                        "from the producers,\n"
                        "                %" PRIu64 " chunks overwritten, %" PRIu64 " discarded, %" PRIu64
                        " invalid packets, %" PRIu64 " ABI violations,\n"
                        "                %" PRIu64 " packets given up by their writers part-way\n",
                        s->chunks_written, s->bytes_written, s->chunks_overwritten, s->chunks_discarded,
                        s->stats_invalid_packets, s->abi_violations, s->writer_packet_loss);
        if (s->end_reason)
                fprintf(f, "Ended early:    %s\n", trace_end_reason_text(s->end_reason));
        for (size_t i = 0; i < s->n_ds_errors; i++)
                fprintf(f, "%s%s\n", i == 0 ? "Not recorded:   " : "                ", s->ds_errors[i]);
        if (s->n_ds_errors_total > s->n_ds_errors)
                fprintf(f, "                and %zu more\n", s->n_ds_errors_total - s->n_ds_errors);
}
