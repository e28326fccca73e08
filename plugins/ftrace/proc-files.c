/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/hashmap.h"
#include "basic/macro.h"
#include "proc-files.h"

enum { F_STATM, F_STATUS, F_OOM, F_STAT, N_FILES };

struct proc_entry {
        int pid;
        int fd[N_FILES];
        uint64_t gen;       /* the poll that last read it */
        unsigned age;       /* polls since status was read */
        bool have_status;
        char statm[96];     /* the text status was last read with */
        struct proc_status st;
};

struct proc_files {
        char root[256];
        size_t max_open;
        bool want_times;
        uint64_t gen, status_reads;
        struct hashmap by_pid; /* pid -> struct proc_entry * */
};

static const char *const file_name[N_FILES] = { "statm", "status", "oom_score_adj", "stat" };

int proc_files_new(const char *root, size_t max_open, bool want_times, struct proc_files **ret) {
        struct proc_files *pf = calloc(1, sizeof(*pf));
        if (!pf)
                return -ENOMEM;
        snprintf(pf->root, sizeof(pf->root), "%s", root);
        pf->max_open = max_open;
        pf->want_times = want_times;
        *ret = pf;
        return 0;
}

static void entry_free(struct proc_entry *e) {
        for (int i = 0; i < N_FILES; i++)
                safe_close(e->fd[i]);
        free(e);
}

void proc_files_free(struct proc_files *pf) {
        if (!pf)
                return;
        size_t it = 0;
        uint64_t k, v;
        while (hashmap_next(&pf->by_pid, &it, &k, &v))
                entry_free((struct proc_entry *) (uintptr_t) v);
        hashmap_clear(&pf->by_pid);
        free(pf);
}

void proc_files_begin(struct proc_files *pf) {
        pf->gen++;
}

void proc_files_end(struct proc_files *pf) {
        size_t it = 0, n = 0;
        uint64_t k, v;
        int dead[256];
        /* In rounds of 256: removing while iterating is not promised to
         * be safe. */
        do {
                n = 0;
                it = 0;
                while (n < ELEMENTSOF(dead) && hashmap_next(&pf->by_pid, &it, &k, &v))
                        if (((struct proc_entry *) (uintptr_t) v)->gen != pf->gen)
                                dead[n++] = (int) k;
                for (size_t i = 0; i < n; i++)
                        if (hashmap_remove(&pf->by_pid, (uint64_t) dead[i], &v))
                                entry_free((struct proc_entry *) (uintptr_t) v);
        } while (n == ELEMENTSOF(dead));
}

/* The whole file at offset 0 into buf (NUL-terminated): its length, or a
 * negative errno. */
static ssize_t pread_all(int fd, char *buf, size_t size) {
        size_t len = 0;
        while (len < size - 1) {
                ssize_t n = pread(fd, buf + len, size - 1 - len, (off_t) len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        buf[len] = '\0';
        return (ssize_t) len;
}

static int open_file(const struct proc_files *pf, int pid, int which) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%d/%s", pf->root, pid, file_name[which]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int entry_open(struct proc_files *pf, int pid, struct proc_entry **ret) {
        struct proc_entry *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->pid = pid;
        for (int i = 0; i < N_FILES; i++)
                e->fd[i] = -EBADF;
        int n = pf->want_times ? N_FILES : F_STAT;
        for (int i = 0; i < n; i++) {
                e->fd[i] = open_file(pf, pid, i);
                /* Without oom_score_adj (a kernel thread has one; a fake
                 * tree may not) the rest still counts. */
                if (e->fd[i] < 0 && i != F_OOM) {
                        int r = e->fd[i];
                        entry_free(e);
                        return r;
                }
        }
        int r = hashmap_put_ptr(&pf->by_pid, (uint64_t) pid, e);
        if (r < 0) {
                entry_free(e);
                return r;
        }
        *ret = e;
        return 0;
}

static void entry_drop(struct proc_files *pf, struct proc_entry *e) {
        uint64_t v;
        (void) hashmap_remove(&pf->by_pid, (uint64_t) e->pid, &v);
        entry_free(e);
}

/* Reads through e's open files: 0, or a negative errno (-ESRCH once the
 * process they were opened for is gone). */
static int entry_read(struct proc_files *pf, struct proc_entry *e, bool fresh, struct proc_counters *ret) {
        char statm[sizeof(e->statm)];
        ssize_t n = pread_all(e->fd[F_STATM], statm, sizeof(statm));
        if (n <= 0)
                return n < 0 ? (int) n : -ESRCH;
        if (fresh || !e->have_status || e->age + 1 >= PROC_FILES_STATUS_POLLS || strcmp(statm, e->statm) != 0) {
                char buf[8192];
                n = pread_all(e->fd[F_STATUS], buf + 1, sizeof(buf) - 1);
                if (n <= 0)
                        return n < 0 ? (int) n : -ESRCH;
                buf[0] = '\n';
                int r = proc_parse_status(buf, &e->st);
                if (r < 0)
                        return r;
                memcpy(e->statm, statm, sizeof(statm));
                e->have_status = true;
                e->age = 0;
                pf->status_reads++;
        } else
                e->age++;
        *ret = (struct proc_counters) { .st = e->st };
        char small[256];
        if (e->fd[F_OOM] >= 0 && pread_all(e->fd[F_OOM], small, sizeof(small)) > 0 &&
            proc_parse_oom_score_adj(small, &ret->oom_score_adj) == 0)
                ret->has_oom_score_adj = true;
        char stat[2048];
        if (pf->want_times && pread_all(e->fd[F_STAT], stat, sizeof(stat)) > 0 &&
            proc_parse_times(stat, &ret->utime, &ret->stime) == 0)
                ret->has_times = true;
        e->gen = pf->gen;
        return 0;
}

/* Without kept files: each opened, read and closed. */
static int read_once(struct proc_files *pf, int pid, struct proc_counters *ret) {
        *ret = (struct proc_counters) {};
        int r = proc_read_status(pf->root, pid, &ret->st);
        if (r < 0)
                return r;
        pf->status_reads++;
        ret->has_oom_score_adj = proc_read_oom_score_adj(pf->root, pid, &ret->oom_score_adj) == 0;
        ret->has_times = pf->want_times && proc_read_times(pf->root, pid, &ret->utime, &ret->stime) == 0;
        return 0;
}

int proc_files_read(struct proc_files *pf, int pid, bool fresh, struct proc_counters *ret) {
        struct proc_entry *e = hashmap_get_ptr(&pf->by_pid, (uint64_t) pid);
        if (e) {
                int r = entry_read(pf, e, fresh, ret);
                if (r >= 0)
                        return r;
                /* Gone, or its pid given to a new process: opened anew. */
                entry_drop(pf, e);
                e = NULL;
        }
        if (hashmap_size(&pf->by_pid) >= pf->max_open || entry_open(pf, pid, &e) < 0)
                return read_once(pf, pid, ret);
        int r = entry_read(pf, e, true, ret);
        if (r < 0)
                entry_drop(pf, e);
        return r;
}

size_t proc_files_open_count(const struct proc_files *pf) {
        return hashmap_size(&pf->by_pid);
}

uint64_t proc_files_status_reads(const struct proc_files *pf) {
        return pf->status_reads;
}
