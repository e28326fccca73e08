/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>

#include "basic/macro.h"
#include "config-check.h"

/* The number of a field, from the schema. */
static uint32_t field_number(const ProtobufCMessageDescriptor *desc, const char *field) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, field);
        return f ? f->id : 0;
}

/* "NAME:LINE:COL: " where the field was written, else "NAME: PATH: ". */
_printf_(6, 7) static void error_at(FILE *out, const char *name, const struct pbtxt_positions *pos,
                                    const ProtobufCMessage *msg, uint32_t field, const char *fmt, ...) {
        unsigned line, col;
        va_list ap;
        if (msg && pbtxt_position_find(pos, msg, field, &line, &col))
                fprintf(out, "%s:%u:%u: ", name, line, col);
        else
                fprintf(out, "%s: ", name);
        va_start(ap, fmt);
        vfprintf(out, fmt, ap);
        va_end(ap);
        fputc('\n', out);
}

unsigned config_check(const Perfetto__Protos__TraceConfig *cfg, const struct pbtxt_positions *pos, const char *name,
                      FILE *out) {
        unsigned n = 0;

        for (size_t i = 0; i < cfg->n_buffers; i++)
                if (!cfg->buffers[i]->has_size_kb || cfg->buffers[i]->size_kb == 0) {
                        error_at(out, name, pos, &cfg->buffers[i]->base, 0,
                                 "buffers[%zu]: no size_kb: a buffer of no size holds nothing (e.g. size_kb: 65536)",
                                 i);
                        n++;
                }
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                const Perfetto__Protos__TraceConfig__DataSource *ds = cfg->data_sources[i];
                const Perfetto__Protos__DataSourceConfig *c = ds->config;
                if (!c || !c->name)
                        continue;
                uint32_t target = c->has_target_buffer ? c->target_buffer : 0;
                if (cfg->n_buffers == 0) {
                        error_at(out, name, pos, &ds->base, 0,
                                 "data_sources \"%s\": the config has no buffers, so its data would go nowhere "
                                 "(add e.g. buffers { size_kb: 65536 })",
                                 c->name);
                        n++;
                } else if (target >= cfg->n_buffers) {
                        error_at(out, name, pos, &c->base,
                                 field_number(&perfetto__protos__data_source_config__descriptor, "target_buffer"),
                                 "target_buffer: %" PRIu32 " of data source \"%s\" is past the last buffer (the "
                                 "config has %zu: 0..%zu)",
                                 target, c->name, cfg->n_buffers, cfg->n_buffers - 1);
                        n++;
                }
        }
        return n;
}
