/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf's CPython frames (callstack_sampling.traced_python_frames).
 *
 * The worker looks at a process when it first unwinds a sample of it (or
 * at the start, when its executable is a CPython), with the same code as
 * linux.bpf_stack (lib/profiling/pyframes-proc.h); a CPython of a known
 * layout goes into the session's table of Python processes. The loop
 * thread, as it drains the rings, reads the Python frames of each sample
 * of a thread of such a process out of its memory
 * (lib/profiling/pyframes-walk.h, checked against the sample's copy of
 * the stack) and queues them after the record; the worker puts them in
 * place of the evaluation frames when the native stack has as many
 * evaluation frames as the walk checked, and otherwise leaves the stack
 * native and counts why. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "basic/prefault.h"
#include "bpfstack/bpfstack.h"
#include "perf-session.h"
#include "perfpy.h"
#include "profiling/pyframes-stack.h"
#include "profiling/unwind.h"

/* A process's state, the worker's (s->py_states, by pid). */
struct perf_py {
        uint32_t generation, maps_version;
        struct py_proc *pp;
        bool published; /* in the loop thread's table */
};

/* ---- the table the loop thread reads ---- */

static void table_set(struct perf_session *s, int pid, const struct py_proc_info *in) {
        pthread_mutex_lock(&s->py_mu);
        size_t free_slot = PERF_PY_PIDS;
        for (size_t k = 0; k < PERF_PY_PIDS; k++) {
                if (s->py_pids[k].pid == pid) {
                        free_slot = k;
                        break;
                }
                if (!s->py_pids[k].pid && free_slot == PERF_PY_PIDS)
                        free_slot = k;
        }
        if (free_slot < PERF_PY_PIDS) {
                bool had = s->py_pids[free_slot].pid == pid;
                if (in) {
                        s->py_pids[free_slot] = (struct perf_py_pid){
                                .pid = pid, .runtime = in->runtime, .layout = in->layout};
                        s->py_n += !had;
                } else if (had) {
                        s->py_pids[free_slot] = (struct perf_py_pid){0};
                        s->py_n--;
                }
        }
        atomic_store(&s->py_any, s->py_n > 0);
        pthread_mutex_unlock(&s->py_mu);
        /* The BPF program's own table (a process it no longer finds there
         * is one whose samples stay native). */
        if (s->py_bpf && perf_pybpf_set(s->py_bpf, pid, in) < 0)
                s->py_bpf_set_errors++;
}

static bool table_get(struct perf_session *s, int pid, struct perf_py_pid *ret) {
        bool found = false;
        pthread_mutex_lock(&s->py_mu);
        for (size_t k = 0; k < PERF_PY_PIDS && !found; k++)
                if (s->py_pids[k].pid == pid) {
                        *ret = s->py_pids[k];
                        found = true;
                }
        pthread_mutex_unlock(&s->py_mu);
        return found;
}

/* Worker: what it found in a process, for the loop thread to say. */
static void note_process(struct perf_session *s, int pid, const struct py_proc_info *in) {
        pthread_mutex_lock(&s->py_mu);
        if (s->py_n_notes < PERF_PY_NOTES) {
                struct perf_py_note *n = &s->py_notes[s->py_n_notes++];
                *n = (struct perf_py_note){.pid = pid, .kind = (uint8_t) in->kind, .major = in->major,
                                           .minor = in->minor, .runtime = in->runtime, .code_type = in->code_type != 0};
                snprintf(n->path, sizeof(n->path), "%s", in->path ? in->path : "?");
        } else
                s->py_notes_lost++;
        pthread_mutex_unlock(&s->py_mu);
}

void perf_py_log(struct perf_session *s) {
        struct perf_py_note notes[PERF_PY_NOTES];
        size_t n, lost;
        pthread_mutex_lock(&s->py_mu);
        n = s->py_n_notes;
        lost = s->py_notes_lost;
        memcpy(notes, s->py_notes, n * sizeof(notes[0]));
        s->py_n_notes = s->py_notes_lost = 0;
        pthread_mutex_unlock(&s->py_mu);
        unsigned long long id = (unsigned long long) s->inst.id;
        for (size_t k = 0; k < n; k++) {
                const struct perf_py_note *x = &notes[k];
                if (x->kind == PY_KNOWN)
                        plugin_log(s->pl, TRACED_LOG_DEBUG,
                                   "linux.perf instance %llu: pid %d runs CPython %u.%u (%s): _PyRuntime at 0x%llx, "
                                   "code objects %s",
                                   id, x->pid, x->major, x->minor, x->path, (unsigned long long) x->runtime,
                                   x->code_type ? "checked against PyCode_Type" : "not checked");
                else if (x->kind == PY_UNKNOWN)
                        plugin_log(s->pl, TRACED_LOG_INFO,
                                   "linux.perf instance %llu: pid %d runs CPython %u.%u (%s), whose layout is not "
                                   "known: its stacks stay native",
                                   id, x->pid, x->major, x->minor, x->path);
                else
                        plugin_log(s->pl, TRACED_LOG_INFO,
                                   "linux.perf instance %llu: pid %d maps %s but no _PyRuntime was found in its "
                                   "CPython files: its stacks stay native",
                                   id, x->pid, x->path);
        }
        if (lost)
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.perf instance %llu: %zu more CPython processes looked at (counted at the stop)", id,
                           lost);
}

