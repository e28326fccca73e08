/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sysstats plugin's parsers against kernel files captured in
 * tests/data/sysstats/, its sysfs readers against a fixture tree, and its
 * SysStatsConfig reading. Output is decoded with the generated protos. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/pb-buf.h"
#include "battery.h"
#include "counters.h"
#include "cpuinfo.h"
#include "files.h"
#include "interrupts.h"
#include "parse.h"
#include "sys-stats.h"
#include "sysfs.h"
#include "test-scratch.h"

#include "perfetto/config/data_source_config.pb-c.h"
#include "perfetto/trace/power/battery_counters.pb-c.h"
#include "perfetto/trace/sys_stats/sys_stats.pb-c.h"
#include "perfetto/trace/system_info/cpu_info.pb-c.h"
#include "perfetto/trace/system_info/interrupt_info.pb-c.h"

#define DATA TEST_DATA_DIR "/sysstats/"

static char text[1 << 16];
static size_t text_len;
static struct pb_buf out;
static SysStats ss; /* the message the parsers write, in out */
static Perfetto__Protos__SysStats *st;
static char root[512];

static void load(const char *name) {
        FILE *f = fopen(name, "r");
        cr_assert_not_null(f, "%s: %s", name, strerror(errno));
        text_len = fread(text, 1, sizeof(text) - 1, f);
        text[text_len] = '\0';
        fclose(f);
}

/* out emptied, a SysStats begun in it. */
static void restart(void) {
        pb_buf_reset(&out);
        SysStats_init(&ss, pb_buf_stream(&out));
}

static void init(void) {
        restart();
}

static Perfetto__Protos__SysStats *decode(void) {
        cr_assert_eq(traced_pb_msg_finish(&ss.msg), 0);
        st = perfetto__protos__sys_stats__unpack(NULL, pb_buf_len(&out), pb_buf_data(&out));
        cr_assert_not_null(st, "the SysStats written does not decode");
        return st;
}

static void fini(void) {
        if (st)
                perfetto__protos__sys_stats__free_unpacked(st, NULL);
        st = NULL;
        pb_buf_done(&out);
        test_scratch_remove(root);
        root[0] = '\0';
}

TestSuite(sysstats, .init = init, .fini = fini);

static uint64_t meminfo_value(uint32_t key) {
        for (size_t i = 0; i < st->n_meminfo; i++)
                if ((uint32_t) st->meminfo[i]->key == key)
                        return st->meminfo[i]->value;
        cr_assert_fail("meminfo key %u missing", key);
        return 0;
}

static unsigned lines_of(const char *name) {
        load(name);
        unsigned n = 0;
        for (size_t i = 0; i < text_len; i++)
                n += text[i] == '\n';
        return n;
}

Test(sysstats, meminfo_all_counters_by_the_kernels_key) {
        struct key_set keys;
        load(DATA "meminfo");
        cr_assert_eq(key_set_init(&keys, false, NULL, 0, NULL), 0);
        size_t n = parse_meminfo(text, text_len, &keys, &ss);
        key_set_done(&keys);
        decode();
        cr_assert_eq(n, st->n_meminfo);
        /* The kernel's values, in kB, under the enum's numbers. */
        cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL), 24684092);
        cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE), 18525144);
        cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_ACTIVE_ANON), 1124);
        cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_COMMITED_AS), 404516);
        /* Every line the kernel has a counter for and nothing else: the
         * fixture has 54 lines, of which these are not counters of ours. */
        cr_assert_eq(n, 31, "%zu counters", n);
}

Test(sysstats, meminfo_selected_counters_only) {
        const uint32_t ids[] = { PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE,
                                 PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_CACHED, 9999 };
        struct key_set keys;
        size_t unknown;
        load(DATA "meminfo");
        cr_assert_eq(key_set_init(&keys, false, ids, 3, &unknown), 0);
        cr_assert_eq(unknown, 1);
        cr_assert_eq(parse_meminfo(text, text_len, &keys, &ss), 2);
        key_set_done(&keys);
        decode();
        cr_assert_eq(st->meminfo[0]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE);
        cr_assert_eq(st->meminfo[1]->key, PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_CACHED);
}

