/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "basic/alloc.h"
#include "basic/hashmap.h"
#include "basic/macro.h"
#include "profiling/jit-map.h"
#include "profiling/procmaps.h"

struct proc_table {
        char *proc_dir;
        void (*free_userdata)(void *userdata);
        struct hashmap procs; /* pid -> struct proc_info * */
};

static void pmap_done(struct pmap *e) {
        free(e->path);
        e->path = NULL;
}

void proc_maps_clear(struct proc_maps *m) {
        for (size_t i = 0; i < m->n; i++)
                pmap_done(&m->v[i]);
        free(m->v);
        *m = (struct proc_maps) {};
}

static int reserve(struct proc_maps *m, size_t extra) {
        return GREEDY_REALLOC_MIN(m->v, m->cap, m->n + extra, 32);
}

/* The first region ending after addr. */
static size_t lower_bound(const struct proc_maps *m, uint64_t addr) {
        size_t lo = 0, hi = m->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->v[mid].end <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

const struct pmap *proc_maps_find(const struct proc_maps *m, uint64_t addr) {
        size_t i = lower_bound(m, addr);
        if (i < m->n && m->v[i].start <= addr)
                return &m->v[i];
        return NULL;
}

int proc_maps_add(struct proc_maps *m, const struct pmap *e) {
        if (e->start >= e->end)
                return -EINVAL;
        char *path = strdup(e->path ? e->path : "");
        if (!path)
                return -ENOMEM;
        /* Room for the new region and a split of one old region in two. */
        if (reserve(m, 2) < 0) {
                free(path);
                return -ENOMEM;
        }
        size_t i = lower_bound(m, e->start);
        /* An old region straddling start keeps its head; one straddling end
         * too keeps its tail as a region of its own. */
        if (i < m->n && m->v[i].start < e->start) {
                struct pmap *o = &m->v[i];
                if (o->end > e->end) {
                        char *tail_path = strdup(o->path);
                        if (!tail_path) {
                                free(path);
                                return -ENOMEM;
                        }
                        struct pmap tail = *o;
                        tail.path = tail_path;
                        tail.pgoff += e->end - o->start;
                        tail.start = e->end;
                        memmove(&m->v[i + 2], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
                        m->v[i + 1] = tail;
                        m->n++;
                }
                o->end = e->start;
                i++;
        }
        /* Regions wholly inside go; one reaching past end keeps its tail. */
        size_t j = i;
        while (j < m->n && m->v[j].end <= e->end)
                pmap_done(&m->v[j++]);
        if (j < m->n && m->v[j].start < e->end) {
                struct pmap *o = &m->v[j];
                o->pgoff += e->end - o->start;
                o->start = e->end;
        }
        /* Now [i, j) are free slots; make it exactly one. */
        if (j == i) {
                memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
                m->n++;
        } else if (j > i + 1) {
                memmove(&m->v[i + 1], &m->v[j], (m->n - j) * sizeof(*m->v));
                m->n -= j - i - 1;
        }
        m->v[i] = *e;
        m->v[i].path = path;
        return 0;
}

const struct pmap *proc_info_find_pc(const struct proc_info *p, uint64_t pc) {
        const struct pmap *m = proc_maps_find(&p->maps, pc);
        return m ? m : proc_maps_find(&p->prev_maps, pc);
}

int proc_maps_copy(const struct proc_maps *from, struct proc_maps *to) {
        struct proc_maps m = {};
        if (reserve(&m, from->n) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < from->n; i++) {
                m.v[i] = from->v[i];
                m.v[i].path = strdup(from->v[i].path);
                if (!m.v[i].path) {
                        m.n = i;
                        proc_maps_clear(&m);
                        return -ENOMEM;
                }
        }
        m.n = from->n;
        proc_maps_clear(to);
        *to = m;
        return 0;
}

/* "start-end perms offset major:minor inode   path" */
static bool parse_line(char *line, struct pmap *e, char **ret_path) {
        char perms[8];
        int path_at = 0;
        unsigned maj, min;
        uint64_t start, end, off, ino;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &start, &end, perms, &off,
                   &maj, &min, &ino, &path_at) < 7 ||
            start >= end)
                return false;
        char *path = path_at > 0 ? line + path_at : line + strlen(line);
        path[strcspn(path, "\n")] = '\0';
        *e = (struct pmap) {
                .start = start,
                .end = end,
                .pgoff = off,
                .inode = ino,
                .dev_major = maj,
                .dev_minor = min,
                .prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                        (perms[2] == 'x' ? PROT_EXEC : 0),
        };
        *ret_path = path;
        return true;
}

