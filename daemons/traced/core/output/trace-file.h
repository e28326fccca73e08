/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The output layer: every way a trace reaches a file, pipe or socket.
 * output-writer.h writes a regular file from a thread of its own,
 * output-path.h opens TraceConfig.output_path in the trace directory,
 * output-fd.h checks and writes a pipe, socket or device without
 * blocking, and this header the files the service makes itself: the copy
 * of a write_into_file session's file that a clone continues, and the
 * file SaveTraceForBugreport leaves. (The session's side of writing, which
 * packets go into the fd when, is sessions/session-output.c.) The
 * output layer knows nothing of sessions or the wire protocol; it
 * returns -errno and never logs.
 */

/* Appends all that from_fd holds, read from its start whatever its
 * offset, to to_fd. 0 or -errno. */
int trace_file_copy(int from_fd, int to_fd);

/* Creates the file for a bugreport trace: a new file *ret_tmp (removed
 * first if left over) next to *ret_path, bugreport.pftrace in $TMPDIR or
 * /tmp. Returns its fd; -ENOMEM with *ret_tmp NULL, or the open error
 * with *ret_tmp naming the file. The caller frees both names. */
int trace_file_bugreport_open(char **ret_path, char **ret_tmp);
/* Moves the finished file over path: 0, or -errno (then it is removed). */
int trace_file_bugreport_commit(const char *tmp, const char *path);
/* Removes an unfinished one. */
void trace_file_bugreport_discard(const char *tmp);
