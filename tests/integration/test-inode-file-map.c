/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.inode_file_map with the real traced and the ftrace plugin: a file
 * this test creates and reads back from disk while linux.ftrace records
 * filemap/mm_filemap_add_to_page_cache is in the trace's InodeFileMap with
 * its inode number and path. The scan is pointed at the test's scratch
 * directory (mount_point_mapping), not at the whole file system holding it.
 * tracectl query lists the data source, tracectl summary counts its
 * packets. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"
#include "test-scratch.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define EVENT_DIR "/sys/kernel/tracing/events/filemap/mm_filemap_add_to_page_cache"
#define TMPFS_MAGIC_NUMBER 0x01021994

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;
static char dir[256], file[300];
static bool bound; /* dir bind-mounted on itself (mappings()) */

static void setup(void) {
        if (fixture_tracefs_usable())
                cr_assert_eq(fixture_start(&inst, &ev), 0);
        int r = test_mkdtemp(dir, sizeof(dir), "test-inode-file-map-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        snprintf(file, sizeof(file), "%s/probe.txt", dir);
}

static void teardown(void) {
        if (ev)
                cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
        if (bound)
                cr_expect_eq(umount2(dir, MNT_DETACH), 0, "umount %s: %s", dir, strerror(errno));
        bound = false;
        cr_expect_eq(test_scratch_remove(dir), 0, "could not remove %s", dir);
}

TestSuite(inode_file_map, .init = setup, .fini = teardown, .timeout = 120);

/* Criterion runs no .fini after a skip. */
#define SKIP(...)                                                                                                      \
        do {                                                                                                           \
                teardown();                                                                                            \
                cr_skip_test(__VA_ARGS__);                                                                             \
        } while (0)

static void need_page_cache_events(void) {
        if (!ev)
                SKIP("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct stat st;
        if (stat(EVENT_DIR, &st) < 0)
                SKIP("this kernel has no filemap/mm_filemap_add_to_page_cache tracepoint");
        struct statfs sf;
        cr_assert_eq(statfs(dir, &sf), 0);
        if (sf.f_type == TMPFS_MAGIC_NUMBER)
                SKIP("%s is on tmpfs, whose pages never enter the page cache through a read: set TRACED_TEST_TMPDIR "
                     "to a directory on a disk file system",
                     dir);
}

/* "mount_point_mapping { mountpoint: M scan_roots: dir } ..." for every
 * mount point M of dir's device in /proc/self/mountinfo; 0 when there is
 * none. */
static size_t mappings_of_mountinfo(char *buf, size_t size) {
        struct stat st;
        cr_assert_eq(stat(dir, &st), 0);
        FILE *f = fopen("/proc/self/mountinfo", "re");
        cr_assert_not_null(f);
        char line[4096];
        size_t n = 0;
        buf[0] = '\0';
        while (fgets(line, sizeof(line), f)) {
                unsigned ma, mi;
                char mp[2048];
                if (sscanf(line, "%*u %*u %u:%u %*s %2047s", &ma, &mi, mp) != 3 || makedev(ma, mi) != st.st_dev)
                        continue;
                if (strchr(mp, '\\'))
                        continue; /* an escaped name: the others do */
                int w = snprintf(buf + n, size - n, "  mount_point_mapping { mountpoint: \"%s\" scan_roots: \"%s\" }\n",
                                 mp, dir);
                cr_assert(w > 0 && (size_t) w < size - n);
                n += (size_t) w;
        }
        fclose(f);
        return n;
}

/* The mappings for dir's device: whichever mount point the plugin takes,
 * it scans only dir. In a chroot the mount holding dir may lie outside the
 * root, so that /proc/self/mountinfo has no line for its device: then dir
 * is bind-mounted on itself, which gives it one (undone by teardown). */
static void mappings(char *buf, size_t size) {
        if (mappings_of_mountinfo(buf, size) > 0)
                return;
        cr_assert_eq(mount(dir, dir, NULL, MS_BIND, NULL), 0, "bind-mounting %s on itself: %s", dir, strerror(errno));
        bound = true;
        cr_assert_gt(mappings_of_mountinfo(buf, size), 0, "the device of %s is in no line of /proc/self/mountinfo, "
                     "even bind-mounted on itself", dir);
}

/* The file, 64 KiB on disk. */
static void write_file(void) {
        char block[4096];
        memset(block, 'x', sizeof(block));
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        for (int i = 0; i < 16; i++)
                cr_assert_eq(write(fd, block, sizeof(block)), (ssize_t) sizeof(block));
        cr_assert_eq(fsync(fd), 0);
        close(fd);
}

/* Drops the file's pages and reads it back: the kernel adds them to the
 * page cache again, with an event naming its inode. */
static void read_from_disk(void) {
        char block[4096];
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
        while (read(fd, block, sizeof(block)) > 0)
                ;
        close(fd);
}

/* The same, then waits for a scan that found it. */
static void read_and_wait_for_the_scan(void *unused) {
        unsigned before = fixture_log_count(&inst, "linux.inode_file_map instance ", "scan over, 1 found");
        read_from_disk();
        cr_assert(fixture_wait_log(&inst, ev, "linux.inode_file_map instance ", "scan over, 1 found", before, 30000),
                  "no scan found the file");
}

static void read_and_drain(void *unused) {
        read_from_disk();
        spin_ms(ev, 300);
}

struct check {
        uint64_t dev, ino;
        unsigned maps, entries_for_file;
        bool path_ok, type_ok, dev_ok;
        char path[512];
};

static void check_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct check *c = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_INODE_FILE_MAP)
                return;
        const Perfetto__Protos__InodeFileMap *m = p->inode_file_map;
        c->maps++;
        for (size_t i = 0; i < m->n_entries; i++) {
                const Perfetto__Protos__InodeFileMap__Entry *e = m->entries[i];
                if (e->inode_number != c->ino)
                        continue;
                c->entries_for_file++;
                c->dev_ok = m->block_device_id == c->dev;
                c->type_ok = e->type == PERFETTO__PROTOS__INODE_FILE_MAP__ENTRY__TYPE__FILE;
                if (e->n_paths > 0) {
                        snprintf(c->path, sizeof(c->path), "%s", e->paths[0]);
                        c->path_ok = strcmp(e->paths[0], file) == 0;
                }
        }
}

