/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Supervision of plugin hosts: one traced-plugin-host process per plugin
 * found in the plugin directory. Each host gets one end of a socketpair
 * to the service (the other end goes to the service core through
 * handoff) and a pipe it writes a heartbeat into. A host that dies or
 * stops beating is killed and restarted with backoff; a plugin the host
 * refuses (exit 78) is reported and not restarted. */

#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "supervisor/host-exec.h"
#include "supervisor/host-probe.h"

struct plugins;

/* Gives the service's end of a new plugin host's connection to the
 * service core. Takes fd. */
typedef int (*plugins_handoff_fn)(int fd, pid_t host_pid, const char *plugin, void *userdata);
struct control_exit;
/* A plugin host that was handed off exited (or died): how. */
typedef void (*plugins_exited_fn)(pid_t host_pid, const char *plugin, const struct control_exit *how,
                                  void *userdata);

/* [plugins] hosts=lazy: plugin's host is not running; data_sources are the
 * data sources it offers (control.h, CONTROL_PLUGIN_PARKED). */
typedef void (*plugins_parked_fn)(const char *plugin, const char *data_sources, void *userdata);

#define PLUGINS_MAX 64

/* What a plugin declared (plugins_declared_capabilities()), for its host
 * (as this kernel grants it: capability_for_kernel()), and whom its host
 * runs as. */
struct plugins_declared {
        char file[256]; /* its file name in the plugin directory */
        uint64_t caps;
        /* The plugin hosts' user cannot run it (supervisor/host-probe.h):
         * its host runs as root, holding only caps, or, with
         * plugins_options.user_required, it is refused for reason. */
        bool as_root;
        bool refused;
        char reason[256];
        /* The plugin file and the host binary that answered. */
        struct host_probe_stamp plugin_stamp, host_stamp;
};

struct plugins_options {
        const char *dir;
        const char *host_binary;
        char *const *disabled; /* plugin names (file names without .so) not to run */
        unsigned n_disabled;
        uint64_t watchdog_usec; /* 0: no hang detection */
        /* traced started as root: each host runs as host_uid/host_gid with
         * its plugin's declared capabilities (supervisor/host-exec.h). */
        bool switch_user;
        uid_t host_uid;
        gid_t host_gid;
        /* traced.conf's plugin_user_required=yes: a plugin the hosts' user
         * cannot run is refused rather than run as root. */
        bool user_required;
        /* Filled by plugins_declared_capabilities(). */
        struct plugins_declared declared[PLUGINS_MAX];
        unsigned n_declared;
        plugins_handoff_fn handoff;
        plugins_exited_fn exited; /* optional */
        /* traced.conf's [plugins] hosts=lazy: a plugin's host starts when
         * plugins_start_host() asks for it, not with traced (parked is
         * told of each plugin that waits so). */
        bool lazy;
        /* How long such a host may serve no data source before the core
         * asks to stop it (plugins_stop_host; 0: never). */
        uint64_t idle_usec;
        plugins_parked_fn parked;
        void *userdata;
};

/* Starts a host for each plugin of o->dir (not disabled), each handed off
 * before this returns; one that could not start is retried later. */
int plugins_start(sd_event *event, const struct plugins_options *o, struct plugins **ret);
/* Starts the host of plugin (its name: the file name without .so), when it
 * is not running or waiting for its restart. Returns 0, -ENOENT for no
 * such plugin, -EPERM for a plugin refused, or -errno when the host could
 * not start. */
int plugins_start_host(struct plugins *p, const char *plugin);
/* The core saw the host pid of plugin (started for a session) serve
 * nothing for a while: it is stopped (SIGTERM) and its plugin parked again,
 * not restarted (its exit is told as the service's stop is: not a
 * failure). A plugins_start_host() meanwhile starts it again once it
 * exited. Returns 0, or -ESRCH when pid is not that plugin's host now, or
 * the plugin's host is not one started on demand. */
int plugins_stop_host(struct plugins *p, const char *plugin, pid_t pid);
/* The hang timeout for hosts from now on (0: none); a host's pipe is set
 * up when it starts, so a change from or to 0 applies to hosts started
 * later. */
void plugins_set_watchdog(struct plugins *p, uint64_t usec);
/* The service is stopping: the hosts go on serving (the core flushes and
 * stops their data sources), but one that exits or dies from now on is
 * not restarted, nor is one waiting for its restart. */
void plugins_stop_restarting(struct plugins *p);
/* SIGTERM to every host, SIGKILL to those still there after 2 s. */
void plugins_stop(struct plugins *p);

/* The union of the capabilities the plugins of o->dir (not disabled)
 * declare, each asked of the plugin host (--print-capabilities) in a
 * process holding none (as the hosts' user when switching), each noted in
 * o->declared for its host. When switching, a plugin the hosts' user
 * cannot run (its probe fails as that user, answers as root, and a host
 * holding what it declares cannot load it either: --check) is noted to
 * run as root, with one warning, or refused (o->user_required). A plugin
 * that does not answer adds nothing (the host refuses it later anyway).
 * Returns 0, or -errno when the directory cannot be read. (In
 * plugins-declared.c.) */
int plugins_declared_capabilities(struct plugins_options *o, uint64_t *ret);

/* Whom o's hosts run as (a plugin's host may run as root instead:
 * plugins_declared.as_root). */
void plugins_host_identity(const struct plugins_options *o, struct host_identity *ret);

/* Before a host of d's plugin (at path) starts again: when the plugin
 * file or the host binary changed since d's answer, asks again whether
 * the hosts' user (id) can run it (--check, holding d->caps; when not,
 * whether root can), and notes the answer in d as
 * plugins_declared_capabilities() does. Nothing for a plugin that did not
 * answer at the start (d->file empty). Blocks until the probes ended. */
void plugins_declared_recheck(struct plugins_declared *d, const char *path, const char *host_binary,
                              const struct host_identity *id, bool user_required);

/* [plugins] hosts=lazy: asks, for each of the n plugins at paths (decls:
 * what they declared), which data sources it offers, in a process started
 * as its host would be (traced-plugin-host --print-data-sources). Each
 * answer into ret_text[i] ("NAME FLAGS\n" lines), ret_r[i] 0 or -errno
 * (logged: such a plugin's host is started at once). Blocks until the
 * probes ended. (In plugins-declared.c.) */
int plugins_probe_data_sources(const char *const *paths, const struct plugins_declared *const *decls, size_t n,
                               const char *host_binary, const struct host_identity *id, char (*ret_text)[1024],
                               int *ret_r);

/* Finds the *.so files of dir that are not disabled, sorted by name.
 * Returns the number found (at most max) or -errno. */
int plugins_scan(const char *dir, char *const *disabled, unsigned n_disabled, char **ret_paths, unsigned max);
