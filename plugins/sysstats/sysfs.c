/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "files.h"
#include "parse.h"
#include "sysfs.h"

#define MAX_ENTRIES 1024 /* devices, zones or idle states of one kind */

int sysfs_open_cpufreq(struct sysfs_set *s, const char *root, size_t n_cpus) {
        s->cpufreq_fds = malloc(MAX(n_cpus, 1u) * sizeof(int));
        if (!s->cpufreq_fds)
                return -ENOMEM;
        s->n_cpus = n_cpus;
        for (size_t i = 0; i < n_cpus; i++) {
                char path[96];
                snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%zu/cpufreq/scaling_cur_freq", i);
                int fd = file_open(root, path);
                s->cpufreq_fds[i] = fd < 0 ? -EBADF : fd;
        }
        return 0;
}

/* Calls fn for each entry of root + dir whose name starts with prefix. */
static int for_each_entry(const char *root, const char *dir, const char *prefix,
                          int (*fn)(struct sysfs_set *s, const char *root, const char *dir, const char *name,
                                    void *userdata),
                          struct sysfs_set *s, void *userdata) {
        char full[4096];
        snprintf(full, sizeof(full), "%s%s", root, dir);
        DIR *d = opendir(full);
        if (!d)
                return 0;
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(d)))
                if (de->d_name[0] != '.' && strncmp(de->d_name, prefix, strlen(prefix)) == 0)
                        r = fn(s, root, dir, de->d_name, userdata);
        closedir(d);
        return r;
}

static int add_devfreq(struct sysfs_set *s, const char *root, const char *dir, const char *name, void *unused) {
        size_t cap = s->n_devfreq;
        char path[512];
        if (s->n_devfreq >= MAX_ENTRIES)
                return 0;
        snprintf(path, sizeof(path), "%s/%s/cur_freq", dir, name);
        int fd = file_open(root, path);
        if (fd < 0)
                return 0;
        if (GREEDY_REALLOC(s->devfreq, cap, s->n_devfreq + 1) < 0) {
                safe_close(fd);
                return -ENOMEM;
        }
        struct devfreq_dev *d = &s->devfreq[s->n_devfreq++];
        d->fd = fd;
        snprintf(d->name, sizeof(d->name), "%.63s", name);
        return 0;
}

int sysfs_open_devfreq(struct sysfs_set *s, const char *root) {
        return for_each_entry(root, "/sys/class/devfreq", "", add_devfreq, s, NULL);
}

static int add_thermal(struct sysfs_set *s, const char *root, const char *dir, const char *name, void *unused) {
        size_t cap = s->n_thermal;
        char path[512];
        if (s->n_thermal >= MAX_ENTRIES)
                return 0;
        snprintf(path, sizeof(path), "%s/%s/temp", dir, name);
        int fd = file_open(root, path);
        if (fd < 0)
                return 0;
        if (GREEDY_REALLOC(s->thermal, cap, s->n_thermal + 1) < 0) {
                safe_close(fd);
                return -ENOMEM;
        }
        struct thermal_zone *z = &s->thermal[s->n_thermal++];
        z->fd = fd;
        snprintf(z->name, sizeof(z->name), "%.31s", name);
        snprintf(path, sizeof(path), "%s/%s/type", dir, name);
        if (file_read_line(root, path, z->type, sizeof(z->type)) < 0)
                z->type[0] = '\0';
        return 0;
}

int sysfs_open_thermal(struct sysfs_set *s, const char *root) {
        return for_each_entry(root, "/sys/class/thermal", "thermal_zone", add_thermal, s, NULL);
}

static int add_idle_state(struct sysfs_set *s, const char *root, const char *dir, const char *name, void *userdata) {
        struct cpuidle_cpu *c = userdata;
        size_t cap = c->n_states;
        char path[512];
        if (c->n_states >= MAX_ENTRIES)
                return 0;
        snprintf(path, sizeof(path), "%s/%s/time", dir, name);
        int fd = file_open(root, path);
        if (fd < 0)
                return 0;
        if (GREEDY_REALLOC(c->states, cap, c->n_states + 1) < 0) {
                safe_close(fd);
                return -ENOMEM;
        }
        struct idle_state *st = &c->states[c->n_states++];
        st->fd = fd;
        snprintf(path, sizeof(path), "%s/%s/name", dir, name);
        if (file_read_line(root, path, st->name, sizeof(st->name)) < 0)
                snprintf(st->name, sizeof(st->name), "%.31s", name);
        return 0;
}

