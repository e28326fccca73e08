/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* proc-files.c: linux.process_stats' /proc files kept open between polls.
 * On a fake tree: status is read again only when statm changed, every
 * PROC_FILES_STATUS_POLLS polls, or when asked; files of processes a poll
 * did not read are closed; beyond max_open files are opened per read. On
 * the real /proc: a process that exits reads as gone, and its pid given
 * to a new process is read afresh. */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc-files.h"
#include "test-scratch.h"

static char root[256];

static void make_root(void) {
        cr_assert_eq(test_mkdtemp(root, sizeof(root), "traced-proc-files-"), 0);
}

static void remove_root(void) {
        cr_expect_eq(test_scratch_remove(root), 0, "could not remove %s", root);
}

/* Rewrites root/pid/name in place (the same inode, as the kernel's files
 * stay the same file): an open descriptor sees the new text. */
static void put(int pid, const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%d", root, pid);
        (void) mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/%d/%s", root, pid, name);
        FILE *f = fopen(path, "r+e");
        if (!f)
                f = fopen(path, "we");
        cr_assert_not_null(f, "%s: %s", path, strerror(errno));
        cr_assert_eq(ftruncate(fileno(f), 0), 0);
        fputs(text, f);
        fclose(f);
}

static void put_status(int pid, long rss_kb, long locked_kb) {
        char text[512];
        snprintf(text, sizeof(text),
                 "Name:\tfake\nTgid:\t%d\nPPid:\t1\nUid:\t0\t0\t0\t0\nVmSize:\t   10000 kB\nVmLck:\t %8ld kB\n"
                 "VmHWM:\t    5000 kB\nVmRSS:\t %8ld kB\nRssAnon:\t    1000 kB\nRssFile:\t    2000 kB\n"
                 "RssShmem:\t       0 kB\nVmSwap:\t       0 kB\n",
                 pid, locked_kb, rss_kb);
        put(pid, "status", text);
}

static void fake_process(int pid, long rss_kb) {
        put_status(pid, rss_kb, 0);
        char statm[64];
        snprintf(statm, sizeof(statm), "2500 %ld 500 10 0 700 0\n", rss_kb / 4);
        put(pid, "statm", statm);
        put(pid, "oom_score_adj", "0\n");
}

