/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* tracectl record --rotate and --keep: the service cuts the recording
 * into numbered files in a directory (TraceConfig.traced_rotation);
 * tracectl opens the directory and passes it with EnableTracing. */

#include <stdint.h>
#include <stdio.h>

#include "perfetto/config/trace_config.pb-c.h"

struct record_rotate {
        uint64_t file_size_bytes;
        uint32_t period_ms;
        uint32_t keep_files;
        uint64_t keep_bytes;
};

/* --rotate SIZE|DURATION[,...]: a size ends in b (kb, mb, gb, as -b
 * takes them), anything else is a duration (as -t takes them). 0 or
 * -EINVAL. */
int record_rotate_parse(const char *spec, struct record_rotate *r);
/* --keep N|SIZE: a number of files, or a size (kb, mb, gb). */
int record_keep_parse(const char *spec, struct record_rotate *r);
/* Puts r into cfg->traced_rotation. -ENOMEM. */
int record_rotate_apply(Perfetto__Protos__TraceConfig *cfg, const struct record_rotate *r);
/* Opens (making it when missing: group traced, mode 2770, so that the
 * service writes there and the user reads back) the directory to rotate
 * in. The fd, or -errno. */
int record_rotate_open_dir(const char *path);
/* Lists the trace files in the directory (fd) to f. */
void record_rotate_list(int dir_fd, const char *path, FILE *f);
