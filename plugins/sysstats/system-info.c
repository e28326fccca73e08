/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.system_info: the CpuInfo packet, once, when the instance starts;
 * with SystemInfoConfig.irq_names, an InterruptInfo packet too. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "cpuinfo.h"
#include "files.h"
#include "interrupts.h"
#include "sysstats.h"
#include "traced/pbzero/perfetto/config/data_source_config.pbw.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

static void si_free(struct sysstats_instance *si) {
        struct sysstats_plugin *pl = si->pl;
        if (si->writer) {
                (void) pl->api->flush_writer(si->writer);
                pl->api->free_writer(si->writer);
        }
        free(si);
}

/* DataSourceConfig.system_info_config.irq_names. */
static bool want_irq_names(const uint8_t *config, size_t size) {
        struct pbr_field sc, f;
        if (!pbr_get(config, size, DataSourceConfig_FIELD_system_info_config, false, &sc) || sc.wire_type != 2)
                return false;
        return pbr_get(sc.data, sc.len, SystemInfoConfig_FIELD_irq_names, false, &f) && f.wire_type == 0 &&
               f.varint != 0;
}

/* A packet of the instance's: its timestamp and one serialized payload,
 * set by set_payload. */
static void write_packet(struct sysstats_instance *si, uint64_t ts, const struct pb_buf *payload,
                         void (*set_payload)(TracePacket *pkt, const void *data, size_t size)) {
        const struct traced_host_api *api = si->pl->api;
        TracePacket pkt;
        if (api->begin_packet(si->writer, &pkt.msg) < 0)
                return;
        TracePacket_set_timestamp(&pkt, ts);
        set_payload(&pkt, pb_buf_data(payload), pb_buf_len(payload));
        (void) api->end_packet(si->writer, &pkt.msg);
}

/* The InterruptInfo packet of /proc/interrupts. */
static void write_interrupts(struct sysstats_instance *si, uint64_t ts) {
        struct sysstats_plugin *pl = si->pl;
        struct read_buf rb = {};
        _cleanup_(pb_buf_done) struct pb_buf b = {};
        InterruptInfo info;
        int fd = file_open("", "/proc/interrupts");
        ssize_t n = fd < 0 ? fd : file_pread(fd, &rb);
        if (fd >= 0)
                close(fd);
        InterruptInfo_init(&info, pb_buf_stream(&b));
        int r = n < 0 ? (int) n : interrupts_write(rb.p, (size_t) n, &info);
        if (r >= 0) {
                write_packet(si, ts, &b, TracePacket_set_interrupt_info_serialized);
                plugin_log(pl, TRACED_LOG_INFO, "linux.system_info instance %llu: %d interrupt names",
                           (unsigned long long) si->inst.id, r);
        } else
                plugin_log(pl, TRACED_LOG_WARNING, "linux.system_info instance %llu: /proc/interrupts: %s; no "
                           "InterruptInfo", (unsigned long long) si->inst.id, strerror(-r));
        read_buf_done(&rb);
}

int system_info_start(struct sysstats_plugin *pl, uint64_t id, const uint8_t *config, size_t size) {
        struct read_buf rb = {};
        _cleanup_(pb_buf_done) struct pb_buf b = {};
        CpuInfo info;
        struct sysstats_instance *si = calloc(1, sizeof(*si));
        if (!si)
                return -ENOMEM;
        si->pl = pl;
        si->inst.id = id;
        int r = pl->api->new_writer(pl->host, id, &si->writer);
        if (r < 0) {
                si_free(si);
                return r;
        }
        uint64_t ts = sysstats_now_ns();
        int fd = file_open("", "/proc/cpuinfo");
        ssize_t n = fd < 0 ? fd : file_pread(fd, &rb);
        if (fd >= 0)
                close(fd);
        CpuInfo_init(&info, pb_buf_stream(&b));
        r = n < 0 ? (int) n : cpuinfo_write(rb.p, (size_t) n, "", &info);
        if (r >= 0) {
                write_packet(si, ts, &b, TracePacket_set_cpu_info_serialized);
                plugin_log(pl, TRACED_LOG_INFO, "linux.system_info instance %llu: %d CPUs described",
                           (unsigned long long) id, r);
        } else
                plugin_log(pl, TRACED_LOG_WARNING, "linux.system_info instance %llu: /proc/cpuinfo: %s; no CpuInfo",
                           (unsigned long long) id, strerror(-r));
        read_buf_done(&rb);
        if (want_irq_names(config, size))
                write_interrupts(si, ts);
        (void) pl->api->flush_writer(si->writer);
        plugin_instance_add(&pl->system_info, &si->inst);
        return 0;
}

bool system_info_stop(struct sysstats_plugin *pl, uint64_t id) {
        struct plugin_instance *i = plugin_instance_take(&pl->system_info, id);
        if (!i)
                return false;
        si_free((struct sysstats_instance *) i);
        return true;
}

void system_info_free_all(struct sysstats_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->system_info)))
                si_free((struct sysstats_instance *) i);
}