int sysfs_open_cpuidle(struct sysfs_set *s, const char *root, size_t n_cpus) {
        /* One more: the entry being filled when a CPU has no states. */
        s->cpuidle = calloc(n_cpus + 1, sizeof(*s->cpuidle));
        if (!s->cpuidle)
                return -ENOMEM;
        for (size_t i = 0; i < n_cpus; i++) {
                struct cpuidle_cpu *c = &s->cpuidle[s->n_cpuidle];
                char dir[96];
                c->cpu = (uint32_t) i;
                snprintf(dir, sizeof(dir), "/sys/devices/system/cpu/cpu%zu/cpuidle", i);
                int r = for_each_entry(root, dir, "state", add_idle_state, s, c);
                if (r < 0)
                        return r;
                if (c->n_states > 0)
                        s->n_cpuidle++;
        }
        return 0;
}

void sysfs_close(struct sysfs_set *s) {
        for (size_t i = 0; i < s->n_cpus; i++)
                safe_close(s->cpufreq_fds[i]);
        free(s->cpufreq_fds);
        for (size_t i = 0; i < s->n_devfreq; i++)
                safe_close(s->devfreq[i].fd);
        free(s->devfreq);
        for (size_t i = 0; i < s->n_thermal; i++)
                safe_close(s->thermal[i].fd);
        free(s->thermal);
        for (size_t i = 0; s->cpuidle && i <= s->n_cpuidle; i++) {
                for (size_t j = 0; j < s->cpuidle[i].n_states; j++)
                        safe_close(s->cpuidle[i].states[j].fd);
                free(s->cpuidle[i].states);
        }
        free(s->cpuidle);
        *s = (struct sysfs_set) {};
}

void sysfs_read_cpufreq(const struct sysfs_set *s, SysStats *out) {
        /* One value per CPU, 0 where the frequency cannot be read (no
         * cpufreq, CPU offline). */
        for (size_t i = 0; i < s->n_cpus; i++) {
                uint64_t khz = 0;
                if (s->cpufreq_fds[i] < 0 || file_pread_u64(s->cpufreq_fds[i], &khz) < 0)
                        khz = 0;
                SysStats_add_cpufreq_khz(out, (uint32_t) khz);
        }
}

void sysfs_read_devfreq(const struct sysfs_set *s, SysStats *out) {
        for (size_t i = 0; i < s->n_devfreq; i++) {
                uint64_t v = 0;
                (void) file_pread_u64(s->devfreq[i].fd, &v);
                SysStats_DevfreqValue d;
                SysStats_begin_devfreq(out, &d);
                SysStats_DevfreqValue_set_key(&d, s->devfreq[i].name);
                SysStats_DevfreqValue_set_value(&d, v);
                SysStats_end_devfreq(out, &d);
        }
}

void sysfs_read_thermal(const struct sysfs_set *s, SysStats *out) {
        for (size_t i = 0; i < s->n_thermal; i++) {
                const struct thermal_zone *z = &s->thermal[i];
                uint64_t milli;
                SysStats_ThermalZone t;
                SysStats_begin_thermal_zone(out, &t);
                SysStats_ThermalZone_set_name(&t, z->name);
                /* The kernel's millidegrees, in degrees Celsius. */
                if (file_pread_u64(z->fd, &milli) == 0)
                        SysStats_ThermalZone_set_temp(&t, milli / 1000u);
                if (z->type[0])
                        SysStats_ThermalZone_set_type(&t, z->type);
                SysStats_end_thermal_zone(out, &t);
        }
}

void sysfs_read_cpuidle(const struct sysfs_set *s, SysStats *out) {
        for (size_t i = 0; i < s->n_cpuidle; i++) {
                const struct cpuidle_cpu *c = &s->cpuidle[i];
                SysStats_CpuIdleState st;
                SysStats_begin_cpuidle_state(out, &st);
                SysStats_CpuIdleState_set_cpu_id(&st, c->cpu);
                for (size_t j = 0; j < c->n_states; j++) {
                        uint64_t us;
                        if (file_pread_u64(c->states[j].fd, &us) < 0)
                                continue;
                        SysStats_CpuIdleStateEntry e;
                        SysStats_CpuIdleState_begin_cpuidle_state_entry(&st, &e);
                        SysStats_CpuIdleStateEntry_set_state(&e, c->states[j].name);
                        SysStats_CpuIdleStateEntry_set_duration_us(&e, us);
                        SysStats_CpuIdleState_end_cpuidle_state_entry(&st, &e);
                }
                SysStats_end_cpuidle_state(out, &st);
        }
}
