/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The batteries of /sys/class/power_supply (type "Battery", present "1")
 * for linux.sysfs_power: found once, their counter files kept open, each
 * poll a BatteryCounters message per battery.
 */

#include <stddef.h>
#include <stdint.h>

#include "traced/pbzero/perfetto/trace/power/battery_counters.pbw.h"

enum {
        BAT_CHARGE_NOW,  /* µAh */
        BAT_CAPACITY,    /* % */
        BAT_CURRENT_NOW, /* µA */
        BAT_CURRENT_AVG, /* µA */
        BAT_ENERGY_NOW,  /* µWh */
        BAT_VOLTAGE_NOW, /* µV */
        N_BAT_FILES,
};

struct battery {
        char name[64];
        int fds[N_BAT_FILES]; /* -EBADF where the driver has no such file */
};

struct battery_set {
        struct battery *b;
        size_t n;
};

/* root: "" or a fixture tree. 0 or -ENOMEM (no battery: n == 0). */
int battery_scan(struct battery_set *s, const char *root);
void battery_set_done(struct battery_set *s);
/* The BatteryCounters of battery i (name set when there are several). */
void battery_write(const struct battery_set *s, size_t i, BatteryCounters *out);
