/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.sys_stats: every tick of the smallest configured period, one
 * SysStats packet with the sources whose own period is due. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "files.h"
#include "parse.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "sys-stats.h"
#include "sysfs.h"
#include "sysstats.h"

static const char *const source_names[N_SOURCES] = {
        [SRC_MEMINFO] = "meminfo",     [SRC_VMSTAT] = "vmstat",         [SRC_STAT] = "stat",
        [SRC_DEVFREQ] = "devfreq",     [SRC_CPUFREQ] = "cpufreq",       [SRC_BUDDYINFO] = "buddyinfo",
        [SRC_DISKSTAT] = "diskstat",   [SRC_PSI] = "psi",               [SRC_THERMAL] = "thermal",
        [SRC_CPUIDLE] = "cpuidle",     [SRC_GPUFREQ] = "gpufreq",       [SRC_SLAB] = "slab",
};

/* The /proc files, kept open. */
enum { F_MEMINFO, F_VMSTAT, F_STAT, F_BUDDYINFO, F_DISKSTATS, F_PSI_CPU, F_PSI_IO, F_PSI_MEMORY, N_FILES };
static const char *const file_paths[N_FILES] = {
        "/proc/meminfo",   "/proc/vmstat",       "/proc/stat",     "/proc/buddyinfo",
        "/proc/diskstats", "/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory",
};

struct ss_session {
        struct sysstats_instance base; /* first */
        struct traced_source *timer;
        struct sys_stats_config cfg;
        uint64_t tick, polls;
        struct key_set meminfo, vmstat;
        uint64_t ns_per_tick;
        int fds[N_FILES];
        bool failed[N_FILES]; /* logged once, then closed */
        struct sysfs_set sysfs;
        struct read_buf rb;
};

static bool due(const struct ss_session *ss, unsigned s) {
        return ss->cfg.ticks[s] && ss->tick % ss->cfg.ticks[s] == 0;
}

/* The text of /proc file i, or NULL (a failure is logged once, and the
 * file closed). */
static const char *read_file(struct ss_session *ss, unsigned i, size_t *ret_len) {
        if (ss->fds[i] < 0)
                return NULL;
        ssize_t n = file_pread(ss->fds[i], &ss->rb);
        if (n == -EAGAIN)
                n = file_pread(ss->fds[i], &ss->rb);
        if (n < 0) {
                struct sysstats_plugin *pl = ss->base.pl;
                plugin_log(pl, TRACED_LOG_WARNING, "linux.sys_stats instance %llu: reading %s failed (%s); no longer read",
                           (unsigned long long) ss->base.inst.id, file_paths[i], strerror((int) -n));
                ss->fds[i] = safe_close(ss->fds[i]);
                return NULL;
        }
        *ret_len = (size_t) n;
        return ss->rb.p;
}

