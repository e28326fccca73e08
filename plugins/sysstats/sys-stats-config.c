/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "sys-stats.h"

/* A repeated enum, packed or not, into ids (at most max). */
static void enum_values(const struct pbr_field *f, uint32_t *ids, size_t *n, size_t max) {
        if (f->wire_type == 0) {
                if (*n < max)
                        ids[(*n)++] = (uint32_t) f->varint;
                return;
        }
        if (f->wire_type != 2)
                return;
        for (size_t pos = 0; pos < f->len && *n < max;) {
                uint64_t v = 0;
                unsigned shift = 0;
                while (pos < f->len && shift < 64) {
                        uint8_t b = f->data[pos++];
                        v |= (uint64_t) (b & 0x7f) << shift;
                        shift += 7;
                        if (!(b & 0x80))
                                break;
                }
                ids[(*n)++] = (uint32_t) v;
        }
}

int sys_stats_parse_config(const uint8_t *config, size_t size, struct sys_stats_config *ret) {
        /* SysStatsConfig field of each source's period. */
        static const uint8_t period_field[N_SOURCES] = {
                [SRC_MEMINFO] = 1,   [SRC_VMSTAT] = 3,    [SRC_STAT] = 5,     [SRC_DEVFREQ] = 7,
                [SRC_CPUFREQ] = 8,   [SRC_BUDDYINFO] = 9, [SRC_DISKSTAT] = 10, [SRC_PSI] = 11,
                [SRC_THERMAL] = 12,  [SRC_CPUIDLE] = 13,  [SRC_GPUFREQ] = 14, [SRC_SLAB] = 15,
        };
        struct pbr_field sc, f;
        uint32_t stat_ids[16];
        size_t n_stat = 0;
        *ret = (struct sys_stats_config) {};
        if (pbr_get(config, size, 104, false, &sc) && sc.wire_type == 2) {
                size_t pos = 0;
                int r;
                while ((r = pbr_next(sc.data, sc.len, &pos, &f)) > 0) {
                        if (f.number == 2)
                                enum_values(&f, ret->meminfo_ids, &ret->n_meminfo_ids, MAX_SELECTED);
                        else if (f.number == 4)
                                enum_values(&f, ret->vmstat_ids, &ret->n_vmstat_ids, MAX_SELECTED);
                        else if (f.number == 6)
                                enum_values(&f, stat_ids, &n_stat, ELEMENTSOF(stat_ids));
                        else if (f.wire_type == 0)
                                for (unsigned s = 0; s < N_SOURCES; s++)
                                        if (period_field[s] == f.number)
                                                ret->period_ms[s] = (uint32_t) MIN(f.varint, UINT32_MAX);
                }
                if (r < 0)
                        return -EBADMSG;
        }
        /* No stat_counters: all of them. */
        ret->stat_mask = n_stat ? 0 : UINT32_MAX;
        for (size_t i = 0; i < n_stat; i++)
                if (stat_ids[i] < 32)
                        ret->stat_mask |= 1u << stat_ids[i];
        ret->tick_ms = 0;
        for (unsigned s = 0; s < N_SOURCES; s++) {
                uint32_t *p = &ret->period_ms[s];
                if (*p && *p < SYS_STATS_MIN_PERIOD_MS) {
                        *p = SYS_STATS_MIN_PERIOD_MS;
                        ret->clamped |= 1u << s;
                }
                if (*p && (ret->tick_ms == 0 || *p < ret->tick_ms))
                        ret->tick_ms = *p;
        }
        for (unsigned s = 0; s < N_SOURCES; s++) {
                if (ret->period_ms[s] % (ret->tick_ms ? ret->tick_ms : 1) != 0)
                        return -EDOM;
                ret->ticks[s] = ret->tick_ms ? ret->period_ms[s] / ret->tick_ms : 0;
        }
        return 0;
}
