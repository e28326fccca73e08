/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The file `tracectl record -o FILE` writes. The trace goes into a new
 * file beside FILE (same directory, a hidden temporary name) and replaces
 * FILE by rename() only once the recording finished: a recording that
 * fails, or is refused, leaves FILE as it was and no temporary file.
 * FILE that is not a regular file (a pipe, /dev/stdout, a device) is
 * written directly: there is nothing there to keep. FILE "-" is the
 * standard output (not when it is a terminal). */

#include <stdbool.h>
#include <stdint.h>

struct record_output {
        char *path;     /* what the user named (symbolic links resolved) */
        char *tmp_path; /* the file being written; NULL when writing path directly */
        int fd;
};

#define RECORD_OUTPUT_INIT { .fd = -EBADF }

/* Creates the file to record into. 0, or -errno (nothing is left then;
 * -ENOTTY: "-" and the standard output is a terminal). */
int record_output_open(struct record_output *o, const char *path);
/* For a recording whose service went away mid-write: cuts the file being
 * written after its last whole packet (a torn one after it is dropped).
 * *ret_packets: the whole packets kept, *ret_cut: the bytes cut off. A
 * file written directly (a pipe, a device) is left alone: 0 packets, 0
 * cut. 0 or -errno. */
int record_output_trim(struct record_output *o, uint64_t *ret_packets, uint64_t *ret_cut);
/* The recording is complete: the file becomes path. 0 or -errno (the
 * temporary file is removed then, path left as it was). */
int record_output_commit(struct record_output *o);
/* Frees o; before a commit (the recording failed) the temporary file is
 * removed and path is left untouched. Safe on a never-opened o. */
void record_output_free(struct record_output *o);