static void poll_once(struct ss_session *ss) {
        const struct traced_host_api *api = ss->base.pl->api;
        const char *text;
        size_t len;
        uint64_t begin = sysstats_now_ns();
        TracePacket pkt;
        SysStats st;
        /* Written straight into the writer's shared memory. */
        if (api->begin_packet(ss->base.writer, &pkt.msg) < 0) {
                ss->tick++;
                return;
        }
        TracePacket_set_timestamp(&pkt, begin);
        TracePacket_begin_sys_stats(&pkt, &st);
        if (due(ss, SRC_MEMINFO) && (text = read_file(ss, F_MEMINFO, &len)))
                parse_meminfo(text, len, &ss->meminfo, &st);
        if (due(ss, SRC_VMSTAT) && (text = read_file(ss, F_VMSTAT, &len)))
                parse_vmstat(text, len, &ss->vmstat, &st);
        if (due(ss, SRC_STAT) && (text = read_file(ss, F_STAT, &len)))
                parse_stat(text, len, ss->cfg.stat_mask, ss->ns_per_tick, &st);
        if (due(ss, SRC_DEVFREQ))
                sysfs_read_devfreq(&ss->sysfs, &st);
        if (due(ss, SRC_CPUFREQ))
                sysfs_read_cpufreq(&ss->sysfs, &st);
        if (due(ss, SRC_BUDDYINFO) && (text = read_file(ss, F_BUDDYINFO, &len)))
                parse_buddyinfo(text, len, &st);
        if (due(ss, SRC_DISKSTAT) && (text = read_file(ss, F_DISKSTATS, &len)))
                parse_diskstats(text, len, &st);
        if (due(ss, SRC_PSI)) {
                static const SysStats_PsiSample_PsiResource some[3] = {
                        SysStats_PsiSample_PSI_RESOURCE_CPU_SOME,
                        SysStats_PsiSample_PSI_RESOURCE_IO_SOME,
                        SysStats_PsiSample_PSI_RESOURCE_MEMORY_SOME,
                };
                for (unsigned i = 0; i < 3; i++)
                        if ((text = read_file(ss, F_PSI_CPU + i, &len)))
                                parse_psi(text, len, some[i], &st);
        }
        if (due(ss, SRC_THERMAL))
                sysfs_read_thermal(&ss->sysfs, &st);
        if (due(ss, SRC_CPUIDLE))
                sysfs_read_cpuidle(&ss->sysfs, &st);
        SysStats_set_collection_end_timestamp(&st, sysstats_now_ns());
        TracePacket_end_sys_stats(&pkt, &st);
        (void) api->end_packet(ss->base.writer, &pkt.msg);
        ss->tick++;
        ss->polls++;
}

static void on_tick(void *userdata) {
        poll_once(userdata);
}

static void ss_free(struct ss_session *ss) {
        struct sysstats_plugin *pl = ss->base.pl;
        if (ss->timer)
                pl->api->remove_source(pl->host, ss->timer);
        if (ss->base.writer) {
                (void) pl->api->flush_writer(ss->base.writer);
                pl->api->free_writer(ss->base.writer);
        }
        for (unsigned i = 0; i < N_FILES; i++)
                safe_close(ss->fds[i]);
        sysfs_close(&ss->sysfs);
        key_set_done(&ss->meminfo);
        key_set_done(&ss->vmstat);
        read_buf_done(&ss->rb);
        free(ss);
}

/* Opens what the configured sources read. */
static int open_sources(struct ss_session *ss) {
        static const int8_t file_source[N_FILES] = {
                [F_MEMINFO] = SRC_MEMINFO,     [F_VMSTAT] = SRC_VMSTAT,   [F_STAT] = SRC_STAT,
                [F_BUDDYINFO] = SRC_BUDDYINFO, [F_DISKSTATS] = SRC_DISKSTAT, [F_PSI_CPU] = SRC_PSI,
                [F_PSI_IO] = SRC_PSI,          [F_PSI_MEMORY] = SRC_PSI,
        };
        struct sysstats_plugin *pl = ss->base.pl;
        long n_cpus = sysconf(_SC_NPROCESSORS_CONF);
        size_t unknown = 0, u;
        int r;
        for (unsigned i = 0; i < N_FILES; i++) {
                ss->fds[i] = -EBADF;
                if (!ss->cfg.ticks[file_source[i]])
                        continue;
                ss->fds[i] = file_open("", file_paths[i]);
                if (ss->fds[i] < 0)
                        plugin_log(pl, TRACED_LOG_WARNING, "linux.sys_stats instance %llu: %s: %s; not recorded",
                                   (unsigned long long) ss->base.inst.id, file_paths[i], strerror(-ss->fds[i]));
        }
        if ((r = key_set_init(&ss->meminfo, false, ss->cfg.meminfo_ids, ss->cfg.n_meminfo_ids, &unknown)) < 0)
                return r;
        if ((r = key_set_init(&ss->vmstat, true, ss->cfg.vmstat_ids, ss->cfg.n_vmstat_ids, &u)) < 0)
                return r;
        if (unknown + u)
                plugin_log(pl, TRACED_LOG_WARNING, "linux.sys_stats instance %llu: %zu unknown counter(s) ignored",
                           (unsigned long long) ss->base.inst.id, unknown + u);
        if (ss->cfg.ticks[SRC_CPUFREQ] && (r = sysfs_open_cpufreq(&ss->sysfs, "", n_cpus > 0 ? (size_t) n_cpus : 0)) < 0)
                return r;
        if (ss->cfg.ticks[SRC_DEVFREQ] && (r = sysfs_open_devfreq(&ss->sysfs, "")) < 0)
                return r;
        if (ss->cfg.ticks[SRC_THERMAL] && (r = sysfs_open_thermal(&ss->sysfs, "")) < 0)
                return r;
        if (ss->cfg.ticks[SRC_CPUIDLE] && (r = sysfs_open_cpuidle(&ss->sysfs, "", n_cpus > 0 ? (size_t) n_cpus : 0)) < 0)
                return r;
        return 0;
}

