/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>

#include "journald-view.h"

static const char *const prio_names[8] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };

const char *journald_prio_name(unsigned prio) {
        return prio < 8 ? prio_names[prio] : "?";
}

void journald_counts_totals(const struct journald_counts *c, uint64_t *ret_total, uint64_t *ret_failed) {
        uint64_t total = 0, failed = 0;
        for (size_t i = 0; i < c->n_stats; i++) {
                total += c->stats[i].total;
                failed += c->stats[i].failed;
        }
        *ret_total = total;
        *ret_failed = failed;
}

static bool is_stats(const Perfetto__Protos__SystemdJournaldEvent *e) {
        return e->has_num_total || e->has_num_failed;
}

void journald_counts_add(struct journald_counts *c, uint32_t seq, const Perfetto__Protos__SystemdJournaldEvent *e) {
        if (is_stats(e)) {
                size_t i;
                for (i = 0; i < c->n_stats; i++)
                        if (c->stats[i].seq == seq)
                                break;
                if (i == c->n_stats) {
                        if (c->n_stats == JOURNALD_VIEW_MAX_SEQS)
                                return;
                        c->stats[c->n_stats++].seq = seq;
                }
                c->stats[i].total = e->num_total;
                c->stats[i].failed = e->num_failed;
                return;
        }
        if (!e->transport) {
                c->notes++;
                return;
        }
        c->entries++;
        if (e->has_prio && e->prio < 8)
                c->by_prio[e->prio]++;
        else
                c->no_prio++;
}

void journald_counts_print(FILE *f, const struct journald_counts *c) {
        if (!c->entries && !c->notes && !c->n_stats)
                return;
        fprintf(f, "Journal:        %" PRIu64 " entries", c->entries);
        const char *sep = " (";
        for (unsigned p = 0; p < 8; p++)
                if (c->by_prio[p]) {
                        fprintf(f, "%s%" PRIu64 " %s", sep, c->by_prio[p], prio_names[p]);
                        sep = ", ";
                }
        if (c->no_prio)
                fprintf(f, "%s%" PRIu64 " of no priority", sep, c->no_prio);
        fprintf(f, "%s\n", sep[0] == ',' ? ")" : "");
        uint64_t total, failed;
        journald_counts_totals(c, &total, &failed);
        if (c->n_stats)
                fprintf(f, "                the data source counted %" PRIu64 " written, %" PRIu64 " failed\n", total,
                        failed);
        if (c->notes)
                fprintf(f, "                %" PRIu64 " %s of the data source (tracectl print shows %s)\n", c->notes,
                        c->notes == 1 ? "note" : "notes", c->notes == 1 ? "it" : "them");
}

void journald_print_event(FILE *f, const Perfetto__Protos__SystemdJournaldEvent *e) {
        if (is_stats(e)) {
                fprintf(f, "counts: %" PRIu64 " entries written, %" PRIu64 " failed\n", e->num_total, e->num_failed);
                return;
        }
        fprintf(f, "%s %s", e->has_prio && e->prio < 8 ? prio_names[e->prio] : "-", e->tag ? e->tag : "?");
        if (e->has_pid)
                fprintf(f, "[%" PRIu32 "]", e->pid);
        if (e->systemd_unit || e->transport)
                fprintf(f, " (%s%s%s)", e->systemd_unit ? e->systemd_unit : "", e->systemd_unit && e->transport ? ", " : "",
                        e->transport ? e->transport : "");
        else
                fprintf(f, " (note of the data source)");
        fprintf(f, ": %s\n", e->message ? e->message : "");
}