/* ---- the loop thread: the frames read as the ring is drained ---- */

/* The item it with the trailer t and its frames after its record (it
 * may move: the item returned replaces it; it, unchanged, when out of
 * memory). */
static struct perf_item *with_trailer(struct perf_queue *q, struct perf_item *it, const struct perf_py_trailer *t,
                                      const uint64_t *frames) {
        size_t extra = sizeof(*t) + 2 * (size_t) t->n * sizeof(uint64_t);
        size_t need = sizeof(*it) + PERF_ITEM_EXTRA(it->len) + extra;
        /* The drain made room for a few frames (PERF_PY_ROOM): most items
         * are not copied again here. */
        struct perf_item *grown = perf_queue_item_grow(q, it, need);
        if (!grown)
                return it;
        uint8_t *at = grown->rec + PERF_ITEM_EXTRA(grown->len);
        memcpy(at, t, sizeof(*t));
        memcpy(at + sizeof(*t), frames, 2 * (size_t) t->n * sizeof(uint64_t));
        grown->extra = (uint32_t) extra;
        return grown;
}

void perf_py_take_record(struct perf_session *s, struct cpu_ring *ring, const uint8_t *rec, size_t len) {
        struct perf_record r;
        struct perf_pyrec h;
        s->py_bpf_records++;
        if (!ring->py_pending && !(ring->py_pending = calloc(1, sizeof(*ring->py_pending))))
                return;
        struct perf_py_pending *p = ring->py_pending;
        p->valid = false;
        if (perf_record_parse(rec, len, &s->py_layout, &r) < 0 || r.kind != PERF_REC_SAMPLE ||
            r.u.sample.raw_size < sizeof(h)) {
                s->bad_records++;
                return;
        }
        memcpy(&h, r.u.sample.raw, sizeof(h));
        if (h.magic != PERF_PYREC_MAGIC || h.n > PY_WALK_MAX_FRAMES ||
            r.u.sample.raw_size - sizeof(h) < 2 * (size_t) h.n * sizeof(uint64_t)) {
                s->bad_records++;
                return;
        }
        p->tid = h.tid;
        p->stop = h.stop;
        p->n = h.n;
        memcpy(p->frames, r.u.sample.raw + sizeof(h), 2 * (size_t) h.n * sizeof(uint64_t));
        p->valid = true;
}

struct perf_item *perf_py_attach(struct perf_session *s, struct cpu_ring *ring, struct perf_item *it,
                                 const struct perf_record *r) {
        const struct perf_sample_view *sv = &r->u.sample;
        if (s->py_bpf) {
                struct perf_py_pending *p = ring->py_pending;
                if (!p || !p->valid || p->tid != sv->tid)
                        return it;
                p->valid = false;
                struct perf_py_trailer t = {.n = p->stop == BPFSTACK_PY_END || p->stop == BPFSTACK_PY_DEPTH ? p->n : 0};
                t.result = t.n                              ? PY_WALK_OK
                           : p->stop == BPFSTACK_PY_FAULT ? PY_WALK_FAULT
                                                          : PY_WALK_NO_THREAD;
                for (uint32_t k = 0; k < t.n; k++)
                        t.entries += (p->frames[2 * k] & PY_WALK_ENTRY) != 0;
                return with_trailer(&s->q, it, &t, p->frames);
        }
        struct perf_py_pid e;
        if (!s->cfg.python_frames || !atomic_load(&s->py_any) || sv->pid <= 0 || !table_get(s, (int) sv->pid, &e))
                return it;
        const uint8_t *stack = NULL;
        uint64_t sp = 0;
        if (s->cfg.user_frames == PERF_UNWIND_DWARF) {
                if (sv->regs_abi == PERF_SAMPLE_REGS_ABI_NONE || !sv->stack_size)
                        return it;
                uint64_t regs[UREG_COUNT];
                unwind_regs_from_perf(sv->regs, regs);
                stack = sv->stack;
                sp = regs[UREG_SP];
        }
        if (!s->py_walk && !(s->py_walk = calloc(1, sizeof(*s->py_walk))))
                return it;
        struct py_walk *w = s->py_walk;
        int pid = (int) sv->pid;
        w->process = (uint64_t) pid;
        w->readv = py_readv_process;
        enum py_walk_result res =
                py_walk(e.layout, py_read_process, &pid, e.runtime, sv->tid, stack, sv->stack_size, sp, w);
        s->py_reads += w->reads;
        struct perf_py_trailer t = {
                .result = (uint8_t) res, .n = res == PY_WALK_OK ? w->n : 0, .entries = w->entries,
                .checked = w->checked, .has_copy = w->has_copy};
        return with_trailer(&s->q, it, &t, w->frames);
}

