/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.inode_file_map's parts without the plugin host: the batched
 * directory walk, InodeFileConfig, mountinfo, the cache, the resolver
 * (cache, scans through mount_point_mapping, do_not_scan,
 * scan_mount_points) and the event fields that name an inode. A scratch
 * tree stands for a file system; a mountinfo file written here says where
 * its device is "mounted". */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "basic/pb-buf.h"
#include "traced/pbzero/perfetto/config/data_source_config.pbw.h"
#include "format.h"
#include "inode-cache.h"
#include "inode-config.h"
#include "inode-mounts.h"
#include "inode-resolve.h"
#include "inode-scan.h"
#include "test-scratch.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define FAKE_MP "/fake mount"

static char dir[256], mountinfo[300];
static uint64_t dev;

static void put_file(const char *rel) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0, "%s: %m", p);
        close(fd);
}

static void put_dir(const char *rel) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        cr_assert_eq(mkdir(p, 0700), 0, "%s: %m", p);
}

static uint64_t ino_of(const char *rel) {
        char p[512];
        struct stat st;
        snprintf(p, sizeof(p), "%s%s%s", dir, rel[0] ? "/" : "", rel);
        cr_assert_eq(lstat(p, &st), 0, "%s: %m", p);
        return (uint64_t) st.st_ino;
}

/* dir/{a.txt, sub/{b.txt, deep/c.txt}, link -> a.txt, mnt/} and a
 * mountinfo that has dir's device mounted on FAKE_MP (and something else
 * on /other). */
static void setup(void) {
        int r = test_mkdtemp(dir, sizeof(dir), "test-ftrace-inode-");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        put_file("a.txt");
        put_dir("sub");
        put_file("sub/b.txt");
        put_dir("sub/deep");
        put_file("sub/deep/c.txt");
        char p[512];
        snprintf(p, sizeof(p), "%s/link", dir);
        cr_assert_eq(symlink("a.txt", p), 0);
        struct stat st;
        cr_assert_eq(stat(dir, &st), 0);
        dev = (uint64_t) st.st_dev;
        snprintf(mountinfo, sizeof(mountinfo), "%s/mountinfo", dir);
        FILE *f = fopen(mountinfo, "we");
        cr_assert_not_null(f);
        fprintf(f, "22 27 0:21 / /proc rw,relatime - proc proc rw\n");
        fprintf(f, "27 1 %u:%u / /fake\\040mount rw,relatime - ext4 /dev/x rw\n", major(st.st_dev), minor(st.st_dev));
        fprintf(f, "28 27 %u:%u /sub /fake\\040mount rw,relatime - ext4 /dev/x rw\n", major(st.st_dev),
                minor(st.st_dev));
        fprintf(f, "29 27 %u:%u / /other rw - ext4 /dev/y rw\n", major(st.st_dev) + 1, minor(st.st_dev));
        fclose(f);
}

static void teardown(void) {
        cr_expect_eq(test_scratch_remove(dir), 0, "could not remove %s", dir);
}

TestSuite(inode, .init = setup, .fini = teardown);

#define MAX_FOUND 64

struct found {
        size_t n;
        uint64_t dev[MAX_FOUND], ino[MAX_FOUND];
        unsigned type[MAX_FOUND];
        char path[MAX_FOUND][512];
        size_t stop_after; /* 0: never stop */
};

static bool collect(uint64_t d, uint64_t ino, const char *path, unsigned type, void *userdata) {
        struct found *f = userdata;
        cr_assert_lt(f->n, MAX_FOUND);
        f->dev[f->n] = d;
        f->ino[f->n] = ino;
        f->type[f->n] = type;
        snprintf(f->path[f->n], sizeof(f->path[0]), "%s", path);
        f->n++;
        return f->stop_after == 0 || f->n < f->stop_after;
}

static ssize_t find_ino(const struct found *f, uint64_t ino) {
        for (size_t i = 0; i < f->n; i++)
                if (f->ino[i] == ino)
                        return (ssize_t) i;
        return -1;
}

