/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The walk of a thread's CPython frames in BPF, shared by linux.bpf_stack's
 * programs and linux.perf's (perfpy.bpf.c). The includer defines, before
 * it includes this: struct scratch, with __u64 frames[] (at least
 * BPFSTACK_MAX_TRAILER + 1) and __u8 pyframe[BPFSTACK_PY_FRAME_READ + 8],
 * the per-CPU array map scratch holding one, and PYWALK_WALKED(), run
 * once for each walk that found frames.
 *
 * The thread's state is found from _PyRuntime (the GIL holder's first,
 * else a bounded search of every interpreter's threads by native thread
 * id); its frames are then read one _PyInterpreterFrame at a time, from
 * the innermost, each as its code object (with BPFSTACK_PY_ENTRY when the
 * frame is the first of its evaluation call) and its prev_instr.
 */
#pragma once

struct pywalk {
        const struct bpfstack_pyproc *pp;
        __u32 tid;
        bool started;
        __u64 interp, ts, found; /* the thread search */
        __u64 frame;             /* the frame walk */
        __u32 base, n;           /* frames go to scratch's frames[base + 2 * k] */
        __u8 stop;
};

/* One thread state of the search for w->tid; 1 ends it. */
static long py_thread_step(__u32 i, void *ctx) {
        struct pywalk *w = ctx;
        const struct bpfstack_pyproc *pp = w->pp;
        if (!w->ts) {
                /* The next interpreter's threads. */
                __u64 at = w->started ? w->interp + pp->interp_next : pp->runtime + pp->runtime_interp_head;
                if (w->started && !w->interp)
                        return 1;
                w->started = true;
                if (bpf_probe_read_user(&w->interp, sizeof(w->interp), (const void *) at) < 0 || !w->interp)
                        return 1;
                if (bpf_probe_read_user(&w->ts, sizeof(w->ts), (const void *) (w->interp + pp->interp_threads_head)) <
                    0)
                        return 1;
                return 0;
        }
        __u64 tid = 0;
        if (bpf_probe_read_user(&tid, sizeof(tid), (const void *) (w->ts + pp->tstate_native_tid)) < 0)
                return 1;
        if ((__u32) tid == w->tid) {
                w->found = w->ts;
                return 1;
        }
        if (bpf_probe_read_user(&w->ts, sizeof(w->ts), (const void *) (w->ts + pp->tstate_next)) < 0)
                return 1;
        return 0;
}

/* The thread state of tid: the GIL holder's first (most samples of a
 * busy Python thread), else by a bounded walk of the threads. 0: none. */
static __always_inline __u64 py_thread_state(const struct bpfstack_pyproc *pp, __u32 tid) {
        __u64 ts = 0, t = 0;
        if (bpf_probe_read_user(&ts, sizeof(ts), (const void *) (pp->runtime + pp->runtime_tstate_current)) == 0 &&
            ts && bpf_probe_read_user(&t, sizeof(t), (const void *) (ts + pp->tstate_native_tid)) == 0 &&
            (__u32) t == tid)
                return ts;
        struct pywalk w = {.pp = pp, .tid = tid};
        bpf_loop(BPFSTACK_PY_THREADS, py_thread_step, &w, 0);
        return w.found;
}

/* One Python frame into scratch; 1 ends the walk. */
static long py_frame_step(__u32 i, void *ctx) {
        struct pywalk *w = ctx;
        if (!w->frame) {
                w->stop = BPFSTACK_PY_END;
                return 1;
        }
        if (w->n >= BPFSTACK_MAX_PYFRAMES) {
                w->stop = BPFSTACK_PY_DEPTH;
                return 1;
        }
        __u32 zero = 0;
        struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
        if (!sc)
                return 1;
        const struct bpfstack_pyproc *pp = w->pp;
        __u32 size = pp->frame_size;
        if (size == 0 || size > BPFSTACK_PY_FRAME_READ ||
            bpf_probe_read_user(sc->pyframe, size, (const void *) w->frame) < 0) {
                w->stop = BPFSTACK_PY_FAULT;
                return 1;
        }
        __u64 code = *(__u64 *) (sc->pyframe + (pp->frame_code & (BPFSTACK_PY_FRAME_READ - 1)));
        __u64 prev = *(__u64 *) (sc->pyframe + (pp->frame_previous & (BPFSTACK_PY_FRAME_READ - 1)));
        __u64 instr = *(__u64 *) (sc->pyframe + (pp->frame_prev_instr & (BPFSTACK_PY_FRAME_READ - 1)));
        __u8 entry = sc->pyframe[pp->frame_is_entry & (BPFSTACK_PY_FRAME_READ - 1)];
        __u64 at = w->base + 2 * w->n;
        if (at >= BPFSTACK_MAX_TRAILER - 1) {
                w->stop = BPFSTACK_PY_DEPTH;
                return 1;
        }
        /* Bounded where the verifier sees it (frames has room past it). */
        asm volatile("%[at] &= 0xff" : [at] "+r"(at));
        sc->frames[at] = code | (entry ? BPFSTACK_PY_ENTRY : 0);
        sc->frames[at + 1] = instr;
        w->n++;
        w->frame = prev;
        return 0;
}

/* Walks the Python frames of thread tid of a CPython process into
 * scratch's frames from index base (after the user frames): their
 * number, how the walk ended in *stop. */
static __always_inline __u32 walk_python(const struct bpfstack_pyproc *pp, __u32 tid, __u32 base, __u8 *stop) {
        *stop = BPFSTACK_PY_NO_THREAD;
        __u64 ts = py_thread_state(pp, tid);
        if (!ts)
                return 0;
        __u64 cframe = 0, frame = 0;
        if (bpf_probe_read_user(&cframe, sizeof(cframe), (const void *) (ts + pp->tstate_cframe)) < 0 || !cframe ||
            bpf_probe_read_user(&frame, sizeof(frame), (const void *) (cframe + pp->cframe_current_frame)) < 0) {
                *stop = BPFSTACK_PY_FAULT;
                return 0;
        }
        struct pywalk w = {.pp = pp, .frame = frame, .base = base};
        bpf_loop(BPFSTACK_MAX_PYFRAMES + 1, py_frame_step, &w, 0);
        *stop = w.stop ? w.stop : BPFSTACK_PY_DEPTH;
        if (w.n)
                PYWALK_WALKED();
        return w.n;
}

