/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What `tracectl record -p PID` and `tracectl record -- CMD ARGS` record:
 * the profilers of the config (linux.perf, linux.bpf_stack) narrowed to
 * the processes, and for CMD a child started once tracing runs, whose end
 * ends the recording. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "perfetto/config/trace_config.pb-c.h"

#define RECORD_TARGET_MAX_PIDS 64

/* Parses "PID[,PID...]" into pids[*n...]: 0, or -EINVAL / -E2BIG. */
int record_target_parse_pids(const char *s, pid_t *pids, size_t *n);

/* Narrows every linux.perf and linux.bpf_stack data source of cfg to the
 * pids: perf_event_config's target_pid (in callstack_sampling.scope when
 * the config samples callstacks), bpf_stack_config's "pid=N" filters.
 * Returns how many data sources were narrowed, or -ENOMEM. */
int record_target_apply(Perfetto__Protos__TraceConfig *cfg, const pid_t *pids, size_t n);

/* Whether the processes exist (kill(pid, 0)): 0, or -ESRCH with
 * *ret_missing the first that does not. */
int record_target_check_pids(const pid_t *pids, size_t n, pid_t *ret_missing);

/* Where execvp() would find name: a name with a slash as it is, else the
 * first executable regular file of that name in $PATH (/bin:/usr/bin when
 * unset). 0, or -ENOENT (nowhere), -EACCES (found, not executable),
 * -EISDIR (a directory). */
int record_command_find(const char *name);

/* A command started for the recording: forked now, stopped before exec
 * until record_command_release(). */
struct record_command {
        pid_t pid;
        int release_fd; /* the write end the child waits on */
        int exec_fd;    /* the read end of the child's exec error, closed by its exec */
        bool released;
        bool exited;
        bool abandoned; /* left running: record_command_finish does not wait */
        int status;     /* waitpid()'s, once exited */
        int exec_error; /* once exited: the errno its exec failed with, 0 when it ran */
};

/* Forks argv[0] (searched in PATH): the child waits, then execs. 0 or
 * -errno. */
int record_command_fork(struct record_command *c, char **argv);
/* Lets the child exec. */
void record_command_release(struct record_command *c);
/* Whether it ended (reaped without blocking). */
bool record_command_poll(struct record_command *c);
/* Ends a child that never ran (the recording failed) and reaps it, or
 * waits for one that runs (not for one abandoned). */
void record_command_finish(struct record_command *c);
/* Waits for a released child to exit, waking when wake_fd (-1: none) is
 * readable or every 200 ms to ask give_up(userdata): true once it exited,
 * false when give_up said so (the child is then abandoned: it runs on). */
bool record_command_wait(struct record_command *c, int wake_fd, bool (*give_up)(void *userdata), void *userdata);
