/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "raw-producer.h"
#include "trace-file-checks.h"
#include "tracectl-child.h"

#include "perfetto/common/trace_stats.pb-c.h"

/* The packets of the trace file at path (asserted to be one): their
 * count, *ret_buf the file's bytes they point into (freed by the caller). */
static int split_trace_file(const char *path, uint8_t **ret_buf, struct pbr_field *pkts, size_t max) {
        size_t len;
        uint8_t *buf = (uint8_t *) test_slurp(path, &len);
        cr_assert_not_null(buf, "no trace file %s", path);
        int n = pbr_split_trace(buf, len, pkts, max);
        cr_assert_geq(n, 0, "%s is not a trace", path);
        *ret_buf = buf;
        return MIN(n, (int) max);
}

static struct pbr_field pkts[100000];

size_t tracectl_count_test_packets(const char *path, size_t payload_size) {
        uint8_t *buf;
        int n = split_trace_file(path, &buf, pkts, ELEMENTSOF(pkts));
        size_t found = 0;
        char *expected = malloc(payload_size + 1);
        for (int i = 0; i < n; i++) {
                struct pbr_field t, str, seq;
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t))
                        continue;
                cr_assert(pbr_get(t.data, t.len, 1, false, &str));
                cr_assert(pbr_get(t.data, t.len, 2, false, &seq));
                cr_assert_eq(seq.varint, found, "packet %zu out of order", found);
                raw_producer_payload((uint32_t) seq.varint, payload_size, expected);
                cr_assert_eq(str.len, payload_size);
                cr_assert_arr_eq(str.data, expected, payload_size);
                found++;
        }
        free(expected);
        free(buf);
        return found;
}

int tracectl_trace_end_reason(const char *path, bool *ret_have_stats) {
        uint8_t *buf;
        int n = split_trace_file(path, &buf, pkts, ELEMENTSOF(pkts));
        int reason = 0;
        *ret_have_stats = false;
        for (int i = 0; i < n; i++) {
                struct pbr_field st;
                if (!pbr_get(pkts[i].data, pkts[i].len, 35, false, &st)) /* TracePacket.trace_stats */
                        continue;
                Perfetto__Protos__TraceStats *ts = perfetto__protos__trace_stats__unpack(NULL, st.len, st.data);
                cr_assert_not_null(ts, "an undecodable TraceStats in %s", path);
                *ret_have_stats = true;
                reason = ts->has_traced_end_reason ? (int) ts->traced_end_reason : 0;
                perfetto__protos__trace_stats__free_unpacked(ts, NULL);
        }
        free(buf);
        return reason;
}
