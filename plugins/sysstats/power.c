/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.sysfs_power: BatteryCounters of each battery every second (a
 * machine without a battery writes nothing). */

#include <errno.h>
#include <stdlib.h>

#include "battery.h"
#include "sysstats.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

#define POWER_POLL_MS 1000u

struct power_session {
        struct sysstats_instance base; /* first */
        struct traced_source *timer;
        struct battery_set batteries;
};

static void poll_batteries(void *userdata) {
        struct power_session *ps = userdata;
        const struct traced_host_api *api = ps->base.pl->api;
        for (size_t i = 0; i < ps->batteries.n; i++) {
                TracePacket pkt;
                BatteryCounters bc;
                if (api->begin_packet(ps->base.writer, &pkt.msg) < 0)
                        continue;
                TracePacket_set_timestamp(&pkt, sysstats_now_ns());
                TracePacket_begin_battery(&pkt, &bc);
                battery_write(&ps->batteries, i, &bc);
                TracePacket_end_battery(&pkt, &bc);
                (void) api->end_packet(ps->base.writer, &pkt.msg);
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
