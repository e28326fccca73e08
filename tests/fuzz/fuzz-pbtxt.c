/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Parses arbitrary text as a TraceConfig; whatever parses must print and
 * pack without trouble. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pbtxt/pbtxt.h"

#include "perfetto/config/trace_config.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ProtobufCMessage *m = NULL;
        char *err = NULL;

        if (pbtxt_parse(&perfetto__protos__trace_config__descriptor, (const char *) data, size, "fuzz", &m, &err) == 0) {
                FILE *f = fopen("/dev/null", "w");
                if (f) {
                        pbtxt_print(f, m, 0);
                        fclose(f);
                }
                size_t n = protobuf_c_message_get_packed_size(m);
                uint8_t *buf = malloc(n ? n : 1);
                if (buf) {
                        protobuf_c_message_pack(m, buf);
                        free(buf);
                }
                protobuf_c_message_free_unpacked(m, NULL);
        }
        free(err);
        return 0;
}
