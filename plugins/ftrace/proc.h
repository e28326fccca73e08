/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading what linux.process_stats needs from /proc (the root is a
 * parameter so tests can use a fake tree). A process that goes away
 * mid-read is an error (-ENOENT/-ESRCH), never a crash; malformed files
 * give what could be parsed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROC_NO_VALUE INT64_MIN

struct proc_status {
        char name[64];
        int32_t tgid, ppid, uid;
        /* Its "Kthread:" line (Linux 6.0 and later): 1 a kernel thread, 0
         * not, -1 the kernel does not say. */
        int8_t kthread;
        /* kB, PROC_NO_VALUE when the kernel gave none (kernel threads). */
        int64_t vm_size, vm_rss, rss_anon, rss_file, rss_shmem, vm_swap, vm_locked, vm_hwm;
};

int proc_read_status(const char *root, int pid, struct proc_status *ret);
/* utime and stime of /proc/<pid>/stat, in clock ticks. */
int proc_read_times(const char *root, int pid, uint64_t *ret_utime, uint64_t *ret_stime);
int proc_read_oom_score_adj(const char *root, int pid, int64_t *ret);
/* The same from a file's text already read (NUL-terminated); the text of
 * status starts with a newline added before its first line. */
int proc_parse_status(const char *buf, struct proc_status *ret);
int proc_parse_times(const char *buf, uint64_t *ret_utime, uint64_t *ret_stime);
int proc_parse_oom_score_adj(const char *buf, int64_t *ret);
/* A thread's name (comm) into name (size bytes, NUL-terminated, the
 * newline cut): 0, or a negative errno. */
int proc_read_comm(const char *root, int pid, char *name, size_t size);
/* The NUL-separated arguments; 0 for a kernel thread (none). */
ssize_t proc_read_cmdline(const char *root, int pid, char *buf, size_t size);
