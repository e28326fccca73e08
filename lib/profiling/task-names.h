/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The names of the tasks a profiler samples, written into its own
 * sequence: a ProcessTree packet with the thread (tid, tgid, name) and,
 * for a process's main thread, the process (pid, cmdline {comm},
 * cmdline_is_comm), when a task is first seen or its comm changes (exec,
 * PR_SET_NAME). trace_processor and tracectl then name a sample's process
 * and thread by the comm it had when sampled, with or without
 * linux.process_stats (whose scan at the start knows a process by what it
 * was before an exec). Not thread-safe: one per writer. */

#include <stdbool.h>
#include <stdint.h>

#include "basic/hashmap.h"

struct TracePacket; /* traced/pbzero/perfetto/trace/trace_packet.pbw.h */

/* Tasks remembered before the table starts over (each is then named again
 * when next seen). */
#define TASK_NAMES_BOUND 65536u
/* A comm is at most this long (the kernel's TASK_COMM_LEN less its NUL). */
#define TASK_NAMES_COMM_MAX 15u

struct task_names {
        struct hashmap seen; /* tid -> hash of its comm */
};

/* Whether tid's comm is new or changed since last asked (it is remembered
 * then). An empty comm is never new. */
bool task_names_changed(struct task_names *t, int32_t tid, const char *comm);
void task_names_done(struct task_names *t);

/* Writes into pkt (a packet just begun) the ProcessTree naming tid (of
 * process pid) comm at ts (on clock_id, a builtin clock). */
void task_names_packet(struct TracePacket *pkt, int32_t pid, int32_t tid, const char *comm, uint64_t ts,
                       uint32_t clock_id);