static char *run_tracectl(const char *const *args) {
        char out[512];
        snprintf(out, sizeof(out), "%s/tracectl.out", inst.dir);
        char *argv[16];
        size_t n = 0;
        argv[n++] = (char *) TRACECTL_BINARY;
        argv[n++] = (char *) "--socket";
        argv[n++] = inst.consumer_path;
        for (; *args && n < 15; args++)
                argv[n++] = (char *) *args;
        argv[n] = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tracectl %s failed", argv[3]);
        static char text[65536];
        FILE *f = fopen(out, "re");
        cr_assert_not_null(f);
        text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
        fclose(f);
        return text;
}

Test(inode_file_map, a_file_read_from_disk_is_named_by_inode_and_path) {
        need_page_cache_events();
        static char maps[8192], config[12288];
        mappings(maps, sizeof(maps));
        snprintf(config, sizeof(config),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                 "  ftrace_events: \"filemap/mm_filemap_add_to_page_cache\" } } }\n"
                 "data_sources { config { name: \"linux.inode_file_map\" inode_file_config {\n"
                 "  scan_delay_ms: 100 scan_interval_ms: 10 scan_batch_size: 100\n%s} } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 maps);
        write_file();
        struct stat st;
        cr_assert_eq(stat(file, &st), 0);
        struct check c = {.dev = (uint64_t) st.st_dev, .ino = (uint64_t) st.st_ino};
        fixture_record(&inst, ev, "linux.inode_file_map", config, read_and_wait_for_the_scan, NULL, check_packet, &c);
        cr_assert_gt(c.maps, 0, "no InodeFileMap packet in the trace");
        cr_assert_eq(c.entries_for_file, 1, "inode %llu is in %u entries", (unsigned long long) c.ino,
                     c.entries_for_file);
        cr_assert(c.path_ok, "inode %llu is named \"%s\", not %s", (unsigned long long) c.ino, c.path, file);
        cr_assert(c.type_ok, "not a FILE");
        cr_assert(c.dev_ok, "block_device_id is not %u:%u", major(st.st_dev), minor(st.st_dev));

        /* tracectl summary counts the packets by kind. */
        char trace[512];
        snprintf(trace, sizeof(trace), "%s/recorded.pftrace", inst.dir);
        const char *text = run_tracectl((const char *const[]) { "summary", trace, NULL });
        cr_assert_not_null(strstr(text, "inode_file_map"), "tracectl summary:\n%s", text);
}

/* Without the data source, the same recording has no InodeFileMap. */
Test(inode_file_map, nothing_without_the_data_source) {
        need_page_cache_events();
        write_file();
        struct check c = {};
        fixture_record(&inst, ev, "linux.ftrace",
                       "buffers { size_kb: 8192 }\n"
                       "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
                       "  ftrace_events: \"filemap/mm_filemap_add_to_page_cache\" } } }\n"
                       "write_into_file: true file_write_period_ms: 200\n",
                       read_and_drain, NULL, check_packet, &c);
        cr_assert_eq(c.maps, 0);
}

Test(inode_file_map, tracectl_query_lists_it) {
        if (!ev)
                cr_skip_test(
                        "tracefs is not mounted and cannot be mounted here: the plugin registers nothing of ftrace");
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, ev, "linux.inode_file_map", 1, 10000));
        test_consumer_free(&cons);
        const char *text = run_tracectl((const char *const[]) { "query", NULL });
        cr_assert_not_null(strstr(text, "linux.inode_file_map"), "tracectl query:\n%s", text);
        cr_assert_not_null(strstr(text, "linux.ftrace"), "tracectl query:\n%s", text);
}
