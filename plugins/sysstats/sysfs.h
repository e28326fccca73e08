/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The sysfs side of linux.sys_stats: CPU frequencies, devfreq devices,
 * thermal zones and CPU idle states. What exists is found once, when the
 * data source starts, and its files kept open; each poll then preads them
 * and appends to a SysStats message. A device that appears later is not
 * polled; one that goes away reads as missing (a CPU's frequency as 0).
 */

#include <stddef.h>
#include <stdint.h>

#include "traced/pbzero/perfetto/trace/sys_stats/sys_stats.pbw.h"

struct devfreq_dev {
        int fd; /* cur_freq */
        char name[64];
};

struct thermal_zone {
        int fd; /* temp */
        char name[32], type[64];
};

struct idle_state {
        int fd; /* time */
        char name[32];
};

struct cpuidle_cpu {
        uint32_t cpu;
        struct idle_state *states;
        size_t n_states;
};

struct sysfs_set {
        int *cpufreq_fds; /* per CPU (0 .. n_cpus - 1); -EBADF where none */
        size_t n_cpus;
        struct devfreq_dev *devfreq;
        size_t n_devfreq;
        struct thermal_zone *thermal;
        size_t n_thermal;
        struct cpuidle_cpu *cpuidle;
        size_t n_cpuidle;
};

/* Opens what each poll will read (root: "" or a fixture tree). n_cpus:
 * CPUs configured. 0 or -ENOMEM; what is absent is simply not there. */
int sysfs_open_cpufreq(struct sysfs_set *s, const char *root, size_t n_cpus);
int sysfs_open_devfreq(struct sysfs_set *s, const char *root);
int sysfs_open_thermal(struct sysfs_set *s, const char *root);
int sysfs_open_cpuidle(struct sysfs_set *s, const char *root, size_t n_cpus);
void sysfs_close(struct sysfs_set *s);

/* One poll each, into a SysStats message being written. */
void sysfs_read_cpufreq(const struct sysfs_set *s, SysStats *out);
void sysfs_read_devfreq(const struct sysfs_set *s, SysStats *out);
void sysfs_read_thermal(const struct sysfs_set *s, SysStats *out);
void sysfs_read_cpuidle(const struct sysfs_set *s, SysStats *out);
