/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Asking traced-plugin-host about a plugin before its host runs, in a
 * process started exactly as a host is (supervisor/host-exec.h): what the
 * plugin declares (--print-capabilities), and whether a host of the plugin
 * hosts' user can run it at all (--check: the host loads the plugin as it
 * would to serve it and exits).
 *
 * A host runs as the plugin hosts' user only when that user can execute
 * the host binary, load its shared libraries and those of the plugin (the
 * plugin file itself comes as a descriptor): a build in a directory that
 * user cannot search (root's home, mode 0700) fails there. Rather than
 * repeat the dynamic loader's search, traced asks the system: the probe
 * runs as that user, and what it could not reach is in its error output
 * (the loader's or the host's message, or the path the probe's exec could
 * not search, which host_exec_child() writes).
 *
 * The answer holds for one version of the plugin file and the host binary
 * (host_probe_stamp): traced asks again when either changed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct host_identity;

/* How long a probe may take before it is killed (a plugin's constructor
 * that hangs must not hang traced's start). */
#define HOST_PROBE_TIMEOUT_MSEC 10000

enum host_probe_mode {
        HOST_PROBE_CAPABILITIES, /* --print-capabilities: holding nothing */
        HOST_PROBE_CHECK,        /* --check: holding what its host would */
        /* --print-data-sources: holding what its host would, the plugin
         * initialized and destroyed. */
        HOST_PROBE_DATA_SOURCES,
};

struct host_probe {
        pid_t pid; /* 0: not started */
        int out;   /* its standard output */
        int err;   /* a memfd: its standard error */
};

/* Starts the host binary on plugin as id says (caps: what it holds when
 * switching user). Returns 0 or -errno (logged). */
int host_probe_start(struct host_probe *p, const char *host_binary, const struct host_identity *id,
                     const char *plugin, enum host_probe_mode mode, uint64_t caps);

/*
 * Waits for the probe (killing it after HOST_PROBE_TIMEOUT_MSEC) and reaps
 * it. Returns 0 (the plugin loaded; *ret_caps, may be NULL, what it
 * declares in HOST_PROBE_CAPABILITIES mode), -EPERM when the host refused
 * the plugin (exit status 78), -ETIMEDOUT, or -ENOEXEC for any other
 * failure (the host binary could not be executed, a library not loaded).
 * err (NUL-terminated, may be NULL) gets the probe's last line of error
 * output, for a message; *ret_output (may be NULL) all of it (malloc'd,
 * NULL when empty), to pass on to the log.
 */
int host_probe_finish(struct host_probe *p, uint64_t *ret_caps, char *err, size_t err_size, char **ret_output);

/* As host_probe_finish(), for a probe whose standard output is kept
 * whole: into out (NUL-terminated; -EMSGSIZE when it does not fit). */
int host_probe_finish_text(struct host_probe *p, char *out, size_t out_size, char *err, size_t err_size,
                           char **ret_output);

/* Kills and reaps a started probe (nothing if not started). */
void host_probe_abandon(struct host_probe *p);

/* One version of a file (a plugin or the host binary), as stat() sees it. */
struct host_probe_stamp {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
};

/* The stamp of path (following symbolic links); a path that cannot be
 * stat'ed gets a zero stamp. */
void host_probe_stamp(const char *path, struct host_probe_stamp *ret);
bool host_probe_stamp_equal(const struct host_probe_stamp *a, const struct host_probe_stamp *b);