static void expect_found(const struct found *f, const char *rel, unsigned type) {
        char want[512];
        snprintf(want, sizeof(want), "%s%s%s", dir, rel[0] ? "/" : "", rel);
        ssize_t i = find_ino(f, ino_of(rel));
        cr_assert_geq(i, 0, "%s not reported", want);
        cr_expect_str_eq(f->path[i], want);
        cr_expect_eq(f->type[i], type, "%s: type %u", want, f->type[i]);
        cr_expect_eq(f->dev[i], dev);
}

Test(inode, scan_reports_every_entry_with_its_inode_and_path) {
        struct inode_scan *s;
        const char *roots[] = {dir};
        cr_assert_eq(inode_scan_new(roots, 1, &s), 0);
        struct found f = {};
        cr_assert_eq(inode_scan_step(s, 1000, collect, &f), 0);
        /* The root, a.txt, sub, b.txt, deep, c.txt, link, mountinfo. */
        cr_expect_eq(f.n, 8, "%zu entries", f.n);
        cr_expect_eq(inode_scan_entries(s), 8);
        expect_found(&f, "", INODE_TYPE_DIRECTORY);
        expect_found(&f, "a.txt", INODE_TYPE_FILE);
        expect_found(&f, "sub", INODE_TYPE_DIRECTORY);
        expect_found(&f, "sub/b.txt", INODE_TYPE_FILE);
        expect_found(&f, "sub/deep/c.txt", INODE_TYPE_FILE);
        /* The link itself, not followed. */
        expect_found(&f, "link", INODE_TYPE_UNKNOWN);
        inode_scan_free(s);
}

Test(inode, scan_reports_at_most_a_batch_per_step) {
        struct inode_scan *s;
        const char *roots[] = {dir};
        cr_assert_eq(inode_scan_new(roots, 1, &s), 0);
        struct found f = {};
        unsigned steps = 0;
        int k;
        do {
                size_t before = f.n;
                k = inode_scan_step(s, 3, collect, &f);
                cr_assert_geq(k, 0);
                cr_assert_leq(f.n - before, 3, "step %u reported %zu entries", steps, f.n - before);
                steps++;
        } while (k > 0 && steps < 100);
        cr_expect_eq(f.n, 8);
        cr_expect_geq(steps, 3, "8 entries in %u steps of 3", steps);
        inode_scan_free(s);
}

Test(inode, scan_ends_when_told) {
        struct inode_scan *s;
        const char *roots[] = {dir};
        cr_assert_eq(inode_scan_new(roots, 1, &s), 0);
        struct found f = {.stop_after = 2};
        cr_expect_eq(inode_scan_step(s, 1000, collect, &f), 0);
        cr_expect_eq(f.n, 2);
        cr_expect_eq(inode_scan_step(s, 1000, collect, &f), 0, "over is over");
        cr_expect_eq(f.n, 2);
        inode_scan_free(s);
}

Test(inode, scan_skips_roots_that_are_not_there) {
        struct inode_scan *s;
        char sub[300];
        snprintf(sub, sizeof(sub), "%s/sub/deep", dir);
        const char *roots[] = {"/nonexistent-traced-root", sub};
        cr_assert_eq(inode_scan_new(roots, 2, &s), 0);
        struct found f = {};
        cr_assert_eq(inode_scan_step(s, 1000, collect, &f), 0);
        cr_expect_eq(f.n, 2, "deep and c.txt: %zu", f.n);
        expect_found(&f, "sub/deep/c.txt", INODE_TYPE_FILE);
        inode_scan_free(s);
}

/* A DataSourceConfig { name, inode_file_config { what fill writes } }, in
 * b; parsed by inode_config_parse. */
static int parse_config(struct pb_buf *b, void (*fill)(InodeFileConfig *c), struct inode_config *c,
                        const char **field) {
        DataSourceConfig ds;
        pb_buf_reset(b);
        DataSourceConfig_init(&ds, pb_buf_stream(b));
        DataSourceConfig_set_name(&ds, "linux.inode_file_map");
        if (fill) {
                InodeFileConfig ic;
                DataSourceConfig_begin_inode_file_config(&ds, &ic);
                fill(&ic);
                DataSourceConfig_end_inode_file_config(&ds, &ic);
        }
        cr_assert_eq(traced_pb_msg_finish(&ds.msg), 0);
        return inode_config_parse(pb_buf_data(b), pb_buf_len(b), c, field);
}

