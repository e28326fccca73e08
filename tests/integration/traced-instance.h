/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Runs the real traced for a test: under systemd-socket-activate (the
 * sockets are created by the activator and passed by name) or standalone. */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

struct traced_instance {
        pid_t pid;
        char dir[256];
        char producer_path[300];
        char consumer_path[300];
        char log_path[300];
        char tmp_dir[300]; /* traced's TMPDIR */
};

/* Starts traced in a new directory (test_tmp_dir()/traced-test-XXXXXX).
 * socket_activated: through systemd-socket-activate; traced starts on the
 * first connection. Returns -errno; then neither a process nor the
 * directory is left. traced_instance_destroy ends what started. */
int traced_instance_start(struct traced_instance *t, bool socket_activated);
/* Same, with extra traced arguments (NULL-terminated; by default traced
 * runs with --no-plugins). */
int traced_instance_start_args(struct traced_instance *t, bool socket_activated, const char *const *args);
/* Starts a stopped instance again on the same socket paths (the log
 * continues). args NULL: --no-plugins. */
int traced_instance_restart(struct traced_instance *t, bool socket_activated, const char *const *args);
/* Writes conf (traced.conf's text) into the instance's directory and
 * starts the stopped instance again with --config naming it, and args
 * (NULL: --no-plugins). */
int traced_instance_restart_conf(struct traced_instance *t, const char *conf, const char *const *args);
/* SIGTERM, wait (up to 30 s: traced finishes its sessions first);
 * returns the exit status (or -errno). The directory
 * stays, for a restart. */
int traced_instance_stop(struct traced_instance *t);
/* Ends an instance for good: stops traced if it runs, prints its log when
 * it did not exit cleanly, and removes its directory with everything in it
 * (with TRACED_TEST_KEEP=1 the directory stays and is named). Returns what
 * traced_instance_stop returned; nothing to do (never started, or already
 * destroyed) gives 0. */
int traced_instance_destroy(struct traced_instance *t);
/* True while the process is alive. */
bool traced_instance_alive(struct traced_instance *t);
/* For test suites: start a socket-activated traced without plugins and
 * an event loop (nothing stays of a start that failed); stop both,
 * dumping the log if traced did not exit cleanly, and remove the
 * instance's directory. Return false on trouble (the caller asserts). */
bool traced_test_setup(struct traced_instance *t, sd_event **ret_event);
bool traced_test_teardown(struct traced_instance *t, sd_event **event);
/* Whether the activator started traced (a connection came in). */
bool traced_instance_was_activated(const struct traced_instance *t);
/* The service core under the instance's supervisor (-1: none). */
pid_t traced_instance_core_pid(const struct traced_instance *t);
/* Prints the daemon's log (for failed tests). */
void traced_instance_dump_log(const struct traced_instance *t);

/* A TCP port on 127.0.0.1 free right now (0 when none could be had). */
unsigned test_free_tcp_port(void);
/* Starts traced standalone, without plugins, with a second producer
 * socket on 127.0.0.1:*ret_port (TCP: shared memory is emulated there). */
int traced_instance_start_tcp(struct traced_instance *t, unsigned *ret_port);
