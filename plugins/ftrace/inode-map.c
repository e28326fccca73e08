/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.inode_file_map: an instance per session, its writer and its scan
 * timer (scan_delay_ms to the first batch, then scan_interval_ms between
 * batches); inode-resolve.c does the work. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/pbr.h"
#include "inode-map.h"
#include "inode-mounts.h"
#include "inode-resolve.h"

#define DS_NAME "linux.inode_file_map"
/* Paths the plugin's instances share (inode-cache.h). */
#define CACHE_MAX 65536u

struct inode_map {
        struct plugin_instance inst; /* first: the plugin's list, by instance id */
        struct plugin *pl;
        uint64_t tracing_session_id;
        struct traced_writer *writer;
        struct inode_resolver *resolver;
        struct traced_source *timer;
        uint32_t timer_ms; /* the period timer runs at */
        struct inode_resolver_stats at_scan_start;
};

static void on_packet(const uint8_t *packet, size_t size, void *userdata) {
        struct inode_map *m = userdata;
        (void) m->pl->api->write_packet(m->writer, packet, size);
}

static void timer_set(struct inode_map *m, uint32_t ms);

/* What a scan did, once it is over. */
static void log_scan(struct inode_map *m) {
        const struct inode_resolver_stats *st = inode_resolver_stats(m->resolver), *a = &m->at_scan_start;
        plugin_log(m->pl, TRACED_LOG_INFO,
                   DS_NAME " instance %llu: scan over, %llu found, %llu not found, %llu entries walked",
                   (unsigned long long) m->inst.id, (unsigned long long) (st->found - a->found),
                   (unsigned long long) (st->not_found - a->not_found),
                   (unsigned long long) (st->entries_walked - a->entries_walked));
        m->at_scan_start = *st;
}

static void on_scan_timer(void *userdata) {
        struct inode_map *m = userdata;
        const struct inode_config *cfg = inode_resolver_config(m->resolver);
        if (inode_resolver_scan_step(m->resolver) > 0) {
                timer_set(m, cfg->scan_interval_ms);
                return;
        }
        log_scan(m);
        if (inode_resolver_scan_wanted(m->resolver))
                timer_set(m, cfg->scan_delay_ms);
        else
                timer_set(m, 0);
}

/* The timer at period ms (0: none). Removing it from its own callback is
 * safe: the host touches nothing of it after the callback returns. */
static void timer_set(struct inode_map *m, uint32_t ms) {
        struct plugin *pl = m->pl;
        if (m->timer && m->timer_ms == ms)
                return;
        if (m->timer)
                pl->api->remove_source(pl->host, m->timer);
        m->timer = NULL;
        m->timer_ms = 0;
        if (ms == 0)
                return;
        int r = pl->api->add_timer(pl->host, ms, on_scan_timer, m, &m->timer);
        if (r < 0) {
                m->timer = NULL;
                plugin_log(pl, TRACED_LOG_WARNING, DS_NAME " instance %llu: cannot schedule a scan: %s",
                           (unsigned long long) m->inst.id, strerror(-r));
                return;
        }
        m->timer_ms = ms;
}

static void map_free(struct inode_map *m) {
        struct plugin *pl = m->pl;
        timer_set(m, 0);
        if (m->resolver)
                inode_resolver_emit(m->resolver);
        if (m->writer) {
                (void) pl->api->flush_writer(m->writer);
                pl->api->free_writer(m->writer);
        }
        inode_resolver_free(m->resolver);
        free(m);
}

