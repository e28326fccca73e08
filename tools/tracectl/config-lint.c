/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdbool.h>

#include "config-lint.h"

unsigned config_lint(const Perfetto__Protos__TraceConfig *cfg, bool write_into_file, const char *name, FILE *out) {
        unsigned n = 0;

        if (!write_into_file)
                return 0;
        if (!(cfg->has_flush_period_ms && cfg->flush_period_ms)) {
                fprintf(out,
                        "tracectl: warning: %s: write_into_file without flush_period_ms: data still in the "
                        "producers' buffers at the end may be lost, and trace_processor reports "
                        "config_write_into_file_no_flush (severity error); set e.g. flush_period_ms: %u\n",
                        name, CONFIG_LINT_FLUSH_PERIOD_MS);
                n++;
        }
        for (size_t i = 0; i < cfg->n_buffers; i++) {
                const Perfetto__Protos__TraceConfig__BufferConfig *b = cfg->buffers[i];
                if (b->has_fill_policy &&
                    b->fill_policy == PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD) {
                        fprintf(out,
                                "tracectl: warning: %s: buffers[%zu] is DISCARD with write_into_file: it stops "
                                "taking data once full even though the file is drained, and trace_processor "
                                "reports config_write_into_file_discard (data loss); use RING_BUFFER\n",
                                name, i);
                        n++;
                }
        }
        return n;
}
