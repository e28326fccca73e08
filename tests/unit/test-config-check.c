/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-check.h"
#include "pbtxt/pbtxt.h"
#include "test-scratch.h"

/* The errors config_check prints for text, one per line. */
static char *check(const char *text, unsigned *ret_n) {
        ProtobufCMessage *m = NULL;
        char *err = NULL, *out = NULL;
        size_t len = 0;
        struct pbtxt_positions pos = {};
        cr_assert_eq(pbtxt_parse_positions(&perfetto__protos__trace_config__descriptor, text, strlen(text), "c.pbtxt",
                                           &m, &err, &pos),
                     0, "%s", err);
        FILE *f = open_memstream(&out, &len);
        *ret_n = config_check((Perfetto__Protos__TraceConfig *) m, &pos, "c.pbtxt", f);
        fclose(f);
        pbtxt_positions_done(&pos);
        protobuf_c_message_free_unpacked(m, NULL);
        return out;
}

Test(config_check, a_config_that_records_is_accepted) {
        unsigned n;
        char *out = check("buffers { size_kb: 1024 }\nbuffers { size_kb: 64 }\n"
                          "data_sources { config { name: \"a\" } }\n"
                          "data_sources { config { name: \"b\" target_buffer: 1 } }\n",
                          &n);
        cr_assert_eq(n, 0, "%s", out);
        cr_assert_str_empty(out);
        free(out);
        /* No data source, no buffer: a session of the service's packets. */
        out = check("duration_ms: 1000\n", &n);
        cr_assert_eq(n, 0, "%s", out);
        free(out);
}

Test(config_check, no_buffers) {
        unsigned n;
        char *out = check("duration_ms: 1000\n\ndata_sources { config { name: \"a\" } }\n", &n);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(out, "c.pbtxt:3:1: data_sources \"a\": the config has no buffers, so its data would go "
                              "nowhere (add e.g. buffers { size_kb: 65536 })\n");
        free(out);
}

Test(config_check, target_buffer_past_the_last_buffer) {
        unsigned n;
        char *out = check("buffers { size_kb: 1024 }\n"
                          "data_sources { config { name: \"a\"\n"
                          "  target_buffer: 5 } }\n",
                          &n);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(out, "c.pbtxt:3:3: target_buffer: 5 of data source \"a\" is past the last buffer (the config "
                              "has 1: 0..0)\n");
        free(out);
}

Test(config_check, a_buffer_without_a_size) {
        unsigned n;
        char *out = check("buffers { size_kb: 1024 }\nbuffers { fill_policy: DISCARD }\n"
                          "data_sources { config { name: \"a\" } }\n",
                          &n);
        cr_assert_eq(n, 1);
        cr_assert(strncmp(out, "c.pbtxt:2:1: buffers[1]: no size_kb", 35) == 0, "%s", out);
        free(out);
}

/* A binary config has no positions: the file and the field. */
Test(config_check, without_positions) {
        Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
        Perfetto__Protos__TraceConfig__DataSource ds = PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT;
        Perfetto__Protos__DataSourceConfig dsc = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
        Perfetto__Protos__TraceConfig__DataSource *list[] = { &ds };
        dsc.name = (char *) "a";
        ds.config = &dsc;
        cfg.n_data_sources = 1;
        cfg.data_sources = list;
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        cr_assert_eq(config_check(&cfg, NULL, "c.pb", f), 1);
        fclose(f);
        cr_assert(strncmp(out, "c.pb: data_sources \"a\": the config has no buffers", 49) == 0, "%s", out);
        free(out);
}
