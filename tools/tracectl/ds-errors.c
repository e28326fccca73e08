/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/pbr.h"
#include "ds-errors.h"
#include "trace-reader.h"

/* TracePacket.trace_stats */
#define TRACE_PACKET_TRACE_STATS 35

void ds_error_format(const Perfetto__Protos__TraceStats__TracedDataSourceError *e, char *buf, size_t size) {
        bool of = ds_error_is_loss(e) && e->producer_name && e->producer_name[0];
        snprintf(buf, size, "%s%s%s: %s%s%s", e->data_source_name ? e->data_source_name : "a data source",
                 of ? " of " : "", of ? e->producer_name : "",
                 e->field && e->field[0] ? e->field : "", e->field && e->field[0] ? ": " : "",
                 e->message && e->message[0] ? e->message : "failed");
}

size_t ds_errors_print_new(const Perfetto__Protos__TraceStats *st, size_t *n_printed, size_t *n_lost, FILE *f) {
        if (!st)
                return 0;
        for (size_t i = *n_printed; i < st->n_traced_data_source_errors; i++) {
                char line[1280];
                if (n_lost && ds_error_is_loss(st->traced_data_source_errors[i]))
                        (*n_lost)++;
                ds_error_format(st->traced_data_source_errors[i], line, sizeof(line));
                fprintf(f, "tracectl: %s\n", line);
        }
        if (st->n_traced_data_source_errors > *n_printed)
                *n_printed = st->n_traced_data_source_errors;
        return st->n_traced_data_source_errors;
}

Perfetto__Protos__TraceStats *ds_errors_last_trace_stats(const char *path) {
        struct trace_reader r;
        /* Mapped, only each packet's field keys are looked at: not a copy
         * of the whole trace to find the few packets that matter. */
        if (trace_reader_open_mapped(&r, path) < 0 && trace_reader_open(&r, path) < 0)
                return NULL;
        Perfetto__Protos__TraceStats *last = NULL;
        const uint8_t *data;
        size_t len;
        while (trace_reader_next(&r, &data, &len) > 0) {
                struct pbr_field f;
                if (!pbr_get(data, len, TRACE_PACKET_TRACE_STATS, false, &f) || f.wire_type != 2)
                        continue;
                Perfetto__Protos__TraceStats *st = perfetto__protos__trace_stats__unpack(NULL, f.len, f.data);
                if (!st)
                        continue;
                if (last)
                        perfetto__protos__trace_stats__free_unpacked(last, NULL);
                last = st;
        }
        trace_reader_close(&r);
        return last;
}
