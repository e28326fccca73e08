/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl record, attach and stop: the wait for the session's end. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "ds-errors.h"
#include "record-ended.h"
#include "record-wait.h"

struct record_signals record_sig = { .wake_pipe = { -EBADF, -EBADF } };

/* A signal writes here too, so that the loop waiting in record_wait_session
 * wakes at once even when the signal came just before it went to sleep. */

static void wake_loop(void) {
        int saved = errno;
        if (record_sig.wake_pipe[1] >= 0) {
                ssize_t k = write(record_sig.wake_pipe[1], "", 1);
                (void) k; /* full: a wake is pending anyway */
        }
        errno = saved;
}

/* SIGINT and SIGTERM: how many came, the last one, and whether it came
 * from the terminal (the whole foreground process group had it then, a
 * command of `record -- CMD` included). */
/* Until tracectl has something to clean up (a file beside FILE, a
 * command, a session), a signal ends it at once, whatever it waits for. */
static void on_sigint(int sig, siginfo_t *si, void *ctx) {
        if (record_sig.nothing_to_undo) {
                static const char msg[] = "\ntracectl: interrupted before the recording started: nothing was recorded\n";
                (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
                _exit(EXIT_OTHER);
        }
        record_sig.interrupted++;
        record_sig.last_signal = sig;
        record_sig.from_tty = si && si->si_code == SI_KERNEL;
        wake_loop();
}

/* Without SA_RESTART: a wait in a system call ends at the signal. */
static void catch_signal(int sig, void (*handler)(int, siginfo_t *, void *)) {
        struct sigaction sa = { .sa_sigaction = handler, .sa_flags = SA_SIGINFO };
        sigemptyset(&sa.sa_mask);
        (void) sigaction(sig, &sa, NULL);
}

/* record -- CMD: a signal that reached tracectl alone goes on to the
 * command too, as perf record and strace pass it on; one from the
 * terminal reached it already. Once: a second signal ends tracectl's wait
 * for the command instead. */
static void forward_signal(struct record_command *cmd, const char *name) {
        if (record_sig.forwarded || !cmd || !cmd->released || record_command_poll(cmd))
                return;
        record_sig.forwarded = true;
        int sig = record_sig.last_signal ? record_sig.last_signal : SIGINT;
        if (record_sig.from_tty)
                return;
        if (kill(cmd->pid, sig) == 0)
                fprintf(stderr, "tracectl: %s passed on to %s (pid %d)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT", name,
                        (int) cmd->pid);
}

/* attach: SIGTERM leaves the session detached again (SIGINT stops it). */
static void on_sigterm(int sig, siginfo_t *si, void *ctx) {
        record_sig.terminated++;
        wake_loop();
}

static int on_wake(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        char buf[64];
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
        return 0;
}

uint64_t record_now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* ObserveEvents' replies: the session's data sources all run. */
void record_on_observed(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                        void *userdata) {
        struct record_watch *watch = userdata;
        const Perfetto__Protos__ObserveEventsResponse *r = (const void *) reply;
        if (error < 0 || !reply || (r->events && r->events->all_data_sources_started))
                watch->all_started = true;
}

void record_stats_freep(Perfetto__Protos__GetTraceStatsResponse **r) {
        if (*r)
                protobuf_c_message_free_unpacked(&(*r)->base, NULL);
}

/* The session's TraceStats now (NULL when the service does not answer). */
Perfetto__Protos__GetTraceStatsResponse *record_poll_stats(struct tracectl *t) {
        ProtobufCMessage *reply = NULL;
        Perfetto__Protos__GetTraceStatsRequest rq = PERFETTO__PROTOS__GET_TRACE_STATS_REQUEST__INIT;
        if (tracectl_call(t, "GetTraceStats", &rq.base, &perfetto__protos__get_trace_stats_response__descriptor, -EBADF,
                          &reply, 1000) < 0 &&
            reply) {
                protobuf_c_message_free_unpacked(reply, NULL);
                reply = NULL;
        }
        return (Perfetto__Protos__GetTraceStatsResponse *) reply;
}

static void show_progress(const Perfetto__Protos__TraceStats *s, int fd, uint64_t start, bool final) {
        struct stat st;
        uint64_t written = 0, lost = 0, used = 0, size = 0;
        for (size_t i = 0; s && i < s->n_buffer_stats; i++) {
                written += s->buffer_stats[i]->bytes_written;
                lost += s->buffer_stats[i]->chunks_overwritten + s->buffer_stats[i]->chunks_discarded;
                size += s->buffer_stats[i]->buffer_size;
                used += s->buffer_stats[i]->bytes_written - s->buffer_stats[i]->bytes_read;
        }
        /* The file we passed, or (attached to a session whose file the
         * service writes) what the service wrote. */
        uint64_t file = fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t) st.st_size : written;
        fprintf(stderr, "\r\033[K%6.1fs  file %8.1f KiB  buffer %3.0f%%  lost chunks %" PRIu64,
                (double) (record_now_usec() - start) / 1e6, (double) file / 1024.0,
                size ? 100.0 * (double) MIN(used, size) / (double) size : 0.0, lost);
        if (final)
                fputc('\n', stderr);
}

