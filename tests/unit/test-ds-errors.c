/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds-errors.h"
#include "trace-reader.h"
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
        cr_assert_eq(ds_errors_print_new(&st, &printed, NULL, f), 1);
        st.n_traced_data_source_errors = 2;
        cr_assert_eq(ds_errors_print_new(&st, &printed, NULL, f), 2);
        cr_assert_not(ds_errors_new(&st, printed));
        cr_assert_eq(ds_errors_print_new(&st, &printed, NULL, f), 2);
        cr_assert_eq(ds_errors_print_new(NULL, &printed, NULL, f), 0);
        fclose(f);
        cr_assert_str_eq(text, "tracectl: x: f: one\ntracectl: y: g: two\n");
        free(text);
}

Test(ds_errors, a_lost_instance_names_its_producer_and_is_counted) {
        char buf[256];
        Perfetto__Protos__TraceStats__TracedDataSourceError lost =
                err("test.plugin", NULL, "lost before it started: its plugin host (x.so, pid 9) was killed by SIGSEGV");
        lost.producer_name = (char *) "traced.test";
        lost.has_kind = true;
        lost.kind = PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_INSTANCE_LOST;
        ds_error_format(&lost, buf, sizeof(buf));
        cr_assert_str_eq(buf, "test.plugin of traced.test: lost before it started: its plugin host (x.so, pid 9) "
                              "was killed by SIGSEGV");
        /* A producer's own report does not name it (the data source does). */
        Perfetto__Protos__TraceStats__TracedDataSourceError rep = err("linux.ftrace", "f", "bad");
        rep.producer_name = (char *) "traced.ftrace";
        ds_error_format(&rep, buf, sizeof(buf));
        cr_assert_str_eq(buf, "linux.ftrace: f: bad");

        Perfetto__Protos__TraceStats__TracedDataSourceError *list[] = { &rep, &lost, &lost };
        Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
        st.traced_data_source_errors = list;
        st.n_traced_data_source_errors = 2;
        size_t printed = 0, n_lost = 0;
        FILE *f = fopen("/dev/null", "w");
        cr_assert_eq(ds_errors_print_new(&st, &printed, &n_lost, f), 2);
        cr_assert_eq(n_lost, 1);
        st.n_traced_data_source_errors = 3;
        cr_assert_eq(ds_errors_print_new(&st, &printed, &n_lost, f), 3);
        cr_assert_eq(n_lost, 2, "each lost instance is counted once");
        cr_assert_eq(ds_errors_print_new(&st, &printed, &n_lost, f), 3);
        cr_assert_eq(n_lost, 2);
        fclose(f);
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

/* Every packet the file reader hands out, in order, as "len:first-byte;". */
static void list_packets(struct trace_reader *r, char *out, size_t size, int *ret) {
        const uint8_t *data;
        size_t len, n = 0;
        int k;
        out[0] = '\0';
        while ((k = trace_reader_next(r, &data, &len)) > 0)
                n += (size_t) snprintf(out + n, size - n, "%zu:%d;", len, len ? data[0] : -1);
        *ret = k;
        trace_reader_close(r);
}

/* The mapped reader (what the end of tracectl record uses to find the last
 * TraceStats without copying the trace) hands out the packets the stream
 * reader does, skips what is not a packet, and calls a cut file damaged. */
Test(trace_reader, mapped_reads_what_the_stream_reader_reads) {
        char dir[256], path[300];
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "traced-test-trace-reader-"), 0);
        snprintf(path, sizeof(path), "%s/t.pftrace", dir);
        /* A packet; a varint field (not a packet); an empty packet; a
         * length-delimited field 2 (not a packet); a 300-byte packet (a
         * two-byte length). */
        uint8_t file[400];
        size_t n = 0;
        const uint8_t head[] = { 0x0a, 3, 7, 8, 9, 0x10, 0x96, 0x01, 0x0a, 0, 0x12, 2, 1, 2, 0x0a, 0xac, 0x02 };
        memcpy(file, head, sizeof(head));
        n = sizeof(head);
        memset(file + n, 0x55, 300);
        n += 300;
        /* Whole, and cut at every byte: the readers agree on each. */
        for (size_t cut = n; cut > 0; cut--) {
                FILE *f = fopen(path, "w");
                cr_assert_not_null(f);
                cr_assert_eq(fwrite(file, 1, cut, f), cut);
                fclose(f);
                char a[256], b[256];
                int ra, rb;
                struct trace_reader r;
                cr_assert_eq(trace_reader_open(&r, path), 0);
                list_packets(&r, a, sizeof(a), &ra);
                cr_assert_eq(trace_reader_open_mapped(&r, path), 0);
                list_packets(&r, b, sizeof(b), &rb);
                cr_assert_str_eq(b, a, "%zu bytes: mapped read \"%s\", the stream \"%s\"", cut, b, a);
                cr_assert_eq(rb, ra, "%zu bytes: mapped ended %d, the stream %d", cut, rb, ra);
                if (cut == n) {
                        cr_assert_str_eq(a, "3:7;0:-1;300:85;");
                        cr_assert_eq(ra, 0);
                } else if (cut > sizeof(head) - 3)
                        cr_assert_eq(ra, -EBADMSG, "a file cut in its last packet (%zu of %zu bytes) ended %d", cut,
                                     n, ra);
        }
        /* An empty file has no packets; a directory cannot be mapped. */
        FILE *f = fopen(path, "w");
        fclose(f);
        struct trace_reader r;
        cr_assert_eq(trace_reader_open_mapped(&r, path), 0);
        const uint8_t *data;
        size_t len;
        cr_assert_eq(trace_reader_next(&r, &data, &len), 0);
        trace_reader_close(&r);
        cr_assert_lt(trace_reader_open_mapped(&r, dir), 0);
        cr_assert_eq(test_scratch_remove(dir), 0);
}
