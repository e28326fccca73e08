/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The summary's lines about system counters (linux.sys_stats) and the
 * CPUs (linux.system_info). */

#include <inttypes.h>
#include <stdio.h>

#include "summary.h"

#include "perfetto/trace/sys_stats/sys_stats.pb-c.h"
#include "perfetto/trace/system_info/cpu_info.pb-c.h"

void summary_add_sys_stats(struct summary *s, const Perfetto__Protos__SysStats *st) {
        struct summary_sys *y = &s->sys;
        y->packets++;
        y->meminfo += st->n_meminfo;
        y->vmstat += st->n_vmstat;
        y->cpu_times += st->n_cpu_stat;
        y->cpufreq += st->n_cpufreq_khz;
        y->other += st->n_num_irq + st->n_num_softirq + st->n_devfreq + st->n_buddy_info + st->n_disk_stat +
                    st->n_psi + st->n_thermal_zone + st->n_cpuidle_state + st->has_num_forks;
        for (size_t i = 0; i < st->n_meminfo; i++) {
                if (st->meminfo[i]->key != PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE)
                        continue;
                uint64_t v = st->meminfo[i]->value;
                if (!y->have_mem_free || v < y->mem_free_min_kb)
                        y->mem_free_min_kb = v;
                if (!y->have_mem_free || v > y->mem_free_max_kb)
                        y->mem_free_max_kb = v;
                y->have_mem_free = true;
        }
}

void summary_add_cpu_info(struct summary *s, const Perfetto__Protos__CpuInfo *ci) {
        s->sys.cpus = (uint32_t) ci->n_cpus;
        if (ci->n_cpus && ci->cpus[0]->processor)
                snprintf(s->sys.cpu_name, sizeof(s->sys.cpu_name), "%s", ci->cpus[0]->processor);
}

void summary_print_sys(FILE *f, const struct summary *s) {
        const struct summary_sys *y = &s->sys;
        if (y->packets) {
                fprintf(f,
                        "System counters: %" PRIu64 " samples: %" PRIu64 " meminfo, %" PRIu64 " vmstat, %" PRIu64
                        " per-CPU times, %" PRIu64 " cpufreq, %" PRIu64 " other values\n",
                        y->packets, y->meminfo, y->vmstat, y->cpu_times, y->cpufreq, y->other);
                if (y->have_mem_free)
                        fprintf(f, "  MemFree %.1f .. %.1f MiB\n", (double) y->mem_free_min_kb / 1024.0,
                                (double) y->mem_free_max_kb / 1024.0);
        }
        if (y->cpus)
                fprintf(f, "CPUs:           %" PRIu32 " (%s)\n", y->cpus, y->cpu_name[0] ? y->cpu_name : "?");
}