/* Waits for the EnableTracing reply; Ctrl-C flushes and stops. A data
 * source error (printed as it comes) stops the session too, unless
 * watch->allow_missing. Attached under watch->detach_key, SIGTERM detaches
 * the session again and returns EXIT_DETACHED. */
int record_wait_session(struct tracectl *t, struct consumer_session *w, int progress_fd, struct record_watch *watch) {
        uint64_t start = record_now_usec(), last_progress = 0;
        bool tty = (progress_fd >= 0 || watch->progress) && isatty(STDERR_FILENO);
        bool stopping = false, command_ended = false;
        /* The loop wakes for the service's messages and for signals (the
         * wake pipe); besides, every 200 ms to redraw the progress line or
         * to look after a command, else every second (each wake costs). */
        uint64_t idle_usec = tty || watch->cmd ? 200000u : 1000000u;
        _cleanup_(sd_event_source_unrefp) sd_event_source *wake = NULL;
        if (record_sig.wake_pipe[0] < 0 && pipe2(record_sig.wake_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
                idle_usec = 200000u;
        else if (sd_event_add_io(t->event, &wake, record_sig.wake_pipe[0], EPOLLIN, on_wake, NULL) < 0)
                idle_usec = 200000u;

        while (!w->replied) {
                if (record_sig.terminated && watch->detach_key && !stopping) {
                        if (tty)
                                fputc('\n', stderr);
                        Perfetto__Protos__DetachRequest dr = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
                        dr.key = (char *) watch->detach_key;
                        if (tracectl_call(t, "Detach", &dr.base, &perfetto__protos__detach_response__descriptor, -EBADF,
                                          NULL, 5000) == 0)
                                return EXIT_DETACHED;
                        fprintf(stderr, "tracectl: could not detach the session again: stopping it\n");
                        record_sig.interrupted = 1;
                }
                if (watch->cmd && !watch->cmd->released &&
                    (watch->all_started || record_now_usec() - start > TRACECTL_DATA_SOURCE_WAIT_MS * 1000ull))
                        record_command_release(watch->cmd);
                if (watch->cmd && watch->cmd->released && !command_ended && record_command_poll(watch->cmd)) {
                        command_ended = true;
                        if (tty && !stopping)
                                fputc('\n', stderr);
                        if (!stopping)
                                fprintf(stderr, "tracectl: the command exited: finishing the trace...\n");
                }
                if (!stopping && !watch->allow_missing && watch->n_errors_printed > watch->n_lost_printed) {
                        stopping = watch->stopped_for_errors = true;
                        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
                        (void) tracectl_call(t, "DisableTracing", &dis.base,
                                             &perfetto__protos__disable_tracing_response__descriptor, -EBADF, NULL, 5000);
                        continue;
                }
                if ((record_sig.interrupted || command_ended) && !stopping) {
                        stopping = true;
                        if (record_sig.interrupted && tty)
                                fputc('\n', stderr);
                        if (record_sig.interrupted)
                                forward_signal(watch->cmd, watch->cmd_name);
                        if (record_sig.interrupted)
                                fprintf(stderr, "tracectl: stopping: flushing and finishing the trace...\n");
                        Perfetto__Protos__FlushRequest fl = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
                        fl.has_timeout_ms = true;
                        fl.timeout_ms = 5000;
                        (void) tracectl_call(t, "Flush", &fl.base, &perfetto__protos__flush_response__descriptor, -EBADF,
                                             NULL, 6000);
                        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
                        (void) tracectl_call(t, "DisableTracing", &dis.base,
                                             &perfetto__protos__disable_tracing_response__descriptor, -EBADF, NULL, 5000);
                        continue;
                }
                int r = sd_event_run(t->event, idle_usec);
                if (r < 0 && r != -EINTR) {
                        fprintf(stderr, "tracectl: event loop failed: %s\n", strerror(-r));
                        return EXIT_OTHER;
                }
                if (!ipc_client_is_connected(t->client) && !w->replied) {
                        if (tty)
                                fputc('\n', stderr);
                        watch->end_reason = RECORD_SERVICE_GONE;
                        return EXIT_ENDED_EARLY;
                }
                /* The progress line is redrawn every 300 ms; without one,
                 * errors are looked for every second (each poll wakes the
                 * service too). */
                if (record_now_usec() - last_progress > (tty ? 300000u : 1000000u) && !w->replied) {
                        last_progress = record_now_usec();
                        _cleanup_(record_stats_freep) Perfetto__Protos__GetTraceStatsResponse *st =
                                record_poll_stats(t);
                        if (tty && st && ds_errors_new(st->trace_stats, watch->n_errors_printed))
                                fputc('\n', stderr);
                        (void) ds_errors_print_new(st ? st->trace_stats : NULL, &watch->n_errors_printed,
                                                   &watch->n_lost_printed, stderr);
                        if (tty)
                                show_progress(st ? st->trace_stats : NULL, progress_fd, start, false);
                }
        }
        if (tty)
                show_progress(NULL, progress_fd, start, true);
        /* The service's words when another consumer takes the session. */
        if (watch->detach_key && w->error && strstr(w->error, "attached by another consumer"))
                return EXIT_TAKEN;
        if (w->ipc_error < 0 && !ipc_client_is_connected(t->client)) {
                watch->end_reason = RECORD_SERVICE_GONE;
                return EXIT_ENDED_EARLY;
        }
        if (w->ipc_error < 0) {
                fprintf(stderr, "tracectl: the session failed: %s\n", strerror(-w->ipc_error));
                return EXIT_SESSION_FAILED;
        }
        if (w->end_reason && !w->error) {
                watch->end_reason = w->end_reason;
                return EXIT_ENDED_EARLY;
        }
        if (w->error) {
                fprintf(stderr, "tracectl: the session failed: %s\n", w->error);
                return EXIT_SESSION_FAILED;
        }
        return EXIT_OK;
}

/* Waiting for the command once the recording ended: a signal not passed
 * on yet goes to it, the next one ends the wait. */
bool record_command_wait_over(void *userdata) {
        const struct record_watch *watch = userdata;
        if (record_sig.interrupted == record_sig.seen)
                return false;
        record_sig.seen = record_sig.interrupted;
        if (!record_sig.forwarded) {
                forward_signal(watch->cmd, watch->cmd_name);
                return false;
        }
        return true;
}

/* The errors the session ended with that were not printed yet (a short
 * session can end before they are polled), and whether they fail the
 * recording: from the session's last stats (final, asked for once it
 * ended), else from the last TraceStats the trace holds. */
int record_check_trace_errors(const char *path, const Perfetto__Protos__TraceStats *final, struct record_watch *watch) {
        if (final && !watch->stopped_for_errors)
                (void) ds_errors_print_new(final, &watch->n_errors_printed,
                                                   &watch->n_lost_printed, stderr);
        else if (path && !watch->stopped_for_errors) {
                Perfetto__Protos__TraceStats *st = ds_errors_last_trace_stats(path);
                (void) ds_errors_print_new(st, &watch->n_errors_printed,
                                                   &watch->n_lost_printed, stderr);
                if (st)
                        perfetto__protos__trace_stats__free_unpacked(st, NULL);
        }
        if (watch->n_errors_printed == 0 || watch->allow_missing)
                return EXIT_OK;
        if (watch->n_errors_printed == watch->n_lost_printed) {
                /* What the others recorded is the user's: kept. */
                fprintf(stderr, "tracectl: the recording is incomplete: %s lost while it ran (above); the "
                                "trace holds the rest (--allow-missing accepts such a trace)\n",
                        watch->n_lost_printed == 1 ? "a data source was" : "data sources were");
                return EXIT_INCOMPLETE;
        }
        fprintf(stderr, "tracectl: the recording %s: a data source could not do what the config asks "
                        "(--allow-missing records without it)\n",
                watch->stopped_for_errors ? "was stopped" : "failed");
        return EXIT_SESSION_FAILED;
}

void record_catch_interrupt(int sig) {
        catch_signal(sig, on_sigint);
}

void record_catch_detach(int sig) {
        catch_signal(sig, on_sigterm);
}
