/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sysstats plugin through the real traced and tracectl:
 * linux.sys_stats's meminfo, vmstat and stat counters move while this test
 * allocates and touches memory, and linux.system_info describes every
 * online CPU. */

#include <criterion/criterion.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin-fixture.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define TOUCH_MB 512u

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(sysstats, .init = setup, .fini = teardown, .timeout = 90);

struct sample {
        uint64_t first, last, min, max;
        unsigned n;
};

static void note(struct sample *s, uint64_t v) {
        if (s->n++ == 0)
                s->first = s->min = s->max = v;
        s->last = v;
        if (v < s->min)
                s->min = v;
        if (v > s->max)
                s->max = v;
}

struct seen {
        unsigned sys_stats, cpu_info_packets, cpus, named_cpus, stat_samples, bad_cpu_samples;
        unsigned interrupt_info_packets, irq_names, irq_names_not_listed;
        struct sample mem_free, anon_pages, pgfault, user_ns_cpu0;
        bool has_end;
};

/* Whether /proc/interrupts has a line "N:" ending with " name". */
static bool irq_listed(uint32_t irq, const char *name) {
        char line[4096], id[16];
        bool found = false;
        snprintf(id, sizeof(id), "%u:", irq);
        FILE *f = fopen("/proc/interrupts", "re");
        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f)) {
                char first[32];
                line[strcspn(line, "\n")] = '\0';
                size_t n = strlen(line), k = strlen(name);
                found = sscanf(line, "%31s", first) == 1 && strcmp(first, id) == 0 && n > k &&
                        strcmp(line + n - k, name) == 0 && line[n - k - 1] == ' ';
        }
        fclose(f);
        return found;
}

static void check(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct seen *s = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_INTERRUPT_INFO) {
                s->interrupt_info_packets++;
                for (size_t i = 0; i < p->interrupt_info->n_irq_mapping; i++) {
                        const Perfetto__Protos__InterruptInfo__InterruptMapping *m = p->interrupt_info->irq_mapping[i];
                        s->irq_names++;
                        if (!m->name || !irq_listed(m->irq_id, m->name))
                                s->irq_names_not_listed++;
                }
                return;
        }
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO) {
                s->cpu_info_packets++;
                s->cpus = (unsigned) p->cpu_info->n_cpus;
                for (size_t i = 0; i < p->cpu_info->n_cpus; i++)
                        if (p->cpu_info->cpus[i]->processor && p->cpu_info->cpus[i]->processor[0])
                                s->named_cpus++;
                return;
        }
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS)
                return;
        const Perfetto__Protos__SysStats *st = p->sys_stats;
        s->sys_stats++;
        s->has_end = st->has_collection_end_timestamp && st->collection_end_timestamp >= p->timestamp;
        for (size_t i = 0; i < st->n_meminfo; i++) {
                if (st->meminfo[i]->key == PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE)
                        note(&s->mem_free, st->meminfo[i]->value);
                else if (st->meminfo[i]->key == PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_ANON_PAGES)
                        note(&s->anon_pages, st->meminfo[i]->value);
        }
        for (size_t i = 0; i < st->n_vmstat; i++)
                if (st->vmstat[i]->key == PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_PGFAULT)
                        note(&s->pgfault, st->vmstat[i]->value);
        if (st->n_cpu_stat) {
                s->stat_samples++;
                /* One entry per CPU /proc/stat lists (the online ones). */
                if (st->n_cpu_stat != (size_t) sysconf(_SC_NPROCESSORS_ONLN))
                        s->bad_cpu_samples++;
                for (size_t i = 0; i < st->n_cpu_stat; i++)
                        if (st->cpu_stat[i]->cpu_id == 0)
                                note(&s->user_ns_cpu0, st->cpu_stat[i]->user_ns + st->cpu_stat[i]->system_mode_ns +
                                                               st->cpu_stat[i]->idle_ns);
        }
}

/* Takes TOUCH_MB of anonymous memory, writes every page, holds it a
 * while, gives it back. */
static void touch_memory(void) {
        size_t len = (size_t) TOUCH_MB << 20;
        uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(m, MAP_FAILED);
        for (size_t off = 0; off < len; off += 4096)
                m[off] = 1;
        /* Held across many polls: on a loaded machine other processes'
         * memory moves too, and a poll may come late. */
        spin_ms(ev, 1500);
        munmap(m, len);
}

