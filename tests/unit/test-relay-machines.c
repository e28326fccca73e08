/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The machines behind traced_relay, as the sessions layer keeps them. */

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/sessions/machines.h"

Test(relay_machines, get_adds_once_and_find_sees_it) {
        static struct relay_machines rm;
        cr_assert_null(relay_machines_find(&rm, 7));
        struct relay_machine *m = relay_machines_get(&rm, 7, "vm-a");
        cr_assert_not_null(m);
        cr_assert_str_eq(m->name, "vm-a");
        cr_assert_eq(relay_machines_get(&rm, 7, "other"), m);
        cr_assert_eq(relay_machines_find(&rm, 7), m);
        cr_assert_eq(rm.n, 1);
        relay_machines_done(&rm);
        cr_assert_eq(rm.n, 0);
}

Test(relay_machines, at_most_the_limit) {
        static struct relay_machines rm;
        for (uint32_t i = 1; i <= RELAY_MAX_MACHINES; i++)
                cr_assert_not_null(relay_machines_get(&rm, i, NULL));
        cr_assert_null(relay_machines_get(&rm, RELAY_MAX_MACHINES + 1, NULL));
        relay_machines_done(&rm);
}

Test(relay_machines, syncs_keep_the_last_ones_in_order) {
        static struct relay_machines rm;
        struct relay_machine *m = relay_machines_get(&rm, 3, NULL);
        uint32_t ids[1] = { 6 };
        for (uint64_t k = 0; k < RELAY_KEPT_SYNCS + 2; k++) {
                uint64_t ts[1] = { 1000 + k };
                struct relay_clock host = { .id = 6, .ts = 2000 + k };
                relay_machine_add_sync(m, ids, ts, 1, &host, 1);
        }
        cr_assert_eq(m->n_syncs, RELAY_KEPT_SYNCS);
        for (size_t i = 0; i < m->n_syncs; i++) {
                const struct relay_sync *s = &m->syncs[(m->syncs_start + i) % RELAY_KEPT_SYNCS];
                cr_assert_eq(s->n_client, 1);
                cr_assert_eq(s->client[0].ts, 1000 + 2 + i);
                cr_assert_eq(s->host[0].ts, 2000 + 2 + i);
        }
        relay_machines_done(&rm);
}

Test(relay_machines, host_clocks_skip_unknown_ids) {
        uint32_t ids[] = { 0, 6, 99, 3 };
        struct relay_clock out[RELAY_MAX_CLOCKS];
        size_t n = relay_read_host_clocks(ids, 4, out);
        cr_assert_eq(n, 2);
        cr_assert_eq(out[0].id, 6);
        cr_assert_eq(out[1].id, 3);
        cr_assert_gt(out[0].ts, 0);
}
