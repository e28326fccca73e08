/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Before sampling starts: the processes running at that moment (state R
 * in /proc/PID/stat) are the likeliest to be sampled first, and a busy
 * one is running nearly always. Their files start compiling while the
 * BPF programs load (the verifier may take a second), and they wait in
 * the pending list as if their samples had asked: their entries are
 * written at the first drain whose files are in, before or at their
 * first samples. */

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

/* Whether the process dir names (under /proc, dfd) is running or runnable. */
static bool running(int dfd, const char *name) {
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
        const char *paren = strrchr(buf, ')');
        return paren && paren[1] == ' ' && paren[2] == 'R';
}

void bpfstack_prewarm(struct bpfstack_session *s) {
        DIR *d = opendir("/proc");
        if (!d)
                return;
        int self = (int) getpid();
        size_t n = 0;
        struct dirent *e;
        while (n < PREWARM_MAX && (e = readdir(d))) {
                char *end;
                long pid = strtol(e->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX || pid == self || !running(dirfd(d), e->d_name))
                        continue;
                if (proc_table_exec(s->procs, (int) pid, "") < 0)
                        continue;
                struct proc_info *p = proc_table_get(s->procs, (int) pid);
                if (!p || p->maps_unreadable || p->maps.n == 0)
                        continue; /* gone, or a kernel thread */
                if (unwind_tables_prepare(s->tables, p, BPFSTACK_ON_CPU_HEAT) < 0)
                        break;
                (void) pending_add(&s->pending, (int) pid, BPFSTACK_ON_CPU_HEAT, 0);
                n++;
        }
        closedir(d);
        plugin_log(s->pl, TRACED_LOG_DEBUG,
                   "linux.bpf_stack instance %llu: the files of %zu running processes queued for unwind tables "
                   "before sampling",
                   (unsigned long long) s->inst.id, n);
}
