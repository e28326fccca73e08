/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The machines behind traced_relay: what the RelayPort (ports/relay-port.c)
 * learns about each (InitRelay's SystemInfo) and the clock readings it
 * exchanges with us (SyncClock), kept per machine for the sessions, which
 * write a system_info and a remote_clock_sync packet per machine.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_MAX_MACHINES 64u
#define RELAY_MAX_CLOCKS 16u
#define RELAY_KEPT_SYNCS 5u /* the last clock exchanges kept per machine */

struct relay_clock {
        uint32_t id;
        uint64_t ts;
};

struct relay_sync {
        struct relay_clock client[RELAY_MAX_CLOCKS];
        size_t n_client;
        struct relay_clock host[RELAY_MAX_CLOCKS];
        size_t n_host;
};

struct relay_machine {
        uint32_t machine_id;
        char *name;
        uint8_t *system_info; /* packed SystemInfo, NULL before InitRelay */
        size_t system_info_size;
        struct relay_sync syncs[RELAY_KEPT_SYNCS]; /* ring, oldest first from syncs_start */
        size_t syncs_start, n_syncs;
};

struct relay_machines {
        struct relay_machine m[RELAY_MAX_MACHINES];
        size_t n;
};

void relay_machines_done(struct relay_machines *rm);
struct relay_machine *relay_machines_find(struct relay_machines *rm, uint32_t machine_id);
/* The machine of that id, added (with name, may be NULL) when new; NULL
 * when RELAY_MAX_MACHINES are known or on ENOMEM. */
struct relay_machine *relay_machines_get(struct relay_machines *rm, uint32_t machine_id, const char *name);
/* Records one SyncClock request's clocks, with the host's at arrival. */
void relay_machine_add_sync(struct relay_machine *m, const uint32_t *ids, const uint64_t *ts, size_t n,
                            const struct relay_clock *host, size_t n_host);
/* The host's readings of the given builtin clock ids, now (ids the host
 * cannot read are left out). Returns how many were written. */
size_t relay_read_host_clocks(const uint32_t *ids, size_t n, struct relay_clock *ret);
