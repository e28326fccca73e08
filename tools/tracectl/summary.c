/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "summary.h"
#include "ds-errors.h"
#include "record-ended.h"
#include "syscalls.h"

#include "perfetto/trace/trace_packet.pb-c.h"

void summary_cmdline_name(const char *argv0, bool is_comm, int32_t ppid, char *buf, size_t size) {
        /* Kernel threads (children of kthreadd, pid 2) have no cmdline; a
         * comm standing in for one may hold '/' ("migration/0"). So does
         * a title a process set itself ("sshd: user@pts/0"). */
        const char *slash = strrchr(argv0, '/');
        bool path = slash && slash[1] && !is_comm && ppid != 2 && !strchr(argv0, ' ') && !strchr(argv0, ':');
        snprintf(buf, size, "%s", path ? slash + 1 : argv0);
}

void summary_init(struct summary *s) {
        memset(s, 0, sizeof(*s));
        s->ts_min = UINT64_MAX;
        for (size_t i = 0; i < SUMMARY_MAX_CPUS; i++)
                s->cpu_cur_pid[i] = -1;
}

void summary_done(struct summary *s) {
        free(s->gaps);
        s->gaps = NULL;
        free(s->wakes);
        s->wakes = NULL;
        free(s->tasks);
        s->tasks = NULL;
        for (size_t i = 0; i < s->n_procs; i++)
                name_history_done(&s->procs[i].names);
        syscall_stats_done(&s->syscalls);
        syscalls_done();
        free(s->procs);
        s->procs = NULL;
        summary_snapshot_done(s);
}

static struct summary_proc *proc(struct summary *s, int32_t pid) {
        for (size_t i = 0; i < s->n_procs; i++)
                if (s->procs[i].pid == pid)
                        return &s->procs[i];
        if (GREEDY_REALLOC_MIN(s->procs, s->cap_procs, s->n_procs + 1, 256) < 0)
                return NULL;
        struct summary_proc *p = &s->procs[s->n_procs++];
        *p = (struct summary_proc) { .pid = pid };
        return p;
}

void summary_heap_totals(const struct summary *s, struct summary_heap *ret) {
        *ret = (struct summary_heap) {};
        for (size_t i = 0; i < s->n_procs; i++) {
                const struct summary_proc *sp = &s->procs[i];
                if (!sp->heap_dumps)
                        continue;
                ret->processes++;
                ret->samples += sp->heap_samples;
                ret->dropped += sp->heap_dropped;
                ret->unwind_errors += sp->heap_unwind_errors;
                ret->overran += sp->heap_overran;
                ret->corrupted += sp->heap_corrupted;
        }
}

static void count_type(struct summary *s, const char *name) {
        for (size_t i = 0; i < s->n_types; i++)
                if (strcmp(s->types[i].name, name) == 0) {
                        s->types[i].count++;
                        return;
                }
        if (s->n_types < SUMMARY_MAX_TYPES)
                s->types[s->n_types++] = (typeof(s->types[0])) { .name = name, .count = 1 };
}

uint64_t summary_type_count(const struct summary *s, const char *name) {
        for (size_t i = 0; i < s->n_types; i++)
                if (strcmp(s->types[i].name, name) == 0)
                        return s->types[i].count;
        return 0;
}

static void see_ts(struct summary *s, uint64_t ts) {
        if (ts == 0)
                return;
        if (ts < s->ts_min)
                s->ts_min = ts;
        if (ts > s->ts_max)
                s->ts_max = ts;
}

static struct summary_task *task(struct summary *s, int32_t pid) {
        for (size_t i = 0; i < s->n_tasks; i++)
                if (s->tasks[i].pid == pid)
                        return &s->tasks[i];
        if (GREEDY_REALLOC_MIN(s->tasks, s->cap_tasks, s->n_tasks + 1, 256) < 0)
                return NULL;
        struct summary_task *t = &s->tasks[s->n_tasks++];
        *t = (struct summary_task) { .pid = pid };
        return t;
}

static void set_comm(struct summary *s, int32_t pid, const char *comm) {
        if (!comm || !comm[0])
                return;
        struct summary_task *t = task(s, pid);
        if (t)
                snprintf(t->comm, sizeof(t->comm), "%s", comm);
}

/* A name from a process tree entry at ts: a later entry (a profiler's,
 * after an exec) wins over an earlier one (the scan at the start),
 * whichever comes first in the file. */
static void tree_comm(struct summary *s, int32_t pid, const char *comm, uint64_t ts) {
        struct summary_task *t = comm && comm[0] ? task(s, pid) : NULL;
        if (t && (ts >= t->comm_ts || !t->comm[0])) {
                snprintf(t->comm, sizeof(t->comm), "%s", comm);
                t->comm_ts = ts;
        }
}

