/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Waiting for a recording (record, attach, stop): the signals that stop
 * or detach it, the progress line, the data source errors printed as they
 * come, and the wait for the session's end. */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record-target.h"
#include "tracectl.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

/* What a recording learns as it runs: the data source errors printed so
 * far, and whether it stopped for them. */
struct record_watch {
        bool allow_missing;
        size_t n_errors_printed;
        /* Of those, instances lost with their producer (a plugin host
         * that crashed, hung or exited): the recording goes on and its
         * file is kept, but it failed (exit status 5). */
        size_t n_lost_printed;
        bool stopped_for_errors;
        /* record -- CMD: started once every data source runs (or after
         * TRACECTL_DATA_SOURCE_WAIT_MS), its end ends the recording. */
        struct record_command *cmd;
        bool all_started;
        const char *cmd_name;
        /* attach: progress shown without a file of ours; SIGTERM detaches
         * the session again under this key. */
        bool progress;
        const char *detach_key;
        /* EXIT_ENDED_EARLY: why (TraceStats.TracedEndReason, or
         * RECORD_SERVICE_GONE). */
        int end_reason;
};

#define EXIT_DETACHED (-1)
#define EXIT_TAKEN (-2) /* attached: another consumer attached to the session under its key */
/* record_check_trace_errors: data sources were lost while they ran, nothing
 * else failed: the file is kept and the recording exits with
 * EXIT_SESSION_FAILED. */
#define EXIT_INCOMPLETE (-3)


/* SIGINT and SIGTERM as they came: how many (interrupted), the last one,
 * whether it came from the terminal (the whole foreground process group
 * had it then, a command of `record -- CMD` included); terminated counts
 * attach's SIGTERMs. Until nothing_to_undo is cleared (tracectl has a
 * file beside FILE, a command or a session to clean up), a signal ends
 * tracectl at once. A signal also writes into wake_pipe, so that the
 * waiting loop wakes even when it came just before the loop slept.
 * forwarded: record -- CMD's command had a signal passed on already;
 * seen: the signals the wait for the command looked at. */
struct record_signals {
        volatile sig_atomic_t interrupted;
        volatile sig_atomic_t last_signal;
        volatile sig_atomic_t from_tty;
        volatile sig_atomic_t nothing_to_undo;
        volatile sig_atomic_t terminated;
        sig_atomic_t seen;
        bool forwarded;
        int wake_pipe[2];
};
extern struct record_signals record_sig;

/* sig (SIGINT or SIGTERM) stops the recording (flush, stop, wait), or
 * detaches the attached session again; without SA_RESTART. */
void record_catch_interrupt(int sig);
void record_catch_detach(int sig);

uint64_t record_now_usec(void);

/* ObserveEvents' replies (userdata: a struct record_watch): the session's
 * data sources all run. */
void record_on_observed(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                        void *userdata);

/* The session's TraceStats now (NULL when the service does not answer). */
Perfetto__Protos__GetTraceStatsResponse *record_poll_stats(struct tracectl *t);
void record_stats_freep(Perfetto__Protos__GetTraceStatsResponse **r);

/* Waits for the EnableTracing reply; a signal flushes and stops. A data
 * source error (printed as it comes) stops the session too, unless
 * watch->allow_missing. Attached under watch->detach_key, SIGTERM detaches
 * the session again and returns EXIT_DETACHED. progress_fd: the file
 * whose size the progress line shows, or -EBADF. An exit code. */
int record_wait_session(struct tracectl *t, struct consumer_session *w, int progress_fd, struct record_watch *watch);

/* record_command_wait's stop test (userdata: the struct record_watch): a
 * signal not passed on to the command yet goes to it, the next one ends
 * the wait. */
bool record_command_wait_over(void *userdata);

/* The errors the session ended with that were not printed yet, and
 * whether they fail the recording (an exit code): from final, the
 * session's last stats, else from the last TraceStats the trace at path
 * holds. */
int record_check_trace_errors(const char *path, const Perfetto__Protos__TraceStats *final,
                              struct record_watch *watch);