int inode_map_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        struct inode_config cfg;
        const char *field;
        int r = inode_config_parse(config, size, &cfg, &field);
        if (r == -EINVAL) {
                plugin_report(pl, DS_NAME, instance_id, field, "malformed (an empty string, or not a %s)",
                              strcmp(field, "mount_point_mapping") == 0 ? "MountPointMappingEntry with a mountpoint"
                                                                        : "string");
                return r;
        }
        if (r < 0)
                return r;
        if (!pl->inode_cache && (r = inode_cache_new(CACHE_MAX, &pl->inode_cache)) < 0) {
                inode_config_done(&cfg);
                return r;
        }
        struct inode_map *m = calloc(1, sizeof(*m));
        if (!m) {
                inode_config_done(&cfg);
                return -ENOMEM;
        }
        m->pl = pl;
        m->inst.id = instance_id;
        struct pbr_field f;
        if (pbr_get(config, size, 4, false, &f) && f.wire_type == 0)
                m->tracing_session_id = f.varint;
        bool do_not_scan = cfg.do_not_scan;
        uint32_t delay = cfg.scan_delay_ms, interval = cfg.scan_interval_ms, batch = cfg.scan_batch_size;
        r = inode_resolver_new(&cfg, pl->inode_cache, INODE_MOUNTINFO, on_packet, m, &m->resolver);
        if (r < 0) {
                inode_config_done(&cfg);
                map_free(m);
                return r;
        }
        r = pl->api->new_writer(pl->host, instance_id, &m->writer);
        if (r < 0) {
                map_free(m);
                return r;
        }
        plugin_instance_add(&pl->inode_maps, &m->inst);
        if (do_not_scan)
                plugin_log(pl, TRACED_LOG_INFO, DS_NAME " instance %llu: names from the cache only (do_not_scan)",
                           (unsigned long long) instance_id);
        else
                plugin_log(pl, TRACED_LOG_INFO,
                           DS_NAME " instance %llu: scans %u ms after an unknown inode, %u entries every %u ms",
                           (unsigned long long) instance_id, delay, batch, interval);
        return 0;
}

bool inode_map_stop(struct plugin *pl, uint64_t instance_id) {
        struct inode_map *m = (struct inode_map *) plugin_instance_take(&pl->inode_maps, instance_id);
        if (!m)
                return false;
        const struct inode_resolver_stats *st = inode_resolver_stats(m->resolver);
        plugin_log(pl, TRACED_LOG_INFO,
                   DS_NAME " instance %llu stopped: %llu inodes seen, %llu named from the cache, %llu found in %llu "
                           "scan(s) of %llu entries, %llu not found, %llu not scanned for, %llu dropped",
                   (unsigned long long) instance_id, (unsigned long long) st->seen, (unsigned long long) st->from_cache,
                   (unsigned long long) st->found, (unsigned long long) st->scans,
                   (unsigned long long) st->entries_walked, (unsigned long long) st->not_found,
                   (unsigned long long) st->not_scanned, (unsigned long long) st->dropped);
        map_free(m);
        return true;
}

void inode_map_flush(struct plugin *pl, uint64_t instance_id) {
        struct inode_map *m = (struct inode_map *) plugin_instance_find(pl->inode_maps, instance_id);
        if (!m)
                return;
        inode_resolver_emit(m->resolver);
        (void) pl->api->flush_writer(m->writer);
}

void inode_map_free_all(struct plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->inode_maps)))
                map_free((struct inode_map *) i);
        inode_cache_free(pl->inode_cache);
        pl->inode_cache = NULL;
}

struct inode_map *inode_map_for_session(struct plugin *pl, uint64_t tracing_session_id) {
        for (struct plugin_instance *i = pl->inode_maps; i; i = i->next)
                if (((struct inode_map *) i)->tracing_session_id == tracing_session_id)
                        return (struct inode_map *) i;
        return NULL;
}

void inode_map_note(struct inode_map *m, uint64_t kernel_dev, uint64_t ino) {
        inode_resolver_note(m->resolver, inode_dev_from_kernel(kernel_dev), ino);
}

void inode_map_drained(struct inode_map *m) {
        if (!m)
                return;
        inode_resolver_emit(m->resolver);
        if (inode_resolver_scan_wanted(m->resolver) && !m->timer)
                timer_set(m, inode_resolver_config(m->resolver)->scan_delay_ms);
}
