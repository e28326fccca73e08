/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-scratch.h"
#include "profiling/jit-map.h"
#include "profiling/symbolizer.h"

/* ---- the parsers ---------------------------------------------------------- */

struct seen {
        struct jit_entry_in e[16];
        char names[16][64];
        size_t n;
};

static int collect(const struct jit_entry_in *e, void *userdata) {
        struct seen *s = userdata;
        cr_assert_lt(s->n, 16);
        s->e[s->n] = *e;
        if (e->name)
                snprintf(s->names[s->n], sizeof(s->names[0]), "%.*s", (int) e->name_len, e->name);
        s->n++;
        return 0;
}

Test(jit_map, perf_map_lines) {
        static const char text[] = "7f0000001000 40 LazyCompile:*fib /app/fib.js:3\n"
                                   "0x00007f0000002000 0x00000080 Interpreter::invoke\r\n"
                                   "garbage line\n"
                                   "7f0000003000 0 zero_size\n"
                                   "7f0000004000 10\n"
                                   "7f0000005000 20 partial";
        struct seen s = {};
        long used = jit_parse_perf_map(text, sizeof(text) - 1, collect, &s);
        /* Everything but the line still being written. */
        cr_assert_eq(used, (long) (strstr(text, "7f0000005000") - text));
        cr_assert_eq(s.n, 2);
        cr_assert_eq(s.e[0].start, 0x7f0000001000ull);
        cr_assert_eq(s.e[0].size, 0x40);
        cr_assert_str_eq(s.names[0], "LazyCompile:*fib /app/fib.js:3");
        cr_assert_eq(s.e[1].start, 0x7f0000002000ull);
        cr_assert_eq(s.e[1].size, 0x80);
        cr_assert_str_eq(s.names[1], "Interpreter::invoke");
}

/* A jitdump image built by hand: header, then records. */
struct dump {
        uint8_t b[1024];
        size_t n;
};

static void put(struct dump *d, const void *p, size_t n) {
        cr_assert_leq(d->n + n, sizeof(d->b));
        memcpy(d->b + d->n, p, n);
        d->n += n;
}

static void put32(struct dump *d, uint32_t v) {
        put(d, &v, 4);
}

static void put64(struct dump *d, uint64_t v) {
        put(d, &v, 8);
}

static void dump_header(struct dump *d, uint32_t magic) {
        put32(d, magic);
        put32(d, JITDUMP_VERSION);
        put32(d, 40);   /* header size */
        put32(d, 62);   /* EM_X86_64 */
        put32(d, 0);    /* padding */
        put32(d, 4242); /* pid */
        put64(d, 1);    /* timestamp */
        put64(d, 0);    /* flags */
}

static void dump_load(struct dump *d, uint64_t addr, uint64_t size, const char *name) {
        size_t len = strlen(name) + 1;
        put32(d, JITDUMP_CODE_LOAD);
        put32(d, (uint32_t) (16 + 40 + len + size));
        put64(d, 2);
        put32(d, 4242);
        put32(d, 4243);
        put64(d, addr);
        put64(d, addr);
        put64(d, size);
        put64(d, 7); /* code index */
        put(d, name, len);
        for (uint64_t k = 0; k < size; k++)
                put(d, "\x90", 1);
}

static void dump_move(struct dump *d, uint64_t from, uint64_t to, uint64_t size) {
        put32(d, JITDUMP_CODE_MOVE);
        put32(d, 16 + 48);
        put64(d, 3);
        put32(d, 4242);
        put32(d, 4243);
        put64(d, to);
        put64(d, from);
        put64(d, to);
        put64(d, size);
        put64(d, 7);
}

Test(jit_map, jitdump_records) {
        struct dump d = {};
        dump_header(&d, JITDUMP_MAGIC);
        dump_load(&d, 0x1000, 16, "java.lang.String::hashCode");
        put32(&d, 99); /* a record kind not read: skipped by its size */
        put32(&d, 16 + 8);
        put64(&d, 4);
        put64(&d, 0);
        dump_move(&d, 0x1000, 0x9000, 16);
        size_t whole = d.n;
        dump_load(&d, 0x2000, 8, "Foo::bar");

        struct seen s = {};
        int header = 0;
        /* Read as a file being written: the last record is not all there. */
        long used = jit_parse_jitdump(d.b, d.n - 3, &header, collect, &s);
        cr_assert_eq(used, (long) whole);
        cr_assert_eq(header, 1);
        cr_assert_eq(s.n, 2);
        cr_assert_str_eq(s.names[0], "java.lang.String::hashCode");
        cr_assert_eq(s.e[0].start, 0x1000);
        cr_assert_eq(s.e[0].size, 16);
        cr_assert_null(s.e[1].name);
        cr_assert_eq(s.e[1].moved_from, 0x1000);
        cr_assert_eq(s.e[1].start, 0x9000);
        /* The rest, from where it stopped. */
        used = jit_parse_jitdump(d.b + whole, d.n - whole, &header, collect, &s);
        cr_assert_eq(used, (long) (d.n - whole));
        cr_assert_eq(s.n, 3);
        cr_assert_str_eq(s.names[2], "Foo::bar");

        /* Another byte order, and a record shorter than its header. */
        struct dump other = {};
        dump_header(&other, __builtin_bswap32(JITDUMP_MAGIC));
        header = 0;
        cr_assert_eq(jit_parse_jitdump(other.b, other.n, &header, collect, &s), -EPROTO);
        struct dump bad = {};
        dump_header(&bad, JITDUMP_MAGIC);
        put32(&bad, JITDUMP_CODE_LOAD);
        put32(&bad, 8);
        put64(&bad, 0);
        header = 0;
        cr_assert_eq(jit_parse_jitdump(bad.b, bad.n, &header, collect, &s), -EPROTO);
}