/* A waking on cpu (the CPU that recorded it: its current task woke pid). */
static void on_waking(struct summary *s, uint32_t cpu, uint64_t ts, int32_t pid, int32_t target_cpu) {
        if (cpu < SUMMARY_MAX_CPUS && !s->cpu_first_event[cpu])
                s->cpu_first_event[cpu] = ts;
        if (target_cpu < 0 || target_cpu >= SUMMARY_MAX_CPUS || pid <= 0)
                return;
        if (s->n_wakes == s->cap_wakes) {
                size_t cap = s->cap_wakes ? s->cap_wakes * 2 : 4096;
                struct summary_wake *w = cap <= SUMMARY_MAX_WAKES ? realloc(s->wakes, cap * sizeof(*w)) : NULL;
                if (!w) {
                        s->wakes_dropped++;
                        return;
                }
                s->wakes = w;
                s->cap_wakes = cap;
        }
        s->wakes[s->n_wakes++] = (struct summary_wake) { .ts = ts, .pid = pid, .cpu = (uint32_t) target_cpu };
}

static void add_runtime(struct summary *s, int32_t pid, uint64_t ns) {
        if (pid <= 0 || ns == 0)
                return;
        struct summary_task *t = task(s, pid);
        if (t)
                t->runtime_ns += ns;
}

static void add_gap(struct summary *s, uint32_t cpu, uint64_t start, uint64_t end, uint64_t first_own, int32_t pid) {
        if (GREEDY_REALLOC_MIN(s->gaps, s->cap_gaps, s->n_gaps + 1, 1024) < 0) {
                add_runtime(s, pid, end - start);
                return;
        }
        s->gaps[s->n_gaps++] = (struct summary_gap) {
                .start = start, .end = end, .first_own = first_own, .pid = pid, .cpu = cpu
        };
}

/* A context switch on cpu at ts from prev_pid (-1: not recorded, as in
 * compact sched) in prev_state to next_pid. The time since the CPU's
 * last switch goes to the task switched in then. When the task leaving
 * is not that one (or, in compact sched, idle was switched in but a task
 * that sleeps leaves), its switch in was not recorded: when it began to
 * run is found later, from its waking. */
static void on_switch(struct summary *s, uint32_t cpu, uint64_t ts, int32_t prev_pid, int64_t prev_state,
                      int32_t next_pid, const char *next_comm) {
        if (cpu >= SUMMARY_MAX_CPUS)
                return;
        s->sched_switches++;
        int32_t cur = s->cpu_cur_pid[cpu];
        uint64_t start = s->cpu_last_ts[cpu];
        if (start && ts >= start && cur >= 0) {
                bool missed_in = prev_pid >= 0 ? prev_pid != cur : (cur == 0 && prev_state > 0);
                if (!missed_in)
                        add_runtime(s, cur, ts - start);
                else
                        add_gap(s, cpu, start, ts,
                                s->cpu_first_event[cpu] >= start && s->cpu_first_event[cpu] ? s->cpu_first_event[cpu] : ts,
                                prev_pid);
        }
        s->cpu_first_event[cpu] = 0;
        s->cpu_cur_pid[cpu] = next_pid;
        s->cpu_last_ts[cpu] = ts;
        struct summary_task *n = task(s, next_pid);
        if (n) {
                n->switches_in++;
                if (next_comm && next_comm[0])
                        snprintf(n->comm, sizeof(n->comm), "%s", next_comm);
        }
}

