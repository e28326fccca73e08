/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "record-ended.h"
#include "summary-json.h"

/* json-c's objects: each add takes the reference; NULL values (out of
 * memory) are checked once, at the end, by the failed flag. */
struct jw {
        bool failed;
};

static json_object *obj(struct jw *w) {
        json_object *o = json_object_new_object();
        w->failed |= !o;
        return o;
}

static void put(struct jw *w, json_object *o, const char *key, json_object *v) {
        if (!o || !v || json_object_object_add(o, key, v) < 0) {
                w->failed = true;
                json_object_put(v);
        }
}

/* null when there is no such figure in the trace (have false). */
static void put_opt(struct jw *w, json_object *o, const char *key, bool have, json_object *v) {
        if (have)
                put(w, o, key, v);
        else if (!o || json_object_object_add(o, key, NULL) < 0)
                w->failed = true;
}

static void put_u64(struct jw *w, json_object *o, const char *key, uint64_t v) {
        put(w, o, key, json_object_new_uint64(v));
}

static void put_str(struct jw *w, json_object *o, const char *key, const char *v) {
        put(w, o, key, json_object_new_string(v));
}

static void push(struct jw *w, json_object *a, json_object *v) {
        if (!a || !v || json_object_array_add(a, v) < 0) {
                w->failed = true;
                json_object_put(v);
        }
}

static uint64_t proc_cpu_ns(const struct summary_proc *p) {
        return p->sched_ns ? p->sched_ns : p->runtime_last_ns - p->runtime_first_ns;
}

static json_object *ftrace(struct jw *w, const struct summary *s) {
        json_object *o = obj(w), *cpus = json_object_new_array();
        put_u64(w, o, "events", s->ftrace_events);
        put_u64(w, o, "sched_switch", s->sched_switches);
        put_u64(w, o, "print", s->prints);
        put(w, o, "lost_events", json_object_new_boolean(s->lost_events));
        put_opt(w, o, "kernel_overrun", s->have_kernel_stats,
                s->have_kernel_stats ? json_object_new_uint64(s->kernel_overrun) : NULL);
        for (uint32_t c = 0; c < s->n_cpus; c++)
                push(w, cpus, json_object_new_uint64(s->cpu_events[c]));
        put(w, o, "events_per_cpu", cpus);
        return o;
}

static json_object *perf(struct jw *w, const struct summary *s, size_t top_n) {
        json_object *o = obj(w), *procs = json_object_new_array();
        put_u64(w, o, "samples", s->perf_samples);
        put_u64(w, o, "with_callstack", s->perf_stacks);
        put_u64(w, o, "unwind_errors", s->perf_unwind_errors);
        put_u64(w, o, "skipped", s->perf_skipped);
        put_u64(w, o, "lost", s->perf_lost);
        /* The processes sampled most, as the text shows them. */
        for (size_t shown = 0, last = SIZE_MAX; shown < top_n; shown++) {
                size_t best = SIZE_MAX;
                for (size_t i = 0; i < s->n_procs; i++) {
                        const struct summary_proc *sp = &s->procs[i];
                        if (!sp->perf_samples ||
                            (last != SIZE_MAX && (sp->perf_samples > s->procs[last].perf_samples ||
                                                  (sp->perf_samples == s->procs[last].perf_samples && i <= last))))
                                continue;
                        if (best == SIZE_MAX || sp->perf_samples > s->procs[best].perf_samples)
                                best = i;
                }
                if (best == SIZE_MAX)
                        break;
                json_object *p = obj(w);
                put(w, p, "pid", json_object_new_int(s->procs[best].pid));
                put_str(w, p, "name", s->procs[best].name);
                put_u64(w, p, "samples", s->procs[best].perf_samples);
                put_u64(w, p, "unwind_errors", s->procs[best].perf_unwind_errors);
                push(w, procs, p);
                last = best;
        }
        put(w, o, "processes", procs);
        return o;
}