int sys_stats_start(struct sysstats_plugin *pl, uint64_t id, const uint8_t *config, size_t size) {
        struct ss_session *ss = calloc(1, sizeof(*ss));
        if (!ss)
                return -ENOMEM;
        ss->base.pl = pl;
        ss->base.inst.id = id;
        for (unsigned i = 0; i < N_FILES; i++)
                ss->fds[i] = -EBADF;
        long hz = sysconf(_SC_CLK_TCK);
        ss->ns_per_tick = 1000000000u / (uint64_t) (hz > 0 ? hz : 100);
        int r = sys_stats_parse_config(config, size, &ss->cfg);
        if (r < 0) {
                /* To the consumer, when the service takes such reports. */
                plugin_report(pl, "linux.sys_stats", id, "sys_stats_config", "%s; nothing recorded",
                              r == -EDOM ? "the *_period_ms are not multiples of the smallest one" : "malformed");
                ss_free(ss);
                return -EINVAL;
        }
        for (unsigned s = 0; s < N_SOURCES; s++)
                if (ss->cfg.clamped & (1u << s))
                        plugin_log(pl, TRACED_LOG_WARNING, "linux.sys_stats instance %llu: %s_period_ms raised to %u ms",
                                   (unsigned long long) id, source_names[s], SYS_STATS_MIN_PERIOD_MS);
        for (unsigned s = SRC_GPUFREQ; s <= SRC_SLAB; s++)
                if (ss->cfg.ticks[s])
                        plugin_log(pl, TRACED_LOG_WARNING, "linux.sys_stats instance %llu: %s_period_ms is not supported; "
                                   "ignored", (unsigned long long) id, source_names[s]);
        if ((r = open_sources(ss)) < 0 || (r = pl->api->new_writer(pl->host, id, &ss->base.writer)) < 0) {
                ss_free(ss);
                return r;
        }
        if (ss->cfg.tick_ms) {
                poll_once(ss);
                r = pl->api->add_timer(pl->host, ss->cfg.tick_ms, on_tick, ss, &ss->timer);
                if (r < 0) {
                        ss_free(ss);
                        return r;
                }
        }
        plugin_instance_add(&pl->sys_stats, &ss->base.inst);
        plugin_log(pl, TRACED_LOG_INFO, "linux.sys_stats instance %llu: polling every %u ms%s",
                   (unsigned long long) id, ss->cfg.tick_ms, ss->cfg.tick_ms ? "" : " (nothing configured)");
        /* A config that names the data source and no period would record
         * nothing, silently: its consumer is told. */
        if (!ss->cfg.tick_ms)
                plugin_report(pl, "linux.sys_stats", id, "sys_stats_config",
                              "no *_period_ms is set: nothing to record (e.g. meminfo_period_ms: 1000)");
        return 0;
}

bool sys_stats_stop(struct sysstats_plugin *pl, uint64_t id) {
        struct ss_session *ss = (struct ss_session *) plugin_instance_take(&pl->sys_stats, id);
        if (!ss)
                return false;
        plugin_log(pl, TRACED_LOG_INFO, "linux.sys_stats instance %llu stopped: %llu polls", (unsigned long long) id,
                   (unsigned long long) ss->polls);
        ss_free(ss);
        return true;
}

void sys_stats_free_all(struct sysstats_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->sys_stats)))
                ss_free((struct ss_session *) i);
}
