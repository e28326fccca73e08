/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.sysfs_power: BatteryCounters of each battery every second (a
 * machine without a battery writes nothing). */

#include <errno.h>
#include <stdlib.h>

#include "basic/pbw.h"
#include "battery.h"
#include "sysstats.h"

#define POWER_POLL_MS 1000u

struct power_session {
        struct sysstats_instance base; /* first */
        struct traced_source *timer;
        struct battery_set batteries;
        struct pbw pkt, counters;
};

static void poll_batteries(void *userdata) {
        struct power_session *ps = userdata;
        for (size_t i = 0; i < ps->batteries.n; i++) {
                pbw_reset(&ps->pkt);
                pbw_reset(&ps->counters);
                battery_write(&ps->batteries, i, &ps->counters);
                pbw_varint(&ps->pkt, 8, sysstats_now_ns()); /* TracePacket.timestamp */
                pbw_message(&ps->pkt, 38, &ps->counters);   /* TracePacket.battery */
                if (!ps->pkt.error)
                        (void) ps->base.pl->api->write_packet(ps->base.writer, ps->pkt.buf, ps->pkt.len);
        }
}

static void power_free(struct power_session *ps) {
        struct sysstats_plugin *pl = ps->base.pl;
        if (ps->timer)
                pl->api->remove_source(pl->host, ps->timer);
        if (ps->base.writer) {
                (void) pl->api->flush_writer(ps->base.writer);
                pl->api->free_writer(ps->base.writer);
        }
        battery_set_done(&ps->batteries);
        pbw_done(&ps->pkt);
        pbw_done(&ps->counters);
        free(ps);
}

int power_start(struct sysstats_plugin *pl, uint64_t id) {
        struct power_session *ps = calloc(1, sizeof(*ps));
        if (!ps)
                return -ENOMEM;
        ps->base.pl = pl;
        ps->base.inst.id = id;
        int r = battery_scan(&ps->batteries, "");
        if (r >= 0)
                r = pl->api->new_writer(pl->host, id, &ps->base.writer);
        if (r >= 0 && ps->batteries.n > 0) {
                poll_batteries(ps);
                r = pl->api->add_timer(pl->host, POWER_POLL_MS, poll_batteries, ps, &ps->timer);
        }
        if (r < 0) {
                power_free(ps);
                return r;
        }
        plugin_instance_add(&pl->power, &ps->base.inst);
        plugin_log(pl, TRACED_LOG_INFO, "linux.sysfs_power instance %llu: %zu batter%s", (unsigned long long) id,
                   ps->batteries.n, ps->batteries.n == 1 ? "y" : "ies");
        return 0;
}

bool power_stop(struct sysstats_plugin *pl, uint64_t id) {
        struct plugin_instance *i = plugin_instance_take(&pl->power, id);
        if (!i)
                return false;
        power_free((struct power_session *) i);
        return true;
}

void power_free_all(struct sysstats_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->power)))
                power_free((struct power_session *) i);
}