int proc_maps_parse(FILE *f, struct proc_maps *m) {
        struct proc_maps n = {};
        char *line = NULL;
        size_t cap = 0;
        int r = 0;
        while (getline(&line, &cap, f) > 0) {
                struct pmap e;
                char *path;
                if (!parse_line(line, &e, &path))
                        continue;
                /* The kernel lists them sorted and disjoint; proc_maps_add
                 * keeps that true whatever the input. */
                e.path = path;
                if (n.n > 0 && n.v[n.n - 1].end <= e.start) {
                        if (reserve(&n, 1) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        e.path = strdup(path);
                        if (!e.path) {
                                r = -ENOMEM;
                                break;
                        }
                        n.v[n.n++] = e;
                } else if ((r = proc_maps_add(&n, &e)) < 0)
                        break;
        }
        free(line);
        if (r < 0) {
                proc_maps_clear(&n);
                return r;
        }
        proc_maps_clear(m);
        *m = n;
        return 0;
}

int proc_table_new(const char *proc_dir, struct proc_table **ret) {
        struct proc_table *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->proc_dir = strdup(proc_dir ? proc_dir : "/proc");
        if (!t->proc_dir) {
                free(t);
                return -ENOMEM;
        }
        *ret = t;
        return 0;
}

static uint64_t pid_key(int pid) {
        return (uint32_t) pid;
}

static void info_free(struct proc_table *t, struct proc_info *i) {
        proc_maps_clear(&i->maps);
        proc_maps_clear(&i->prev_maps);
        if (i->userdata && t->free_userdata)
                t->free_userdata(i->userdata);
        jit_symbols_free(i->jit);
        free(i);
}

void proc_table_set_free_userdata(struct proc_table *t, void (*free_userdata)(void *userdata)) {
        t->free_userdata = free_userdata;
}

void proc_table_free(struct proc_table *t) {
        if (!t)
                return;
        uint64_t v;
        for (size_t it = 0; hashmap_next(&t->procs, &it, NULL, &v);)
                info_free(t, (struct proc_info *) (uintptr_t) v);
        hashmap_clear(&t->procs);
        free(t->proc_dir);
        free(t);
}

size_t proc_table_count(const struct proc_table *t) {
        return hashmap_size(&t->procs);
}

struct proc_info *proc_table_peek(struct proc_table *t, int pid) {
        return hashmap_get_ptr(&t->procs, pid_key(pid));
}

static struct proc_info *get_or_add(struct proc_table *t, int pid) {
        struct proc_info *i = proc_table_peek(t, pid);
        if (i)
                return i;
        i = calloc(1, sizeof(*i));
        if (!i)
                return NULL;
        i->pid = pid;
        if (hashmap_put_ptr(&t->procs, pid_key(pid), i) < 0) {
                free(i);
                return NULL;
        }
        return i;
}

/* Reads PROC/PID/maps. With over_notes, what the process's maps hold
 * (the notes since it was met or exec'd, up to the sample being
 * symbolized, which /proc, read later, may no longer show: a library
 * dlclose'd since) stays over what is read. */
static void load_maps(struct proc_table *t, struct proc_info *i, bool over_notes) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%d/maps", t->proc_dir, i->pid);
        FILE *f = fopen(path, "re");
        if (!f) {
                i->maps_unreadable = true;
                return;
        }
        struct proc_maps m = {};
        int r = proc_maps_parse(f, &m);
        fclose(f);
        /* An empty read: the process became a zombie between open and
         * read; keep what the notes said. */
        if (r < 0 || m.n == 0) {
                proc_maps_clear(&m);
                i->maps_unreadable = true;
                return;
        }
        for (size_t k = 0; over_notes && k < i->maps.n; k++)
                if (proc_maps_add(&m, &i->maps.v[k]) < 0) {
                        proc_maps_clear(&m);
                        return;
                }
        proc_maps_clear(&i->maps);
        i->maps = m;
        i->maps_loaded = true;
        i->maps_version++;
        if (!i->comm[0]) {
                snprintf(path, sizeof(path), "%s/%d/comm", t->proc_dir, i->pid);
                f = fopen(path, "re");
                if (f) {
                        if (fgets(i->comm, sizeof(i->comm), f))
                                i->comm[strcspn(i->comm, "\n")] = '\0';
                        fclose(f);
                }
        }
}

