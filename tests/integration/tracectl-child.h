/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* tracectl run by a test: spawned with its standard output and error in
 * files of a directory, waited for while the test's event loop serves its
 * producers, and its JSON checked by python3. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

struct tracectl_child {
        pid_t pid;
        char out[512];      /* its standard output */
        char err_path[512]; /* its standard error */
};

enum {
        /* SIGINT and SIGTERM ignored when tracectl starts, as a shell
         * leaves them for a command it runs in the background. */
        TRACECTL_CHILD_SIGNALS_IGNORED = 1 << 0,
};

/* tracectl --socket SOCKET ARGS... (NULL-terminated), its output files
 * under dir. */
void tracectl_child_spawn(struct tracectl_child *c, const char *dir, const char *socket, const char *const *args,
                          unsigned flags);
/* Runs the loop until the child exits: its exit status (128 + signal when
 * killed), or -ETIMEDOUT after timeout_ms (it is killed then). */
int tracectl_child_wait(struct tracectl_child *c, sd_event *event, unsigned timeout_ms);
/* Runs the loop until the child's standard error holds text (true), or it
 * exited, or timeout_ms passed (false). */
bool tracectl_child_wait_stderr(struct tracectl_child *c, sd_event *event, const char *text, unsigned timeout_ms);
/* A file's contents, NUL-terminated (NULL when it cannot be read). */
char *test_slurp(const char *path, size_t *ret_len);
/* Runs `tracectl --socket SOCKET ARGS | python3 CHECK` (CHECK reads the
 * JSON as d and asserts), serving the loop meanwhile; whether both
 * succeeded. The script goes under dir. */
bool tracectl_check_json(sd_event *event, const char *dir, const char *socket, const char *args, const char *check);
/* The same for a tracectl that is to exit with status. */
bool tracectl_check_json_status(sd_event *event, const char *dir, const char *socket, const char *args, int status,
                                const char *check);
