/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The machines behind traced_relay (machines.h). */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "core/sessions/machines.h"

void relay_machines_done(struct relay_machines *rm) {
        for (size_t i = 0; i < rm->n; i++) {
                free(rm->m[i].name);
                free(rm->m[i].system_info);
        }
        rm->n = 0;
}

struct relay_machine *relay_machines_find(struct relay_machines *rm, uint32_t machine_id) {
        for (size_t i = 0; i < rm->n; i++)
                if (rm->m[i].machine_id == machine_id)
                        return &rm->m[i];
        return NULL;
}

struct relay_machine *relay_machines_get(struct relay_machines *rm, uint32_t machine_id, const char *name) {
        struct relay_machine *m = relay_machines_find(rm, machine_id);
        if (m)
                return m;
        if (rm->n >= RELAY_MAX_MACHINES)
                return NULL;
        m = &rm->m[rm->n];
        *m = (struct relay_machine) { .machine_id = machine_id };
        if (name && !(m->name = strdup(name)))
                return NULL;
        rm->n++;
        return m;
}

void relay_machine_add_sync(struct relay_machine *m, const uint32_t *ids, const uint64_t *ts, size_t n,
                            const struct relay_clock *host, size_t n_host) {
        struct relay_sync *s;
        if (m->n_syncs < RELAY_KEPT_SYNCS)
                s = &m->syncs[(m->syncs_start + m->n_syncs++) % RELAY_KEPT_SYNCS];
        else {
                s = &m->syncs[m->syncs_start];
                m->syncs_start = (m->syncs_start + 1) % RELAY_KEPT_SYNCS;
        }
        *s = (struct relay_sync) {};
        for (size_t i = 0; i < n && s->n_client < RELAY_MAX_CLOCKS; i++)
                s->client[s->n_client++] = (struct relay_clock) { .id = ids[i], .ts = ts[i] };
        for (size_t i = 0; i < n_host && s->n_host < RELAY_MAX_CLOCKS; i++)
                s->host[s->n_host++] = host[i];
}

size_t relay_read_host_clocks(const uint32_t *ids, size_t n, struct relay_clock *ret) {
        /* Builtin clock ids of the Perfetto ABI. */
        static const clockid_t by_id[] = {
                [1] = CLOCK_REALTIME,         [2] = CLOCK_REALTIME_COARSE, [3] = CLOCK_MONOTONIC,
                [4] = CLOCK_MONOTONIC_COARSE, [5] = CLOCK_MONOTONIC_RAW,   [6] = CLOCK_BOOTTIME,
        };
        size_t k = 0;
        for (size_t i = 0; i < n && k < RELAY_MAX_CLOCKS; i++) {
                struct timespec t;
                if (ids[i] == 0 || ids[i] >= ELEMENTSOF(by_id) || clock_gettime(by_id[ids[i]], &t) < 0)
                        continue;
                ret[k++] = (struct relay_clock) {
                        .id = ids[i],
                        .ts = (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec,
                };
        }
        return k;
}
