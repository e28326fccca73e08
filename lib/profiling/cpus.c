/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "cpus.h"

#define ONLINE_PATH "/sys/devices/system/cpu/online"

/* The list in the file open at fd, read from its start into buf. */
static int read_list(int fd, char *buf, size_t size) {
        ssize_t n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -EIO;
        buf[n] = '\0';
        return 0;
}

int cpus_online(uint32_t *cpus, size_t max, size_t *ret_n) {
        char buf[1024];
        int fd = open(ONLINE_PATH, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        int r = read_list(fd, buf, sizeof(buf));
        close(fd);
        if (r < 0)
                return r;
        cpus_parse(buf, cpus, max, ret_n);
        return 0;
}

void cpus_parse(const char *list, uint32_t *cpus, size_t max, size_t *ret_n) {
        char buf[1024], *save = NULL;
        size_t n = 0;
        snprintf(buf, sizeof(buf), "%s", list);
        /* "0-3,5,7-8" */
        for (char *tok = strtok_r(buf, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save)) {
                unsigned a, b;
                int k = sscanf(tok, "%u-%u", &a, &b);
                if (k == 1)
                        b = a;
                else if (k != 2)
                        continue;
                for (unsigned c = a; c <= b && n < max; c++)
                        cpus[n++] = c;
        }
        *ret_n = n;
}

bool cpus_contain(const uint32_t *cpus, size_t n, uint32_t cpu) {
        for (size_t i = 0; i < n; i++)
                if (cpus[i] == cpu)
                        return true;
        return false;
}

int cpu_hotplug_init(struct cpu_hotplug *h, size_t n, const struct cpu_hotplug_ops *ops, void *userdata) {
        *h = (struct cpu_hotplug) { .ops = ops, .userdata = userdata };
        if (n == 0)
                return 0;
        h->slots = calloc(n, sizeof(*h->slots));
        if (!h->slots)
                return -ENOMEM;
        h->n = n;
        for (size_t k = 0; k < n; k++)
                h->slots[k] = (struct cpu_hotplug_slot) { .cpu = (uint32_t) k, .fd = -EBADF };
        return 0;
}

void cpu_hotplug_set(struct cpu_hotplug *h, size_t k, uint32_t cpu, int fd) {
        if (k < h->n)
                h->slots[k] = (struct cpu_hotplug_slot) { .cpu = cpu, .fd = fd < 0 ? -EBADF : fd };
}

void cpu_hotplug_done(struct cpu_hotplug *h) {
        if (h->online_open)
                close(h->online_fd);
        free(h->slots);
        *h = (struct cpu_hotplug) {};
}

static void changed(struct cpu_hotplug *h, size_t k, enum cpu_hotplug_change what, int error) {
        if (h->ops->changed)
                h->ops->changed(h->userdata, k, what, error);
}

/* Whether the event has stopped since the last look: its time_enabled
 * stands still (or it cannot be read). An event not enabled yet (time 0)
 * has not stopped. */
static bool event_stopped(struct cpu_hotplug *h, struct cpu_hotplug_slot *slot) {
        uint64_t v[4];
        h->reads++;
        ssize_t n = read(slot->fd, v, sizeof(v));
        if (n < (ssize_t) (2 * sizeof(uint64_t)))
                return true;
        bool stopped = slot->last_enabled != 0 && v[1] == slot->last_enabled;
        slot->last_enabled = v[1];
        return stopped;
}

void cpu_hotplug_check_online(struct cpu_hotplug *h, const uint32_t *online, size_t n_online) {
        for (size_t k = 0; k < h->n; k++) {
                struct cpu_hotplug_slot *slot = &h->slots[k];
                bool on = cpus_contain(online, n_online, slot->cpu);
                if (slot->fd >= 0) {
                        bool active = slot->active;
                        slot->active = false;
                        if (on && (active || !event_stopped(h, slot)))
                                continue;
                        h->ops->close(h->userdata, k);
                        slot->fd = -EBADF;
                        slot->last_enabled = 0;
                        h->stops++;
                        changed(h, k, CPU_HOTPLUG_STOPPED, 0);
                        /* Its CPU is back already (the offline stretch
                         * fell between two looks): opened below. */
                }
                if (!on) {
                        slot->gave_up = false;
                        slot->open_failures = 0;
                        continue;
                }
                if (slot->gave_up)
                        continue;
                int fd = h->ops->open(h->userdata, k);
                if (fd >= 0) {
                        slot->fd = fd;
                        slot->open_failures = 0;
                        changed(h, k, CPU_HOTPLUG_BACK, 0);
                } else if (++slot->open_failures >= CPU_HOTPLUG_OPEN_TRIES) {
                        slot->gave_up = true;
                        changed(h, k, CPU_HOTPLUG_GAVE_UP, fd);
                }
        }
}

int cpu_hotplug_check(struct cpu_hotplug *h) {
        uint32_t online[1024];
        char buf[1024];
        size_t n;
        if (!h->online_open) {
                if ((h->online_fd = open(ONLINE_PATH, O_RDONLY | O_CLOEXEC)) < 0)
                        return negative_errno();
                h->online_open = true;
        }
        int r = read_list(h->online_fd, buf, sizeof(buf));
        if (r < 0)
                return r;
        cpus_parse(buf, online, ELEMENTSOF(online), &n);
        cpu_hotplug_check_online(h, online, n);
        return 0;
}