static int by_cpu_ts(const void *a, const void *b) {
        const struct summary_wake *x = a, *y = b;
        if (x->cpu != y->cpu)
                return x->cpu < y->cpu ? -1 : 1;
        return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The gaps: the task ran from its last waking onto that CPU within the
 * gap; before it, the CPU was idle. */
static void resolve_gaps(struct summary *s) {
        if (s->n_wakes)
                qsort(s->wakes, s->n_wakes, sizeof(*s->wakes), by_cpu_ts);
        for (size_t i = 0; i < s->n_gaps; i++) {
                const struct summary_gap *g = &s->gaps[i];
                /* last waking with (cpu, ts) <= (g->cpu, g->end) */
                size_t lo = 0, hi = s->n_wakes;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        const struct summary_wake *w = &s->wakes[mid];
                        if (w->cpu < g->cpu || (w->cpu == g->cpu && w->ts <= g->end))
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                const struct summary_wake *found = NULL;
                for (size_t k = lo, scanned = 0; k-- > 0 && scanned < 64; scanned++) {
                        const struct summary_wake *w = &s->wakes[k];
                        if (w->cpu != g->cpu || w->ts < g->start)
                                break;
                        if (g->pid < 0 || w->pid == g->pid) {
                                found = w;
                                break;
                        }
                }
                if (found) {
                        s->gaps_from_waking++;
                        add_runtime(s, found->pid, g->end - found->ts);
                        s->gaps_upper_ns += g->end - found->ts;
                        s->gaps_lower_ns += g->end - (g->first_own > found->ts ? g->first_own : found->ts);
                } else if (g->pid > 0)
                        add_runtime(s, g->pid, g->end - g->start);
                else
                        s->gaps_unattributed_ns += g->end - g->start;
        }
}

/* The "ret" field of a syscalls/sys_exit_NAME event, else 0. */
static int64_t generic_ret(const Perfetto__Protos__GenericFtraceEvent *g) {
        for (size_t i = 0; i < g->n_field; i++)
                if (g->field[i]->name && strcmp(g->field[i]->name, "ret") == 0 &&
                    g->field[i]->value_case == PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_INT_VALUE)
                        return g->field[i]->int_value;
        return 0;
}

static void add_bundle(struct summary *s, const Perfetto__Protos__FtraceEventBundle *b) {
        uint32_t cpu = b->has_cpu ? b->cpu : 0;
        if (cpu < SUMMARY_MAX_CPUS && cpu + 1 > s->n_cpus)
                s->n_cpus = cpu + 1;
        if (b->has_lost_events && b->lost_events) {
                /* Switches are missing before this bundle: do not carry
                 * the CPU's last task across them. */
                s->lost_events = true;
                if (cpu < SUMMARY_MAX_CPUS)
                        s->cpu_cur_pid[cpu] = -1;
        }
        for (size_t i = 0; i < b->n_event; i++) {
                const Perfetto__Protos__FtraceEvent *e = b->event[i];
                s->ftrace_events++;
                if (cpu < SUMMARY_MAX_CPUS)
                        s->cpu_events[cpu]++;
                see_ts(s, e->timestamp);
                switch (e->event_case) {
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH:
                        set_comm(s, e->sched_switch->prev_pid, e->sched_switch->prev_comm);
                        on_switch(s, cpu, e->timestamp, e->sched_switch->has_prev_pid ? e->sched_switch->prev_pid : -1,
                                  e->sched_switch->has_prev_state ? e->sched_switch->prev_state : -1,
                                  e->sched_switch->next_pid, e->sched_switch->next_comm);
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING:
                        on_waking(s, cpu, e->timestamp, e->sched_waking->pid,
                                  e->sched_waking->has_target_cpu ? e->sched_waking->target_cpu : -1);
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT:
                        s->prints++;
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_NEWTASK:
                        set_comm(s, e->task_newtask->pid, e->task_newtask->comm);
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME:
                        set_comm(s, e->task_rename->pid, e->task_rename->newcomm);
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_ENTER:
                        syscall_stats_enter_nr(&s->syscalls, (int32_t) e->pid, e->timestamp, e->sys_enter->id);
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_EXIT:
                        syscall_stats_exit_nr(&s->syscalls, (int32_t) e->pid, e->timestamp, e->sys_exit->id,
                                              e->sys_exit->has_ret && e->sys_exit->ret < 0);
                        break;
                case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC:
                        syscall_stats_event(&s->syscalls, (int32_t) e->pid, e->timestamp, e->generic->event_name,
                                            generic_ret(e->generic));
                        break;
                default:
                        break;
                }
        }
        const Perfetto__Protos__FtraceEventBundle__CompactSched *c = b->compact_sched;
        if (c) {
                /* Switches and wakings are separate columns: walk both in
                 * time order. */
                uint64_t sw_ts = 0, wk_ts = 0;
                size_t i = 0, k = 0;
                if (c->n_switch_timestamp)
                        sw_ts = c->switch_timestamp[0];
                if (c->n_waking_timestamp)
                        wk_ts = c->waking_timestamp[0];
                while (i < c->n_switch_timestamp || k < c->n_waking_timestamp) {
                        s->ftrace_events++;
                        if (cpu < SUMMARY_MAX_CPUS)
                                s->cpu_events[cpu]++;
                        bool waking_first = k < c->n_waking_timestamp && (i >= c->n_switch_timestamp || wk_ts <= sw_ts);
                        if (waking_first) {
                                see_ts(s, wk_ts);
                                on_waking(s, cpu, wk_ts, k < c->n_waking_pid ? c->waking_pid[k] : -1,
                                          k < c->n_waking_target_cpu ? c->waking_target_cpu[k] : -1);
                                if (++k < c->n_waking_timestamp)
                                        wk_ts += c->waking_timestamp[k];
                                continue;
                        }
                        see_ts(s, sw_ts);
                        int32_t pid = i < c->n_switch_next_pid ? c->switch_next_pid[i] : -1;
                        const char *comm = NULL;
                        if (i < c->n_switch_next_comm_index && c->switch_next_comm_index[i] < c->n_intern_table)
                                comm = c->intern_table[c->switch_next_comm_index[i]];
                        on_switch(s, cpu, sw_ts, -1, i < c->n_switch_prev_state ? c->switch_prev_state[i] : -1, pid, comm);
                        if (++i < c->n_switch_timestamp)
                                sw_ts += c->switch_timestamp[i];
                }
        }
}

void summary_add_packet(struct summary *s, const uint8_t *data, size_t len) {
        s->packets++;
        s->bytes += len;
        Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, len, data);
        if (!p) {
                s->invalid_packets++;
                count_type(s, "undecodable");
                return;
        }
        if (p->has_timestamp)
                see_ts(s, p->timestamp);
        bool bpf_seq = false;
        if (p->optional_trusted_packet_sequence_id_case ==
            PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID) {
                uint32_t id = p->trusted_packet_sequence_id;
                size_t i;
                for (i = 0; i < s->n_seqs; i++)
                        if (s->seqs[i].id == id)
                                break;
                if (i == s->n_seqs && s->n_seqs < SUMMARY_MAX_SEQS)
                        s->seqs[s->n_seqs++].id = id;
                if (i < SUMMARY_MAX_SEQS) {
                        s->seqs[i].count++;
                        if (p->has_previous_packet_dropped && p->previous_packet_dropped && s->seqs[i].count > 1)
                                s->seqs[i].lost = true;
                        /* linux.bpf_stack's samples: its counters tell its walks. */
                        const Perfetto__Protos__TracePacketDefaults *d = p->trace_packet_defaults;
                        if (d && d->perf_sample_defaults && d->perf_sample_defaults->timebase &&
                            d->perf_sample_defaults->timebase->name)
                                s->seqs[i].bpf = stack_walks_bpf_timebase(d->perf_sample_defaults->timebase->name,
                                                                          strlen(d->perf_sample_defaults->timebase->name));
                        bpf_seq = s->seqs[i].bpf;
                }
        }
        if (p->has_previous_packet_dropped && p->previous_packet_dropped)
                s->packets_after_loss++;

        const char *type = "other";
        uint64_t ts = p->has_timestamp ? p->timestamp : 0;
        switch (p->data_case) {
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
                type = "ftrace_events";
                add_bundle(s, p->ftrace_events);
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE: {
                const Perfetto__Protos__PerfSample *ps = p->perf_sample;
                type = "perf_sample";
                if (ps->has_kernel_records_lost && ps->kernel_records_lost)
                        s->perf_lost += ps->kernel_records_lost;
                else if (ps->optional_sample_skipped_reason_case ==
                         PERFETTO__PROTOS__PERF_SAMPLE__OPTIONAL_SAMPLE_SKIPPED_REASON_SAMPLE_SKIPPED_REASON)
                        s->perf_skipped++;
                else {
                        bool err = ps->optional_unwind_error_case ==
                                           PERFETTO__PROTOS__PERF_SAMPLE__OPTIONAL_UNWIND_ERROR_UNWIND_ERROR &&
                                   ps->unwind_error != PERFETTO__PROTOS__PROFILING__STACK_UNWIND_ERROR__UNWIND_ERROR_NONE;
                        s->perf_samples++;
                        s->perf_stacks += ps->has_callstack_iid;
                        s->perf_unwind_errors += err;
                        if (ps->has_callstack_iid && !bpf_seq)
                                stack_walks_sample(&s->walks, ps->optional_unwind_error_case ==
                                                                              PERFETTO__PROTOS__PERF_SAMPLE__OPTIONAL_UNWIND_ERROR_UNWIND_ERROR
                                                                      ? (int64_t) ps->unwind_error
                                                                      : -1);
                        struct summary_proc *sp = ps->pid ? proc(s, (int32_t) ps->pid) : NULL;
                        if (sp) {
                                if (ts > sp->last_sample_ts)
                                        sp->last_sample_ts = ts;
                                sp->perf_samples++;
                                sp->perf_unwind_errors += err;
                        }
                }
                break;
        }
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROFILE_PACKET:
                type = "profile_packet";
                for (size_t i = 0; i < p->profile_packet->n_process_dumps; i++) {
                        const Perfetto__Protos__ProfilePacket__ProcessHeapSamples *d = p->profile_packet->process_dumps[i];
                        struct summary_proc *sp = d->has_pid && d->pid <= INT32_MAX ? proc(s, (int32_t) d->pid) : NULL;
                        s->heap_dumps++;
                        if (!sp)
                                continue;
                        /* Each dump gives the totals since the start (a
                         * continued packet repeats its header). */
                        sp->heap_dumps++;
                        if (d->stats) {
                                sp->heap_samples = MAX(sp->heap_samples, d->stats->heap_samples);
                                sp->heap_unwind_errors = MAX(sp->heap_unwind_errors, d->stats->unwinding_errors);
                        }
                        sp->heap_dropped = MAX(sp->heap_dropped, d->traced_samples_dropped);
                        sp->heap_overran |= d->buffer_overran ||
                                            d->client_error ==
                                                    PERFETTO__PROTOS__PROFILE_PACKET__PROCESS_HEAP_SAMPLES__CLIENT_ERROR__CLIENT_ERROR_HIT_TIMEOUT;
                        sp->heap_corrupted |= d->buffer_corrupted;
                }
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
                type = "process_tree";
                for (size_t i = 0; i < p->process_tree->n_processes; i++) {
                        const Perfetto__Protos__ProcessTree__Process *pr = p->process_tree->processes[i];
                        s->processes_in_tree++;
                        if (pr->n_cmdline > 0) {
                                char name[32];
                                summary_cmdline_name(pr->cmdline[0],
                                                     (pr->has_cmdline_is_comm && pr->cmdline_is_comm) ||
                                                             (pr->has_is_kthread && pr->is_kthread),
                                                     pr->has_ppid ? pr->ppid : -1, name, sizeof(name));
                                tree_comm(s, pr->pid, name, ts);
                                struct summary_proc *sp = proc(s, pr->pid);
                                if (sp)
                                        (void) name_history_add(&sp->names, ts, name);
                        }
                }
                for (size_t i = 0; i < p->process_tree->n_threads; i++) {
                        const Perfetto__Protos__ProcessTree__Thread *th = p->process_tree->threads[i];
                        tree_comm(s, th->tid, th->name, ts);
                        struct summary_task *t = task(s, th->tid);
                        if (t && th->has_tgid)
                                t->tgid = th->tgid;
                }
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_STATS:
                type = "process_stats";
                s->process_stats_samples++;
                if (p->has_timestamp) {
                        if (!s->ps_first_ts || p->timestamp < s->ps_first_ts)
                                s->ps_first_ts = p->timestamp;
                        if (p->timestamp > s->ps_last_ts)
                                s->ps_last_ts = p->timestamp;
                }
                for (size_t i = 0; i < p->process_stats->n_processes; i++) {
                        const Perfetto__Protos__ProcessStats__Process *pr = p->process_stats->processes[i];
                        struct summary_proc *sp = proc(s, pr->pid);
                        if (!sp)
                                continue;
                        if (pr->has_runtime_user_mode || pr->has_runtime_kernel_mode) {
                                uint64_t rt = pr->runtime_user_mode + pr->runtime_kernel_mode;
                                if (!sp->have_runtime)
                                        sp->runtime_first_ns = rt;
                                sp->runtime_last_ns = rt;
                                sp->have_runtime = true;
                        }
                        if (pr->has_vm_rss_kb)
                                sp->rss_kb = pr->vm_rss_kb;
                }
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_JOURNALD_EVENT:
                type = "journald_event";
                journald_counts_add(&s->journald, p->trusted_packet_sequence_id, p->journald_event);
                summary_add_journal_unit(s, p->journald_event);
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACED_SNAPSHOT:
                type = "traced_snapshot";
                summary_add_snapshot(s, p->traced_snapshot);
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_INODE_FILE_MAP:
                type = "inode_file_map";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT:
                type = "clock_snapshot";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG:
                type = "trace_config";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS: {
                type = "trace_stats";
                const Perfetto__Protos__TraceStats *st = p->trace_stats;
                s->have_stats = true;
                s->chunks_overwritten = s->chunks_discarded = s->abi_violations = s->patches_failed = 0;
                s->writer_packet_loss = 0;
                s->bytes_written = s->chunks_written = 0;
                for (size_t i = 0; i < st->n_buffer_stats; i++) {
                        s->chunks_overwritten += st->buffer_stats[i]->chunks_overwritten;
                        s->chunks_discarded += st->buffer_stats[i]->chunks_discarded;
                        s->abi_violations += st->buffer_stats[i]->abi_violations;
                        s->patches_failed += st->buffer_stats[i]->patches_failed;
                        s->writer_packet_loss += st->buffer_stats[i]->trace_writer_packet_loss;
                        s->bytes_written += st->buffer_stats[i]->bytes_written;
                        s->chunks_written += st->buffer_stats[i]->chunks_written;
                }
                s->stats_invalid_packets = st->invalid_packets;
                s->end_reason = st->has_traced_end_reason ? (int) st->traced_end_reason : 0;
                s->n_ds_errors_total = st->n_traced_data_source_errors;
                s->n_ds_errors = MIN(st->n_traced_data_source_errors, (size_t) SUMMARY_MAX_DS_ERRORS);
                for (size_t i = 0; i < s->n_ds_errors; i++)
                        ds_error_format(st->traced_data_source_errors[i], s->ds_errors[i], sizeof(s->ds_errors[i]));
                break;
        }
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYNCHRONIZATION_MARKER:
                type = "synchronization_marker";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO:
                type = "system_info";
                if (p->system_info->utsname) {
                        const Perfetto__Protos__Utsname *u = p->system_info->utsname;
                        snprintf(s->sysname, sizeof(s->sysname), "%s", u->sysname ? u->sysname : "");
                        snprintf(s->release, sizeof(s->release), "%s", u->release ? u->release : "");
                        snprintf(s->machine, sizeof(s->machine), "%s", u->machine ? u->machine : "");
                }
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS:
                type = "sys_stats";
                summary_add_sys_stats(s, p->sys_stats);
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO:
                type = "cpu_info";
                summary_add_cpu_info(s, p->cpu_info);
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_INTERRUPT_INFO:
                type = "interrupt_info";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT: {
                const Perfetto__Protos__TracingServiceEvent *e = p->service_event;
                type = "service_event";
                if (e->event_type_case == PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_STARTED &&
                    !s->tracing_started_ts)
                        s->tracing_started_ts = ts;
                else if (e->event_type_case ==
                                 PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_STARTED &&
                         !s->all_started_ts)
                        s->all_started_ts = ts;
                else if (e->event_type_case ==
                                 PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_SLOW_STARTING_DATA_SOURCES &&
                         e->slow_starting_data_sources)
                        s->slow_starting = (uint32_t) e->slow_starting_data_sources->n_data_source;
                break;
        }
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID:
                type = "trace_uuid";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING:
                type = "for_testing";
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS:
                type = "ftrace_stats";
                if (p->ftrace_stats->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE) {
                        s->kernel_overrun = 0;
                        for (size_t i = 0; i < p->ftrace_stats->n_cpu_stats; i++)
                                s->kernel_overrun += p->ftrace_stats->cpu_stats[i]->overrun;
                        s->have_kernel_stats = true;
                }
                for (size_t i = 0; i < p->ftrace_stats->n_cpu_stats; i++) {
                        const Perfetto__Protos__FtraceCpuStats *c = p->ftrace_stats->cpu_stats[i];
                        if (c->has_traced_reader && c->cpu < SUMMARY_MAX_CPUS)
                                s->cpu_reader[c->cpu] = (uint8_t) c->traced_reader;
                }
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR:
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT:
                type = p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT ? "track_event" : "track_descriptor";
                stack_walks_packet(&s->walks, data, len);
                break;
        case PERFETTO__PROTOS__TRACE_PACKET__DATA_COMPRESSED_PACKETS:
                type = "compressed_packets";
                break;
        default:
                break;
        }
        count_type(s, type);
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

static int by_runtime(const void *a, const void *b) {
        const struct summary_task *x = a, *y = b;
        if (x->runtime_ns != y->runtime_ns)
                return x->runtime_ns < y->runtime_ns ? 1 : -1;
        return x->pid - y->pid;
}

static uint64_t proc_cpu(const struct summary_proc *p) {
        return p->sched_ns ? p->sched_ns : p->runtime_last_ns - p->runtime_first_ns;
}

static int by_proc_cpu(const void *a, const void *b) {
        const struct summary_proc *x = a, *y = b;
        if (proc_cpu(x) != proc_cpu(y))
                return proc_cpu(x) < proc_cpu(y) ? 1 : -1;
        return x->pid - y->pid;
}

void summary_finish(struct summary *s) {
        resolve_gaps(s);
        /* A process is called what it was at its last sample (after an
         * exec; not what a later process of the same pid was). */
        for (size_t i = 0; i < s->n_procs; i++) {
                struct summary_proc *p = &s->procs[i];
                const char *n = p->perf_samples ? name_history_at(&p->names, p->last_sample_ts)
                                                : name_history_last(&p->names);
                if (n)
                        snprintf(p->name, sizeof(p->name), "%s", n);
        }
        /* Threads' scheduled time adds up to their process's. */
        for (size_t i = 0; i < s->n_tasks; i++) {
                const struct summary_task *t = &s->tasks[i];
                if (t->runtime_ns == 0 || t->pid == 0)
                        continue;
                struct summary_proc *p = proc(s, t->tgid > 0 ? t->tgid : t->pid);
                if (!p)
                        continue;
                p->sched_ns += t->runtime_ns;
                p->threads++;
                if (!p->name[0] && (t->tgid <= 0 || t->tgid == t->pid) && t->comm[0])
                        snprintf(p->name, sizeof(p->name), "%s", t->comm);
        }
        if (s->n_tasks)
                qsort(s->tasks, s->n_tasks, sizeof(*s->tasks), by_runtime);
        if (s->n_procs)
                qsort(s->procs, s->n_procs, sizeof(*s->procs), by_proc_cpu);
}

void summary_print(FILE *f, const struct summary *s, size_t top_n) {
        fprintf(f, "Packets:        %" PRIu64 " (%" PRIu64 " bytes)\n", s->packets, s->bytes);
        if (s->sysname[0])
                fprintf(f, "System:         %s %s %s\n", s->sysname, s->release, s->machine);
        if (s->ts_max >= s->ts_min && s->ts_min != UINT64_MAX)
                fprintf(f, "Time span:      %.3f s (boot time %.6f .. %.6f)\n", (double) (s->ts_max - s->ts_min) / 1e9,
                        (double) s->ts_min / 1e9, (double) s->ts_max / 1e9);
        summary_print_start(f, s);
        summary_print_snapshot(f, s);
        fprintf(f, "Packet types:\n");
        for (size_t i = 0; i < s->n_types; i++)
                fprintf(f, "  %-24s %" PRIu64 "\n", s->types[i].name, s->types[i].count);
        fprintf(f, "Sequences:      %zu", s->n_seqs);
        size_t lossy = 0;
        for (size_t i = 0; i < s->n_seqs; i++)
                lossy += s->seqs[i].lost;
        fprintf(f, " (%zu with data losses)\n", lossy);
        if (s->ftrace_events) {
                fprintf(f, "Ftrace events:  %" PRIu64 " (%" PRIu64 " sched_switch, %" PRIu64 " print)%s\n",
                        s->ftrace_events, s->sched_switches, s->prints, s->lost_events ? ", kernel reported lost events" : "");
                for (uint32_t c = 0; c < s->n_cpus; c++)
                        fprintf(f, "  cpu%-3u %" PRIu64 "%s\n", c, s->cpu_events[c],
                                s->cpu_reader[c] == 3   ? " (buffer spliced)"
                                : s->cpu_reader[c] == 2 ? " (buffer mapped)"
                                : s->cpu_reader[c] == 1 ? " (buffer read())"
                                                        : "");
        }
        if (s->perf_samples || s->perf_skipped || s->perf_lost)
                fprintf(f,
                        "Perf samples:   %" PRIu64 " (%" PRIu64 " with callstacks, %" PRIu64 " unwind errors), %" PRIu64
                        " skipped, %" PRIu64 " lost by the kernel\n",
                        s->perf_samples, s->perf_stacks, s->perf_unwind_errors, s->perf_skipped, s->perf_lost);
        /* The processes sampled most, with their unwind errors. */
        for (size_t shown = 0, last = SIZE_MAX; shown < top_n && s->perf_samples; shown++) {
                size_t best = SIZE_MAX;
                for (size_t i = 0; i < s->n_procs; i++) {
                        const struct summary_proc *sp = &s->procs[i];
                        if (!sp->perf_samples || (last != SIZE_MAX && (sp->perf_samples > s->procs[last].perf_samples ||
                                                                       (sp->perf_samples == s->procs[last].perf_samples &&
                                                                        i <= last))))
                                continue;
                        if (best == SIZE_MAX || sp->perf_samples > s->procs[best].perf_samples)
                                best = i;
                }
                if (best == SIZE_MAX)
                        break;
                fprintf(f, "  pid %-8d %-16s %8" PRIu64 " samples, %" PRIu64 " unwind errors\n", s->procs[best].pid,
                        s->procs[best].name[0] ? s->procs[best].name : "?", s->procs[best].perf_samples,
                        s->procs[best].perf_unwind_errors);
                last = best;
        }
        if (s->heap_dumps) {
                struct summary_heap h;
                summary_heap_totals(s, &h);
                fprintf(f, "Heap profiles:  %" PRIu64 " processes, %" PRIu64 " dumps: %" PRIu64 " samples (%" PRIu64
                           " unwind errors), %" PRIu64 " dropped for a full buffer%s%s\n",
                        h.processes, s->heap_dumps, h.samples, h.unwind_errors, h.dropped,
                        h.overran ? " (a larger shmem_size_bytes, or block_client, keeps them)" : "",
                        h.corrupted ? "; some buffers did not read: those profiles end early" : "");
                size_t shown = 0;
                for (size_t i = 0; i < s->n_procs && shown < top_n; i++) {
                        const struct summary_proc *sp = &s->procs[i];
                        if (!sp->heap_dumps)
                                continue;
                        fprintf(f, "  pid %-8d %-16s %8" PRIu64 " samples, %" PRIu64 " dropped, %" PRIu64 " dumps\n",
                                sp->pid, sp->name[0] ? sp->name : "?", sp->heap_samples, sp->heap_dropped,
                                sp->heap_dumps);
                        shown++;
                }
        }
        syscall_stats_print(f, &s->syscalls, s->machine, top_n);
        stack_walks_print(f, &s->walks, "");
        journald_counts_print(f, &s->journald);
        if (s->have_kernel_stats)
                fprintf(f, "Kernel buffer:  %" PRIu64 " events overwritten before they were read\n", s->kernel_overrun);
        if (s->processes_in_tree)
                fprintf(f, "Processes:      %u in the process tree\n", s->processes_in_tree);
        summary_print_sys(f, s);
        size_t shown = 0;
        for (size_t i = 0; i < s->n_tasks && shown < top_n; i++) {
                if (s->tasks[i].runtime_ns == 0)
                        break;
                if (shown == 0)
                        fprintf(f, "Top threads by CPU time:\n  %-8s %-20s %12s %10s\n", "tid", "name", "cpu ms", "switches");
                fprintf(f, "  %-8d %-20s %12.3f %10" PRIu64 "\n", s->tasks[i].pid,
                        s->tasks[i].comm[0] ? s->tasks[i].comm : "?", (double) s->tasks[i].runtime_ns / 1e6,
                        s->tasks[i].switches_in);
                shown++;
        }
        shown = 0;
        for (size_t i = 0; i < s->n_procs && shown < top_n; i++) {
                const struct summary_proc *p = &s->procs[i];
                if (proc_cpu(p) == 0)
                        break;
                if (!s->sched_switches) {
                        /* No scheduling events: only what /proc said (a
                         * perf-only trace with linux.process_stats). */
                        if (!p->have_runtime)
                                continue;
                        if (shown == 0)
                                fprintf(f, "Top processes by CPU time (\"/proc cpu ms\": the kernel's count between the first\n"
                                           "  and last process stats, %.3f s apart, in clock ticks; no sched_switch recorded):\n"
                                           "  %-8s %-20s %14s %10s\n",
                                        (double) (s->ps_last_ts - s->ps_first_ts) / 1e9, "pid", "name", "/proc cpu ms", "rss MB");
                        fprintf(f, "  %-8d %-20s %14.3f %10.1f\n", p->pid, p->name[0] ? p->name : "?",
                                (double) (p->runtime_last_ns - p->runtime_first_ns) / 1e6, (double) p->rss_kb / 1024.0);
                        shown++;
                        continue;
                }
                if (shown == 0) {
                        fprintf(f, "Top processes by CPU time (\"cpu ms\": scheduled, from sched_switch, over %.3f s",
                                s->ts_max > s->ts_min && s->ts_min != UINT64_MAX ? (double) (s->ts_max - s->ts_min) / 1e9 : 0.0);
                        if (s->process_stats_samples)
                                fprintf(f, ";\n  \"/proc cpu ms\": the kernel's count between the first and last process\n"
                                           "  stats, %.3f s apart, in clock ticks",
                                        (double) (s->ps_last_ts - s->ps_first_ts) / 1e9);
                        fprintf(f, "):\n  %-8s %-20s %12s %8s %14s %10s\n", "pid", "name", "cpu ms", "threads",
                                "/proc cpu ms", "rss MB");
                }
                fprintf(f, "  %-8d %-20s %12.3f %8u", p->pid, p->name[0] ? p->name : "?", (double) p->sched_ns / 1e6,
                        p->threads);
                if (p->have_runtime)
                        fprintf(f, " %14.3f %10.1f", (double) (p->runtime_last_ns - p->runtime_first_ns) / 1e6,
                                (double) p->rss_kb / 1024.0);
                fputc('\n', f);
                shown++;
        }
        if (s->n_gaps)
                fprintf(f,
                        "Scheduling:     %zu switches out had no switch in recorded (the kernel leaves out some\n"
                        "                switches from idle to a woken task); %" PRIu64 " were timed from the task's\n"
                        "                waking: %.3f ms counted (an upper bound: the wakeup latency is in it;\n"
                        "                %.3f ms of it came after the next event on that CPU); %.3f ms stayed\n"
                        "                unattributed%s\n",
                        s->n_gaps, s->gaps_from_waking, (double) s->gaps_upper_ns / 1e6, (double) s->gaps_lower_ns / 1e6,
                        (double) s->gaps_unattributed_ns / 1e6,
                        s->wakes_dropped ? " (too many wakings to keep them all)" : "");
        if (shown && (s->lost_events || (s->have_kernel_stats && s->kernel_overrun)))
                fprintf(f, "Note:           the kernel lost scheduling events: CPU time across them is not counted,\n"
                           "                so \"cpu ms\" is below the kernel's own accounting (\"/proc cpu ms\")\n");
        summary_print_session(f, s);
        if (s->invalid_packets)
                fprintf(f, "Undecodable:    %" PRIu64 " packets\n", s->invalid_packets);
}
