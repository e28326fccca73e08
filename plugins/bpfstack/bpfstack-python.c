/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack's CPython frames, user space side: a process is looked
 * at once (per exec) when first sampled, or at the start when its
 * executable is a CPython; when it runs a CPython of a known layout
 * (lib/profiling/pyframes-proc.h), the address of its _PyRuntime and the
 * version's offsets go into the BPF map py_procs, and its samples come
 * with the thread's Python frames, which take the place of the
 * evaluation function's native frames (lib/profiling/pyframes.h's
 * merge). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfstack-pyproc.h"
#include "bpfstack-session.h"
#include "profiling/pyframes-proc.h"
#include "profiling/pyframes-stack.h"
#include "profiling/pyframes.h"

/* A process's state, as its proc_info's userdata. */
struct py_state {
        uint32_t generation;   /* the proc_info generation it was made for */
        uint32_t maps_version; /* and its maps' version (a process without CPython is looked at again when
                                  they change: a dlopen of libpython) */
        struct py_proc *pp;
        uint64_t codes_read, codes_unreadable; /* counted into the session so far */
};

void bpfstack_py_proc_free(void *userdata) {
        struct py_state *st = userdata;
        if (!st)
                return;
        py_proc_free(st->pp);
        free(st);
}

/* Writes the process's py_procs entry, logs and counts what it runs. */
static void take(struct bpfstack_session *s, const struct proc_info *p, struct py_proc *pp) {
        const struct py_proc_info *in = py_proc_info(pp);
        if (in->kind == PY_NOT)
                return;
        if (in->kind != PY_KNOWN) {
                s->py_unknown++;
                if (in->kind == PY_UNKNOWN)
                        plugin_log(s->pl, TRACED_LOG_INFO,
                                   "linux.bpf_stack instance %llu: pid %d runs CPython %u.%u (%s), whose layout is "
                                   "not known: its stacks stay native",
                                   (unsigned long long) s->inst.id, p->pid, in->major, in->minor, in->path);
                else
                        plugin_log(s->pl, TRACED_LOG_INFO,
                                   "linux.bpf_stack instance %llu: pid %d maps %s but no _PyRuntime was found in its "
                                   "CPython files: its stacks stay native",
                                   (unsigned long long) s->inst.id, p->pid, in->path);
                return;
        }
        struct bpfstack_pyproc v = bpfstack_pyproc_of(in);
        uint32_t key = (uint32_t) p->pid;
        if (bpf_map__update_elem(s->skel->maps.py_procs, &key, sizeof(key), &v, sizeof(v), BPF_ANY) < 0) {
                s->py_map_full++;
                return;
        }
        s->py_procs++;
        plugin_log(s->pl, TRACED_LOG_DEBUG,
                   "linux.bpf_stack instance %llu: pid %d runs CPython %u.%u (%s): _PyRuntime at 0x%llx, code "
                   "objects %s",
                   (unsigned long long) s->inst.id, p->pid, in->major, in->minor, in->path,
                   (unsigned long long) in->runtime, in->code_type ? "checked against PyCode_Type" : "not checked");
}

/* The process's state for its current exec; NULL when out of memory. */
static struct py_state *py_state(struct bpfstack_session *s, struct proc_info *p) {
        struct py_state *st = p->userdata;
        if (st && st->generation == p->generation &&
            (st->maps_version == p->maps_version || (st->pp && py_proc_info(st->pp)->kind != PY_NOT)))
                return st;
        if (!st) {
                st = calloc(1, sizeof(*st));
                if (!st)
                        return NULL;
                p->userdata = st;
        }
        py_proc_free(st->pp);
        *st = (struct py_state){.generation = p->generation, .maps_version = p->maps_version};
        if (py_proc_new(&s->sym, p, &st->pp) < 0)
                return st;
        take(s, p, st->pp);
        return st;
}

void bpfstack_py_seen(struct bpfstack_session *s, uint32_t pid) {
        if (!s->cfg.python_frames || !s->skel)
                return;
        struct proc_info *p = proc_table_get(s->procs, (int) pid);
        if (!p || p->maps_unreadable || !p->maps.n)
                return;
        (void) py_state(s, p);
}

static void scan_seen(int pid, void *userdata) {
        bpfstack_py_seen(userdata, (uint32_t) pid);
}

void bpfstack_py_scan(struct bpfstack_session *s) {
        if (!s->cfg.python_frames)
                return;
        py_scan_processes(scan_seen, s);
}

size_t bpfstack_py_user_frames(struct bpfstack_session *s, struct intern_writer *iw, struct proc_info *p,
                               const uint64_t *user, size_t n_user, const struct bpfstack_pyframe *py, size_t n_py,
                               uint64_t *out) {
        struct py_state *st =
                p && p->userdata && p->generation == ((struct py_state *) p->userdata)->generation ? p->userdata : NULL;
        struct py_proc *pp = st ? st->pp : NULL;
        bool use_py = pp && py_proc_info(pp)->kind == PY_KNOWN && n_py > 0;
        bool is_eval[BPFSTACK_MAX_DEPTH];
        uint64_t native[BPFSTACK_MAX_DEPTH];
        if (n_user > BPFSTACK_MAX_DEPTH)
                n_user = BPFSTACK_MAX_DEPTH;
        if (n_py > BPFSTACK_MAX_PYFRAMES)
                n_py = BPFSTACK_MAX_PYFRAMES;
        for (size_t k = 0; k < n_user; k++) {
                /* Return addresses but the innermost: the call is the byte before. */
                uint64_t pc = k > 0 ? user[k] - 1 : user[k];
                native[k] = symbolizer_user_frame(&s->sym, iw, p, pc);
                is_eval[k] = false;
                if (use_py) {
                        struct symbolized r;
                        symbolizer_resolve(&s->sym, p, pc, &r);
                        is_eval[k] = r.function && strcmp(r.function, PY_EVAL_FUNCTION) == 0;
                }
        }
        size_t n = 0;
        if (!use_py) {
                for (size_t k = n_user; k-- > 0;)
                        if (native[k])
                                out[n++] = native[k];
                return n;
        }
        _Static_assert(sizeof(struct bpfstack_pyframe) == 2 * sizeof(uint64_t) && BPFSTACK_PY_ENTRY == PY_FRAME_ENTRY,
                       "a Python frame of a record is a pair of py_stack_frames");
        n = py_stack_frames(pp, iw, native, is_eval, n_user, (const uint64_t *) py, n_py, out,
                            BPFSTACK_MAX_DEPTH + BPFSTACK_MAX_PYFRAMES);
        s->py_samples++;
        uint64_t r, u;
        py_proc_counts(pp, &r, &u);
        s->py_codes_read += r - st->codes_read;
        s->py_code_unreadable += u - st->codes_unreadable;
        st->codes_read = r;
        st->codes_unreadable = u;
        return n;
}
