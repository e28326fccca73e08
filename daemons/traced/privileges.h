/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Dropping privileges for the service core: the process that parses what
 * untrusted producers and consumers send keeps no capabilities and, when
 * started as root, runs as an unprivileged user. */

#include <stdbool.h>
#include <sys/types.h>

/* Resolves a user name (or a numeric uid) to its uid and primary gid. */
int privileges_lookup_user(const char *name, uid_t *ret_uid, gid_t *ret_gid);

/*
 * Empties the capability bounding set, switches to uid/gid with no
 * supplementary groups when running as root and uid is not 0, clears the
 * effective, permitted, inheritable and ambient sets and sets
 * no_new_privs. Checks the result: returns -EPERM if any capability is
 * left.
 */
int privileges_drop(uid_t uid, gid_t gid);
