/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The root tracefs instance's state as a session found it, kept in a file
 * as well as in memory, so that a plugin host killed mid-session does not
 * leave the machine's tracing_on, buffer size and event switches changed:
 * the next session (or plugin start) that takes the root's flock puts it
 * back from the file. */

#include <stddef.h>

/* Plugins' state lives apart from the sockets' directory, /run/traced
 * (which must stay reachable for the traced group): traced.service makes
 * it its RuntimeDirectory, kept across restarts; a traced started by hand
 * creates it 0700. */
#define ROOT_JOURNAL_PATH "/run/traced-plugins/ftrace-root-state"

/* A tracefs file (relative to the root) and the value to write back. */
struct saved_file {
        char *rel;
        char *value;
};

/* Writes the n saved files to path (replacing it atomically; directory
 * created 0700 when missing; the file is 0600). */
int root_journal_save(const char *path, const struct saved_file *files, size_t n);

/* Puts back, newest first, what a journal at path says into the tracefs
 * tree at root, then removes the journal. The caller holds the root's
 * flock. Returns the number of files written back (0: no journal), or a
 * negative errno (the journal is then left for a later try). */
int root_journal_replay(const char *path, const char *root);