static int open_fds(void) {
        int n = 0;
        DIR *d = opendir("/proc/self/fd");
        cr_assert_not_null(d);
        for (struct dirent *de; (de = readdir(d));)
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

static int poll_one(struct proc_files *pf, int pid, bool fresh, struct proc_counters *c) {
        proc_files_begin(pf);
        int r = proc_files_read(pf, pid, fresh, c);
        proc_files_end(pf);
        return r;
}

Test(proc_files, status_is_read_again_only_when_statm_moves_or_every_few_polls, .init = make_root,
     .fini = remove_root) {
        struct proc_files *pf;
        cr_assert_eq(proc_files_new(root, 16, false, &pf), 0);
        fake_process(100, 4000);
        struct proc_counters c;
        cr_assert_eq(poll_one(pf, 100, false, &c), 0);
        cr_assert_eq(c.st.vm_rss, 4000);
        cr_assert(c.has_oom_score_adj);
        cr_assert_eq(proc_files_status_reads(pf), 1);
        cr_assert_eq(proc_files_open_count(pf), 1);

        /* VmLck moves without statm: the old value stands, unread. */
        put_status(100, 4000, 64);
        cr_assert_eq(poll_one(pf, 100, false, &c), 0);
        cr_assert_eq(c.st.vm_locked, 0);
        cr_assert_eq(proc_files_status_reads(pf), 1, "status read again with statm unchanged");

        /* The cache renewed: read whatever statm says. */
        cr_assert_eq(poll_one(pf, 100, true, &c), 0);
        cr_assert_eq(c.st.vm_locked, 64);
        cr_assert_eq(proc_files_status_reads(pf), 2);

        /* statm moves: status is read, through the same descriptors. */
        int fds = open_fds();
        put_status(100, 8000, 64);
        put(100, "statm", "2500 2000 500 10 0 700 0\n");
        cr_assert_eq(poll_one(pf, 100, false, &c), 0);
        cr_assert_eq(c.st.vm_rss, 8000);
        cr_assert_eq(proc_files_status_reads(pf), 3);
        cr_assert_eq(open_fds(), fds, "a poll opened files");

        /* Unchanged, it is read at the latest every PROC_FILES_STATUS_POLLS
         * polls. */
        put_status(100, 8000, 128);
        unsigned polls = 0;
        while (c.st.vm_locked != 128 && polls < 2 * PROC_FILES_STATUS_POLLS) {
                cr_assert_eq(poll_one(pf, 100, false, &c), 0);
                polls++;
        }
        cr_assert_eq(c.st.vm_locked, 128, "not read again in %u polls", polls);
        cr_assert_eq(polls, PROC_FILES_STATUS_POLLS, "read again after %u polls", polls);
        proc_files_free(pf);
}

Test(proc_files, a_poll_closes_the_files_of_processes_it_did_not_read, .init = make_root, .fini = remove_root) {
        struct proc_files *pf;
        cr_assert_eq(proc_files_new(root, 16, true, &pf), 0);
        fake_process(100, 4000);
        fake_process(200, 4000);
        put(100, "stat", "100 (fake) S 1 100 100 0 -1 4194560 0 0 0 0 7 3 0 0 20 0 1 0 1 0 0\n");
        put(200, "stat", "200 (fake) S 1 200 200 0 -1 4194560 0 0 0 0 9 4 0 0 20 0 1 0 1 0 0\n");
        int before = open_fds();
        struct proc_counters c;
        proc_files_begin(pf);
        cr_assert_eq(proc_files_read(pf, 100, false, &c), 0);
        cr_assert(c.has_times);
        cr_assert_eq(c.utime, 7);
        cr_assert_eq(c.stime, 3);
        cr_assert_eq(proc_files_read(pf, 200, false, &c), 0);
        proc_files_end(pf);
        cr_assert_eq(proc_files_open_count(pf), 2);
        cr_assert_eq(open_fds(), before + 2 * 4);
        cr_assert_eq(poll_one(pf, 200, false, &c), 0);
        cr_assert_eq(proc_files_open_count(pf), 1);
        cr_assert_eq(open_fds(), before + 4, "the files of a process the poll did not read stay open");
        proc_files_free(pf);
        cr_assert_eq(open_fds(), before);
}

Test(proc_files, beyond_max_open_files_are_opened_per_read, .init = make_root, .fini = remove_root) {
        struct proc_files *pf;
        cr_assert_eq(proc_files_new(root, 1, false, &pf), 0);
        fake_process(100, 4000);
        fake_process(200, 8000);
        int before = open_fds();
        struct proc_counters c;
        proc_files_begin(pf);
        cr_assert_eq(proc_files_read(pf, 100, false, &c), 0);
        cr_assert_eq(proc_files_read(pf, 200, false, &c), 0);
        cr_assert_eq(c.st.vm_rss, 8000);
        cr_assert_eq(proc_files_read(pf, 300, false, &c), -ENOENT);
        proc_files_end(pf);
        cr_assert_eq(proc_files_open_count(pf), 1);
        cr_assert_eq(open_fds(), before + 3);
        proc_files_free(pf);
}

/* The real /proc: a child that exits reads as gone, and never as the
 * process that may get its pid. */
Test(proc_files, a_process_that_exits_reads_as_gone) {
        struct proc_files *pf;
        cr_assert_eq(proc_files_new("/proc", 16, true, &pf), 0);
        int p[2];
        cr_assert_eq(pipe(p), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                char b;
                close(p[1]);
                (void) read(p[0], &b, 1);
                _exit(0);
        }
        close(p[0]);
        struct proc_counters c;
        cr_assert_eq(poll_one(pf, pid, false, &c), 0);
        cr_assert_gt(c.st.vm_rss, 0);
        cr_assert_eq(c.st.tgid, pid);
        cr_assert_eq(proc_files_open_count(pf), 1);
        close(p[1]);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        int r = poll_one(pf, pid, false, &c);
        cr_assert(r == -ESRCH || r == -ENOENT, "a reaped process read as %d", r);
        cr_assert_eq(proc_files_open_count(pf), 0, "the files of a gone process stayed open");
        cr_assert_eq(poll_one(pf, getpid(), false, &c), 0);
        cr_assert_eq(c.st.tgid, getpid());
        proc_files_free(pf);
}

/* What a clear's description of every process reads: status says whether
 * a process is a kernel thread (Linux 6.0 and later; unknown before), and
 * a thread's name comes from its comm. */
Test(proc_files, status_says_kernel_threads_and_comm_names_threads, .init = make_root, .fini = remove_root) {
        struct proc_status st;
        cr_assert_eq(proc_parse_status("\nName:\tkworker/0:1\nKthread:\t1\nTgid:\t7\nPPid:\t2\n", &st), 0);
        cr_assert_eq(st.kthread, 1);
        cr_assert_str_eq(st.name, "kworker/0:1");
        cr_assert_eq(proc_parse_status("\nName:\tbash\nKthread:\t0\nTgid:\t9\nPPid:\t1\n", &st), 0);
        cr_assert_eq(st.kthread, 0);
        cr_assert_eq(proc_parse_status("\nName:\told\nTgid:\t9\nPPid:\t1\n", &st), 0);
        cr_assert_eq(st.kthread, -1, "a kernel that does not say");
        put(42, "comm", "worker-3\n");
        char name[64];
        cr_assert_eq(proc_read_comm(root, 42, name, sizeof(name)), 0);
        cr_assert_str_eq(name, "worker-3");
        cr_assert_lt(proc_read_comm(root, 43, name, sizeof(name)), 0, "no such thread");
        /* And on the real /proc: this thread's comm, and this process's
         * status, not a kernel thread's. */
        char self[64];
        snprintf(self, sizeof(self), "/proc/%d/task", (int) getpid());
        cr_assert_eq(proc_read_comm(self, (int) getpid(), name, sizeof(name)), 0);
        cr_assert_gt(strlen(name), 0);
        cr_assert_eq(proc_read_status("/proc", (int) getpid(), &st), 0);
        cr_assert_neq(st.kthread, 1);
        if (proc_read_status("/proc", 2, &st) == 0 && st.kthread >= 0)
                cr_assert_eq(st.kthread, 1, "kthreadd is a kernel thread");
}