Test(sysstats, vmstat_keys_come_from_the_proto) {
        struct key_set keys;
        cr_assert_str_eq(vmstat_key_name(PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_PGFAULT), "pgfault");
        cr_assert_str_eq(vmstat_key_name(VMSTAT_COUNTERS_MAX), "workingset_restore_file");
        cr_assert_null(vmstat_key_name(0));
        cr_assert_null(vmstat_key_name(VMSTAT_COUNTERS_MAX + 1));
        /* Every enum value of the generated descriptor has a name. */
        const ProtobufCEnumDescriptor *d = &perfetto__protos__vmstat_counters__descriptor;
        for (unsigned i = 0; i < d->n_values; i++)
                if (d->values[i].value)
                        cr_assert_not_null(vmstat_key_name((uint32_t) d->values[i].value), "%s", d->values[i].name);
        d = &perfetto__protos__meminfo_counters__descriptor;
        for (unsigned i = 0; i < d->n_values; i++)
                if (d->values[i].value)
                        cr_assert_not_null(meminfo_key_name((uint32_t) d->values[i].value), "%s", d->values[i].name);
        load(DATA "vmstat");
        cr_assert_eq(key_set_init(&keys, true, NULL, 0, NULL), 0);
        size_t n = parse_vmstat(text, text_len, &keys, &ss);
        key_set_done(&keys);
        decode();
        cr_assert_gt(n, 40);
        cr_assert_eq(st->vmstat[0]->key, PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES);
        cr_assert_eq(st->vmstat[0]->value, 4631299);
}

Test(sysstats, stat_cpu_times_irqs_softirqs_forks) {
        load(DATA "stat");
        size_t cpus = parse_stat(text, text_len, UINT32_MAX, 10000000, &ss);
        decode();
        /* cpu0 and cpu1; the machine-wide "cpu" line is left out. */
        cr_assert_eq(cpus, 2);
        cr_assert_eq(st->n_cpu_stat, 2);
        cr_assert_eq(st->cpu_stat[1]->cpu_id, 1);
        cr_assert_eq(st->cpu_stat[0]->user_ns, 423029ull * 10000000);
        cr_assert_eq(st->cpu_stat[0]->idle_ns, 406561ull * 10000000);
        cr_assert_eq(st->cpu_stat[1]->steal_ns, 739ull * 10000000);
        cr_assert_eq(st->num_irq_total, 51936276);
        /* Interrupts that never fired are left out. */
        for (size_t i = 0; i < st->n_num_irq; i++)
                cr_assert_neq(st->num_irq[i]->count, 0);
        cr_assert_eq(st->num_irq[0]->irq, 24); /* the 25th number after the total */
        cr_assert_eq(st->num_softirq_total, 8172794);
        cr_assert_eq(st->n_num_softirq, 10);
        cr_assert_eq(st->num_softirq[9]->count, 5244143);
        cr_assert_eq(st->num_forks, 3097268);
}

Test(sysstats, stat_counter_selection) {
        load(DATA "stat");
        parse_stat(text, text_len, 1u << SysStatsConfig_STAT_FORK_COUNT, 10000000, &ss);
        decode();
        cr_assert_eq(st->n_cpu_stat, 0);
        cr_assert_not(st->has_num_irq_total);
        cr_assert_eq(st->num_forks, 3097268);
}

Test(sysstats, psi_some_and_full_in_ns) {
        load(DATA "pressure-memory");
        cr_assert_eq(parse_psi(text, text_len, SysStats_PsiSample_PSI_RESOURCE_MEMORY_SOME, &ss), 2);
        decode();
        cr_assert_eq(st->psi[0]->resource, PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_MEMORY_SOME);
        cr_assert_eq(st->psi[0]->total_ns, 4076258000ull);
        cr_assert_eq(st->psi[1]->resource, PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_MEMORY_FULL);
        cr_assert_eq(st->psi[1]->total_ns, 2421460000ull);
}