#define MAX_INHERIT_DEPTH 8

/* A forked child gone before its maps were read: its parent's maps (as
 * they are, unless the parent exec'd since the fork), with what the notes
 * told of the child since (its own mmaps) on top. */
static void inherit_maps(struct proc_table *t, struct proc_info *i, unsigned depth) {
        int ppid = i->fork_parent;
        i->fork_parent = 0; /* once */
        struct proc_info *parent = ppid > 0 ? proc_table_peek(t, ppid) : NULL;
        if (!parent || parent->generation != i->fork_generation)
                return;
        if (!parent->maps_loaded && !parent->maps_unreadable && !parent->exited)
                load_maps(t, parent, true);
        if (!parent->maps_loaded && parent->fork_parent && depth < MAX_INHERIT_DEPTH)
                inherit_maps(t, parent, depth + 1);
        if (parent->maps.n == 0)
                return;
        struct proc_maps m = {};
        if (proc_maps_copy(&parent->maps, &m) < 0)
                return;
        for (size_t k = 0; k < i->maps.n; k++)
                if (proc_maps_add(&m, &i->maps.v[k]) < 0) {
                        proc_maps_clear(&m);
                        return;
                }
        proc_maps_clear(&i->maps);
        i->maps = m;
        i->maps_loaded = parent->maps_loaded;
        i->maps_version++;
        if (!i->comm[0])
                snprintf(i->comm, sizeof(i->comm), "%s", parent->comm);
}

struct proc_info *proc_table_get(struct proc_table *t, int pid) {
        struct proc_info *i = get_or_add(t, pid);
        if (!i || i->maps_loaded)
                return i;
        if (i->maps_noted && i->maps.n > 0) {
                /* Exec'd while the notes came: they are its maps (a
                 * compiler's cc1 and as each cost a read of /proc and its
                 * path walk, a tenth of a profiler's CPU beside a build). */
                i->maps_loaded = true;
                return i;
        }
        if (!i->maps_unreadable && !i->exited)
                load_maps(t, i, true);
        if (!i->maps_loaded && i->fork_parent)
                inherit_maps(t, i, 0);
        return i;
}

int proc_table_scan(struct proc_table *t, size_t max) {
        DIR *d = opendir(t->proc_dir);
        if (!d)
                return negative_errno();
        int n = 0;
        struct dirent *e;
        while ((size_t) n < max && n < INT32_MAX && (e = readdir(d))) {
                char *end;
                long pid = strtol(e->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX || proc_table_peek(t, (int) pid))
                        continue;
                struct proc_info *i = proc_table_get(t, (int) pid);
                if (!i) {
                        closedir(d);
                        return -ENOMEM;
                }
                n += i->maps_loaded;
        }
        closedir(d);
        return n;
}

void proc_table_reload(struct proc_table *t, int pid) {
        struct proc_info *i = get_or_add(t, pid);
        if (!i || i->exited)
                return;
        i->maps_unreadable = false;
        load_maps(t, i, false);
}

int proc_table_mmap(struct proc_table *t, int pid, const struct pmap *e) {
        struct proc_info *i = get_or_add(t, pid);
        if (!i)
                return -ENOMEM;
        i->maps_version++;
        return proc_maps_add(&i->maps, e);
}

