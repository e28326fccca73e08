/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The /proc files linux.process_stats reads at every poll, kept open from
 * one poll to the next and read again with pread() at offset 0: opening
 * and closing two or three files per process per poll was most of what an
 * idle machine's recording cost. status, the costly one to generate, is
 * read again only when statm (a line of numbers the kernel makes cheaply)
 * changed, at least every PROC_FILES_STATUS_POLLS polls, and whenever the
 * caller asks for every value (its cache's renewal): the memory counters
 * it gives all move statm (size, resident, shared) except VmLck and the
 * split of shared memory between file and shmem, which the periodic read
 * keeps at most that many polls behind.
 *
 * An open file names the process it was opened for, not its pid: once the
 * process is gone it reads ESRCH, and a new process given the same pid is
 * opened afresh. Processes not read during a poll have their files closed
 * at its end. Beyond max_open processes (or when a file cannot be opened)
 * the files are opened and closed per read, as before.
 *
 * Library code: negative errno, nothing logged. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"

#define PROC_FILES_STATUS_POLLS 10u

struct proc_counters {
        struct proc_status st;
        int64_t oom_score_adj;
        bool has_oom_score_adj;
        uint64_t utime, stime; /* clock ticks, with want_times */
        bool has_times;
};

struct proc_files;

/* root: "/proc", or a fake tree in tests. */
int proc_files_new(const char *root, size_t max_open, bool want_times, struct proc_files **ret);
void proc_files_free(struct proc_files *pf);

/* Around each poll. */
void proc_files_begin(struct proc_files *pf);
/* Closes the files of the processes this poll did not read. */
void proc_files_end(struct proc_files *pf);

/* pid's counters: 0, or a negative errno (-ENOENT, -ESRCH: no such
 * process). With fresh, status is read whatever statm says. */
int proc_files_read(struct proc_files *pf, int pid, bool fresh, struct proc_counters *ret);

/* Processes whose files are open; status reads this poll and in all. */
size_t proc_files_open_count(const struct proc_files *pf);
uint64_t proc_files_status_reads(const struct proc_files *pf);

/* How many file descriptors `processes` processes need. */
static inline size_t proc_files_fds(size_t processes, bool want_times) {
        return processes * (want_times ? 4u : 3u);
}