Test(sysstats, buddyinfo_per_zone) {
        load(DATA "buddyinfo");
        cr_assert_eq(parse_buddyinfo(text, text_len, &ss), 3);
        decode();
        cr_assert_str_eq(st->buddy_info[2]->node, "0");
        cr_assert_str_eq(st->buddy_info[2]->zone, "Normal");
        cr_assert_eq(st->buddy_info[2]->n_order_pages, 11);
        cr_assert_eq(st->buddy_info[2]->order_pages[0], 15574);
        cr_assert_eq(st->buddy_info[2]->order_pages[10], 3671);
}

Test(sysstats, diskstats_fields_by_position) {
        unsigned lines = lines_of(DATA "diskstats");
        cr_assert_eq(parse_diskstats(text, text_len, &ss), lines);
        decode();
        const Perfetto__Protos__SysStats__DiskStat *d = st->disk_stat[4];
        cr_assert_str_eq(d->device_name, "sda");
        cr_assert_eq(d->read_sectors, 4096000);
        cr_assert_eq(d->read_time_ms, 30210);
        cr_assert_eq(d->write_sectors, 9123456);
        cr_assert_eq(d->write_time_ms, 70450);
        cr_assert_eq(d->discard_sectors, 2048);
        cr_assert_eq(d->discard_time_ms, 33);
        cr_assert_eq(d->flush_count, 4500);
        cr_assert_eq(d->flush_time_ms, 71);
        /* An old kernel's short line: no discard or flush fields. */
        cr_assert_str_eq(st->disk_stat[5]->device_name, "nvme0n1");
        cr_assert_not(st->disk_stat[5]->has_flush_count);
}

/* The keys of one text are remembered by line: a second text in the same
 * layout is matched line by line, and one whose layout changed (a key
 * added, one gone, two swapped) is still read by key. */
Test(sysstats, meminfo_layout_remembered_and_relearned) {
        static const char *const texts[] = {
                "MemTotal:  100 kB\nMemFree:  50 kB\nFoo:  7 kB\nCached:  9 kB\n",
                "MemTotal:  101 kB\nMemFree:  51 kB\nFoo:  8 kB\nCached:  10 kB\n",
                "MemTotal:  102 kB\nBar:  1 kB\nMemFree:  52 kB\nCached:  11 kB\n",
                "MemFree:  53 kB\nMemTotal:  103 kB\n",
                "MemFree:  54 kB\nMemTotal:  104 kB\nCached:  12 kB\n",
        };
        static const uint64_t want[][3] = { /* MemTotal, MemFree, Cached */
                { 100, 50, 9 }, { 101, 51, 10 }, { 102, 52, 11 }, { 103, 53, 0 }, { 104, 54, 12 },
        };
        struct key_set keys;
        cr_assert_eq(key_set_init(&keys, false, NULL, 0, NULL), 0);
        for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
                restart();
                size_t n = parse_meminfo(texts[t], strlen(texts[t]), &keys, &ss);
                decode();
                cr_assert_eq(n, want[t][2] ? 3 : 2, "text %zu: %zu values", t, n);
                cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL), want[t][0]);
                cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE), want[t][1]);
                if (want[t][2])
                        cr_assert_eq(meminfo_value(PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_CACHED), want[t][2]);
                perfetto__protos__sys_stats__free_unpacked(st, NULL);
                st = NULL;
                /* Every line, counter or not, is remembered. */
                cr_assert_eq(keys.n_lines, want[t][2] ? (t < 3 ? 4u : 3u) : 2u, "text %zu: %zu lines", t, keys.n_lines);
        }
        key_set_done(&keys);
}