static json_object *heap(struct jw *w, const struct summary *s, size_t top_n) {
        json_object *o = obj(w), *procs = json_object_new_array();
        struct summary_heap h;
        summary_heap_totals(s, &h);
        put_u64(w, o, "dumps", s->heap_dumps);
        put_u64(w, o, "processes", h.processes);
        put_u64(w, o, "samples", h.samples);
        put_u64(w, o, "unwind_errors", h.unwind_errors);
        put_u64(w, o, "dropped", h.dropped);
        put_u64(w, o, "overran", h.overran);
        put_u64(w, o, "corrupted", h.corrupted);
        size_t shown = 0;
        for (size_t i = 0; i < s->n_procs && shown < top_n; i++) {
                const struct summary_proc *sp = &s->procs[i];
                if (!sp->heap_dumps)
                        continue;
                json_object *p = obj(w);
                put(w, p, "pid", json_object_new_int(sp->pid));
                put_str(w, p, "name", sp->name);
                put_u64(w, p, "dumps", sp->heap_dumps);
                put_u64(w, p, "samples", sp->heap_samples);
                put_u64(w, p, "dropped", sp->heap_dropped);
                push(w, procs, p);
                shown++;
        }
        put(w, o, "processes_profiled", procs);
        return o;
}

static json_object *walks(struct jw *w, const struct stack_walks *sw) {
        static const char *const keys[_WALK_MAX] = {
                [WALK_WHOLE] = "whole", [WALK_FRAME_POINTERS] = "frame_pointers",
                [WALK_CUT_DEPTH] = "cut_max_depth", [WALK_CUT_NO_MAPPING] = "cut_outside_files_with_tables",
                [WALK_CUT_NO_CFI] = "cut_no_unwind_info", [WALK_CUT_UNSUPPORTED] = "cut_unsupported_rule",
                [WALK_CUT_READ_FAULT] = "cut_unreadable_frame", [WALK_CUT_BAD_FRAME] = "cut_bad_frame",
        };
        json_object *o = obj(w);
        put_u64(w, o, "total", stack_walks_total(sw));
        put_u64(w, o, "cut", stack_walks_cut(sw));
        for (size_t k = 0; k < _WALK_MAX; k++)
                put_u64(w, o, keys[k], sw->count[k] > 0 ? (uint64_t) sw->count[k] : 0);
        /* The other profilers' samples, by unwind error. */
        put_u64(w, o, "sampled", stack_walks_sampled(sw));
        put_u64(w, o, "sampled_cut", stack_walks_sampled_cut(sw));
        json_object *by = obj(w);
        for (size_t k = 0; k < STACK_WALKS_ERRORS; k++)
                if (k != 1 && sw->sampled[k] && stack_walks_error_key(k))
                        put_u64(w, by, stack_walks_error_key(k), sw->sampled[k]);
        put(w, o, "sampled_cut_by", by);
        return o;
}

static json_object *syscalls(struct jw *w, const struct summary *s, size_t top_n) {
        json_object *a = json_object_new_array();
        size_t *order, n = syscall_stats_sorted(&s->syscalls, &order);
        for (size_t k = 0; k < n && k < top_n; k++) {
                const struct syscall_stat *st = &s->syscalls.v[order[k]];
                char buf[48];
                json_object *o = obj(w);
                put_str(w, o, "name", syscall_stats_name(&s->syscalls, order[k], s->machine, buf, sizeof(buf)));
                put_u64(w, o, "calls", st->calls);
                put_u64(w, o, "errors", st->errors);
                put(w, o, "total_ms", json_object_new_double((double) st->total_ns / 1e6));
                put(w, o, "max_us", json_object_new_double((double) st->max_ns / 1e3));
                push(w, a, o);
        }
        w->failed |= !order;
        free(order);
        return a;
}

static json_object *threads(struct jw *w, const struct summary *s, size_t top_n) {
        json_object *a = json_object_new_array();
        for (size_t i = 0; i < s->n_tasks && i < top_n && s->tasks[i].runtime_ns; i++) {
                json_object *t = obj(w);
                put(w, t, "tid", json_object_new_int(s->tasks[i].pid));
                put_str(w, t, "name", s->tasks[i].comm);
                put(w, t, "cpu_ms", json_object_new_double((double) s->tasks[i].runtime_ns / 1e6));
                put_u64(w, t, "switches", s->tasks[i].switches_in);
                push(w, a, t);
        }
        return a;
}

