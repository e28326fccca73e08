/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One journal entry into one TracePacket holding a SystemdJournaldEvent;
 * the instance's counts and its notes in the same form; the journal's
 * wall-clock times on the trace's clock (CLOCK_BOOTTIME). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/pbw.h"

/* TracePacket fields. */
#define JOURNALD_TP_TIMESTAMP 8
#define JOURNALD_TP_EVENT 132

/* SystemdJournaldEvent fields. */
enum {
        JOURNALD_EV_PID = 1,
        JOURNALD_EV_TID = 2,
        JOURNALD_EV_UID = 3,
        JOURNALD_EV_GID = 4,
        JOURNALD_EV_PRIO = 5,
        JOURNALD_EV_TAG = 6,
        JOURNALD_EV_MESSAGE = 7,
        JOURNALD_EV_COMM = 8,
        JOURNALD_EV_EXE = 9,
        JOURNALD_EV_SYSTEMD_UNIT = 10,
        JOURNALD_EV_HOSTNAME = 11,
        JOURNALD_EV_TRANSPORT = 12,
        JOURNALD_EV_NUM_TOTAL = 20,
        JOURNALD_EV_NUM_FAILED = 21,
};

/* The tag of the notes the data source writes about itself (an entry of
 * no _TRANSPORT: journald gives every entry one). */
#define JOURNALD_NOTE_TAG "traced-journald"

/* Reads field (e.g. "MESSAGE") of the current entry: 0 with its value
 * (not NUL-terminated, without "FIELD="), -ENOENT when the entry has none,
 * another negative errno when it cannot be read. */
typedef int (*journald_field_fn)(void *userdata, const char *field, const void **ret, size_t *ret_len);

/*
 * The current entry as a TracePacket at ts_ns: ev is scratch, pkt receives
 * the packet (both emptied first). Fields the entry lacks, and numbers that
 * do not parse, are left out. Returns 0, or the first error of get other
 * than -ENOENT, or -ENOMEM.
 */
int journald_entry_encode(journald_field_fn get, void *userdata, uint64_t ts_ns, struct pbw *ev, struct pbw *pkt);

/* The counts of an instance (num_total, num_failed) as a packet at ts_ns. */
int journald_stats_encode(uint64_t ts_ns, uint64_t total, uint64_t failed, struct pbw *ev, struct pbw *pkt);

/* A note of the data source (tag JOURNALD_NOTE_TAG, pid) as a packet. */
int journald_note_encode(uint64_t ts_ns, uint32_t prio, uint32_t pid, const char *message, struct pbw *ev,
                         struct pbw *pkt);

/* CLOCK_BOOTTIME minus CLOCK_REALTIME now, in nanoseconds. */
int64_t journald_clock_offset(void);
/* A wall-clock time in microseconds on CLOCK_BOOTTIME, given that offset;
 * false when it falls before the boot (an entry of an earlier boot). */
bool journald_realtime_to_boottime(uint64_t realtime_us, int64_t offset_ns, uint64_t *ret_ns);
/* CLOCK_BOOTTIME now, in nanoseconds. */
uint64_t journald_boottime_now(void);