Test(sysstats, truncated_and_garbage_input) {
        const char junk[] = "MemFree:\nMemTotal: x kB\n:\n\n\nprocesses\nintr\nsome total=\nNode\n 1 2";
        struct key_set keys;
        cr_assert_eq(key_set_init(&keys, false, NULL, 0, NULL), 0);
        parse_meminfo(junk, sizeof(junk) - 1, &keys, &ss);
        parse_stat(junk, sizeof(junk) - 1, UINT32_MAX, 1, &ss);
        parse_psi(junk, sizeof(junk) - 1, SysStats_PsiSample_PSI_RESOURCE_CPU_SOME, &ss);
        parse_buddyinfo(junk, sizeof(junk) - 1, &ss);
        parse_diskstats(junk, sizeof(junk) - 1, &ss);
        key_set_done(&keys);
        decode();
        /* "MemTotal: x kB" has a value of no digits: 0. */
        cr_assert_eq(st->n_meminfo, 1);
        cr_assert_eq(st->n_buddy_info, 0);
}

/* A DataSourceConfig holding sys_stats_config (the given SysStatsConfig
 * fields). */
static size_t config_of(uint8_t *buf, size_t size, const Perfetto__Protos__SysStatsConfig *sc) {
        Perfetto__Protos__DataSourceConfig c = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
        c.name = (char *) "linux.sys_stats";
        c.sys_stats_config = (Perfetto__Protos__SysStatsConfig *) sc;
        cr_assert_leq(perfetto__protos__data_source_config__get_packed_size(&c), size);
        return perfetto__protos__data_source_config__pack(&c, buf);
}

Test(sysstats, config_periods_ticks_and_selections) {
        uint8_t buf[512];
        struct sys_stats_config cfg;
        Perfetto__Protos__SysStatsConfig sc = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
        Perfetto__Protos__SysStatsConfig__StatCounters stat[] = {
                PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_CPU_TIMES,
        };
        Perfetto__Protos__MeminfoCounters mem[] = { PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE };
        sc.has_meminfo_period_ms = sc.has_stat_period_ms = sc.has_cpufreq_period_ms = true;
        sc.meminfo_period_ms = 100;
        sc.stat_period_ms = 300;
        sc.cpufreq_period_ms = 5; /* raised to 10 */
        sc.n_stat_counters = 1;
        sc.stat_counters = stat;
        sc.n_meminfo_counters = 1;
        sc.meminfo_counters = mem;
        cr_assert_eq(sys_stats_parse_config(buf, config_of(buf, sizeof(buf), &sc), &cfg), 0);
        cr_assert_eq(cfg.tick_ms, 10);
        cr_assert_eq(cfg.clamped, 1u << SRC_CPUFREQ);
        cr_assert_eq(cfg.ticks[SRC_MEMINFO], 10);
        cr_assert_eq(cfg.ticks[SRC_STAT], 30);
        cr_assert_eq(cfg.ticks[SRC_CPUFREQ], 1);
        cr_assert_eq(cfg.ticks[SRC_VMSTAT], 0);
        cr_assert_eq(cfg.stat_mask, 1u << SysStatsConfig_STAT_CPU_TIMES);
        cr_assert_eq(cfg.n_meminfo_ids, 1);
        cr_assert_eq(cfg.meminfo_ids[0], PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE);
        /* No stat_counters: all of them. */
        sc.n_stat_counters = 0;
        cr_assert_eq(sys_stats_parse_config(buf, config_of(buf, sizeof(buf), &sc), &cfg), 0);
        cr_assert_eq(cfg.stat_mask, UINT32_MAX);
        /* 100 and 150: not multiples of each other. */
        sc.has_cpufreq_period_ms = false;
        sc.stat_period_ms = 150;
        cr_assert_eq(sys_stats_parse_config(buf, config_of(buf, sizeof(buf), &sc), &cfg), -EDOM);
        /* No sys_stats_config at all: nothing to poll. */
        cr_assert_eq(sys_stats_parse_config(NULL, 0, &cfg), 0);
        cr_assert_eq(cfg.tick_ms, 0);
}