static void on_py_timer(void *userdata) {
        struct perf_session *s = userdata;
        s->hold_items = PERF_PY_HOLD_ITEMS;
        perf_drain_all(s);
        s->hold_items = 0;
}

/* Whether every ring holds 8 times what its CPU writes in a period of
 * the drains for the Python frames (at the configured frequency, each
 * sample with a whole stack copy): then those drains alone keep up. */
static bool rings_outlast(const struct perf_session *s, uint32_t period_ms) {
        const struct perf_event_attr *a = &s->cfg.attr;
        if (!a->freq)
                return false;
        uint64_t per_sample = (uint64_t) a->sample_stack_user + 1024u;
        uint64_t per_period = a->sample_freq * period_ms / 1000u + 1u;
        for (size_t k = 0; k < s->n_rings; k++)
                if (s->rings[k].base && s->rings[k].data_size < 8u * per_period * per_sample)
                        return false;
        return true;
}

/* A ring wakes the loop each time its watermark's worth is written,
 * however much of it was read: with drains every few milliseconds those
 * wake-ups only cost, and the rings' fds leave the loop while the drains
 * run (a ring that opens meanwhile, after a CPU came back, is the
 * exception until they stop). */
static void rings_listen(struct perf_session *s, bool on) {
        for (size_t k = 0; k < s->n_rings; k++) {
                struct cpu_ring *ring = &s->rings[k];
                if (on && !ring->src && ring->base && ring->fd >= 0)
                        (void) s->pl->api->add_fd(s->pl->host, ring->fd, EPOLLIN, perf_on_ring, ring, &ring->src);
                else if (!on && ring->src) {
                        s->pl->api->remove_source(s->pl->host, ring->src);
                        ring->src = NULL;
                }
        }
        s->rings_quiet = !on;
}

/* While the table holds a process, the rings are drained every
 * PERF_PY_DRAIN_MS (PERF_PY_DRAIN_SLOW_MS at low rates) as well: the
 * Python frames read are those of a moment at most that long after the
 * sample (besides the time the drain takes). */
void perf_py_timer_check(struct perf_session *s) {
        const struct perf_event_attr *a = &s->cfg.attr;
        uint32_t period = a->freq && a->sample_freq >= PERF_PY_DRAIN_FAST_HZ ? PERF_PY_DRAIN_MS : PERF_PY_DRAIN_SLOW_MS;
        /* Frames walked by BPF at the sample need no early drains. */
        bool want = s->cfg.python_frames && !s->py_bpf && atomic_load(&s->py_any) && s->cfg.read_period_ms > period;
        if (want && !s->py_timer) {
                if (s->pl->api->add_timer(s->pl->host, period, on_py_timer, s, &s->py_timer) >= 0 &&
                    rings_outlast(s, period))
                        rings_listen(s, false);
        } else if (!want && s->py_timer) {
                s->pl->api->remove_source(s->pl->host, s->py_timer);
                s->py_timer = NULL;
                rings_listen(s, true);
        }
}

/* ---- the worker ---- */

static void py_free(struct perf_py *py) {
        if (!py)
                return;
        py_proc_free(py->pp);
        free(py);
}

/* The state of process p for its current exec (looked at now if need
 * be); NULL when out of memory. */