static json_object *processes(struct jw *w, const struct summary *s, size_t top_n) {
        json_object *a = json_object_new_array();
        for (size_t i = 0, shown = 0; i < s->n_procs && shown < top_n; i++) {
                const struct summary_proc *p = &s->procs[i];
                if (proc_cpu_ns(p) == 0)
                        break;
                if (!s->sched_switches && !p->have_runtime)
                        continue;
                json_object *o = obj(w);
                put(w, o, "pid", json_object_new_int(p->pid));
                put_str(w, o, "name", p->name);
                /* Scheduled time needs sched_switch; /proc's needs linux.process_stats. */
                bool sched = s->sched_switches > 0;
                put_opt(w, o, "cpu_ms", sched, sched ? json_object_new_double((double) p->sched_ns / 1e6) : NULL);
                put_opt(w, o, "threads", sched, sched ? json_object_new_int((int32_t) p->threads) : NULL);
                double proc_ms = (double) (p->runtime_last_ns - p->runtime_first_ns) / 1e6;
                put_opt(w, o, "proc_cpu_ms", p->have_runtime, p->have_runtime ? json_object_new_double(proc_ms) : NULL);
                put_opt(w, o, "rss_kb", p->have_runtime, p->have_runtime ? json_object_new_uint64(p->rss_kb) : NULL);
                push(w, a, o);
                shown++;
        }
        return a;
}

static json_object *journal(struct jw *w, const struct journald_counts *c) {
        json_object *o = obj(w), *prio = obj(w);
        uint64_t total, failed;
        put_u64(w, o, "entries", c->entries);
        for (unsigned p = 0; p < 8; p++)
                put_u64(w, prio, journald_prio_name(p), c->by_prio[p]);
        put(w, o, "by_priority", prio);
        put_u64(w, o, "no_priority", c->no_prio);
        put_u64(w, o, "notes", c->notes);
        journald_counts_totals(c, &total, &failed);
        put_opt(w, o, "counted_written", c->n_stats > 0, c->n_stats ? json_object_new_uint64(total) : NULL);
        put_opt(w, o, "counted_failed", c->n_stats > 0, c->n_stats ? json_object_new_uint64(failed) : NULL);
        return o;
}

static json_object *system_counters(struct jw *w, const struct summary_sys *y) {
        json_object *o = obj(w);
        put_u64(w, o, "samples", y->packets);
        put_u64(w, o, "meminfo", y->meminfo);
        put_u64(w, o, "vmstat", y->vmstat);
        put_u64(w, o, "cpu_times", y->cpu_times);
        put_u64(w, o, "cpufreq", y->cpufreq);
        put_u64(w, o, "other", y->other);
        put_opt(w, o, "mem_free_min_kb", y->have_mem_free,
                y->have_mem_free ? json_object_new_uint64(y->mem_free_min_kb) : NULL);
        put_opt(w, o, "mem_free_max_kb", y->have_mem_free,
                y->have_mem_free ? json_object_new_uint64(y->mem_free_max_kb) : NULL);
        return o;
}

static json_object *started(struct jw *w, const struct summary *s) {
        json_object *o = obj(w);
        bool all = s->all_started_ts >= s->tracing_started_ts;
        put_u64(w, o, "tracing_started_ns", s->tracing_started_ts);
        put_opt(w, o, "all_data_sources_started_ns", all, all ? json_object_new_uint64(s->all_started_ts) : NULL);
        put_opt(w, o, "delay_ms", all,
                all ? json_object_new_double((double) (s->all_started_ts - s->tracing_started_ts) / 1e6) : NULL);
        put_u64(w, o, "slow_starting_data_sources", s->slow_starting);
        return o;
}

/* Whether the trace holds everything the session recorded: read to its
 * end, nothing reported as not recorded, nothing lost on the way. */
static bool whole(const struct summary *s, bool complete, size_t lossy) {
        return complete && s->n_ds_errors_total == 0 && lossy == 0 && s->chunks_overwritten == 0 &&
               s->chunks_discarded == 0 && !s->lost_events && !(s->have_kernel_stats && s->kernel_overrun) &&
               s->perf_lost == 0 && s->invalid_packets == 0;
}

