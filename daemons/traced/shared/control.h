/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The channel between traced's supervisor and its service core: a
 * SOCK_SEQPACKET socketpair. The supervisor hands over the service's end of
 * each plugin host's connection, naming the host's pid and plugin; says
 * when it has started every plugin host of the service's start (the core
 * holds sessions until those registered their data sources); names a
 * plugin host that exited; and, with [plugins] hosts=lazy, names a plugin
 * whose host is not running and the data sources it offers. The core asks
 * the supervisor for one thing only: to start the host of such a plugin
 * (CONTROL_START_PLUGIN, which the supervisor checks against the plugins
 * it knows). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CONTROL_NAME_MAX 64
#define CONTROL_PATH_MAX 1024

enum control_kind {
        CONTROL_PRODUCER = 0,      /* fd: the service's end of a plugin host's connection */
        CONTROL_TRACE_DIRECTORY, /* fd (or none): the trace directory, path names it */
        CONTROL_PLUGINS_LAUNCHED, /* every plugin host of the start is handed over */
        CONTROL_PLUGIN_EXITED,   /* the plugin host pid (plugin name) exited: how in exit */
        CONTROL_RESIDENT_SESSIONS, /* fd: a sealed memfd, the whole set of resident sessions (resident.h) */
        /* Plugin name's host is not running (parked): path lists the data
         * sources it offers, a line each as traced-plugin-host
         * --print-data-sources printed them: "NAME", then
         * " will_notify_on_stop" and " handles_incremental_state_clear"
         * when its descriptor says so. */
        CONTROL_PLUGIN_PARKED,
        /* Core to supervisor: start the host of parked plugin name. */
        CONTROL_START_PLUGIN,
        /* Core to supervisor: plugin name's host pid (started for a
         * session) has served none for the plugin's idle_usec: stop it. */
        CONTROL_STOP_PLUGIN,
};

struct control_msg {
        int kind;                     /* enum control_kind */
        pid_t pid;                    /* the plugin host */
        char name[CONTROL_NAME_MAX]; /* the plugin, NUL-terminated */
        char path[CONTROL_PATH_MAX]; /* CONTROL_TRACE_DIRECTORY: NUL-terminated */
        /* CONTROL_TRACE_DIRECTORY: traced.conf's max_use= and keep_free=
         * (bytes, 0: none). */
        uint64_t max_use, keep_free;
        /* CONTROL_PLUGIN_PARKED: how long its host may serve no data
         * source before the core asks to stop it (0: never). */
        uint64_t idle_usec;
        /* CONTROL_PLUGIN_EXITED: how the host ended. */
        struct control_exit {
                int code;   /* siginfo's si_code: CLD_EXITED, CLD_KILLED, CLD_DUMPED */
                int status; /* its exit status or signal */
                /* The supervisor's watchdog killed it after this long
                 * without a sign of life (0: not the watchdog). */
                uint64_t hung_usec;
                /* The supervisor is stopping the plugins: not a failure. */
                bool stopping;
                /* The host refused its plugin (and said why in reason,
                 * NUL-terminated, when it could). */
                bool refused;
                char reason[256];
        } exit;
};

/* The exit status with which a plugin host refuses its plugin (sysexits'
 * EX_CONFIG): the supervisor does not restart it. */
#define CONTROL_EXIT_PLUGIN_REFUSED 78

int control_pair(int ret_fds[2]);
/* Sends msg with fd attached (the fd stays the caller's). */
int control_send_producer(int ctl_fd, const struct control_msg *msg, int fd);
/* Sends the trace directory: path and an O_PATH fd on it, or (fd < 0) that
 * there is none, with the retention caps. The fd stays the caller's. */
int control_send_trace_directory(int ctl_fd, const char *path, int fd, uint64_t max_use, uint64_t keep_free);
/* CONTROL_PLUGINS_LAUNCHED, and CONTROL_PLUGIN_EXITED for host pid. */
int control_send_plugins_launched(int ctl_fd);
int control_send_plugin_exited(int ctl_fd, pid_t pid, const char *name, const struct control_exit *how);
/* Says how a plugin host ended, for the log and a session's errors:
 * "was killed by SIGSEGV", "exited with status 3", "was killed by
 * traced's watchdog after 2.0 s without a sign of life", "refused its
 * plugin: REASON". Returns buf. */
const char *control_exit_describe(const struct control_exit *how, char *buf, size_t size);
/* CONTROL_PLUGIN_PARKED: -ENAMETOOLONG when the list does not fit. */
int control_send_plugin_parked(int ctl_fd, const char *name, const char *data_sources, uint64_t idle_usec);
/* CONTROL_START_PLUGIN and CONTROL_STOP_PLUGIN (from the core). */
int control_send_start_plugin(int ctl_fd, const char *name);
int control_send_stop_plugin(int ctl_fd, const char *name, pid_t pid);
/* Sends the resident sessions: fd from resident_set_to_memfd (stays the
 * caller's). */
int control_send_resident(int ctl_fd, int fd);
/* Receives one message. Returns 1 with *ret_fd set (or -EBADF if none came
 * with it), 0 at end of file, -EAGAIN when nothing is pending, or -errno;
 * a malformed message is -EBADMSG (any fd it carried is closed). */
int control_recv(int ctl_fd, struct control_msg *ret_msg, int *ret_fd);
/* control_recv(), a malformed message skipped with a warning naming peer
 * ("the supervisor", "the service core"): never -EBADMSG. */
int control_recv_next(int ctl_fd, const char *peer, struct control_msg *ret_msg, int *ret_fd);
