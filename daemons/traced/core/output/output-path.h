/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Trace files the service opens itself (TraceConfig.output_path): only
 * inside its trace directory ([service] trace_directory in traced.conf,
 * default /var/lib/traced/traces). Anything else is opened by the consumer,
 * which passes the file descriptor with EnableTracing (tracectl -o). */

/* Opens output_path for writing: it must be absolute, name a file below
 * dir (dir_fd is open on dir), contain no "." or ".." component and no
 * symbolic link below dir, and be a new file or an existing regular file
 * with a single link (then truncated). Nothing is created or truncated
 * when it is refused. Returns the fd, or -errno with *ret_error (may be
 * NULL) saying why. */
int output_path_open(int dir_fd, const char *dir, const char *output_path, char **ret_error);
