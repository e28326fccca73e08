/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * linux.perf's BPF program (CO-RE, turned into perfpy.skel.h by bpftool
 * gen skeleton): attached to each CPU's sampling event, it runs as the
 * kernel takes a sample, before the sample is written. For a thread of a
 * process in py_procs (a CPython the plugin found, with its layout) it
 * walks the thread's Python frames, as linux.bpf_stack does, and sends
 * them into the CPU's BPF output event, whose records land in the
 * sampling event's ring just before the sample (see perfpy.h). Every
 * sample is kept.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpfstack.h"
#include "perfpy.h"

char LICENSE[] SEC("license") = "GPL";

/* The CPython processes (key: thread group id), set by the plugin. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __type(key, __u32);
        __type(value, struct bpfstack_pyproc);
        __uint(max_entries, 1024);
} py_procs SEC(".maps");

/* Each CPU's BPF output event (sized by libbpf to the possible CPUs). */
struct {
        __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
        __uint(key_size, sizeof(__u32));
        __uint(value_size, sizeof(__u32));
} py_out SEC(".maps");

/* The record, with its frames right after it. */
struct scratch {
        struct perf_pyrec rec;
        __u64 frames[256 + 1]; /* as walk_python bounds its index */
        __u8 pyframe[BPFSTACK_PY_FRAME_READ + 8]; /* one _PyInterpreterFrame as read */
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __type(key, __u32);
        __type(value, struct scratch);
        __uint(max_entries, 1);
} scratch SEC(".maps");

#define PYWALK_WALKED() \
        do {            \
        } while (0)
#include "bpfstack-pywalk.bpf.h"

SEC("perf_event")
int py_sample(struct bpf_perf_event_data *ctx) {
        __u64 id = bpf_get_current_pid_tgid();
        __u32 pid = id >> 32, tid = (__u32) id;
        const struct bpfstack_pyproc *pp = bpf_map_lookup_elem(&py_procs, &pid);
        if (!pp)
                return 1;
        __u32 zero = 0;
        struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
        if (!sc)
                return 1;
        __u8 stop = BPFSTACK_PY_NONE;
        __u32 n = walk_python(pp, tid, 0, &stop);
        if (n > BPFSTACK_MAX_PYFRAMES)
                n = BPFSTACK_MAX_PYFRAMES;
        sc->rec.magic = PERF_PYREC_MAGIC;
        sc->rec.tid = tid;
        sc->rec.stop = stop;
        sc->rec.pad = 0;
        sc->rec.n = (__u16) n;
        sc->rec.pad2 = 0;
        __u64 len = (__u64) n * 2 * sizeof(__u64);
        /* Bounded where the verifier sees it (frames holds more). */
        asm volatile("%[len] &= 0x7ff" : [len] "+r"(len));
        bpf_perf_event_output(ctx, &py_out, BPF_F_CURRENT_CPU, sc, sizeof(sc->rec) + len);
        return 1;
}
