/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "journald-entry.h"

static const struct {
        const char *name;
        uint32_t number;
        bool is_number;
} fields[] = {
        { "_PID", JOURNALD_EV_PID, true },
        { "_TID", JOURNALD_EV_TID, true },
        { "_UID", JOURNALD_EV_UID, true },
        { "_GID", JOURNALD_EV_GID, true },
        { "PRIORITY", JOURNALD_EV_PRIO, true },
        { "SYSLOG_IDENTIFIER", JOURNALD_EV_TAG, false },
        { "MESSAGE", JOURNALD_EV_MESSAGE, false },
        { "_COMM", JOURNALD_EV_COMM, false },
        { "_EXE", JOURNALD_EV_EXE, false },
        { "_SYSTEMD_UNIT", JOURNALD_EV_SYSTEMD_UNIT, false },
        { "_HOSTNAME", JOURNALD_EV_HOSTNAME, false },
        { "_TRANSPORT", JOURNALD_EV_TRANSPORT, false },
};

/* A decimal uint32 of the whole value, or false. */
static bool parse_u32(const char *s, size_t n, uint32_t *ret) {
        uint64_t v = 0;
        if (n == 0 || n > 10)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        if (v > UINT32_MAX)
                return false;
        *ret = (uint32_t) v;
        return true;
}

static int finish(uint64_t ts_ns, struct pbw *ev, struct pbw *pkt) {
        pbw_reset(pkt);
        pbw_varint(pkt, JOURNALD_TP_TIMESTAMP, ts_ns);
        pbw_message(pkt, JOURNALD_TP_EVENT, ev);
        return ev->error < 0 ? ev->error : pkt->error;
}

int journald_entry_encode(journald_field_fn get, void *userdata, uint64_t ts_ns, struct pbw *ev, struct pbw *pkt) {
        pbw_reset(ev);
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const void *v;
                size_t n;
                int r = get(userdata, fields[i].name, &v, &n);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                uint32_t u;
                if (!fields[i].is_number)
                        pbw_bytes(ev, fields[i].number, v, n);
                else if (parse_u32(v, n, &u))
                        pbw_varint(ev, fields[i].number, u);
        }
        return finish(ts_ns, ev, pkt);
}

int journald_stats_encode(uint64_t ts_ns, uint64_t total, uint64_t failed, struct pbw *ev, struct pbw *pkt) {
        pbw_reset(ev);
        pbw_varint(ev, JOURNALD_EV_NUM_TOTAL, total);
        pbw_varint(ev, JOURNALD_EV_NUM_FAILED, failed);
        return finish(ts_ns, ev, pkt);
}

int journald_note_encode(uint64_t ts_ns, uint32_t prio, uint32_t pid, const char *message, struct pbw *ev,
                         struct pbw *pkt) {
        pbw_reset(ev);
        pbw_varint(ev, JOURNALD_EV_PID, pid);
        pbw_varint(ev, JOURNALD_EV_PRIO, prio);
        pbw_string(ev, JOURNALD_EV_TAG, JOURNALD_NOTE_TAG);
        pbw_string(ev, JOURNALD_EV_MESSAGE, message);
        return finish(ts_ns, ev, pkt);
}

static int64_t ns_of(clockid_t id) {
        struct timespec ts;
        clock_gettime(id, &ts);
        return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t journald_clock_offset(void) {
        /* Real time read on both sides of the boot time: their middle. */
        int64_t a = ns_of(CLOCK_REALTIME);
        int64_t boot = ns_of(CLOCK_BOOTTIME);
        int64_t b = ns_of(CLOCK_REALTIME);
        return boot - (a + (b - a) / 2);
}

bool journald_realtime_to_boottime(uint64_t realtime_us, int64_t offset_ns, uint64_t *ret_ns) {
        if (realtime_us > (uint64_t) INT64_MAX / 1000)
                return false;
        int64_t t = (int64_t) realtime_us * 1000 + offset_ns;
        if (t < 0)
                return false;
        *ret_ns = (uint64_t) t;
        return true;
}

uint64_t journald_boottime_now(void) {
        return (uint64_t) ns_of(CLOCK_BOOTTIME);
}
