/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* tracectl run by a test as a user runs it: its own process, its output
 * and errors in files of their own, the test's event loop (serving the
 * producers of the test's process) running while it waits; and the trace
 * files it leaves, checked. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

struct tracectl_child {
        pid_t pid;
        char out[512];
        char err_path[512];
};

/* Starts TRACECTL_BINARY --socket socket ARGS... (NULL-terminated), its
 * stdout and stderr into new files under dir (each run its own: two may
 * run at once). 0 or -errno. */
int tracectl_child_spawn(struct tracectl_child *c, const char *dir, const char *socket, const char *const *args);
/* Runs event until the child exits: its exit status (128 + the signal
 * that killed it), or -ETIMEDOUT after timeout_ms (it is killed then). */
int tracectl_child_wait(struct tracectl_child *c, sd_event *event, unsigned timeout_ms);
/* A file's bytes, NUL-terminated (at most 4 MiB of them); NULL if it
 * cannot be read. Freed by the caller. */
char *test_slurp(const char *path, size_t *ret_len);
/* The raw producer's packets (raw-producer.h) with payload_size bytes in
 * the trace file at path: asserts that it is a trace, that they come in
 * order from the first with none missing and none damaged; their count. */
size_t tracectl_count_test_packets(const char *path, size_t payload_size);
/* traced_end_reason of the last TraceStats in the trace file at path (0
 * when it has none), and whether it has one. */
int tracectl_trace_end_reason(const char *path, bool *ret_have_stats);