static void every_field(InodeFileConfig *c) {
        InodeFileConfig_MountPointMappingEntry m;
        InodeFileConfig_set_scan_interval_ms(c, 5);
        InodeFileConfig_set_scan_delay_ms(c, 7);
        InodeFileConfig_set_scan_batch_size(c, 3);
        InodeFileConfig_set_do_not_scan(c, 1);
        InodeFileConfig_add_scan_mount_points(c, "/mnt");
        InodeFileConfig_begin_mount_point_mapping(c, &m);
        InodeFileConfig_MountPointMappingEntry_set_mountpoint(&m, "/");
        InodeFileConfig_MountPointMappingEntry_add_scan_roots(&m, "/x");
        InodeFileConfig_MountPointMappingEntry_add_scan_roots(&m, "/y");
        InodeFileConfig_end_mount_point_mapping(c, &m);
}

static void mapping_without_mount_point(InodeFileConfig *c) {
        InodeFileConfig_MountPointMappingEntry m;
        InodeFileConfig_begin_mount_point_mapping(c, &m);
        InodeFileConfig_MountPointMappingEntry_add_scan_roots(&m, "/x");
        InodeFileConfig_end_mount_point_mapping(c, &m);
}

Test(inode, config_fields_and_defaults) {
        struct inode_config c;
        const char *field;
        struct pb_buf b = {};
        cr_assert_eq(parse_config(&b, NULL, &c, &field), 0);
        cr_expect_eq(c.scan_interval_ms, INODE_DEFAULT_SCAN_INTERVAL_MS);
        cr_expect_eq(c.scan_delay_ms, INODE_DEFAULT_SCAN_DELAY_MS);
        cr_expect_eq(c.scan_batch_size, INODE_DEFAULT_SCAN_BATCH_SIZE);
        cr_expect_not(c.do_not_scan);
        inode_config_done(&c);

        cr_assert_eq(parse_config(&b, every_field, &c, &field), 0);
        cr_expect_eq(c.scan_interval_ms, 5);
        cr_expect_eq(c.scan_delay_ms, 7);
        cr_expect_eq(c.scan_batch_size, 3);
        cr_expect(c.do_not_scan);
        cr_assert_eq(c.n_scan_mount_points, 1);
        cr_expect_str_eq(c.scan_mount_points[0], "/mnt");
        cr_assert_eq(c.n_mapping, 1);
        cr_expect_str_eq(c.mapping[0].mountpoint, "/");
        cr_assert_eq(c.mapping[0].n_scan_roots, 2);
        cr_expect_str_eq(c.mapping[0].scan_roots[1], "/y");
        inode_config_done(&c);

        cr_expect_eq(parse_config(&b, mapping_without_mount_point, &c, &field), -EINVAL);
        cr_expect_str_eq(field, "mount_point_mapping");
        pb_buf_done(&b);
}

Test(inode, mount_points_of_a_device) {
        char **mps;
        size_t n;
        cr_assert_eq(inode_mounts_of(mountinfo, dev, &mps, &n), 0);
        cr_assert_eq(n, 1, "listed once: %zu", n);
        cr_expect_str_eq(mps[0], FAKE_MP);
        inode_mounts_free(mps, n);
        cr_assert_eq(inode_mounts_of(mountinfo, makedev(4095, 4095), &mps, &n), 0);
        cr_expect_eq(n, 0);
        inode_mounts_free(mps, n);
        cr_expect_eq(inode_mounts_of("/nonexistent-mountinfo", dev, &mps, &n), -ENOENT);
        /* The kernel's 12:20 bit dev_t, as events carry it. */
        cr_expect_eq(inode_dev_from_kernel((254u << 20) | 3u), (uint64_t) makedev(254, 3));
        cr_expect_eq(inode_dev_from_kernel((8u << 20) | 0x12345u), (uint64_t) makedev(8, 0x12345));
}

