/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Before sampling starts: the processes running at that moment (state R
 * in /proc/PID/stat) are the likeliest to be sampled first, and a busy
 * one is running nearly always. Their files start compiling while the
 * BPF programs load (the verifier may take a second), and they wait in
 * the pending list as if their samples had asked: their entries are
 * written at the first drain whose files are in, before or at their
 * first samples. With a pid filter, those processes are prepared whatever
 * their state; with a comm filter, the running ones of those names; with
 * a tid or cgroup filter, none (their samples ask). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpfstack-session.h"

/* Processes prepared at most: a machine has few CPUs' worth running. */
#define PREWARM_MAX 32u

/* Whether process pid (its directory name under /proc, dfd) is running
 * or runnable (or in any state, when !only_running) and passes the comm
 * filter of c. */
static bool candidate(int dfd, const char *name, const struct bpfstack_config *c, bool only_running) {
        char path[64], buf[512];
        if ((size_t) snprintf(path, sizeof(path), "%s/stat", name) >= sizeof(path))
                return false;
        int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = 0;
        /* "pid (comm) S ...": the comm may hold anything, ')' too. */
        char *open = strchr(buf, '('), *close_paren = strrchr(buf, ')');
        if (!open || !close_paren || close_paren < open || close_paren[1] != ' ')
                return false;
        if (only_running && close_paren[2] != 'R')
                return false;
        if (c->n_comms == 0)
                return true;
        *close_paren = 0;
        for (size_t k = 0; k < c->n_comms; k++)
                if (strncmp(open + 1, c->comms[k], BPFSTACK_COMM_LEN - 1) == 0)
                        return true;
        return false;
}

/* Queues the files of pid and the process itself; false when out of
 * memory. */
static bool prepare(struct bpfstack_session *s, int pid, size_t *n) {
        if (proc_table_exec(s->procs, pid, "") < 0)
                return true;
        struct proc_info *p = proc_table_get(s->procs, pid);
        if (!p || p->maps_unreadable || p->maps.n == 0)
                return true; /* gone, or a kernel thread */
        if (unwind_tables_prepare(s->tables, p, BPFSTACK_ON_CPU_HEAT) < 0)
                return false;
        (void) pending_add(&s->pending, pid, BPFSTACK_ON_CPU_HEAT, 0);
        (*n)++;
        return true;
}

void bpfstack_prewarm(struct bpfstack_session *s) {
        const struct bpfstack_config *c = &s->cfg;
        if (c->n_tids > 0 || c->cgroup[0])
                return;
        DIR *d = opendir("/proc");
        if (!d)
                return;
        int self = (int) getpid();
        size_t n = 0;
        if (c->n_pids > 0) {
                for (size_t k = 0; k < c->n_pids && n < PREWARM_MAX; k++) {
                        char name[16];
                        snprintf(name, sizeof(name), "%u", c->pids[k]);
                        if (candidate(dirfd(d), name, c, false) && !prepare(s, (int) c->pids[k], &n))
                                break;
                }
        } else {
                struct dirent *e;
                while (n < PREWARM_MAX && (e = readdir(d))) {
                        char *end;
                        long pid = strtol(e->d_name, &end, 10);
                        if (*end || pid <= 0 || pid > INT32_MAX || pid == self ||
                            !candidate(dirfd(d), e->d_name, c, true))
                                continue;
                        if (!prepare(s, (int) pid, &n))
                                break;
                }
        }
        closedir(d);
        plugin_log(s->pl, TRACED_LOG_DEBUG,
                   "linux.bpf_stack instance %llu: the files of %zu processes (running, or named by the filter) "
                   "queued for unwind tables before sampling",
                   (unsigned long long) s->inst.id, n);
}
