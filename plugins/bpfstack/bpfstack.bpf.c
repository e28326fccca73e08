/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * linux.bpf_stack's BPF programs (CO-RE, built with clang -target bpf and
 * turned into bpfstack.skel.h by bpftool gen skeleton).
 *
 * on_cpu runs on a cpu-clock perf event per CPU and sends the interrupted
 * task's stacks. The sched_switch programs remember, for the task leaving
 * a CPU, when it left and its stacks at that point; when that task comes
 * back, they send one record with the time it spent away. The plugin
 * keeps exactly one of switch_btf (tp_btf) and switch_raw (raw tracepoint)
 * loaded, whichever the kernel supports.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpfstack.h"

#define EEXIST 17
#define EFAULT 14
#define PF_EXITING 0x00000004 /* task_struct.flags: in do_exit() */

char LICENSE[] SEC("license") = "GPL";

/* Set by the plugin before load. */
const volatile bool want_on_cpu = true;
const volatile bool want_off_cpu = true;
const volatile bool want_kernel = true;
const volatile bool want_user = true;
const volatile __u64 min_block_ns = 0;
const volatile __u32 n_pids = 0, n_tids = 0, n_comms = 0;
const volatile __u32 pids[BPFSTACK_MAX_PIDS] = {};
const volatile __u32 tids[BPFSTACK_MAX_PIDS] = {};
const volatile char comms[BPFSTACK_MAX_COMMS][BPFSTACK_COMM_LEN] = {};
const volatile __u64 cgroup_id = 0; /* 0: any */
const volatile __u64 wakeup_bytes = 1 << 20; /* wake the drainer past this much data */
const volatile bool with_preempted = false; /* off-CPU: also tasks switched out still runnable */
/* On-CPU samples come at a bounded rate: when the plugin knows the ring
 * cannot fill between two of its timed drains, samples skip the fill
 * check (a helper call each). */
const volatile bool on_cpu_wakeups = true;
/* User stacks walked by the unwind tables the plugin loads (else frame
 * pointers, by bpf_get_stackid). */
const volatile bool walk_user = false;
const volatile __u32 max_depth = BPFSTACK_MAX_DEPTH;
/* CPython frames of the processes in py_procs. */
const volatile bool want_python = false;

/* Sizes are set by the plugin before load (max depth, entries). */
struct {
        __uint(type, BPF_MAP_TYPE_STACK_TRACE);
        __uint(key_size, sizeof(__u32));
        __uint(value_size, BPFSTACK_MAX_DEPTH * sizeof(__u64));
        __uint(max_entries, 16384);
} stacks SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 4 << 20);
} records SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __type(key, __u32); /* tid */
        __type(value, struct bpfstack_switched_out);
        __uint(max_entries, 32768);
} out_since SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __type(key, __u32);
        __type(value, __u64);
        __uint(max_entries, BPFSTACK_CNT_MAX);
} counters SEC(".maps");

/* The unwind tables: every loaded image's rows, one run each (sized
 * and mapped by the plugin). */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __type(key, __u32);
        __type(value, struct bpfstack_row);
        __uint(max_entries, 1);
} unwind_rows SEC(".maps");

/* The tables' page indexes (struct bpfstack_umap). */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(map_flags, BPF_F_MMAPABLE);
        __type(key, __u32);
        __type(value, struct bpfstack_page);
        __uint(max_entries, 1);
} unwind_pages SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __type(key, __u32); /* thread group id */
        __type(value, struct bpfstack_uproc);
        __uint(max_entries, 1);
} unwind_procs SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __type(key, __u32); /* tid */
        __type(value, struct bpfstack_ustack);
        __uint(max_entries, 1);
} out_ustack SEC(".maps");

/* The CPython processes: where their interpreter state is (set by the
 * plugin when it first sees them). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __type(key, __u32); /* thread group id */
        __type(value, struct bpfstack_pyproc);
        __uint(max_entries, 1024);
} py_procs SEC(".maps");

