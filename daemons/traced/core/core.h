/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The service core: the event loop that serves producers and consumers on
 * the two listening sockets. Under the supervisor it runs in its own,
 * unprivileged process and receives plugin hosts' connections over the
 * control socket. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#define LISTEN_MAX_EXTRA 8u

/* A further producer listener: another UNIX socket, or TCP / vsock. */
struct extra_listener {
        int fd;
        bool relay; /* BindService("RelayPort") may succeed on it */
};

struct traced_service;

struct core_options {
        int producer_fd; /* listening sockets, taken */
        int consumer_fd;
        bool producer_relay; /* the RelayPort is offered on producer_fd */
        struct extra_listener extra[LISTEN_MAX_EXTRA]; /* further producer listeners, taken */
        size_t n_extra;
        bool from_systemd;
        const char *producer_path; /* for the log */
        const char *consumer_path;
        int control_fd; /* from the supervisor, taken; -EBADF when none */
        /* Without a supervisor: the trace directory (output-path.h), NULL
         * for none. Under one, the supervisor sends it. */
        const char *trace_dir;
        /* Without a supervisor: the sessions directory (resident sessions,
         * shared/resident.h), read at start and on SIGHUP; NULL for none.
         * Under one, the supervisor sends the sessions. */
        const char *sessions_dir;
        /* traced.conf's max_use= and keep_free= (0: none), likewise. */
        uint64_t max_use, keep_free;
        /* Data source names only plugin hosts, root and trusted_uids may
         * register (NAME or PREFIX*). */
        const char *const *trusted_names;
        size_t n_trusted_names;
        const uid_t *trusted_uids;
        size_t n_trusted_uids;
        /* Under a supervisor running plugin hosts: the longest the service
         * holds the sessions of its start until those registered their
         * data sources (ports/startup-hold.h); 0: no hold. */
        uint64_t plugin_start_timeout_usec;
        /* Optional: called once the service listens (e.g. to start plugins
         * in process) and when it shuts down. */
        int (*started)(sd_event *event, struct traced_service *svc, void *userdata);
        void (*stopping)(void *userdata);
        void *userdata;
};

/* Runs until SIGTERM/SIGINT or the supervisor goes away. Then it stops
 * taking new sessions, ends every session (its data sources flushed and
 * stopped, its file finished, its consumer told) and returns; what is not
 * done after CORE_STOP_TIMEOUT_MS is finished with what it holds (at once
 * on a second signal). A supervisor kills a core still running
 * CORE_STOP_KILL_MS after it asked it to stop; both leave systemd's
 * TimeoutStopSec (90 s by default) room. Returns 0 or -errno. */
#define CORE_STOP_TIMEOUT_MS 15000u
#define CORE_STOP_KILL_MS 25000u
int core_run(const struct core_options *o);