static struct perf_py *py_state(struct perf_session *s, const struct proc_info *p) {
        uint64_t v;
        struct perf_py *py = hashmap_get(&s->py_states, (uint64_t) p->pid, &v) ? (struct perf_py *) (uintptr_t) v
                                                                                 : NULL;
        /* A CPython found is kept for the exec, but for one found before
         * the mapping that holds PyCode_Type was noted (an exec's
         * mappings come one record at a time): looked at again when its
         * maps change. */
        if (py && py->generation == p->generation &&
            (py->maps_version == p->maps_version ||
             (py->pp && py_proc_info(py->pp)->kind != PY_NOT &&
              (py_proc_info(py->pp)->kind != PY_KNOWN || py_proc_info(py->pp)->code_type))))
                return py;
        if (!py) {
                py = calloc(1, sizeof(*py));
                if (!py)
                        return NULL;
                if (hashmap_put(&s->py_states, (uint64_t) p->pid, (uint64_t) (uintptr_t) py) < 0) {
                        free(py);
                        return NULL;
                }
        }
        bool was_published = py->published;
        /* The interpreter it was found running before, if any: the same
         * one found again (the exec's note applied after the process was
         * read from /proc, its maps read anew) is not said again. */
        uint64_t was_runtime = was_published && py->pp ? py_proc_info(py->pp)->runtime : 0;
        py_proc_free(py->pp);
        *py = (struct perf_py){.generation = p->generation, .maps_version = p->maps_version};
        if (py_proc_new(&s->sym, p, &py->pp) < 0) {
                py->pp = NULL;
                if (was_published)
                        table_set(s, p->pid, NULL);
                return py;
        }
        const struct py_proc_info *in = py_proc_info(py->pp);
        if (in->kind != PY_NOT && !(in->kind == PY_KNOWN && was_runtime && in->runtime == was_runtime))
                note_process(s, p->pid, in);
        if (in->kind == PY_KNOWN) {
                table_set(s, p->pid, in);
                py->published = true;
                if (!was_published)
                        s->py_procs++;
        } else {
                if (was_published)
                        table_set(s, p->pid, NULL);
                if (in->kind != PY_NOT)
                        s->py_unknown++;
        }
        return py;
}

static void scan_seen(int pid, void *userdata) {
        struct perf_session *s = userdata;
        struct proc_info *p = proc_table_get(s->procs, pid);
        if (p && !p->maps_unreadable && p->maps.n)
                (void) py_state(s, p);
}

/* The CPython processes in scope, as sampling starts: their first
 * samples get their Python frames too. With a scope of command lines
 * they are met at their first sample (the drain of those comes before). */
void perf_py_scan(struct perf_session *s) {
        const struct perf_config *c = &s->cfg;
        if (!c->python_frames || !c->callstacks || c->user_frames == PERF_UNWIND_SKIP)
                return;
        if (c->n_target_pid)
                for (size_t k = 0; k < c->n_target_pid; k++)
                        scan_seen(c->target_pid[k], s);
        else if (!c->n_target_cmdline && !c->additional_cmdline_count)
                py_scan_processes(scan_seen, s);
}

/* The interned frame of a Python frame (code object, last instruction) of
 * process p: most samples repeat the frames of the last ones, and their
 * names, lines and interning are looked up once per interning epoch. */
static uint64_t python_frame(struct perf_session *s, const struct proc_info *p, struct py_proc *pp, uint64_t code,
                             uint64_t instr) {
        uint64_t h = (code ^ (instr << 7) ^ ((uint64_t) (uint32_t) p->pid << 40)) * 0x9e3779b97f4a7c15ull;
        struct perf_py_frame_slot *f = &s->py_frames[(h >> 44) & (PERF_PY_FRAME_SLOTS - 1)];
        if (f->epoch == s->epoch && f->code == code && f->instr == instr && f->pid == p->pid &&
            f->generation == p->generation && f->iid)
                return f->iid;
        uint64_t iid = py_proc_frame(pp, s->iw, code, instr);
        *f = (struct perf_py_frame_slot){.code = code, .instr = instr, .pid = p->pid, .generation = p->generation,
                                         .epoch = s->epoch, .iid = iid};
        return iid;
}

