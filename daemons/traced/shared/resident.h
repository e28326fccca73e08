/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Resident sessions: the TraceConfig text files NAME.cfg of a sessions
 * directory (/etc/traced/sessions.d), which traced starts itself, keeps
 * running and lists under NAME. The supervisor (or, without one, the
 * core) reads the directory at start and at each reload and hands the
 * core the whole set in a sealed memfd over the control channel; the core
 * starts what is new, stops what is gone and restarts what changed.
 *
 * A file is NAME.cfg with NAME of [A-Za-z0-9_.-] (at most
 * RESIDENT_NAME_MAX bytes, not starting with a dot); other names (editor
 * backups, .dpkg-old, hidden files) are not read. A bad file is reported
 * through on_error with its path, line and field, and skipped: the other
 * files still count. Nothing here logs. */

#include <stddef.h>
#include <stdint.h>

#define RESIDENT_NAME_MAX 64
#define RESIDENT_MAX_SESSIONS 32
#define RESIDENT_MAX_FILE_SIZE (1024u * 1024u)

struct resident_config {
        char *name;      /* NAME, the session's unique_session_name */
        char *path;      /* the file it came from */
        uint8_t *config; /* the packed TraceConfig, unique_session_name = name */
        size_t size;
};

struct resident_set {
        struct resident_config *v;
        size_t n;
};

typedef void (*resident_error_fn)(const char *message, void *userdata);

/* Parses one file's text: 0, or -EINVAL with *ret_error
 * ("PATH:LINE:COL: what (field F)"), or -ENOMEM. */
int resident_parse(const char *name, const char *path, const char *text, size_t len, struct resident_config *ret,
                   char **ret_error);
/* Reads every NAME.cfg of dir into *ret (sorted by name). A missing
 * directory is an empty set. Returns the number of files skipped as bad
 * (each told to on_error), or -errno when the directory cannot be read. */
int resident_load_dir(const char *dir, struct resident_set *ret, resident_error_fn on_error, void *userdata);
/* The set in a sealed memfd, for the control channel. */
int resident_set_to_memfd(const struct resident_set *set, int *ret_fd);
/* Reads a set written by resident_set_to_memfd; -EBADMSG if malformed. */
int resident_set_from_fd(int fd, struct resident_set *ret);
void resident_set_done(struct resident_set *set);
