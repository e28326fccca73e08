/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Reads arbitrary bytes as a trace and runs every report and the summary
 * over its packets: damaged interning, missing callstacks, cleared state
 * at any point must never crash or leak. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "basic/pbr.h"
#include "tools/tracectl/profile.h"
#include "tools/tracectl/summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct profile p;
        struct summary *s = malloc(sizeof(*s));
        if (!s)
                return 0;
        profile_init(&p, NULL);
        summary_init(s);
        size_t pos = 0;
        struct pbr_field f;
        while (pbr_next(data, size, &pos, &f) > 0) {
                if (f.number != 1 || f.wire_type != 2)
                        continue;
                if (profile_add_packet(&p, f.data, f.len) == -ENOMEM)
                        break;
                summary_add_packet(s, f.data, f.len);
        }
        profile_finish(&p);
        summary_finish(s);
        FILE *out = fopen("/dev/null", "w");
        if (out) {
                struct report_options o = { .top_n = 10 };
                (void) report_text(out, &p, &o);
                (void) report_folded(out, &p);
                (void) report_svg(out, &p, &o);
                o.icicle = true;
                (void) report_svg(out, &p, &o);
                summary_print(out, s, 10);
                fclose(out);
        }
        summary_done(s);
        free(s);
        profile_done(&p);
        return 0;
}