static void put(const char *rel, const char *content) {
        char path[1024];
        snprintf(path, sizeof(path), "%s%s", root, rel);
        for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
                *p = '\0';
                (void) mkdir(path, 0755);
                *p = '/';
        }
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "%s", path);
        fputs(content, f);
        fclose(f);
}

static void make_root(void) {
        cr_assert_eq(test_mkdtemp(root, sizeof(root), "sysstats-"), 0);
}

Test(sysstats, sysfs_cpufreq_thermal_cpuidle_devfreq) {
        struct sysfs_set s = {};
        make_root();
        put("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1800000\n");
        put("/sys/devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n");
        put("/sys/devices/system/cpu/cpu0/cpuidle/state0/time", "123\n");
        put("/sys/devices/system/cpu/cpu0/cpuidle/state1/name", "C1\n");
        put("/sys/devices/system/cpu/cpu0/cpuidle/state1/time", "98765\n");
        put("/sys/class/thermal/thermal_zone0/temp", "45500\n");
        put("/sys/class/thermal/thermal_zone0/type", "x86_pkg_temp\n");
        put("/sys/class/thermal/cooling_device0/type", "Processor\n");
        put("/sys/class/devfreq/gpu/cur_freq", "585000000\n");
        /* Two CPUs configured; the second has no cpufreq (0). */
        cr_assert_eq(sysfs_open_cpufreq(&s, root, 2), 0);
        cr_assert_eq(sysfs_open_thermal(&s, root), 0);
        cr_assert_eq(sysfs_open_cpuidle(&s, root, 2), 0);
        cr_assert_eq(sysfs_open_devfreq(&s, root), 0);
        sysfs_read_cpufreq(&s, &ss);
        sysfs_read_thermal(&s, &ss);
        sysfs_read_cpuidle(&s, &ss);
        sysfs_read_devfreq(&s, &ss);
        sysfs_close(&s);
        decode();
        cr_assert_eq(st->n_cpufreq_khz, 2);
        cr_assert_eq(st->cpufreq_khz[0], 1800000);
        cr_assert_eq(st->cpufreq_khz[1], 0);
        cr_assert_eq(st->n_thermal_zone, 1);
        cr_assert_str_eq(st->thermal_zone[0]->name, "thermal_zone0");
        cr_assert_eq(st->thermal_zone[0]->temp, 45);
        cr_assert_str_eq(st->thermal_zone[0]->type, "x86_pkg_temp");
        cr_assert_eq(st->n_cpuidle_state, 1);
        cr_assert_eq(st->cpuidle_state[0]->n_cpuidle_state_entry, 2);
        uint64_t c1 = 0;
        for (size_t i = 0; i < 2; i++)
                if (strcmp(st->cpuidle_state[0]->cpuidle_state_entry[i]->state, "C1") == 0)
                        c1 = st->cpuidle_state[0]->cpuidle_state_entry[i]->duration_us;
        cr_assert_eq(c1, 98765);
        cr_assert_eq(st->n_devfreq, 1);
        cr_assert_str_eq(st->devfreq[0]->key, "gpu");
        cr_assert_eq(st->devfreq[0]->value, 585000000);
}

Test(sysstats, kept_open_files_are_read_afresh) {
        char path[1024];
        struct read_buf rb = {};
        make_root();
        put("/proc/meminfo", "MemFree: 1 kB\n");
        int fd = file_open(root, "/proc/meminfo");
        cr_assert_geq(fd, 0);
        cr_assert_eq(file_pread(fd, &rb), 14);
        /* Rewritten in place (as the kernel regenerates the text). */
        snprintf(path, sizeof(path), "%s/proc/meminfo", root);
        FILE *f = fopen(path, "r+");
        fputs("MemFree: 22 kB\n", f);
        fclose(f);
        cr_assert_eq(file_pread(fd, &rb), 15);
        cr_assert_str_eq(rb.p, "MemFree: 22 kB\n");
        /* Longer than the first buffer: the buffer grows, whole text read. */
        static char big[200000];
        memset(big, 'a', sizeof(big) - 1);
        put("/proc/big", big);
        int fd2 = file_open(root, "/proc/big");
        cr_assert_eq(file_pread(fd2, &rb), (ssize_t) sizeof(big) - 1);
        close(fd);
        close(fd2);
        read_buf_done(&rb);
}

