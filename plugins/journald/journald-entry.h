/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One journal entry into one SystemdJournaldEvent (a TracePacket's);
 * the instance's counts and its notes in the same form; the journal's
 * wall-clock times on the trace's clock (CLOCK_BOOTTIME). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "traced/pbzero/perfetto/trace/linux/journald_event.pbw.h"

/* The tag of the notes the data source writes about itself (an entry of
 * no _TRANSPORT: journald gives every entry one). */
#define JOURNALD_NOTE_TAG "traced-journald"

/* Reads field (e.g. "MESSAGE") of the current entry: 0 with its value
 * (not NUL-terminated, without "FIELD="), -ENOENT when the entry has none,
 * another negative errno when it cannot be read. */
typedef int (*journald_field_fn)(void *userdata, const char *field, const void **ret, size_t *ret_len);

/*
 * The fields of the current entry into ev. Fields the entry lacks, and
 * numbers that do not parse, are left out. Returns 0, or the first error
 * of get other than -ENOENT (ev is then to be thrown away), or ev's
 * stream's error.
 */
int journald_entry_encode(journald_field_fn get, void *userdata, SystemdJournaldEvent *ev);

/* The counts of an instance (num_total, num_failed). */
void journald_stats_encode(SystemdJournaldEvent *ev, uint64_t total, uint64_t failed);

/* A note of the data source (tag JOURNALD_NOTE_TAG, pid). */
void journald_note_encode(SystemdJournaldEvent *ev, uint32_t prio, uint32_t pid, const char *message);

/* CLOCK_BOOTTIME minus CLOCK_REALTIME now, in nanoseconds. */
int64_t journald_clock_offset(void);
/* A wall-clock time in microseconds on CLOCK_BOOTTIME, given that offset;
 * false when it falls before the boot (an entry of an earlier boot). */
bool journald_realtime_to_boottime(uint64_t realtime_us, int64_t offset_ns, uint64_t *ret_ns);
/* CLOCK_BOOTTIME now, in nanoseconds. */
uint64_t journald_boottime_now(void);
