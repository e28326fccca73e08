/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profiling/procmaps.h"
#include "test-scratch.h"

static const char maps_text[] =
        "55d1c0a00000-55d1c0a02000 r--p 00000000 08:01 1234 /usr/bin/prog\n"
        "55d1c0a02000-55d1c0a05000 r-xp 00002000 08:01 1234 /usr/bin/prog\n"
        "55d1c2000000-55d1c2021000 rw-p 00000000 00:00 0          [heap]\n"
        "not a maps line\n"
        "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
        "7f0000100000-7f0000200000 r-xp 00028000 08:01 99 /lib/x86_64-linux-gnu/libc.so.6\n"
        "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n"
        "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 /tmp/my file (deleted)\n";

static void parse(struct proc_maps *m, const char *text) {
        FILE *f = fmemopen((void *) text, strlen(text), "r");
        cr_assert_not_null(f);
        cr_assert_eq(proc_maps_parse(f, m), 0);
        fclose(f);
}

Test(procmaps, parses_the_kernel_format) {
        struct proc_maps m = {};
        parse(&m, maps_text);
        cr_assert_eq(m.n, 7, "%zu regions", m.n);
        const struct pmap *e = proc_maps_find(&m, 0x55d1c0a03000);
        cr_assert_not_null(e);
        cr_assert_str_eq(e->path, "/usr/bin/prog");
        cr_assert_eq(e->pgoff, 0x2000);
        cr_assert_eq(e->prot, PROT_READ | PROT_EXEC);
        cr_assert_eq(e->dev_major, 8);
        cr_assert_eq(e->dev_minor, 1);
        cr_assert_eq(e->inode, 1234);
        cr_assert_str_eq(proc_maps_find(&m, 0x55d1c2000010)->path, "[heap]");
        cr_assert_str_eq(proc_maps_find(&m, 0x7f0000000000)->path, "", "anonymous");
        cr_assert_str_eq(proc_maps_find(&m, 0x7ffd00000001)->path, "/tmp/my file (deleted)", "spaces kept");
        cr_assert_null(proc_maps_find(&m, 0x55d1c0a05000), "end is exclusive");
        cr_assert_null(proc_maps_find(&m, 0x1000));
        cr_assert_null(proc_maps_find(&m, UINT64_MAX));
        proc_maps_clear(&m);
}

static struct pmap region(uint64_t start, uint64_t end, uint64_t off, const char *path) {
        return (struct pmap) { .start = start, .end = end, .pgoff = off, .path = (char *) path, .prot = PROT_EXEC };
}

Test(procmaps, a_new_mapping_cuts_what_it_overlaps) {
        struct proc_maps m = {};
        struct pmap a = region(0x1000, 0x9000, 0, "/a");
        cr_assert_eq(proc_maps_add(&m, &a), 0);
        /* Inside a: a splits in head and tail. */
        struct pmap b = region(0x3000, 0x4000, 0x100000, "/b");
        cr_assert_eq(proc_maps_add(&m, &b), 0);
        cr_assert_eq(m.n, 3);
        cr_assert_str_eq(proc_maps_find(&m, 0x2fff)->path, "/a");
        cr_assert_str_eq(proc_maps_find(&m, 0x3000)->path, "/b");
        const struct pmap *tail = proc_maps_find(&m, 0x4000);
        cr_assert_str_eq(tail->path, "/a");
        cr_assert_eq(tail->pgoff, 0x3000, "the tail's offset moves with its start");
        /* Over the end of b and into the tail. */
        struct pmap c = region(0x3800, 0x5000, 0, "/c");
        cr_assert_eq(proc_maps_add(&m, &c), 0);
        cr_assert_eq(proc_maps_find(&m, 0x37ff)->end, 0x3800);
        cr_assert_str_eq(proc_maps_find(&m, 0x4fff)->path, "/c");
        cr_assert_eq(proc_maps_find(&m, 0x5000)->pgoff, 0x4000);
        /* Over everything. */
        struct pmap d = region(0, 0x10000, 0, "/d");
        cr_assert_eq(proc_maps_add(&m, &d), 0);
        cr_assert_eq(m.n, 1);
        cr_assert_str_eq(m.v[0].path, "/d");
        struct pmap empty = region(0x5000, 0x5000, 0, "/e");
        cr_assert_eq(proc_maps_add(&m, &empty), -EINVAL);
        proc_maps_clear(&m);
}

Test(procmaps, sorted_whatever_the_order_of_adds) {
        struct proc_maps m = {};
        for (int k = 20; k > 0; k--) {
                struct pmap e = region((uint64_t) k * 0x10000, (uint64_t) k * 0x10000 + 0x8000, 0, "/x");
                cr_assert_eq(proc_maps_add(&m, &e), 0);
        }
        for (size_t k = 1; k < m.n; k++)
                cr_assert_lt(m.v[k - 1].end, m.v[k].start + 1);
        cr_assert_eq(m.n, 20);
        proc_maps_clear(&m);
}