Test(sysstats, cpuinfo_x86_and_arm) {
        make_root();
        put("/sys/devices/system/cpu/cpu1/cpufreq/scaling_available_frequencies", "2000000 1000000 3000000 \n");
        put("/sys/devices/system/cpu/cpu1/cpufreq/scaling_boost_frequencies", "3500000 3000000\n");
        put("/sys/devices/system/cpu/cpu1/cpu_capacity", "1024\n");
        CpuInfo info;
        load(DATA "cpuinfo-x86");
        pb_buf_reset(&out);
        CpuInfo_init(&info, pb_buf_stream(&out));
        cr_assert_eq(cpuinfo_write(text, text_len, root, &info), 2);
        Perfetto__Protos__CpuInfo *ci = perfetto__protos__cpu_info__unpack(NULL, pb_buf_len(&out), pb_buf_data(&out));
        cr_assert_not_null(ci);
        cr_assert_eq(ci->n_cpus, 2);
        cr_assert_str_eq(ci->cpus[0]->processor, "AMD EPYC");
        cr_assert_eq(ci->cpus[0]->n_frequencies, 0);
        cr_assert_null(ci->cpus[0]->arm_identifier);
        /* Ascending, each once. */
        cr_assert_eq(ci->cpus[1]->n_frequencies, 4);
        cr_assert_eq(ci->cpus[1]->frequencies[0], 1000000);
        cr_assert_eq(ci->cpus[1]->frequencies[3], 3500000);
        cr_assert_eq(ci->cpus[1]->capacity, 1024);
        perfetto__protos__cpu_info__free_unpacked(ci, NULL);

        pb_buf_reset(&out);
        CpuInfo_init(&info, pb_buf_stream(&out));
        load(DATA "cpuinfo-arm");
        cr_assert_eq(cpuinfo_write(text, text_len, root, &info), 2);
        ci = perfetto__protos__cpu_info__unpack(NULL, pb_buf_len(&out), pb_buf_data(&out));
        cr_assert_not_null(ci);
        cr_assert_str_eq(ci->cpus[1]->processor, "AArch64 Processor rev 4 (aarch64)");
        const Perfetto__Protos__CpuInfo__ArmCpuIdentifier *a = ci->cpus[1]->arm_identifier;
        cr_assert_not_null(a);
        cr_assert_eq(a->implementer, 0x41);
        cr_assert_eq(a->architecture, 8);
        cr_assert_eq(a->variant, 3);
        cr_assert_eq(a->part, 0xd0d);
        cr_assert_eq(a->revision, 1);
        perfetto__protos__cpu_info__free_unpacked(ci, NULL);
}

Test(sysstats, batteries_only_present_ones) {
        struct battery_set s;
        make_root();
        put("/sys/class/power_supply/AC/type", "Mains\n");
        put("/sys/class/power_supply/AC/online", "1\n");
        put("/sys/class/power_supply/BAT1/type", "Battery\n");
        put("/sys/class/power_supply/BAT1/present", "0\n");
        put("/sys/class/power_supply/BAT0/type", "Battery\n");
        put("/sys/class/power_supply/BAT0/present", "1\n");
        put("/sys/class/power_supply/BAT0/capacity", "87\n");
        put("/sys/class/power_supply/BAT0/current_now", "-1200000\n");
        put("/sys/class/power_supply/BAT0/energy_now", "41230000\n");
        put("/sys/class/power_supply/BAT0/voltage_now", "12100000\n");
        cr_assert_eq(battery_scan(&s, root), 0);
        cr_assert_eq(s.n, 1);
        BatteryCounters bc;
        pb_buf_reset(&out);
        BatteryCounters_init(&bc, pb_buf_stream(&out));
        battery_write(&s, 0, &bc);
        battery_set_done(&s);
        Perfetto__Protos__BatteryCounters *b =
                perfetto__protos__battery_counters__unpack(NULL, pb_buf_len(&out), pb_buf_data(&out));
        cr_assert_not_null(b);
        cr_assert_float_eq(b->capacity_percent, 87.0f, 0.001f);
        cr_assert_eq(b->current_ua, -1200000);
        cr_assert_eq(b->energy_counter_uwh, 41230000);
        cr_assert_eq(b->voltage_uv, 12100000);
        cr_assert_not(b->has_charge_counter_uah);
        cr_assert_null(b->name, "one battery: no name");
        perfetto__protos__battery_counters__free_unpacked(b, NULL);

        /* No power_supply at all: no battery, no error. */
        cr_assert_eq(battery_scan(&s, "/nonexistent-root"), 0);
        cr_assert_eq(s.n, 0);
}

