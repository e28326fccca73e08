/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The fd a write_into_file trace goes to, at the level of bytes: whether
 * it can take a trace, writing to a pipe, socket or device without ever
 * blocking the loop, and the words for a failed write. (A regular file is
 * written by output-writer.h; which packets go when is the session's,
 * sessions/session-output.c.) */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NULL when fd can take a trace, else why not (static text). A pipe,
 * socket or device (not a regular file) is switched to non-blocking mode:
 * *ret_pollable then; *ret_regular for a regular file. */
const char *output_fd_check(int fd, bool *ret_pollable, bool *ret_regular);

/* Writes buf[*off, len) to fd, moving *off on (*ret_progress, may be
 * NULL, set once anything went). 0 when it all went, 1 when a pollable fd
 * would block, -errno on a write error (-EIO when it takes nothing). */
int output_fd_write(int fd, bool pollable, const uint8_t *buf, size_t *off, size_t len, bool *ret_progress);

/* A message for a write error (static storage). */
const char *output_error_message(int error);
