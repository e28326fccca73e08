/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Memory maps of processes, as the profilers need them: read from
 * /proc/PID/maps when a process is first met, then kept current from the
 * kernel's own notes (perf's PERF_RECORD_MMAP2, COMM with the exec flag,
 * FORK and EXIT, or the same facts from any other source).
 *
 * Threading: a proc_table and everything it hands out belong to one thread
 * at a time; the caller serialises. Library code: errors are returned as
 * negative errno, nothing is logged. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One mapped region. path is owned by the struct proc_maps holding it:
 * "" for anonymous memory, "[vdso]", "[stack]", ... as the kernel names
 * them, a file path (as seen inside the process's mount namespace), with
 * " (deleted)" when the file was unlinked. */
struct pmap {
        uint64_t start, end; /* [start, end) */
        uint64_t pgoff;      /* file offset of start */
        uint64_t inode;
        uint32_t dev_major, dev_minor;
        uint32_t prot; /* PROT_READ | PROT_WRITE | PROT_EXEC */
        char *path;
};

/* The maps of one address space, sorted by start, never overlapping. */
struct proc_maps {
        struct pmap *v;
        size_t n, cap;
};

void proc_maps_clear(struct proc_maps *m);
/* Replaces m's content with the maps text read from f (the format of
 * /proc/PID/maps). Lines that do not parse are skipped; -ENOMEM. */
int proc_maps_parse(FILE *f, struct proc_maps *m);
/* Adds a region (path copied), cutting away whatever it overlaps, as a
 * new mmap() over old mappings does. -EINVAL for an empty range, -ENOMEM. */
int proc_maps_add(struct proc_maps *m, const struct pmap *e);
/* The region holding addr, or NULL. The pointer stays valid until m
 * changes. */
const struct pmap *proc_maps_find(const struct proc_maps *m, uint64_t addr);
int proc_maps_copy(const struct proc_maps *from, struct proc_maps *to);

/* A known process. Owned by its table; valid until the table drops it
 * (proc_table_reap after its exit, proc_table_free). */
struct proc_info {
        int pid;
        char comm[16];
        struct proc_maps maps;
        /* The maps before the last exec: a sample taken inside the exec
         * itself (execve() loading the new program) still has its user
         * pc in the old program. */
        struct proc_maps prev_maps;
        /* maps reflect /proc/PID/maps read since the last exec (else only
         * what the kernel's notes told since then) */
        bool maps_loaded;
        /* reading /proc/PID/maps failed since the last exec (the process is
         * gone, or hidden from us): do not retry for every sample */
        bool maps_unreadable;
        /* the kernel's notes of every executable mapping since the last
         * exec reach the table (proc_table_exec_noted): once they hold
         * one, maps need no read of /proc/PID/maps */
        bool maps_noted;
        bool exited;
        uint64_t exit_time;
        /* Forked from this process (0: not known) before its maps were
         * known, at the parent's generation fork_generation: a child that
         * is gone before its own maps are read inherits its parent's. */
        int fork_parent;
        uint32_t fork_generation;
        /* bumped on every exec: callers caching per-process results key
         * them with it */
        uint32_t generation;
        /* bumped on every change of maps (mmap notes, exec, fork, a read
         * of /proc): callers caching per-address results key them with it */
        uint32_t maps_version;
        /* The caller's, e.g. per-process unwinder state; freed with the
         * process by the table's free_userdata (if set). */
        void *userdata;
        /* Names of its generated code (jit-map.h), read when first needed;
         * dropped with the process and at its exec. */
        struct jit_symbols *jit;
};

struct jit_symbols;
struct proc_table;

/* proc_dir: where procfs is, "/proc" normally (tests point it at a tree of
 * their own). Copied. */
int proc_table_new(const char *proc_dir, struct proc_table **ret);
void proc_table_free(struct proc_table *t);
/* What frees a process's userdata when the table drops the process. */
void proc_table_set_free_userdata(struct proc_table *t, void (*free_userdata)(void *userdata));
size_t proc_table_count(const struct proc_table *t);

/* The process pid, created when unknown. When its maps are not loaded
 * since its last exec, reads PROC/PID/maps first (a failure there is not
 * an error: the process keeps what it has, maps_unreadable is set); a
 * process forked (and not exec'd) since the table met it, and gone before
 * its maps could be read, gets its parent's (read now if need be, while
 * the parent lives) under what the notes told of its own. NULL only when
 * out of memory. */
struct proc_info *proc_table_get(struct proc_table *t, int pid);
/* Reads the maps of every process there is now (at most max of them), as
 * perf record does when it starts: the processes that exit before their
 * first sample is symbolized are known all the same, and what they map
 * later comes from the kernel's notes. Returns how many were read, or a
 * negative errno when the proc directory cannot be read. */
int proc_table_scan(struct proc_table *t, size_t max);
/* Reads the maps of pid again (they may hold what no note told: a
 * mapping made since, by a process the notes do not follow). When that
 * fails (the process is gone) the maps stay what they were. */
void proc_table_reload(struct proc_table *t, int pid);
/* The region of process p holding a user pc: in its maps, else in those
 * it had before its last exec. NULL when in neither. */
const struct pmap *proc_info_find_pc(const struct proc_info *p, uint64_t pc);
/* The process pid if known, without creating or loading anything. */
struct proc_info *proc_table_peek(struct proc_table *t, int pid);

/* The kernel's notes. */
int proc_table_mmap(struct proc_table *t, int pid, const struct pmap *e);
/* An exec: every old map is gone (kept as prev_maps); maps are read again
 * at the next get. */
int proc_table_exec(struct proc_table *t, int pid, const char *comm);
/* The same, told by a stream of notes that goes on with every executable
 * mmap of the process (a perf event's mmap records): its maps are then
 * built from the notes alone, as perf(1) builds them, and /proc/PID/maps
 * is read only when a caller asks again (proc_table_reload). */
int proc_table_exec_noted(struct proc_table *t, int pid, const char *comm);
/* Notes were lost: every process whose maps came from notes alone has
 * /proc/PID/maps read at its next get (what the notes said stays over
 * it). */
void proc_table_notes_lost(struct proc_table *t);
/* A rename without exec (prctl PR_SET_NAME). */
int proc_table_comm(struct proc_table *t, int pid, const char *comm);
/* A new process pid forked from ppid (threads, pid == ppid, are ignored):
 * it starts with a copy of its parent's maps, or, when those are not known
 * yet, inherits them once it is looked up (see proc_table_get). */
int proc_table_fork(struct proc_table *t, int pid, int ppid);
/* The process exited at time. It stays known (its samples may still be
 * queued) until proc_table_reap with a later time. */
void proc_table_exit(struct proc_table *t, int pid, uint64_t time);
/* Drops the processes that exited before time; returns how many. */
size_t proc_table_reap(struct proc_table *t, uint64_t before);

/* Where procfs is, as given to proc_table_new. */
const char *proc_table_proc_dir(const struct proc_table *t);

/* Opens path as process pid sees it: PROC/PID/root/path first (its mount
 * namespace), then path itself (the process may be gone). Returns an fd
 * (O_RDONLY|O_CLOEXEC) or a negative errno. */
int proc_table_open_file(const struct proc_table *t, int pid, const char *path);