/* ---- a process's files, through a proc tree of the test's own ------------- */

#define PID 4242
#define NSPID 42
#define ANON 0x7f0000000000ull

static char root[4096];

static void write_file(const char *rel, const void *data, size_t n, const char *mode) {
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                (void) mkdir(path, 0755);
                *s = '/';
        }
        FILE *f = fopen(path, mode);
        cr_assert_not_null(f, "%s: %m", path);
        cr_assert_eq(fwrite(data, 1, n, f), n);
        fclose(f);
}

static void write_text(const char *rel, const char *text, const char *mode) {
        write_file(rel, text, strlen(text), mode);
}

static void setup(void) {
        cr_assert_eq(test_mkdtemp(root, sizeof(root), "jit-map-"), 0);
        char maps[512];
        snprintf(maps, sizeof(maps),
                 "%llx-%llx r-xp 00000000 00:00 0 \n"
                 "%llx-%llx rw-p 00000000 00:00 0 \n"
                 "7f1000000000-7f1000001000 r-xp 00000000 08:01 99 /home/u/.debug/jit/java-jit-1/jit-%d.dump\n",
                 ANON, ANON + 0x100000, ANON + 0x200000, ANON + 0x300000, NSPID);
        write_text("4242/maps", maps, "w");
        write_text("4242/status", "Name:\tnode\nUid:\t0\t0\t0\t0\nNSpid:\t4242\t42\n", "w");
}

static void teardown(void) {
        (void) rm_rf(root);
}

static struct symbolized resolve(struct symbolizer *s, struct proc_info *p, uint64_t pc) {
        struct symbolized r;
        symbolizer_resolve(s, p, pc, &r);
        return r;
}

TestSuite(jit_process, .init = setup, .fini = teardown);

Test(jit_process, perf_map_of_a_process_in_its_own_namespace) {
        /* The process is 42 in its namespace: its map is /tmp/perf-42.map
         * under its own root; a perf-4242.map is another process's. */
        write_text("4242/root/tmp/perf-42.map", "7f0000001000 100 fib\n7f0000001080 10 fib_inner\n", "w");
        write_text("4242/root/tmp/perf-4242.map", "7f0000001000 100 not_this_one\n", "w");
        struct proc_table *t;
        cr_assert_eq(proc_table_new(root, &t), 0);
        struct symbolizer s = { .procs = t };
        struct proc_info *p = proc_table_get(t, PID);
        cr_assert_not_null(p);
        cr_assert_eq(p->maps.n, 3);

        uint32_t version = p->maps_version;
        struct symbolized r = resolve(&s, p, ANON + 0x1010);
        cr_assert_str_eq(r.function, "fib");
        cr_assert_eq(r.rel_pc, 0x1010);
        cr_assert_neq(p->maps_version, version, "new names void what callers cached for the maps");
        /* The later of two overlapping entries. */
        cr_assert_str_eq(resolve(&s, p, ANON + 0x1088).function, "fib_inner");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x10f0).function, "fib");
        /* Not executable: no name looked for. */
        cr_assert_null(resolve(&s, p, ANON + 0x200010).function);
        proc_table_free(t);
}

Test(jit_process, the_map_is_read_again_as_it_grows) {
        write_text("4242/root/tmp/perf-42.map", "7f0000001000 100 first\n7f00000020", "w");
        struct proc_table *t;
        cr_assert_eq(proc_table_new(root, &t), 0);
        struct symbolizer s = { .procs = t };
        struct proc_info *p = proc_table_get(t, PID);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x1000).function, "first");
        cr_assert_eq(s.jit_unnamed, 0);
        cr_assert_null(resolve(&s, p, ANON + 0x2000).function);
        cr_assert_eq(s.jit_unnamed, 1, "callers caching frames are told a name may come later");
        /* The runtime finishes the line and compiles more. */
        write_text("4242/root/tmp/perf-42.map", "00 40 second\n7f0000003000 40 third\n", "a");
        usleep(JIT_REFRESH_USEC + 20000);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x2010).function, "second");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x3010).function, "third");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x1000).function, "first");
        /* An exec drops the names with the program. */
        cr_assert_eq(proc_table_exec(t, PID, "other"), 0);
        cr_assert_null(p->jit);
        proc_table_free(t);
}