int proc_table_exec(struct proc_table *t, int pid, const char *comm) {
        struct proc_info *i = get_or_add(t, pid);
        if (!i)
                return -ENOMEM;
        proc_maps_clear(&i->prev_maps);
        i->prev_maps = i->maps;
        i->maps = (struct proc_maps) {};
        i->maps_loaded = false;
        i->maps_unreadable = false;
        i->maps_noted = false;
        i->exited = false;
        i->fork_parent = 0;
        i->generation++;
        i->maps_version++;
        jit_symbols_free(i->jit);
        i->jit = NULL;
        snprintf(i->comm, sizeof(i->comm), "%s", comm ? comm : "");
        return 0;
}

int proc_table_exec_noted(struct proc_table *t, int pid, const char *comm) {
        int r = proc_table_exec(t, pid, comm);
        if (r < 0)
                return r;
        struct proc_info *i = proc_table_peek(t, pid);
        if (i)
                i->maps_noted = true;
        return 0;
}

void proc_table_notes_lost(struct proc_table *t) {
        uint64_t v;
        for (size_t it = 0; hashmap_next(&t->procs, &it, NULL, &v);) {
                struct proc_info *i = (struct proc_info *) (uintptr_t) v;
                if (!i->maps_noted)
                        continue;
                i->maps_noted = false;
                i->maps_loaded = false;
        }
}

int proc_table_comm(struct proc_table *t, int pid, const char *comm) {
        struct proc_info *i = get_or_add(t, pid);
        if (!i)
                return -ENOMEM;
        snprintf(i->comm, sizeof(i->comm), "%s", comm ? comm : "");
        return 0;
}

int proc_table_fork(struct proc_table *t, int pid, int ppid) {
        if (pid == ppid)
                return 0;
        /* The parent is remembered (not read: most children never get
         * sampled) so that the child can inherit its maps later. */
        struct proc_info *parent = ppid > 0 ? get_or_add(t, ppid) : NULL;
        struct proc_info *child = get_or_add(t, pid);
        if (!child || (ppid > 0 && !parent))
                return -ENOMEM;
        /* pid reuse: whatever was known under this pid is void. */
        proc_maps_clear(&child->maps);
        proc_maps_clear(&child->prev_maps);
        child->maps_loaded = child->maps_unreadable = child->exited = child->maps_noted = false;
        child->fork_parent = 0;
        child->generation++;
        child->maps_version++;
        jit_symbols_free(child->jit);
        child->jit = NULL;
        child->comm[0] = '\0';
        if (!parent)
                return 0;
        snprintf(child->comm, sizeof(child->comm), "%s", parent->comm);
        /* A parent exec'd while the notes came has its maps in them. */
        bool known = parent->maps_loaded || (parent->maps_noted && parent->maps.n > 0);
        if (!known) {
                /* Known later, if at all: inherited when looked up. */
                child->fork_parent = ppid;
                child->fork_generation = parent->generation;
                return 0;
        }
        int r = proc_maps_copy(&parent->maps, &child->maps);
        if (r < 0)
                return r;
        child->maps_loaded = true;
        child->maps_noted = parent->maps_noted;
        return 0;
}

void proc_table_exit(struct proc_table *t, int pid, uint64_t time) {
        struct proc_info *i = proc_table_peek(t, pid);
        if (!i)
                return;
        i->exited = true;
        i->exit_time = time;
}

size_t proc_table_reap(struct proc_table *t, uint64_t before) {
        size_t n = 0;
        uint64_t k, v;
        for (size_t it = 0; hashmap_next(&t->procs, &it, &k, &v);) {
                struct proc_info *i = (struct proc_info *) (uintptr_t) v;
                if (i->exited && i->exit_time < before) {
                        (void) hashmap_remove(&t->procs, k, NULL);
                        info_free(t, i);
                        n++;
                }
        }
        return n;
}

const char *proc_table_proc_dir(const struct proc_table *t) {
        return t->proc_dir;
}

int proc_table_open_file(const struct proc_table *t, int pid, const char *path) {
        char buf[4096];
        if (!path || path[0] != '/')
                return -EINVAL;
        if (snprintf(buf, sizeof(buf), "%s/%d/root%s", t->proc_dir, pid, path) < (int) sizeof(buf)) {
                int fd = open(buf, O_RDONLY | O_CLOEXEC);
                if (fd >= 0)
                        return fd;
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        return fd >= 0 ? fd : negative_errno();
}