Test(sysstats, tracectl_records_counters_that_move_and_cpu_info) {
        struct test_consumer ready;
        cr_assert_eq(test_consumer_connect(&ready, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&ready, ev, "linux.sys_stats", 1, 30000), "linux.sys_stats never registered");
        cr_assert(fixture_wait_data_source(&ready, ev, "linux.system_info", 1, 30000));
        cr_assert(fixture_wait_data_source(&ready, ev, "linux.sysfs_power", 1, 30000));
        test_consumer_free(&ready);

        char cfg[512], out[512];
        snprintf(cfg, sizeof(cfg), "%s/sys.cfg", inst.dir);
        snprintf(out, sizeof(out), "%s/sys.pftrace", inst.dir);
        FILE *f = fopen(cfg, "w");
        cr_assert_not_null(f);
        fputs("buffers { size_kb: 16384 }\n"
              "duration_ms: 5000\n"
              "data_sources { config { name: \"linux.sys_stats\" sys_stats_config {\n"
              "  meminfo_period_ms: 100 vmstat_period_ms: 100 stat_period_ms: 100 } } }\n"
              "data_sources { config { name: \"linux.system_info\" system_info_config { irq_names: true } } }\n",
              f);
        cr_assert_eq(fclose(f), 0);
        char *argv[] = { (char *) TRACECTL_BINARY, (char *) "--socket", inst.consumer_path, (char *) "record",
                         (char *) "-c", cfg, (char *) "--txt", (char *) "-o", out, (char *) "--no-summary", NULL };
        /* The CPUs counted stay online meanwhile: no other test takes one
         * offline while the lock is held shared. */
        int hotplug = fixture_hotplug_lock(false);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, NULL, NULL, argv, environ), 0);
        spin_ms(ev, 800);
        touch_memory();
        int st;
        while (waitpid(pid, &st, WNOHANG) == 0)
                spin_ms(ev, 50);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tracectl failed");

        struct seen s = {};
        int fd = open(out, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        fixture_for_each_packet(fd, check, &s);
        close(fd);
        fixture_hotplug_unlock(hotplug);

        /* Polled every 100 ms for 5 s: allow for a loaded machine. */
        cr_assert_geq(s.sys_stats, 10, "%u SysStats packets", s.sys_stats);
        cr_assert(s.has_end, "collection_end_timestamp missing or before the packet's timestamp");
        cr_assert_eq(s.mem_free.n, s.sys_stats, "MemFree in %u of %u packets", s.mem_free.n, s.sys_stats);
        /* Every page touched is anonymous and resident while held. */
        uint64_t touched_kb = (uint64_t) TOUCH_MB * 1024u;
        cr_assert_geq(s.anon_pages.max - s.anon_pages.min, touched_kb / 2, "AnonPages moved by %llu kB only",
                      (unsigned long long) (s.anon_pages.max - s.anon_pages.min));
        cr_assert_geq(s.pgfault.last - s.pgfault.first, touched_kb / 4 / 2, "pgfault moved by %llu only",
                      (unsigned long long) (s.pgfault.last - s.pgfault.first));
        cr_assert_geq(s.stat_samples, 10);
        cr_assert_eq(s.bad_cpu_samples, 0, "%u stat samples without one entry per online CPU", s.bad_cpu_samples);
        /* CPU 0's busy + idle time grows with wall time. */
        cr_assert_gt(s.user_ns_cpu0.last, s.user_ns_cpu0.first);

        cr_assert_eq(s.cpu_info_packets, 1, "%u CpuInfo packets", s.cpu_info_packets);
        cr_assert_eq(s.cpus, (unsigned) sysconf(_SC_NPROCESSORS_ONLN), "CpuInfo has %u CPUs", s.cpus);
        cr_assert_eq(s.named_cpus, s.cpus);
        /* irq_names: the interrupt lines by number, as the kernel names
         * them (every machine has numbered lines: at least a timer's). */
        cr_assert_eq(s.interrupt_info_packets, 1, "%u InterruptInfo packets", s.interrupt_info_packets);
        cr_assert_geq(s.irq_names, 1);
        cr_assert_eq(s.irq_names_not_listed, 0, "%u of %u interrupt names not in /proc/interrupts",
                      s.irq_names_not_listed, s.irq_names);

        /* tracectl summary tells of both. */
        char so[512];
        snprintf(so, sizeof(so), "%s/summary.txt", inst.dir);
        char *sargv[] = { (char *) TRACECTL_BINARY, (char *) "summary", out, NULL };
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, so, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, &fa, NULL, sargv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tracectl summary failed");
        static char text[65536];
        f = fopen(so, "r");
        cr_assert_not_null(f);
        text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
        fclose(f);
        char want[128];
        snprintf(want, sizeof(want), "System counters: %u samples: ", s.sys_stats);
        cr_assert_not_null(strstr(text, want), "no \"%s\" in the summary:\n%s", want, text);
        cr_assert_not_null(strstr(text, "  MemFree "), "%s", text);
        snprintf(want, sizeof(want), "CPUs:           %u (", s.cpus);
        cr_assert_not_null(strstr(text, want), "no \"%s\" in the summary:\n%s", want, text);
}

/* Periods that are not multiples of the smallest: nothing is recorded, and
 * tracectl says why and fails. */
Test(sysstats, periods_not_multiples_fail_the_recording_with_a_reason) {
        struct test_consumer ready;
        cr_assert_eq(test_consumer_connect(&ready, ev, inst.consumer_path), 0);
        cr_assert(fixture_wait_data_source(&ready, ev, "linux.sys_stats", 1, 30000));
        test_consumer_free(&ready);
        char cfg[512], out[512], err[512];
        snprintf(cfg, sizeof(cfg), "%s/bad.cfg", inst.dir);
        snprintf(out, sizeof(out), "%s/bad.pftrace", inst.dir);
        snprintf(err, sizeof(err), "%s/bad.stderr", inst.dir);
        FILE *f = fopen(cfg, "w");
        cr_assert_not_null(f);
        fputs("buffers { size_kb: 4096 }\n"
              "duration_ms: 2000\n"
              "data_sources { config { name: \"linux.sys_stats\" sys_stats_config {\n"
              "  meminfo_period_ms: 100 stat_period_ms: 150 } } }\n",
              f);
        cr_assert_eq(fclose(f), 0);
        char *argv[] = { (char *) TRACECTL_BINARY, (char *) "--socket", inst.consumer_path, (char *) "record",
                         (char *) "-c", cfg, (char *) "--txt", (char *) "-o", out, (char *) "--no-summary", NULL };
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, TRACECTL_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        int st;
        while (waitpid(pid, &st, WNOHANG) == 0)
                spin_ms(ev, 50);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 5, "tracectl: status %d", st);
        static char text[8192];
        f = fopen(err, "r");
        cr_assert_not_null(f);
        text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
        fclose(f);
        cr_assert_not_null(strstr(text, "sys_stats_config: the *_period_ms are not multiples of the smallest one"),
                           "tracectl said:\n%s", text);
}