static Perfetto__Protos__InterruptInfo *interrupts_of(const char *name, int want) {
        load(name);
        InterruptInfo info;
        pb_buf_reset(&out);
        InterruptInfo_init(&info, pb_buf_stream(&out));
        cr_assert_eq(interrupts_write(text, text_len, &info), want, "%s", name);
        Perfetto__Protos__InterruptInfo *ii =
                perfetto__protos__interrupt_info__unpack(NULL, pb_buf_len(&out), pb_buf_data(&out));
        cr_assert_not_null(ii, "the InterruptInfo written does not decode");
        cr_assert_eq(ii->n_irq_mapping, (size_t) want);
        return ii;
}

/* A VM's /proc/interrupts: the 19 numbered lines, named after their
 * trigger word; the named lines (LOC, RES, ...) are not interrupt lines. */
Test(sysstats, interrupt_names_x86) {
        Perfetto__Protos__InterruptInfo *ii = interrupts_of(DATA "interrupts-x86", 19);
        cr_assert_eq(ii->irq_mapping[0]->irq_id, 24);
        cr_assert_str_eq(ii->irq_mapping[0]->name, "ACPI:Ged");
        cr_assert_eq(ii->irq_mapping[3]->irq_id, 28);
        cr_assert_str_eq(ii->irq_mapping[3]->name, "virtio0-config");
        cr_assert_eq(ii->irq_mapping[18]->irq_id, 43);
        cr_assert_str_eq(ii->irq_mapping[18]->name, "virtio3-event");
        perfetto__protos__interrupt_info__free_unpacked(ii, NULL);
}

/* Four CPUs; a name of two words; a line whose trigger word is not one
 * (its last word names it); a line with only a chip and one with nothing
 * after its trigger (both skipped). */
Test(sysstats, interrupt_names_arm) {
        Perfetto__Protos__InterruptInfo *ii = interrupts_of(DATA "interrupts-arm", 4);
        static const struct {
                uint32_t irq;
                const char *name;
        } want[] = { { 11, "arch_timer" }, { 47, "gpio-keys: KEY_VOLUMEUP" }, { 200, "ufshcd" }, { 210, "panel" } };
        for (size_t i = 0; i < 4; i++) {
                cr_assert_eq(ii->irq_mapping[i]->irq_id, want[i].irq);
                cr_assert_str_eq(ii->irq_mapping[i]->name, want[i].name);
        }
        perfetto__protos__interrupt_info__free_unpacked(ii, NULL);
}

Test(sysstats, interrupt_names_of_nothing) {
        static const char *const junk[] = { "", "CPU0\n", "no header\n 1: 2 chip Edge x\n", "CPU0\n1:", "CPU0\n:\n 9x: 1 c Edge n\n",
                                            "CPU0 CPU1\n 5: 1\n", "CPU0\n 99999999999: 1 c Edge n\n" };
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
                InterruptInfo info;
                pb_buf_reset(&out);
                InterruptInfo_init(&info, pb_buf_stream(&out));
                cr_assert_eq(interrupts_write(junk[i], strlen(junk[i]), &info), 0, "junk %zu", i);
        }
}
