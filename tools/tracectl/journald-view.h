/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.systemd_journald's packets for people: one line per entry (print)
 * and the counts of a trace (summary). */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "perfetto/trace/linux/journald_event.pb-c.h"

#define JOURNALD_VIEW_MAX_SEQS 16

struct journald_counts {
        uint64_t entries;
        uint64_t by_prio[8];
        uint64_t no_prio;
        uint64_t notes; /* the data source's own (no _TRANSPORT) */
        /* The counts each sequence (instance) last wrote. */
        struct {
                uint32_t seq;
                uint64_t total, failed;
        } stats[JOURNALD_VIEW_MAX_SEQS];
        size_t n_stats;
};

void journald_counts_add(struct journald_counts *c, uint32_t seq, const Perfetto__Protos__SystemdJournaldEvent *e);
/* "emerg" .. "debug" for 0..7. */
const char *journald_prio_name(unsigned prio);
/* What the data source's instances counted last: entries written, failed. */
void journald_counts_totals(const struct journald_counts *c, uint64_t *ret_total, uint64_t *ret_failed);
/* Nothing when the trace held no journald packet. */
void journald_counts_print(FILE *f, const struct journald_counts *c);

/* "err mytag[1234] (unit foo.service, syslog): text", or the counts. */
void journald_print_event(FILE *f, const Perfetto__Protos__SystemdJournaldEvent *e);
