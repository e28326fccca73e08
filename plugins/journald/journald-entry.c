/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "journald-entry.h"

/* The journal's fields, and the SystemdJournaldEvent fields they go in. */
static const struct {
        const char *name;
        uint32_t number;
        bool is_number;
} fields[] = {
        { "_PID", SystemdJournaldEvent_FIELD_pid, true },
        { "_TID", SystemdJournaldEvent_FIELD_tid, true },
        { "_UID", SystemdJournaldEvent_FIELD_uid, true },
        { "_GID", SystemdJournaldEvent_FIELD_gid, true },
        { "PRIORITY", SystemdJournaldEvent_FIELD_prio, true },
        { "SYSLOG_IDENTIFIER", SystemdJournaldEvent_FIELD_tag, false },
        { "MESSAGE", SystemdJournaldEvent_FIELD_message, false },
        { "_COMM", SystemdJournaldEvent_FIELD_comm, false },
        { "_EXE", SystemdJournaldEvent_FIELD_exe, false },
        { "_SYSTEMD_UNIT", SystemdJournaldEvent_FIELD_systemd_unit, false },
        { "_HOSTNAME", SystemdJournaldEvent_FIELD_hostname, false },
        { "_TRANSPORT", SystemdJournaldEvent_FIELD_transport, false },
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

int journald_entry_encode(journald_field_fn get, void *userdata, SystemdJournaldEvent *ev) {
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
                        traced_pb_msg_bytes(&ev->msg, fields[i].number, v, n);
                else if (parse_u32(v, n, &u))
                        traced_pb_msg_varint(&ev->msg, fields[i].number, u);
        }
        return ev->msg.stream->error;
}

void journald_stats_encode(SystemdJournaldEvent *ev, uint64_t total, uint64_t failed) {
        SystemdJournaldEvent_set_num_total(ev, total);
        SystemdJournaldEvent_set_num_failed(ev, failed);
}

void journald_note_encode(SystemdJournaldEvent *ev, uint32_t prio, uint32_t pid, const char *message) {
        SystemdJournaldEvent_set_pid(ev, pid);
        SystemdJournaldEvent_set_prio(ev, prio);
        SystemdJournaldEvent_set_tag(ev, JOURNALD_NOTE_TAG);
        SystemdJournaldEvent_set_message(ev, message);
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
