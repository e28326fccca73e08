/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "battery.h"
#include "files.h"

#define MAX_BATTERIES 16
#define POWER_SUPPLY "/sys/class/power_supply"

static const char *const file_names[N_BAT_FILES] = {
        "charge_now", "capacity", "current_now", "current_avg", "energy_now", "voltage_now",
};

static bool attr_is(const char *root, const char *name, const char *attr, const char *want) {
        char path[512], v[64];
        snprintf(path, sizeof(path), POWER_SUPPLY "/%s/%s", name, attr);
        return file_read_line(root, path, v, sizeof(v)) == 0 && strcmp(v, want) == 0;
}

int battery_scan(struct battery_set *s, const char *root) {
        char dir[4096];
        size_t cap = 0;
        *s = (struct battery_set) {};
        snprintf(dir, sizeof(dir), "%s" POWER_SUPPLY, root);
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        struct dirent *de;
        while ((de = readdir(d)) && s->n < MAX_BATTERIES) {
                if (de->d_name[0] == '.' || !attr_is(root, de->d_name, "type", "Battery") ||
                    !attr_is(root, de->d_name, "present", "1"))
                        continue;
                if (GREEDY_REALLOC(s->b, cap, s->n + 1) < 0) {
                        closedir(d);
                        battery_set_done(s);
                        return -ENOMEM;
                }
                struct battery *b = &s->b[s->n++];
                snprintf(b->name, sizeof(b->name), "%.63s", de->d_name);
                for (unsigned i = 0; i < N_BAT_FILES; i++) {
                        char path[512];
                        snprintf(path, sizeof(path), POWER_SUPPLY "/%s/%s", de->d_name, file_names[i]);
                        int fd = file_open(root, path);
                        b->fds[i] = fd < 0 ? -EBADF : fd;
                }
        }
        closedir(d);
        return 0;
}

void battery_set_done(struct battery_set *s) {
        for (size_t i = 0; i < s->n; i++)
                for (unsigned j = 0; j < N_BAT_FILES; j++)
                        safe_close(s->b[i].fds[j]);
        free(s->b);
        *s = (struct battery_set) {};
}

/* A signed decimal attribute. */
static int read_i64(int fd, int64_t *ret) {
        char buf[32];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
                return n < 0 ? -errno : -EINVAL;
        buf[n] = '\0';
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (end == buf || errno)
                return -EINVAL;
        *ret = v;
        return 0;
}

void battery_write(const struct battery_set *s, size_t i, BatteryCounters *out) {
        const struct battery *b = &s->b[i];
        for (unsigned j = 0; j < N_BAT_FILES; j++) {
                int64_t v = 0;
                if (b->fds[j] < 0 || read_i64(b->fds[j], &v) < 0)
                        continue;
                switch (j) {
                case BAT_CHARGE_NOW:
                        BatteryCounters_set_charge_counter_uah(out, v);
                        break;
                case BAT_CAPACITY:
                        BatteryCounters_set_capacity_percent(out, (float) v);
                        break;
                case BAT_CURRENT_NOW:
                        BatteryCounters_set_current_ua(out, v);
                        break;
                case BAT_CURRENT_AVG:
                        BatteryCounters_set_current_avg_ua(out, v);
                        break;
                case BAT_ENERGY_NOW:
                        BatteryCounters_set_energy_counter_uwh(out, v);
                        break;
                case BAT_VOLTAGE_NOW:
                        BatteryCounters_set_voltage_uv(out, v);
                        break;
                }
        }
        if (s->n > 1)
                BatteryCounters_set_name(out, b->name);
}