Test(inode, cache_forgets_everything_when_full) {
        struct inode_cache *c;
        cr_assert_eq(inode_cache_new(2, &c), 0);
        unsigned type;
        cr_assert_eq(inode_cache_put(c, 1, 10, "/a", INODE_TYPE_FILE), 0);
        cr_assert_eq(inode_cache_put(c, 2, 10, "/b", INODE_TYPE_DIRECTORY), 0);
        cr_expect_str_eq(inode_cache_get(c, 1, 10, &type), "/a");
        cr_expect_str_eq(inode_cache_get(c, 2, 10, &type), "/b");
        cr_expect_eq(type, INODE_TYPE_DIRECTORY);
        cr_assert_eq(inode_cache_put(c, 2, 10, "/b2", INODE_TYPE_FILE), 0, "a replacement is no new entry");
        cr_expect_eq(inode_cache_size(c), 2);
        cr_assert_eq(inode_cache_put(c, 1, 11, "/c", INODE_TYPE_FILE), 0);
        cr_expect_eq(inode_cache_size(c), 1);
        cr_expect_null(inode_cache_get(c, 1, 10, NULL));
        cr_expect_str_eq(inode_cache_get(c, 1, 11, NULL), "/c");
        inode_cache_free(c);
}

/* What a resolver wrote, decoded. */
struct written {
        unsigned packets;
        uint64_t dev;
        char mount_point[64];
        size_t n;
        uint64_t ino[MAX_FOUND];
        unsigned type[MAX_FOUND];
        char path[MAX_FOUND][512];
};

static void on_packet(const uint8_t *data, size_t size, void *userdata) {
        struct written *w = userdata;
        Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, size, data);
        cr_assert_not_null(p);
        cr_assert_eq(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_INODE_FILE_MAP);
        const Perfetto__Protos__InodeFileMap *m = p->inode_file_map;
        w->packets++;
        w->dev = m->block_device_id;
        if (m->n_mount_points > 0)
                snprintf(w->mount_point, sizeof(w->mount_point), "%s", m->mount_points[0]);
        for (size_t i = 0; i < m->n_entries; i++) {
                cr_assert_lt(w->n, MAX_FOUND);
                cr_assert_eq(m->entries[i]->n_paths, 1);
                w->ino[w->n] = m->entries[i]->inode_number;
                w->type[w->n] = m->entries[i]->type;
                snprintf(w->path[w->n], sizeof(w->path[0]), "%s", m->entries[i]->paths[0]);
                w->n++;
        }
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

static void expect_written(const struct written *w, const char *rel) {
        char want[512];
        snprintf(want, sizeof(want), "%s/%s", dir, rel);
        for (size_t i = 0; i < w->n; i++)
                if (w->ino[i] == ino_of(rel)) {
                        cr_expect_str_eq(w->path[i], want);
                        cr_expect_eq(w->type[i], INODE_TYPE_FILE);
                        return;
                }
        cr_assert_fail("%s (inode %llu) not written", want, (unsigned long long) ino_of(rel));
}

/* A config mapping FAKE_MP to the scratch tree. */
static struct inode_config mapped_config(uint32_t batch) {
        struct inode_config c = {.scan_interval_ms = 1, .scan_delay_ms = 1, .scan_batch_size = batch};
        c.mapping = calloc(1, sizeof(*c.mapping));
        cr_assert_not_null(c.mapping);
        c.n_mapping = 1;
        c.mapping[0].mountpoint = strdup(FAKE_MP);
        c.mapping[0].scan_roots = calloc(1, sizeof(char *));
        cr_assert_not_null(c.mapping[0].scan_roots);
        c.mapping[0].scan_roots[0] = strdup(dir);
        c.mapping[0].n_scan_roots = 1;
        return c;
}

static unsigned run_scan(struct inode_resolver *r) {
        unsigned steps = 0;
        cr_assert(inode_resolver_scan_wanted(r));
        while (inode_resolver_scan_step(r) > 0)
                cr_assert_lt(++steps, 1000);
        cr_expect_not(inode_resolver_scan_wanted(r));
        return steps + 1;
}

