/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What a summary says of a snapshot (tracectl snapshot's TracedSnapshot
 * packet): the session it is of, when, and for a unit that failed
 * (traced-snapshot@.service) how and when it failed, how many of its
 * journal lines the snapshot holds and which processes wrote them. */

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "summary.h"

#include "perfetto/trace/traced_snapshot.pb-c.h"

static void copy(char *dst, size_t size, const char *src) {
        snprintf(dst, size, "%s", src ? src : "");
}

void summary_add_snapshot(struct summary *s, const Perfetto__Protos__TracedSnapshot *p) {
        struct summary_snapshot *k = &s->snap;
        k->have = true;
        copy(k->session, sizeof(k->session), p->session_name);
        k->snapshot_ns = p->has_snapshot_realtime_ns ? p->snapshot_realtime_ns : 0;
        if (!p->unit)
                return;
        const Perfetto__Protos__TracedSnapshot__Unit *u = p->unit;
        copy(k->unit, sizeof(k->unit), u->name);
        copy(k->active_state, sizeof(k->active_state), u->active_state);
        copy(k->result, sizeof(k->result), u->result);
        copy(k->invocation_id, sizeof(k->invocation_id), u->invocation_id);
        copy(k->error, sizeof(k->error), u->error);
        k->failed_ns = u->has_failed_realtime_ns ? u->failed_realtime_ns : 0;
        k->have_main_pid = u->has_main_pid;
        k->main_pid = u->main_pid;
        k->have_exit = u->has_exit_code;
        k->exit_code = u->exit_code;
        k->exit_status = u->exit_status;
}

void summary_add_journal_unit(struct summary *s, const Perfetto__Protos__SystemdJournaldEvent *e) {
        struct summary_snapshot *k = &s->snap;
        if (!e->systemd_unit || !e->systemd_unit[0])
                return;
        struct summary_unit_lines *u = NULL;
        for (size_t i = 0; i < k->n_units && !u; i++)
                if (strncmp(k->units[i].unit, e->systemd_unit, sizeof(k->units[i].unit) - 1) == 0)
                        u = &k->units[i];
        if (!u) {
                if (k->n_units == SUMMARY_SNAPSHOT_MAX_UNITS)
                        return;
                struct summary_unit_lines *v = realloc(k->units, (k->n_units + 1) * sizeof(*v));
                if (!v)
                        return;
                k->units = v;
                u = &k->units[k->n_units++];
                *u = (struct summary_unit_lines) {};
                copy(u->unit, sizeof(u->unit), e->systemd_unit);
        }
        u->lines++;
        if (!e->has_pid)
                return;
        for (size_t i = 0; i < u->n_procs; i++)
                if (u->procs[i].pid == e->pid)
                        return;
        if (u->n_procs < SUMMARY_SNAPSHOT_MAX_PROCS) {
                u->procs[u->n_procs].pid = e->pid;
                copy(u->procs[u->n_procs].comm, sizeof(u->procs[u->n_procs].comm), e->comm);
                u->n_procs++;
        }
}

void summary_snapshot_done(struct summary *s) {
        free(s->snap.units);
        s->snap.units = NULL;
        s->snap.n_units = 0;
}

static const char *local_time(int64_t ns, char *buf, size_t size) {
        time_t t = (time_t) (ns / 1000000000);
        struct tm tm;
        if (ns <= 0 || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                snprintf(buf, size, "?");
        return buf;
}

void summary_print_snapshot(FILE *f, const struct summary *s) {
        const struct summary_snapshot *k = &s->snap;
        char when[64];
        if (!k->have)
                return;
        fprintf(f, "Snapshot:       of session %s, taken %s\n", k->session[0] ? k->session : "?",
                local_time(k->snapshot_ns, when, sizeof(when)));
        if (!k->unit[0])
                return;
        fprintf(f, "Failed unit:    %s", k->unit);
        if (k->failed_ns)
                fprintf(f, " failed at %s", local_time(k->failed_ns, when, sizeof(when)));
        if (k->result[0] || k->active_state[0])
                fprintf(f, " (%s%s%s)", k->active_state, k->active_state[0] && k->result[0] ? ", result " : "",
                        k->result);
        fprintf(f, "\n");
        if (k->have_main_pid) {
                fprintf(f, "                main process %d", k->main_pid);
                if (k->have_exit)
                        fprintf(f, " %s %d", k->exit_code == 1 ? "exited with status" : "killed by signal",
                                k->exit_status);
                fprintf(f, "\n");
        }
        if (k->invocation_id[0])
                fprintf(f, "                invocation %s\n", k->invocation_id);
        if (k->error[0])
                fprintf(f, "                (systemd was not asked: %s)\n", k->error);
        const struct summary_unit_lines *u = NULL;
        for (size_t i = 0; i < k->n_units && !u; i++)
                if (strcmp(k->units[i].unit, k->unit) == 0)
                        u = &k->units[i];
        if (!u) {
                fprintf(f, "                no journal lines of it in the snapshot\n");
                return;
        }
        fprintf(f, "                %" PRIu64 " journal lines of it, from", u->lines);
        for (size_t i = 0; i < u->n_procs; i++)
                fprintf(f, "%s pid %u (%s)", i ? "," : "", u->procs[i].pid,
                        u->procs[i].comm[0] ? u->procs[i].comm : "?");
        fprintf(f, "%s\n", u->n_procs ? "" : " no process named");
}
