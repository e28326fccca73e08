/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* How the supervisor executes traced-plugin-host, for a plugin's host or
 * for the question of what it declares (--print-capabilities).
 *
 * The supervisor opens the plugin file itself and checks the file it
 * opened (a regular file owned by root or traced's user, not writable by
 * everyone); the host loads that very file from HOST_EXEC_PLUGIN_FD
 * (--plugin-fd), so it needs no access to the plugin directory, and a
 * file swapped after the check is not what runs.
 *
 * Started as root, the supervisor runs every host as the plugin hosts'
 * user (plugins_options.host_uid), with no supplementary groups: a host
 * holds the capabilities its plugin declared as that user's permitted,
 * effective, inheritable and ambient sets and nothing else (its bounding
 * set trimmed to them, no_new_privs set), so that a plugin declaring none
 * reaches only what that user may. Such a host gets, when traced has a
 * $CACHE_DIRECTORY, a directory of its own in it, PLUGIN (the plugin's
 * file name without .so), root's, of that user's group, mode 2770, as
 * HOST_EXEC_CACHE_FD, and CACHE_DIRECTORY=/proc/self/fd/HOST_EXEC_CACHE_FD:
 * the cache directory itself stays root's 0700, so no other process of
 * that user (another plugin's host, holding fewer capabilities, cannot
 * ptrace this one for its descriptors) reaches it. Not started as root,
 * hosts run as traced's own user and drop to their plugins'
 * capabilities themselves, as traced-plugin-host does when started by
 * hand. */

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define HOST_EXEC_PLUGIN_FD 5
#define HOST_EXEC_PLUGIN_FD_STR "5"
#define HOST_EXEC_CACHE_FD 6
#define HOST_EXEC_CACHE_FD_STR "6"

struct host_exec {
        char *argv[12];
        char **envp;   /* environ, or a copy of it (owned) */
        bool own_envp;
        char exec_context[512];
        int plugin_fd; /* parked at or above 10 until the child moves it */
        int cache_fd;  /* -EBADF: none */
        bool switch_user;
        uid_t uid;
        gid_t gid;
        uint64_t caps;
};

/* Who the hosts run as: filled once by the supervisor. */
struct host_identity {
        bool switch_user; /* started as root: hosts run as uid/gid */
        uid_t uid;
        gid_t gid;
        char name[64]; /* uid's user name (its number without one), for messages */
};

/*
 * Opens and checks plugin_path, finds the host's SELinux context, and
 * (switching user) sets up the host's cache directory for plugin name
 * (NULL: none);
 * args are the host's arguments before the plugin path (the binary
 * first, at most 8). caps: what the host is given when switching user.
 * Logs what fails; returns 0 or -errno.
 */
int host_exec_prepare(struct host_exec *e, const struct host_identity *id, const char *name,
                      const char *plugin_path, uint64_t caps, char *const *args, size_t n_args);

/* In the forked child, once the caller placed its own descriptors (3 and
 * up, below HOST_EXEC_PLUGIN_FD, or stdout): moves the plugin and cache
 * descriptors into place, enters the SELinux context and the host's user
 * and capabilities, ties the child to its parent and execs. Only
 * async-signal-safe calls. Never returns (exit status 127 on failure). */
_Noreturn void host_exec_child(struct host_exec *e);

/* Frees what host_exec_prepare() made (the parent's copies). */
void host_exec_done(struct host_exec *e);

/* Whether a plugin file or directory (st, of path) is safe to load code
 * from: owned by root or by traced's own user, not writable by everyone.
 * Says why not in why. */
bool host_exec_file_trusted(const struct stat *st, const char *path, bool want_dir, char *why, size_t why_size);