size_t perf_py_user_frames(struct perf_session *s, const struct perf_item *it, struct proc_info *p,
                           const uint64_t *user, const uint64_t *native, size_t n_user, uint64_t *out, size_t cap) {
        struct perf_py *py = s->cfg.python_frames && p && p->maps.n ? py_state(s, p) : NULL;
        if (py && !s->py_frames && !(s->py_frames = calloc_prefaulted(PERF_PY_FRAME_SLOTS, sizeof(*s->py_frames))))
                py = NULL;
        struct py_proc *pp = py ? py->pp : NULL;
        bool is_eval[PERF_PY_MAX_NATIVE];
        size_t n_eval = 0;
        if (n_user > PERF_PY_MAX_NATIVE)
                n_user = PERF_PY_MAX_NATIVE;
        if (pp && py_proc_info(pp)->kind == PY_KNOWN)
                for (size_t k = 0; k < n_user; k++) {
                        is_eval[k] = perf_frame_is_eval(s, p, k > 0 ? user[k] - 1 : user[k]);
                        n_eval += is_eval[k];
                }
        struct perf_py_trailer t = {0};
        const uint8_t *at = it->rec + PERF_ITEM_EXTRA(it->len);
        bool has = n_eval > 0 && it->extra >= sizeof(t);
        if (has) {
                memcpy(&t, at, sizeof(t));
                has = it->extra >= sizeof(t) + 2 * (size_t) t.n * sizeof(uint64_t);
        }
        if (n_eval > 0) {
                if (!has)
                        s->py_late++;
                else if (t.result == PY_WALK_FAULT)
                        s->py_unreadable++;
                else if (t.result == PY_WALK_NO_THREAD)
                        s->py_no_thread++;
                else if (t.result != PY_WALK_OK || !py_walk_counts_match(t.has_copy, t.entries, t.checked, n_eval))
                        s->py_moved++;
                else {
                        uint64_t frames[2 * PY_WALK_MAX_FRAMES], iids[PY_WALK_MAX_FRAMES];
                        memcpy(frames, at + sizeof(t), 2 * (size_t) t.n * sizeof(uint64_t));
                        for (size_t j = 0; j < t.n; j++)
                                iids[j] = python_frame(s, p, pp, frames[2 * j] & ~PY_FRAME_ENTRY, frames[2 * j + 1]);
                        s->py_samples++;
                        return py_stack_frames_interned(native, is_eval, n_user, frames, iids, t.n, out, cap);
                }
        }
        size_t n = 0;
        for (size_t k = n_user; k-- > 0 && n < cap;)
                if (native[k])
                        out[n++] = native[k];
        return n;
}

void perf_py_reap(struct perf_session *s) {
        uint64_t key, v;
        for (size_t i = 0; hashmap_next(&s->py_states, &i, &key, &v);)
                if (!proc_table_peek(s->procs, (int) key)) {
                        struct perf_py *py = (struct perf_py *) (uintptr_t) v;
                        if (py->published)
                                table_set(s, (int) key, NULL);
                        py_free(py);
                        (void) hashmap_remove(&s->py_states, key, NULL);
                }
}

void perf_py_free(struct perf_session *s) {
        free(s->py_frames);
        s->py_frames = NULL;
        free(s->py_walk);
        s->py_walk = NULL;
        uint64_t key, v;
        for (size_t i = 0; hashmap_next(&s->py_states, &i, &key, &v);)
                py_free((struct perf_py *) (uintptr_t) v);
        hashmap_clear(&s->py_states);
}

/* The counters, on tracks of their own (see traced-perf(7)). */
static const struct {
        const char *name;
        size_t offset;
} py_counters[PERF_PY_COUNTERS] = {
        {"linux.perf python: processes with Python frames", offsetof(struct perf_session, py_procs)},
        {"linux.perf python: CPython processes left native (layout not known)",
         offsetof(struct perf_session, py_unknown)},
        {"linux.perf python: samples with Python frames", offsetof(struct perf_session, py_samples)},
        {"linux.perf python: samples left native (the thread moved on)", offsetof(struct perf_session, py_moved)},
        {"linux.perf python: samples left native (no thread state)", offsetof(struct perf_session, py_no_thread)},
        {"linux.perf python: samples left native (memory unreadable)",
         offsetof(struct perf_session, py_unreadable)},
        {"linux.perf python: samples left native (process looked at after the drain)",
         offsetof(struct perf_session, py_late)},
};

void perf_py_write_counters(struct perf_session *s) {
        if (!s->cfg.python_frames || !(s->py_procs || s->py_unknown))
                return;
        for (size_t k = 0; k < PERF_PY_COUNTERS; k++) {
                uint64_t v = *(const uint64_t *) ((const uint8_t *) s + py_counters[k].offset);
                if (v == s->py_written[k] && s->py_epoch[k] == s->epoch)
                        continue;
                perf_write_counter_track(s, 0x7065727079000000ull ^ (s->inst.id << 16) ^ k, py_counters[k].name,
                                         &s->py_epoch[k], s->latest_time, v);
                s->py_written[k] = v;
        }
}