/* Where a record with walked frames is put together before it is sent. */
struct scratch {
        struct bpfstack_record rec;
        __u64 frames[256 + 1]; /* sent right after rec: user, then Python frames (BPFSTACK_MAX_TRAILER) */
        struct bpfstack_ustack u;            /* what out_ustack keeps */
        __u8 pyframe[BPFSTACK_PY_FRAME_READ + 8]; /* one _PyInterpreterFrame as read */
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __type(key, __u32);
        __type(value, struct scratch);
        __uint(max_entries, 1);
} scratch SEC(".maps");

static __always_inline void count(__u32 slot) {
        __u64 *v = bpf_map_lookup_elem(&counters, &slot);
        if (v)
                (*v)++;
}

static __always_inline bool comm_equal(const char *a, const volatile char *b) {
        for (int k = 0; k < BPFSTACK_COMM_LEN; k++) {
                if (a[k] != b[k])
                        return false;
                if (!a[k])
                        return true;
        }
        return true;
}

/* Whether the task (pid, tid, comm, in the current cgroup when current)
 * passes the filters. */
static __always_inline bool wanted(__u32 pid, __u32 tid, const char *comm, bool is_current) {
        if (tid == 0)
                return false; /* the idle task */
        if (n_pids) {
                bool hit = false;
                for (__u32 k = 0; k < BPFSTACK_MAX_PIDS && k < n_pids; k++)
                        if (pids[k] == pid)
                                hit = true;
                if (!hit)
                        return false;
        }
        if (n_tids) {
                bool hit = false;
                for (__u32 k = 0; k < BPFSTACK_MAX_PIDS && k < n_tids; k++)
                        if (tids[k] == tid)
                                hit = true;
                if (!hit)
                        return false;
        }
        if (n_comms) {
                bool hit = false;
                for (__u32 k = 0; k < BPFSTACK_MAX_COMMS && k < n_comms; k++)
                        if (comm_equal(comm, comms[k]))
                                hit = true;
                if (!hit)
                        return false;
        }
        if (cgroup_id && is_current && bpf_get_current_cgroup_id() != cgroup_id)
                return false;
        return true;
}

/* Waking user space for every record costs an irq_work each; the drainer
 * also runs on a timer, so wake it only when the ring fills up. */