Test(inode, resolver_scans_the_mapped_roots_then_names_from_the_cache) {
        struct inode_cache *cache;
        cr_assert_eq(inode_cache_new(100, &cache), 0);
        struct inode_config c = mapped_config(15000);
        struct written w = {};
        struct inode_resolver *r;
        cr_assert_eq(inode_resolver_new(&c, cache, mountinfo, on_packet, &w, &r), 0);
        cr_expect_not(inode_resolver_scan_wanted(r));
        inode_resolver_note(r, dev, ino_of("sub/b.txt"));
        inode_resolver_note(r, dev, ino_of("sub/deep/c.txt"));
        inode_resolver_note(r, dev, ino_of("sub/b.txt"));  /* once is enough */
        inode_resolver_note(r, dev, UINT64_C(0xfffffff0)); /* no such file */
        inode_resolver_emit(r);
        cr_expect_eq(w.packets, 0, "nothing known before the scan");
        run_scan(r);
        cr_expect_eq(w.n, 2, "%zu entries", w.n);
        expect_written(&w, "sub/b.txt");
        expect_written(&w, "sub/deep/c.txt");
        cr_expect_eq(w.dev, dev);
        cr_expect_str_eq(w.mount_point, FAKE_MP);
        const struct inode_resolver_stats *st = inode_resolver_stats(r);
        cr_expect_eq(st->seen, 3);
        cr_expect_eq(st->found, 2);
        cr_expect_eq(st->not_found, 1);
        cr_expect_eq(st->scans, 1);
        inode_resolver_free(r);

        /* Another instance (do_not_scan) names b.txt from the cache, and
         * not a.txt, which no scan found. */
        struct inode_config c2 = {.do_not_scan = true, .scan_batch_size = 1};
        struct written w2 = {};
        cr_assert_eq(inode_resolver_new(&c2, cache, mountinfo, on_packet, &w2, &r), 0);
        inode_resolver_note(r, dev, ino_of("sub/b.txt"));
        inode_resolver_note(r, dev, ino_of("a.txt"));
        cr_expect_not(inode_resolver_scan_wanted(r), "do_not_scan");
        inode_resolver_emit(r);
        cr_expect_eq(w2.packets, 1);
        cr_expect_eq(w2.n, 1);
        expect_written(&w2, "sub/b.txt");
        cr_expect_eq(inode_resolver_stats(r)->from_cache, 1);
        cr_expect_eq(inode_resolver_stats(r)->not_scanned, 1);
        inode_resolver_free(r);
        inode_cache_free(cache);
}

Test(inode, resolver_writes_what_each_batch_found) {
        struct inode_cache *cache;
        cr_assert_eq(inode_cache_new(100, &cache), 0);
        struct inode_config c = mapped_config(1);
        struct written w = {};
        struct inode_resolver *r;
        cr_assert_eq(inode_resolver_new(&c, cache, mountinfo, on_packet, &w, &r), 0);
        inode_resolver_note(r, dev, ino_of("a.txt"));
        inode_resolver_note(r, dev, ino_of("sub/deep/c.txt"));
        unsigned steps = 0, packets_before_end = 0;
        cr_assert(inode_resolver_scan_wanted(r));
        while (inode_resolver_scan_step(r) > 0) {
                cr_assert_lt(++steps, 1000);
                packets_before_end = w.packets;
        }
        /* One entry a batch: the walk took a step per entry it needed, and
         * the first file found went out before the walk was over. */
        cr_expect_geq(steps, 3, "%u steps", steps);
        cr_expect_geq(packets_before_end, 1);
        cr_expect_eq(w.n, 2);
        expect_written(&w, "a.txt");
        expect_written(&w, "sub/deep/c.txt");
        /* Found everything: the walk ended before the whole tree. */
        cr_expect_leq(inode_resolver_stats(r)->entries_walked, 8);
        inode_resolver_free(r);
        inode_cache_free(cache);
}

