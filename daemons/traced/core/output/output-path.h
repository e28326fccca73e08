/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Trace files the service opens itself (TraceConfig.output_path): only
 * inside its trace directory ([service] trace_directory in traced.conf,
 * default /var/lib/traced/traces). Anything else is opened by the consumer,
 * which passes the file descriptor with EnableTracing (tracectl -o). */

/* Opens output_path for writing: it must be absolute, name a file below
 * dir (dir_fd is open on dir), contain no "." or ".." component and no
 * symbolic link below dir, and be a new file or an existing regular file
 * with a single link. Nothing is created when it is refused, and an
 * existing file is not truncated: the caller does that once the session
 * is accepted (output_path_claim), or removes the file it created
 * (*ret_created, may be NULL) when the session is refused. Returns the
 * fd, or -errno with *ret_error (may be NULL) saying why. */
int output_path_open(int dir_fd, const char *dir, const char *output_path, bool *ret_created, char **ret_error);
/* The session writing into fd (from output_path_open) was accepted: the
 * old content goes. 0 or -errno. */
int output_path_claim(int fd);
/* The session was refused: removes output_path, which output_path_open
 * created (checked as output_path_open checks it). */
void output_path_unlink(int dir_fd, const char *dir, const char *output_path);

/* Rotation into the trace directory: output_path names a directory below
 * dir, ending in "/" (made, mode 2770, when its last component is
 * missing; checked as output_path_open checks a file). Its fd (O_RDONLY |
 * O_DIRECTORY), or -errno with *ret_error. */
int output_path_open_dir(int dir_fd, const char *dir, const char *output_path, char **ret_error);
/* A directory fd a consumer of uid passed to rotate in: NULL when the
 * service may write there for it (uid owns the directory, or is root),
 * else why not. The service creates files in it with its own
 * credentials, so the directory must also let the service's user in. */
const char *output_path_check_dir(int fd, uid_t uid);