static __always_inline __u64 submit_flags(void) {
        return bpf_ringbuf_query(&records, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
                                                                               : BPF_RB_NO_WAKEUP;
}

static __always_inline __s32 stack_of(void *ctx, __u64 flags, bool want) {
        if (!want)
                return -EFAULT;
        long id = bpf_get_stackid(ctx, &stacks, flags);
        if (id == -EEXIST)
                count(BPFSTACK_CNT_STACK_COLLISION);
        else if (id < 0 && id != -EFAULT)
                count(BPFSTACK_CNT_STACK_ERROR);
        return (__s32) id;
}

#include "bpfstack-uwalk.bpf.h"

/* The bytes of n <= BPFSTACK_MAX_TRAILER __u64, bounded where the
 * verifier sees it (clang would otherwise test a copy of n and use
 * another). */
static __always_inline __u64 frames_len(__u32 n) {
        __u64 len = (__u64) n * sizeof(__u64);
        asm volatile("%[len] &= 0x7ff" : [len] "+r"(len));
        return len;
}

/* Sends the scratch record with its n walked frames and n_py Python
 * frames (after them). */
static __always_inline void send_walked(struct scratch *sc, __u32 n, __u32 n_py, __u64 flags) {
        if (n > BPFSTACK_MAX_DEPTH)
                n = BPFSTACK_MAX_DEPTH;
        if (n_py > BPFSTACK_MAX_PYFRAMES)
                n_py = BPFSTACK_MAX_PYFRAMES;
        sc->rec.n_uframes = (__u16) n;
        sc->rec.n_pyframes = (__u16) n_py;
        if (bpf_ringbuf_output(&records, sc, frames_len(n + 2 * n_py) + sizeof(sc->rec), flags) < 0)
                count(BPFSTACK_CNT_RING_LOST);
}

#define PYWALK_WALKED() count(BPFSTACK_CNT_PY_WALKED)
#include "bpfstack-pywalk.bpf.h"

SEC("perf_event")
int on_cpu(struct bpf_perf_event_data *ctx) {
        if (!want_on_cpu)
                return 0;
        __u64 id = bpf_get_current_pid_tgid();
        __u32 pid = id >> 32, tid = (__u32) id;
        /* The name, for a filter on names and to name the task in the
         * trace. */
        char comm[BPFSTACK_COMM_LEN] = {};
        bpf_get_current_comm(comm, sizeof(comm));
        if (!wanted(pid, tid, comm, true))
                return 0;
        const struct bpfstack_pyproc *pp = want_python ? bpf_map_lookup_elem(&py_procs, &pid) : NULL;
        if ((walk_user && want_user) || pp) {
                __u32 zero = 0;
                struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
                if (!sc)
                        return 0;
                __u8 stop = BPFSTACK_STOP_NONE, pystop = BPFSTACK_PY_NONE, unmapped = 0;
                __u32 n = 0, n_py = 0;
                if (walk_user && want_user)
                        n = walk_user_stack(bpf_get_current_task_btf(), pid, &stop, &unmapped);
                struct bpfstack_record *r = &sc->rec;
                r->ts = bpf_ktime_get_boot_ns();
                r->blocked_ns = 0;
                r->pid = pid;
                r->tid = tid;
                r->cpu = bpf_get_smp_processor_id();
                r->kstack_id = stack_of(ctx, 0, want_kernel);
                if (!walk_user || !want_user)
                        r->ustack_id = stack_of(ctx, BPF_F_USER_STACK, want_user);
                else
                        r->ustack_id = stop == BPFSTACK_STOP_NO_TABLES || stop == BPFSTACK_STOP_NONE
                                               ? stack_of(ctx, BPF_F_USER_STACK, true)
                                               : BPFSTACK_USTACK_WALKED;
                if (r->ustack_id != BPFSTACK_USTACK_WALKED)
                        n = 0;
                if (n > BPFSTACK_MAX_DEPTH)
                        n = BPFSTACK_MAX_DEPTH;
                if (pp)
                        n_py = walk_python(pp, tid, n, &pystop);
                r->kind = BPFSTACK_ON_CPU;
                r->ustop = stop;
                r->unmapped = n ? unmapped : 0;
                r->pystop = pystop;
                __builtin_memcpy(r->comm, comm, sizeof(comm));
                send_walked(sc, n, n_py, on_cpu_wakeups ? submit_flags() : BPF_RB_NO_WAKEUP);
                return 0;
        }
        struct bpfstack_record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
        if (!r) {
                count(BPFSTACK_CNT_RING_LOST);
                return 0;
        }
        r->ts = bpf_ktime_get_boot_ns();
        r->blocked_ns = 0;
        r->pid = pid;
        r->tid = tid;
        r->cpu = bpf_get_smp_processor_id();
        r->kstack_id = stack_of(ctx, 0, want_kernel);
        r->ustack_id = stack_of(ctx, BPF_F_USER_STACK, want_user);
        r->kind = BPFSTACK_ON_CPU;
        r->ustop = BPFSTACK_STOP_NONE;
        r->unmapped = 0;
        r->n_uframes = 0;
        r->n_pyframes = 0;
        r->pystop = BPFSTACK_PY_NONE;
        __builtin_memcpy(r->comm, comm, sizeof(comm));
        bpf_ringbuf_submit(r, on_cpu_wakeups ? submit_flags() : BPF_RB_NO_WAKEUP);
        return 0;
}

/* task_struct's state field was renamed __state in Linux 5.14. */
struct task_struct___pre_5_14 {
        long state;
} __attribute__((preserve_access_index));

static __always_inline bool still_runnable(struct task_struct *t) {
        if (bpf_core_field_exists(t->__state))
                return BPF_CORE_READ(t, __state) == 0;
        return BPF_CORE_READ((struct task_struct___pre_5_14 *) t, state) == 0;
}

static __always_inline int switched(void *ctx, struct task_struct *prev, struct task_struct *next) {
        __u64 now = bpf_ktime_get_boot_ns();

        /* prev is current: its stacks are the ones where it blocks. */
        __u32 pid = BPF_CORE_READ(prev, tgid), tid = BPF_CORE_READ(prev, pid);
        struct bpfstack_switched_out o = {};
        BPF_CORE_READ_STR_INTO(&o.comm, prev, comm);
        /* A task's last switch-out, dead: it never comes back to take its
         * entry away. */
        bool exiting = BPF_CORE_READ(prev, flags) & PF_EXITING;
        if (!exiting && wanted(pid, tid, o.comm, true) && (with_preempted || !still_runnable(prev))) {
                o.ts = now;
                o.pid = pid;
                o.cpu = bpf_get_smp_processor_id();
                o.kstack_id = stack_of(ctx, 0, want_kernel);
                o.ustack_id = -EFAULT;
                const struct bpfstack_pyproc *pp = want_python ? bpf_map_lookup_elem(&py_procs, &pid) : NULL;
                __u32 zero = 0;
                struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
                __u32 n = 0, n_py = 0;
                __u8 stop = BPFSTACK_STOP_NONE, pystop = BPFSTACK_PY_NONE, unmapped = 0;
                if (walk_user && want_user) {
                        n = walk_user_stack(bpf_get_current_task_btf(), pid, &stop, &unmapped); /* prev is current */
                        o.ustop = stop;
                        o.unmapped = unmapped;
                        if (stop != BPFSTACK_STOP_NO_TABLES && stop != BPFSTACK_STOP_NONE && sc)
                                o.ustack_id = BPFSTACK_USTACK_WALKED;
                        else
                                n = 0;
                }
                if (n > BPFSTACK_MAX_DEPTH)
                        n = BPFSTACK_MAX_DEPTH;
                if (pp && sc)
                        n_py = walk_python(pp, tid, n, &pystop);
                if (n_py > BPFSTACK_MAX_PYFRAMES)
                        n_py = BPFSTACK_MAX_PYFRAMES;
                if ((o.ustack_id == BPFSTACK_USTACK_WALKED || n_py > 0) && sc) {
                        /* The frames wait in out_ustack for the task's return. */
                        sc->u.n = (__u16) n;
                        sc->u.stop = stop;
                        sc->u.pystop = pystop;
                        sc->u.n_py = (__u16) n_py;
                        bpf_probe_read_kernel(sc->u.frames, frames_len(n + 2 * n_py), sc->frames);
                        if (bpf_map_update_elem(&out_ustack, &tid, &sc->u, BPF_ANY) == 0)
                                o.has_trailer = 1;
                        else {
                                count(BPFSTACK_CNT_USTACK_FULL);
                                o.ustack_id = -EFAULT;
                        }
                }
                if (o.ustack_id != BPFSTACK_USTACK_WALKED)
                        o.ustack_id = stack_of(ctx, BPF_F_USER_STACK, want_user);
                if (bpf_map_update_elem(&out_since, &tid, &o, BPF_ANY) < 0)
                        count(BPFSTACK_CNT_START_FULL);
        }

        __u32 next_tid = BPF_CORE_READ(next, pid);
        struct bpfstack_switched_out *was = bpf_map_lookup_elem(&out_since, &next_tid);
        if (!was)
                return 0;
        __u64 blocked = now - was->ts;
        if (blocked >= min_block_ns && was->has_trailer) {
                __u32 zero = 0;
                struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
                struct bpfstack_ustack *u = bpf_map_lookup_elem(&out_ustack, &next_tid);
                if (sc) {
                        struct bpfstack_record *r = &sc->rec;
                        __u32 n = 0, n_py = 0;
                        if (u) {
                                n = u->n;
                                n_py = u->n_py;
                                if (n > BPFSTACK_MAX_DEPTH)
                                        n = BPFSTACK_MAX_DEPTH;
                                if (n_py > BPFSTACK_MAX_PYFRAMES)
                                        n_py = BPFSTACK_MAX_PYFRAMES;
                                bpf_probe_read_kernel(sc->frames, frames_len(n + 2 * n_py), u->frames);
                                r->pystop = u->pystop;
                        } else
                                r->pystop = BPFSTACK_PY_NONE;
                        r->ts = was->ts;
                        r->blocked_ns = blocked;
                        r->pid = was->pid;
                        r->tid = next_tid;
                        r->cpu = was->cpu;
                        r->kstack_id = was->kstack_id;
                        if (was->ustack_id == BPFSTACK_USTACK_WALKED)
                                r->ustack_id = u ? BPFSTACK_USTACK_WALKED : -EFAULT;
                        else
                                r->ustack_id = was->ustack_id;
                        if (r->ustack_id != BPFSTACK_USTACK_WALKED)
                                n = 0;
                        r->kind = BPFSTACK_OFF_CPU;
                        r->ustop = was->ustop;
                        r->unmapped = n ? was->unmapped : 0;
                        __builtin_memcpy(r->comm, was->comm, sizeof(r->comm));
                        if (u)
                                send_walked(sc, n, n_py, submit_flags());
                        else
                                send_walked(sc, 0, 0, submit_flags());
                }
        } else if (blocked >= min_block_ns) {
                struct bpfstack_record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
                if (r) {
                        r->ts = was->ts;
                        r->blocked_ns = blocked;
                        r->pid = was->pid;
                        r->tid = next_tid;
                        r->cpu = was->cpu;
                        r->kstack_id = was->kstack_id;
                        r->ustack_id = was->ustack_id == BPFSTACK_USTACK_WALKED ? -EFAULT : was->ustack_id;
                        r->kind = BPFSTACK_OFF_CPU;
                        r->ustop = was->ustop;
                        r->unmapped = 0;
                        r->n_uframes = 0;
                        r->n_pyframes = 0;
                        r->pystop = BPFSTACK_PY_NONE;
                        __builtin_memcpy(r->comm, was->comm, sizeof(r->comm));
                        bpf_ringbuf_submit(r, submit_flags());
                } else
                        count(BPFSTACK_CNT_RING_LOST);
        }
        if (was->has_trailer)
                bpf_map_delete_elem(&out_ustack, &next_tid);
        bpf_map_delete_elem(&out_since, &next_tid);
        return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next) {
        if (!want_off_cpu)
                return 0;
        return switched(ctx, prev, next);
}

SEC("raw_tp/sched_switch")
int switch_raw(struct bpf_raw_tracepoint_args *ctx) {
        if (!want_off_cpu)
                return 0;
        return switched(ctx, (struct task_struct *) ctx->args[1], (struct task_struct *) ctx->args[2]);
}

/* An exec replaces the process's mappings, an exit ends them: its tables
 * entry goes, so that its next samples ask the plugin for tables again. */
SEC("raw_tp/sched_process_exec")
int on_exec(struct bpf_raw_tracepoint_args *ctx) {
        __u32 pid = bpf_get_current_pid_tgid() >> 32;
        bpf_map_delete_elem(&unwind_procs, &pid);
        bpf_map_delete_elem(&py_procs, &pid);
        return 0;
}

SEC("raw_tp/sched_process_exit")
int on_exit(struct bpf_raw_tracepoint_args *ctx) {
        __u64 id = bpf_get_current_pid_tgid();
        __u32 pid = id >> 32;
        if (pid == (__u32) id) {
                bpf_map_delete_elem(&unwind_procs, &pid);
                bpf_map_delete_elem(&py_procs, &pid);
        }
        return 0;
}
