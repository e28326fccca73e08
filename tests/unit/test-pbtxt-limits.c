/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What a text or binary config costs and what it may hold: adjacent
 * string literals are joined in linear time and memory (reallocations
 * are counted through the linker's --wrap=realloc), and integers too
 * large for their field are refused with a position, never truncated. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbtxt/pb-check.h"
#include "pbtxt/pbtxt.h"

#include "perfetto/config/trace_config.pb-c.h"

void *__real_realloc(void *p, size_t n);
static size_t n_reallocs;

void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) {
        n_reallocs++;
        return __real_realloc(p, n);
}

Test(pbtxt_limits, adjacent_strings_are_joined_in_linear_time) {
        const size_t n = 200000;
        char *text = malloc(n * 4 + 64);
        cr_assert_not_null(text);
        size_t len = (size_t) sprintf(text, "unique_session_name: ");
        for (size_t i = 0; i < n; i++) {
                memcpy(text + len, "\"a\" ", 4);
                len += 4;
        }
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        n_reallocs = 0;
        int r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len, "big.pbtxt", &m, &err);
        size_t used = n_reallocs;
        cr_assert_eq(r, 0, "%s", err ? err : "");
        const Perfetto__Protos__TraceConfig *c = (const void *) m;
        cr_assert_eq(strlen(c->unique_session_name), n);
        /* One growth per doubling, not one per literal. */
        cr_assert_lt(used, 64u, "%zu reallocations for %zu literals", used, n);
        protobuf_c_message_free_unpacked(m, NULL);
        free(text);
}

Test(pbtxt_limits, text_integer_out_of_range_is_refused_with_position) {
        static const char text[] = "duration_ms: 100\nbuffers {\n  size_kb: 1099511627780\n}\n";
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        int r = pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), "c.pbtxt", &m, &err);
        cr_assert_eq(r, -EINVAL);
        cr_assert_null(m);
        cr_assert_not_null(err);
        cr_assert(strstr(err, "c.pbtxt:3:12:") && strstr(err, "size_kb"), "error was \"%s\"", err);
        free(err);
}

static size_t packed_config(uint64_t size_kb, uint8_t *buf) {
        /* TraceConfig { buffers (1) { size_kb (1): size_kb } duration_ms (3): 100 } */
        uint8_t inner[16];
        size_t n = 0;
        inner[n++] = 1 << 3;
        for (uint64_t v = size_kb;; v >>= 7) {
                inner[n++] = (uint8_t) ((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                if (v < 0x80)
                        break;
        }
        size_t k = 0;
        buf[k++] = 1 << 3 | 2;
        buf[k++] = (uint8_t) n;
        memcpy(buf + k, inner, n);
        k += n;
        buf[k++] = 3 << 3;
        buf[k++] = 100;
        return k;
}

Test(pbtxt_limits, binary_integer_out_of_range_is_refused) {
        uint8_t buf[32];
        char *err = NULL;

        size_t n = packed_config(1024, buf);
        cr_assert_eq(pb_check_ranges(&perfetto__protos__trace_config__descriptor, buf, n, &err), 0);
        cr_assert_null(err);

        n = packed_config(1099511627780ull, buf);
        /* protobuf-c alone would keep the low 32 bits: 4. */
        Perfetto__Protos__TraceConfig *c = perfetto__protos__trace_config__unpack(NULL, n, buf);
        cr_assert_not_null(c);
        cr_assert_eq(c->buffers[0]->size_kb, 4u);
        perfetto__protos__trace_config__free_unpacked(c, NULL);

        cr_assert_eq(pb_check_ranges(&perfetto__protos__trace_config__descriptor, buf, n, &err), -ERANGE);
        cr_assert_not_null(err);
        cr_assert(strstr(err, "size_kb") && strstr(err, "1099511627780") && strstr(err, "byte 2"),
                  "error was \"%s\"", err);
        free(err);
}
