/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Dropping privileges for the service core: the process that parses what
 * untrusted producers and consumers send keeps no capabilities and, when
 * started as root, runs as an unprivileged user. */

#include <stdbool.h>
#include <stdint.h>
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

/*
 * Becomes a plugin host's user in a freshly forked child of a supervisor
 * running as root (only async-signal-safe calls): every capability outside
 * keep leaves the bounding set, the process switches to uid/gid with no
 * supplementary groups, holding keep (effective, permitted, inheritable)
 * and raising each of keep in the ambient set, so that keep, and only
 * keep, survives the exec of the host; then no_new_privs (ambient
 * capabilities survive it). What of keep the caller does not hold is not
 * held after (the host says so when its plugin asks for it).
 */
int privileges_enter_host(uid_t uid, gid_t gid, uint64_t keep);

/* What traced's supervisor uses itself (bits = capability numbers): the
 * switch of the core and of the plugin hosts to their users (CAP_SETUID,
 * CAP_SETGID), emptying or trimming their bounding sets (CAP_SETPCAP),
 * and signals to the core and the hosts, which run as other users
 * (CAP_KILL). */
#define PRIVILEGES_SUPERVISOR_CAPS                                                                     \
        (((uint64_t) 1 << 6) | ((uint64_t) 1 << 7) | ((uint64_t) 1 << 8) | ((uint64_t) 1 << 5))

/*
 * Limits this process to keep: every other capability leaves the bounding
 * set (so no child gets it back, even across exec as root) and the
 * effective and permitted sets; the inheritable and ambient sets are
 * cleared. Capabilities not held before stay not held. *ret_kept (may be
 * NULL) is the effective set after. Returns -EPERM if anything outside
 * keep is left.
 */
int privileges_limit(uint64_t keep, uint64_t *ret_kept);