Test(inode, resolver_scans_only_the_mount_points_asked_for) {
        struct inode_cache *cache;
        cr_assert_eq(inode_cache_new(100, &cache), 0);
        struct inode_config c = mapped_config(100);
        c.scan_mount_points = calloc(1, sizeof(char *));
        c.scan_mount_points[0] = strdup("/other");
        c.n_scan_mount_points = 1;
        struct written w = {};
        struct inode_resolver *r;
        cr_assert_eq(inode_resolver_new(&c, cache, mountinfo, on_packet, &w, &r), 0);
        inode_resolver_note(r, dev, ino_of("a.txt"));
        cr_expect_not(inode_resolver_scan_wanted(r), "the device is mounted on " FAKE_MP ", not /other");
        cr_expect_eq(inode_resolver_stats(r)->not_scanned, 1);
        inode_resolver_free(r);

        c = mapped_config(100);
        c.scan_mount_points = calloc(1, sizeof(char *));
        c.scan_mount_points[0] = strdup(FAKE_MP);
        c.n_scan_mount_points = 1;
        cr_assert_eq(inode_resolver_new(&c, cache, mountinfo, on_packet, &w, &r), 0);
        inode_resolver_note(r, dev, ino_of("a.txt"));
        run_scan(r);
        expect_written(&w, "a.txt");
        inode_resolver_free(r);
        inode_cache_free(cache);
}

Test(inode, resolver_without_a_mount_point_gives_up) {
        struct inode_cache *cache;
        cr_assert_eq(inode_cache_new(100, &cache), 0);
        struct inode_config c = mapped_config(100);
        struct written w = {};
        struct inode_resolver *r;
        cr_assert_eq(inode_resolver_new(&c, cache, mountinfo, on_packet, &w, &r), 0);
        inode_resolver_note(r, makedev(4095, 4095), 12);
        run_scan(r);
        cr_expect_eq(w.packets, 0);
        cr_expect_eq(inode_resolver_stats(r)->not_found, 1);
        inode_resolver_free(r);
        inode_cache_free(cache);
}

Test(inode, events_name_their_inode_and_device_fields) {
        static const char *filemap = "name: mm_filemap_add_to_page_cache\nID: 600\nformat:\n"
                                     "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                                     "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
                                     "\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n"
                                     "\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n"
                                     "\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n"
                                     "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n";
        static const char *ext4 = "name: ext4_free_inode\nID: 700\nformat:\n"
                                  "\tfield:ino_t cgroup_ino;\toffset:8;\tsize:8;\tsigned:0;\n"
                                  "\tfield:dev_t dev;\toffset:16;\tsize:4;\tsigned:0;\n"
                                  "\tfield:ino_t ino;\toffset:24;\tsize:8;\tsigned:0;\n";
        static const char *sched = "name: sched_wakeup\nID: 70\nformat:\n"
                                   "\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n";
        struct event_format f;
        cr_assert_eq(format_parse(filemap, "filemap", &f), 0);
        cr_assert_geq(f.ino_field, 0);
        cr_assert_geq(f.dev_field, 0);
        cr_expect_str_eq(f.fields[f.ino_field].name, "i_ino");
        cr_expect_str_eq(f.fields[f.dev_field].name, "s_dev");
        uint8_t rec[40] = {};
        uint64_t ino = 0x1234567;
        uint32_t kdev = (254u << 20) | 1u;
        memcpy(rec + 16, &ino, 8);
        memcpy(rec + 32, &kdev, 4);
        cr_expect_eq((uint64_t) format_read_int(&f.fields[f.ino_field], rec, sizeof(rec)), ino);
        cr_expect_eq(inode_dev_from_kernel((uint64_t) format_read_int(&f.fields[f.dev_field], rec, sizeof(rec))),
                     (uint64_t) makedev(254, 1));
        cr_assert_eq(format_parse(ext4, "ext4", &f), 0);
        cr_assert_geq(f.ino_field, 0);
        cr_expect_str_eq(f.fields[f.ino_field].name, "ino", "a cgroup's inode is not the file's");
        cr_expect_str_eq(f.fields[f.dev_field].name, "dev");
        cr_assert_eq(format_parse(sched, "sched", &f), 0);
        cr_expect_eq(f.ino_field, -1);
        cr_expect_eq(f.dev_field, -1);
}