/* The fake /proc of a test, removed by its .fini (rm_fake_proc) whether
 * the test passed or not. */
static char fake_dir[256];

static char *fake_proc(int pid, const char *maps) {
        int r = test_mkdtemp(fake_dir, sizeof(fake_dir), "test-procmaps-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        char *dir = fake_dir;
        char p[512];
        snprintf(p, sizeof(p), "%s/%d", dir, pid);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/%d/maps", dir, pid);
        FILE *f = fopen(p, "w");
        fputs(maps, f);
        fclose(f);
        snprintf(p, sizeof(p), "%s/%d/comm", dir, pid);
        f = fopen(p, "w");
        fputs("prog\n", f);
        fclose(f);
        return dir;
}

static void rm_fake_proc(void) {
        cr_expect_eq(test_scratch_remove(fake_dir), 0, "could not remove %s", fake_dir);
        fake_dir[0] = '\0';
}

static int freed;
static void count_free(void *p) {
        freed++;
        free(p);
}

Test(procmaps, table_follows_exec_fork_exit, .fini = rm_fake_proc) {
        char *dir = fake_proc(42, maps_text);
        struct proc_table *t;
        cr_assert_eq(proc_table_new(dir, &t), 0);
        struct proc_info *p = proc_table_get(t, 42);
        cr_assert_not_null(p);
        cr_assert(p->maps_loaded);
        cr_assert_str_eq(p->comm, "prog");
        cr_assert_eq(p->maps.n, 7);

        /* A new library mapped: seen without reading the maps again. */
        struct pmap lib = region(0x7f0000400000, 0x7f0000500000, 0x1000, "/usr/lib/libnew.so");
        cr_assert_eq(proc_table_mmap(t, 42, &lib), 0);
        cr_assert_str_eq(proc_maps_find(&p->maps, 0x7f0000400000)->path, "/usr/lib/libnew.so");

        /* A fork copies the parent's maps; a thread (pid == ppid) is no process. */
        cr_assert_eq(proc_table_fork(t, 43, 42), 0);
        cr_assert_eq(proc_table_fork(t, 42, 42), 0);
        cr_assert_eq(proc_table_count(t), 2);
        struct proc_info *c = proc_table_peek(t, 43);
        cr_assert_not_null(c);
        cr_assert_eq(c->maps.n, 8);
        cr_assert_str_eq(c->comm, "prog");

        /* An exec forgets every map; the next get reads them again. */
        uint32_t gen = p->generation;
        cr_assert_eq(proc_table_exec(t, 42, "newprog"), 0);
        cr_assert_eq(p->maps.n, 0);
        cr_assert_neq(p->generation, gen);
        cr_assert_str_eq(p->comm, "newprog");
        char path[512];
        snprintf(path, sizeof(path), "%s/42/maps", dir);
        FILE *f = fopen(path, "w");
        fputs("400000-401000 r-xp 00000000 08:01 7 /usr/bin/newprog\n", f);
        fclose(f);
        p = proc_table_get(t, 42);
        cr_assert_eq(p->maps.n, 1);
        cr_assert_str_eq(p->maps.v[0].path, "/usr/bin/newprog");

        /* Exit keeps the process until reaped past its exit time; its
         * userdata goes with it. */
        proc_table_set_free_userdata(t, count_free);
        c->userdata = malloc(8);
        proc_table_exit(t, 43, 1000);
        cr_assert_eq(proc_table_reap(t, 1000), 0);
        cr_assert_not_null(proc_table_peek(t, 43));
        cr_assert_eq(proc_table_reap(t, 1001), 1);
        cr_assert_null(proc_table_peek(t, 43));
        cr_assert_eq(freed, 1);

        /* A process whose maps cannot be read: known, empty, not retried. */
        struct proc_info *gone = proc_table_get(t, 77);
        cr_assert_not_null(gone);
        cr_assert(gone->maps_unreadable);
        cr_assert_eq(gone->maps.n, 0);
        proc_table_free(t);
}

/* An exec told by notes that go on with every executable mmap: the maps
 * are the notes', and /proc/PID/maps (here a different text) is not read,
 * unless no note came yet or a caller asks for a reload. */
Test(procmaps, an_exec_told_by_notes_is_not_read_from_proc, .fini = rm_fake_proc) {
        char *dir = fake_proc(42, maps_text);
        struct proc_table *t;
        cr_assert_eq(proc_table_new(dir, &t), 0);
        cr_assert_eq(proc_table_exec_noted(t, 42, "cc1"), 0);
        struct pmap bin = region(0x400000, 0x500000, 0x1000, "/usr/lib/gcc/cc1");
        cr_assert_eq(proc_table_mmap(t, 42, &bin), 0);
        struct proc_info *p = proc_table_get(t, 42);
        cr_assert_not_null(p);
        cr_assert(p->maps_loaded && p->maps_noted);
        cr_assert_eq(p->maps.n, 1, "the note alone, not the 7 maps of /proc (%zu)", p->maps.n);
        cr_assert_str_eq(p->maps.v[0].path, "/usr/lib/gcc/cc1");
        cr_assert_str_eq(p->comm, "cc1");

        /* Its child, forked before either was looked up, has them too. */
        cr_assert_eq(proc_table_exec_noted(t, 50, "as"), 0);
        struct pmap as = region(0x600000, 0x700000, 0x1000, "/usr/bin/as");
        cr_assert_eq(proc_table_mmap(t, 50, &as), 0);
        cr_assert_eq(proc_table_fork(t, 51, 50), 0);
        struct proc_info *c = proc_table_get(t, 51);
        cr_assert(c && c->maps_loaded && c->maps.n == 1);
        cr_assert_str_eq(c->maps.v[0].path, "/usr/bin/as");

        /* Notes lost: a process whose maps came from them alone has
         * /proc read at its next get, the notes kept over it. */
        proc_table_notes_lost(t);
        p = proc_table_get(t, 42);
        cr_assert_not(p->maps_noted);
        cr_assert_eq(p->maps.n, 8, "/proc's 7 and the note (%zu)", p->maps.n);

        /* No note yet (a sample inside the exec): /proc is read. */
        cr_assert_eq(proc_table_exec_noted(t, 42, "cc1"), 0);
        p = proc_table_get(t, 42);
        cr_assert_eq(p->maps.n, 7);

        /* A plain exec (no notes follow) reads /proc, as before. */
        cr_assert_eq(proc_table_exec(t, 42, "prog"), 0);
        cr_assert_eq(proc_table_mmap(t, 42, &bin), 0);
        p = proc_table_get(t, 42);
        cr_assert_not(p->maps_noted);
        cr_assert_eq(p->maps.n, 8, "/proc's and the note (%zu)", p->maps.n);

        /* A reload reads /proc whatever the notes said. */
        cr_assert_eq(proc_table_exec_noted(t, 42, "cc1"), 0);
        cr_assert_eq(proc_table_mmap(t, 42, &bin), 0);
        proc_table_reload(t, 42);
        p = proc_table_peek(t, 42);
        cr_assert_eq(p->maps.n, 7);
        proc_table_free(t);
}

/* Many processes, most of them exited at different times: a reap drops
 * exactly those before its time (with their userdata), and the others
 * stay where they were. */
Test(procmaps, reap_among_many) {
        struct proc_table *t;
        cr_assert_eq(proc_table_new("/nonexistent", &t), 0);
        proc_table_set_free_userdata(t, count_free);
        freed = 0;
        for (int pid = 1; pid <= 5000; pid++) {
                cr_assert_eq(proc_table_comm(t, pid, "p"), 0);
                struct proc_info *i = proc_table_peek(t, pid);
                cr_assert_not_null(i);
                i->userdata = malloc(8);
                if (pid % 2 == 0)
                        proc_table_exit(t, pid, (uint64_t) pid);
        }
        cr_assert_eq(proc_table_count(t), 5000);
        cr_assert_eq(proc_table_reap(t, 2501), 1250);
        cr_assert_eq(freed, 1250);
        cr_assert_eq(proc_table_count(t), 3750);
        for (int pid = 1; pid <= 5000; pid++)
                cr_assert_eq(proc_table_peek(t, pid) != NULL, pid % 2 == 1 || pid > 2500, "pid %d", pid);
        cr_assert_eq(proc_table_reap(t, UINT64_MAX), 1250);
        cr_assert_eq(proc_table_count(t), 2500);
        proc_table_free(t);
        cr_assert_eq(freed, 5000);
}

Test(procmaps, reads_this_process_and_opens_its_files) {
        struct proc_table *t;
        cr_assert_eq(proc_table_new(NULL, &t), 0);
        struct proc_info *p = proc_table_get(t, getpid());
        cr_assert(p->maps_loaded);
        const struct pmap *e = proc_maps_find(&p->maps, (uint64_t) (uintptr_t) &parse);
        cr_assert_not_null(e, "the test's own code is mapped");
        cr_assert(e->prot & PROT_EXEC);
        int fd = proc_table_open_file(t, getpid(), e->path);
        cr_assert_geq(fd, 0, "%s: %s", e->path, strerror(-fd));
        char magic[4];
        cr_assert_eq(read(fd, magic, 4), 4);
        cr_assert_eq(memcmp(magic, "\177ELF", 4), 0);
        close(fd);
        cr_assert_eq(proc_table_open_file(t, getpid(), "relative/path"), -EINVAL);
        cr_assert_lt(proc_table_open_file(t, getpid(), "/nonexistent/file"), 0);
        proc_table_free(t);
}

/* A child forked from a parent whose maps were never read, and gone
 * before anyone read its own: it inherits the parent's (read then, the
 * parent still there), under what the notes told of its own mappings. */
Test(procmaps, a_child_gone_first_inherits_its_parents_maps, .fini = rm_fake_proc) {
        char *dir = fake_proc(42, maps_text);
        struct proc_table *t;
        cr_assert_eq(proc_table_new(dir, &t), 0);
        cr_assert_eq(proc_table_fork(t, 50, 42), 0);
        struct proc_info *parent = proc_table_peek(t, 42);
        cr_assert_not_null(parent, "the parent is remembered");
        cr_assert_not(parent->maps_loaded, "and not read at the fork");
        struct pmap own = region(0x7f0000400000, 0x7f0000500000, 0, "/usr/lib/libchild.so");
        cr_assert_eq(proc_table_mmap(t, 50, &own), 0);
        struct proc_info *c = proc_table_get(t, 50);
        cr_assert_not_null(c);
        cr_assert(c->maps_loaded, "the parent's maps, read from its /proc");
        cr_assert_eq(c->maps.n, 8);
        cr_assert_str_eq(proc_maps_find(&c->maps, 0x55d1c0a03000)->path, "/usr/bin/prog");
        cr_assert_str_eq(proc_maps_find(&c->maps, 0x7f0000400000)->path, "/usr/lib/libchild.so");
        cr_assert_str_eq(c->comm, "prog");

        /* A parent known by then: the child starts with a copy. */
        cr_assert_eq(proc_table_fork(t, 52, 42), 0);
        cr_assert_eq(proc_table_peek(t, 52)->maps.n, 7);
        proc_table_free(t);

        /* A parent that exec'd since the fork has other maps: none are
         * inherited from it. */
        cr_assert_eq(proc_table_new(dir, &t), 0);
        cr_assert_eq(proc_table_fork(t, 51, 42), 0);
        cr_assert_eq(proc_table_exec(t, 42, "other"), 0);
        c = proc_table_get(t, 51);
        cr_assert_eq(c->maps.n, 0);
        cr_assert_not(c->maps_loaded);
        proc_table_free(t);

        /* Through a parent gone too: from the grandparent. */
        cr_assert_eq(proc_table_new(dir, &t), 0);
        cr_assert_eq(proc_table_fork(t, 60, 42), 0);
        cr_assert_eq(proc_table_fork(t, 61, 60), 0);
        c = proc_table_get(t, 61);
        cr_assert_eq(c->maps.n, 7);
        proc_table_free(t);
}

/* A reload keeps what is known when the process is gone; an exec keeps
 * the maps before it for the pcs of samples taken inside the exec. */
Test(procmaps, reload_and_the_maps_before_an_exec, .fini = rm_fake_proc) {
        char *dir = fake_proc(42, maps_text);
        struct proc_table *t;
        cr_assert_eq(proc_table_new(dir, &t), 0);
        struct pmap note = region(0x400000, 0x401000, 0, "/usr/bin/noted");
        cr_assert_eq(proc_table_mmap(t, 77, &note), 0);
        proc_table_reload(t, 77); /* no /proc/77 */
        struct proc_info *gone = proc_table_peek(t, 77);
        cr_assert(gone->maps_unreadable);
        cr_assert_eq(gone->maps.n, 1, "the notes stay");
        proc_table_reload(t, 42);
        struct proc_info *p = proc_table_peek(t, 42);
        cr_assert(p->maps_loaded);
        cr_assert_eq(p->maps.n, 7);

        cr_assert_eq(proc_table_exec(t, 42, "next"), 0);
        struct pmap next = region(0x400000, 0x401000, 0, "/usr/bin/next");
        cr_assert_eq(proc_table_mmap(t, 42, &next), 0);
        cr_assert_str_eq(proc_info_find_pc(p, 0x400010)->path, "/usr/bin/next");
        cr_assert_str_eq(proc_info_find_pc(p, 0x7f0000100010)->path, "/lib/x86_64-linux-gnu/libc.so.6",
                         "a pc of the program before the exec");
        cr_assert_null(proc_maps_find(&p->maps, 0x7f0000100010));
        cr_assert_null(proc_info_find_pc(p, 0x1000));
        proc_table_free(t);
}
