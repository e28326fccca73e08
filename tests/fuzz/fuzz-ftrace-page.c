/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A ring-buffer page from the kernel (or anything): parsed, and every
 * record encoded with a sched_switch-like format, must never go outside
 * the input. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/pb-buf.h"
#include "encode.h"
#include "format.h"
#include "page.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char format_text[] =
        "name: sched_switch\nID: 1\nformat:\n"
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
        "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
        "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
        "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
        "\tfield:__data_loc char[] name;\toffset:40;\tsize:4;\tsigned:0;\n"
        "\tfield:char buf[];\toffset:44;\tsize:0;\tsigned:0;\n";

static struct event_format fmt;
static bool ready;

static void on_rec(uint64_t ts, const uint8_t *rec, size_t len, void *ud) {
        ftrace_encode_event(ud, &fmt, ts, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (!ready) {
                if (format_parse(format_text, "sched", &fmt) < 0)
                        abort();
                ready = true;
        }
        /* The parser gets an exact-size copy so overreads are caught. */
        uint8_t *page = malloc(size ? size : 1);
        if (!page)
                return 0;
        memcpy(page, data, size);
        struct pb_buf w = {};
        FtraceEventBundle b;
        FtraceEventBundle_init(&b, pb_buf_stream(&w));
        (void) page_parse(page, size, on_rec, &b, NULL);
        if (traced_pb_msg_finish(&b.msg) < 0)
                abort();
        pb_buf_done(&w);
        free(page);
        return 0;
}
