/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds-errors.h"
#include "test-scratch.h"

static Perfetto__Protos__TraceStats__TracedDataSourceError err(const char *ds, const char *field, const char *msg) {
        Perfetto__Protos__TraceStats__TracedDataSourceError e = PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__INIT;
        e.data_source_name = (char *) ds;
        e.field = (char *) field;
        e.message = (char *) msg;
        return e;
}

Test(ds_errors, the_data_source_and_field_come_first) {
        char buf[256];
        Perfetto__Protos__TraceStats__TracedDataSourceError e =
                err("linux.ftrace", "ftrace_events \"a/b\"", "no such event");
        ds_error_format(&e, buf, sizeof(buf));
        cr_assert_str_eq(buf, "linux.ftrace: ftrace_events \"a/b\": no such event");
        e = err("linux.bpf_stack", NULL, "no kernel BTF");
        ds_error_format(&e, buf, sizeof(buf));
        cr_assert_str_eq(buf, "linux.bpf_stack: no kernel BTF");
        e = err(NULL, "", NULL);
        ds_error_format(&e, buf, sizeof(buf));
        cr_assert_str_eq(buf, "a data source: failed");
}

Test(ds_errors, each_error_is_printed_once) {
        Perfetto__Protos__TraceStats__TracedDataSourceError a = err("x", "f", "one"), b = err("y", "g", "two");
        Perfetto__Protos__TraceStats__TracedDataSourceError *list[] = { &a, &b };
        Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
        st.traced_data_source_errors = list;
        st.n_traced_data_source_errors = 1;
        char *text = NULL;
        size_t len = 0, printed = 0;
        FILE *f = open_memstream(&text, &len);
        cr_assert(ds_errors_new(&st, printed));
        cr_assert_eq(ds_errors_print_new(&st, &printed, f), 1);
        st.n_traced_data_source_errors = 2;
        cr_assert_eq(ds_errors_print_new(&st, &printed, f), 2);
        cr_assert_not(ds_errors_new(&st, printed));
        cr_assert_eq(ds_errors_print_new(&st, &printed, f), 2);
        cr_assert_eq(ds_errors_print_new(NULL, &printed, f), 0);
        fclose(f);
        cr_assert_str_eq(text, "tracectl: x: f: one\ntracectl: y: g: two\n");
        free(text);
}

Test(ds_errors, the_last_trace_stats_of_a_file) {
        char dir[256], path[300];
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "traced-test-ds-errors-"), 0);
        snprintf(path, sizeof(path), "%s/t.pftrace", dir);
        FILE *f = fopen(path, "w");
        /* Two packets with trace_stats (TracePacket field 35): the first
         * with producers_connected 1, the last with 2. */
        for (unsigned n = 1; n <= 2; n++) {
                const unsigned char pkt[] = { 0x0a, 5, 0x9a, 0x02, 2, 0x10, (unsigned char) n, };
                fwrite(pkt, 1, 7, f);
        }
        fclose(f);
        Perfetto__Protos__TraceStats *st = ds_errors_last_trace_stats(path);
        cr_assert_not_null(st);
        cr_assert_eq(st->producers_connected, 2);
        perfetto__protos__trace_stats__free_unpacked(st, NULL);
        snprintf(path, sizeof(path), "%s/none", dir);
        cr_assert_null(ds_errors_last_trace_stats(path));
        cr_assert_eq(test_scratch_remove(dir), 0);
}