Test(jit_process, a_map_owned_by_another_user_is_not_read) {
        write_text("4242/root/tmp/perf-42.map", "7f0000001000 100 planted\n", "w");
        char path[8192];
        snprintf(path, sizeof(path), "%s/4242/root/tmp/perf-42.map", root);
        /* The process runs as root (its status): a file of user 12345 in
         * the shared /tmp is not its runtime's. */
        cr_assert_eq(chown(path, 12345, 12345), 0, "%m");
        struct proc_table *t;
        cr_assert_eq(proc_table_new(root, &t), 0);
        struct symbolizer s = { .procs = t };
        struct proc_info *p = proc_table_get(t, PID);
        cr_assert_null(resolve(&s, p, ANON + 0x1000).function);
        proc_table_free(t);
}

Test(jit_process, jitdump_found_in_the_maps_and_followed_through_moves) {
        struct dump d = {};
        dump_header(&d, JITDUMP_MAGIC);
        dump_load(&d, ANON + 0x4000, 32, "Main::loop");
        dump_move(&d, ANON + 0x4000, ANON + 0x8000, 32);
        char rel[256];
        snprintf(rel, sizeof(rel), "4242/root/home/u/.debug/jit/java-jit-1/jit-%d.dump", NSPID);
        write_file(rel, d.b, d.n, "w");
        struct proc_table *t;
        cr_assert_eq(proc_table_new(root, &t), 0);
        struct symbolizer s = { .procs = t };
        struct proc_info *p = proc_table_get(t, PID);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x4004).function, "Main::loop");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x8004).function, "Main::loop");
        proc_table_free(t);
}

Test(jit_process, a_map_written_anew_replaces_the_old_one) {
        /* JDK 17's jcmd PID Compiler.perfmap writes the whole map again
         * each time, over the same file. */
        write_text("4242/root/tmp/perf-42.map", "0x00007f0000001000 0x0000000000000100 void Main.old()\n", "w");
        struct proc_table *t;
        cr_assert_eq(proc_table_new(root, &t), 0);
        struct symbolizer s = { .procs = t };
        struct proc_info *p = proc_table_get(t, PID);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x1000).function, "void Main.old()");
        write_text("4242/root/tmp/perf-42.map",
                   "0x00007f0000005000 0x0000000000000100 void Main.warm()\n"
                   "0x00007f0000001000 0x0000000000000080 double Main.busyLoop(int)\n"
                   "0x00007f0000009000 0x0000000000000100 void Main.other()\n",
                   "w");
        usleep(JIT_REFRESH_USEC + 20000);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x5010).function, "void Main.warm()");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x1010).function, "double Main.busyLoop(int)");
        /* Where the new map names nothing, the old name is gone too. */
        cr_assert_null(resolve(&s, p, ANON + 0x10f0).function);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x9000).function, "void Main.other()");
        proc_table_free(t);
}

/* A map written anew with a method compiled since in its middle, the same
 * first line, and a newline where the last read ended: a rewrite, not an
 * append (read as an append, the new method was never named). */
Test(jit_process, a_map_written_anew_with_an_entry_inserted_is_read_whole) {
        const char *a = "0x00007f0000001000 0x0000000000000100 void Main.first()\n";
        const char *b = "0x00007f0000009000 0x0000000000000100 void Main.later()\n";
        const char *x = "0x00007f0000005000 0x0000000000000100 void Main.burst()\n";
        char text[512];
        snprintf(text, sizeof(text), "%s%s", a, b);
        write_text("4242/root/tmp/perf-42.map", text, "w");
        struct proc_table *t;
        cr_assert_eq(proc_table_new(root, &t), 0);
        struct symbolizer s = { .procs = t };
        struct proc_info *p = proc_table_get(t, PID);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x9010).function, "void Main.later()");
        /* x has b's length: where the first read ended, a line ends again. */
        cr_assert_eq(strlen(x), strlen(b));
        snprintf(text, sizeof(text), "%s%s%s", a, x, b);
        write_text("4242/root/tmp/perf-42.map", text, "w");
        usleep(JIT_REFRESH_USEC + 20000);
        cr_assert_str_eq(resolve(&s, p, ANON + 0x5010).function, "void Main.burst()");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x9010).function, "void Main.later()");
        cr_assert_str_eq(resolve(&s, p, ANON + 0x1010).function, "void Main.first()");
        proc_table_free(t);
}