int summary_print_json(FILE *f, const struct summary *s, const char *path, uint64_t file_bytes,
                       uint64_t readable_bytes, bool complete, size_t top_n) {
        struct jw w = {};
        json_object *root = obj(&w), *types = obj(&w);
        put_str(&w, root, "file", path);
        put_u64(&w, root, "file_bytes", file_bytes);
        put_u64(&w, root, "readable_bytes", readable_bytes);
        put(&w, root, "complete", json_object_new_boolean(complete));
        put_u64(&w, root, "packets", s->packets);
        put_u64(&w, root, "bytes", s->bytes);
        put_u64(&w, root, "undecodable_packets", s->invalid_packets);
        json_object *sys = s->sysname[0] ? obj(&w) : NULL;
        if (sys) {
                put_str(&w, sys, "sysname", s->sysname);
                put_str(&w, sys, "release", s->release);
                put_str(&w, sys, "machine", s->machine);
        }
        put_opt(&w, root, "system", sys != NULL, sys);
        bool span = s->ts_max >= s->ts_min && s->ts_min != UINT64_MAX;
        put_opt(&w, root, "first_ts_ns", span, span ? json_object_new_uint64(s->ts_min) : NULL);
        put_opt(&w, root, "last_ts_ns", span, span ? json_object_new_uint64(s->ts_max) : NULL);
        for (size_t i = 0; i < s->n_types; i++)
                put_u64(&w, types, s->types[i].name, s->types[i].count);
        put(&w, root, "packet_types", types);
        size_t lossy = 0;
        for (size_t i = 0; i < s->n_seqs; i++)
                lossy += s->seqs[i].lost;
        put_u64(&w, root, "sequences", s->n_seqs);
        put_u64(&w, root, "sequences_with_data_losses", lossy);
        put(&w, root, "whole", json_object_new_boolean(whole(s, complete, lossy)));
        put_opt(&w, root, "started", s->tracing_started_ts != 0, s->tracing_started_ts ? started(&w, s) : NULL);
        put_opt(&w, root, "ftrace", s->ftrace_events > 0, s->ftrace_events ? ftrace(&w, s) : NULL);
        bool have_perf = s->perf_samples || s->perf_skipped || s->perf_lost;
        put_opt(&w, root, "perf", have_perf, have_perf ? perf(&w, s, top_n) : NULL);
        put_opt(&w, root, "heap", s->heap_dumps > 0, s->heap_dumps ? heap(&w, s, top_n) : NULL);
        bool any_walks = s->walks.seen || stack_walks_sampled(&s->walks);
        put_opt(&w, root, "stack_walks", any_walks, any_walks ? walks(&w, &s->walks) : NULL);
        bool have_syscalls = s->syscalls.calls > 0;
        put_opt(&w, root, "syscalls", have_syscalls, have_syscalls ? syscalls(&w, s, top_n) : NULL);
        const struct journald_counts *jc = &s->journald;
        bool have_journal = jc->entries || jc->notes || jc->n_stats;
        put_opt(&w, root, "journal", have_journal, have_journal ? journal(&w, jc) : NULL);
        put_opt(&w, root, "system_counters", s->sys.packets > 0, s->sys.packets ? system_counters(&w, &s->sys) : NULL);
        json_object *cpus = s->sys.cpus ? obj(&w) : NULL;
        if (cpus) {
                put_u64(&w, cpus, "count", s->sys.cpus);
                put_str(&w, cpus, "name", s->sys.cpu_name);
        }
        put_opt(&w, root, "cpus", cpus != NULL, cpus);
        put_u64(&w, root, "processes_in_tree", s->processes_in_tree);
        put(&w, root, "top_threads", threads(&w, s, top_n));
        put(&w, root, "top_processes", processes(&w, s, top_n));
        json_object *st = s->have_stats ? obj(&w) : NULL;
        if (st) {
                put_u64(&w, st, "chunks_written", s->chunks_written);
                put_u64(&w, st, "bytes_written", s->bytes_written);
                put_u64(&w, st, "chunks_overwritten", s->chunks_overwritten);
                put_u64(&w, st, "chunks_discarded", s->chunks_discarded);
                put_u64(&w, st, "invalid_packets", s->stats_invalid_packets);
                put_u64(&w, st, "abi_violations", s->abi_violations);
                put_u64(&w, st, "writer_packet_loss", s->writer_packet_loss);
                put_opt(&w, st, "ended_early", s->end_reason != 0,
                        s->end_reason ? json_object_new_string(trace_end_reason_name(s->end_reason)) : NULL);
        }
        put_opt(&w, root, "service_stats", st != NULL, st);
        /* What the text calls "Not recorded": the data source errors. */
        json_object *errors = json_object_new_array();
        for (size_t i = 0; i < s->n_ds_errors; i++)
                push(&w, errors, json_object_new_string(s->ds_errors[i]));
        put(&w, root, "not_recorded", errors);
        put_u64(&w, root, "not_recorded_total", s->n_ds_errors_total);
        int r = 0;
        const char *text =
                w.failed ? NULL : json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                r = -ENOMEM;
        else
                fprintf(f, "%s\n", text);
        json_object_put(root);
        return r;
}
