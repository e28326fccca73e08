/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/perf_event.h>

/* The CPUs online now (/sys/devices/system/cpu/online), in order, at most
 * max of them. Returns -errno when the list cannot be read. */
int cpus_online(uint32_t *cpus, size_t max, size_t *ret_n);

/* The same from a list already read ("0-3,5,7-8"). */
void cpus_parse(const char *list, uint32_t *cpus, size_t max, size_t *ret_n);

/* Whether cpu is among the n CPUs of the list. */
bool cpus_contain(const uint32_t *cpus, size_t n, uint32_t cpu);

/*
 * Per-CPU perf events across CPU hotplug, for the samplers.
 *
 * When a CPU goes offline the kernel takes its events out of scheduling for
 * good: once the CPU is back they stay silent, and only a new event
 * samples it again. Comparing the online CPUs between two looks misses an
 * offline stretch shorter than the time between them (a loop thread held
 * up for a second on a loaded machine does), so the tracker also reads each
 * event's time_enabled, which stops advancing when its CPU leaves: an event
 * whose time stood still since the last look is stopped, closed and opened
 * anew as soon as its CPU is online. Events must be opened with
 * CPU_HOTPLUG_READ_FORMAT among their read_format bits (no PERF_FORMAT_GROUP)
 * and be enabled while the tracker looks at them.
 *
 * The tracker owns no event: it tells its user, through the ops, to close
 * one slot's event (keeping what it recorded) or to open it again.
 *
 * A read of a CPU's event from another CPU is an inter-processor
 * interrupt. An event whose records arrived since the last look is not
 * read (its user says so with cpu_hotplug_active): it is running. One
 * that stops then is found a look later than it would be otherwise, as
 * its time is read twice, two looks apart, once its records stop.
 */
#define CPU_HOTPLUG_READ_FORMAT PERF_FORMAT_TOTAL_TIME_ENABLED

/* Looks at which a CPU's event comes back before it is given up: a CPU
 * shows as online before the kernel's perf side of it is ready. */
#define CPU_HOTPLUG_OPEN_TRIES 10u

enum cpu_hotplug_change {
        CPU_HOTPLUG_STOPPED,  /* its CPU went offline (or the event stopped) */
        CPU_HOTPLUG_BACK,     /* opened again on a CPU back online */
        CPU_HOTPLUG_GAVE_UP,  /* could not be opened CPU_HOTPLUG_OPEN_TRIES times */
};

struct cpu_hotplug_ops {
        /* Close slot k's event, keeping what it recorded. */
        void (*close)(void *userdata, size_t k);
        /* Open and enable slot k's event again: its fd, or a negative errno. */
        int (*open)(void *userdata, size_t k);
        /* What happened to slot k, for the log (error with GAVE_UP); optional. */
        void (*changed)(void *userdata, size_t k, enum cpu_hotplug_change what, int error);
};

struct cpu_hotplug_slot {
        uint32_t cpu;
        int fd;                /* the event; negative while closed */
        bool gave_up;          /* not tried again until its CPU goes offline */
        unsigned open_failures;
        uint64_t last_enabled; /* time_enabled at the last look, 0 before the first */
        bool active;           /* records arrived since the last look */
};

struct cpu_hotplug {
        struct cpu_hotplug_slot *slots;
        size_t n;
        uint64_t stops; /* events found stopped: CPUs gone offline */
        uint64_t reads; /* events' times read */
        const struct cpu_hotplug_ops *ops;
        void *userdata;
        /* /sys/devices/system/cpu/online, kept open (read again from its
         * start at each look); online_open says whether online_fd is (a
         * zeroed tracker is a closed one). */
        bool online_open;
        int online_fd;
};

/* n slots, each closed on CPU k until cpu_hotplug_set says otherwise. */
int cpu_hotplug_init(struct cpu_hotplug *h, size_t n, const struct cpu_hotplug_ops *ops, void *userdata);
/* Slot k samples cpu with the event fd (negative: not open, its CPU is
 * offline; it is opened when the CPU comes online). */
void cpu_hotplug_set(struct cpu_hotplug *h, size_t k, uint32_t cpu, int fd);
/* Records of slot k's event arrived: it runs, and is not read at the
 * next look. */
static inline void cpu_hotplug_active(struct cpu_hotplug *h, size_t k) {
        if (k < h->n)
                h->slots[k].active = true;
}
/* One look, against the online CPUs read now. */
int cpu_hotplug_check(struct cpu_hotplug *h);
/* One look, against the given online CPUs. */
void cpu_hotplug_check_online(struct cpu_hotplug *h, const uint32_t *online, size_t n_online);
void cpu_hotplug_done(struct cpu_hotplug *h);
