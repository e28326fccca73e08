/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack on the drain timer: the on-CPU program's cpu-clock event
 * on each CPU, kept across CPU hotplug by the shared tracker, and the
 * unwind counters' track. */

#include <errno.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"
#include "bpfstack-session.h"

void bpfstack_close_cpu(struct bpfstack_session *s, size_t cpu) {
        if (s->perf_links[cpu]) {
                bpf_link__destroy(s->perf_links[cpu]);
                s->perf_links[cpu] = NULL;
        }
        if (s->perf_fds[cpu] >= 0) {
                close(s->perf_fds[cpu]);
                s->perf_fds[cpu] = -EBADF;
                s->n_cpus--;
        }
}

static void hotplug_close(void *userdata, size_t cpu) {
        bpfstack_close_cpu(userdata, cpu);
}

static int hotplug_open(void *userdata, size_t cpu) {
        struct bpfstack_session *s = userdata;
        int r = bpfstack_open_cpu(s, (uint32_t) cpu);
        return r < 0 ? r : s->perf_fds[cpu];
}

static void hotplug_changed(void *userdata, size_t cpu, enum cpu_hotplug_change what, int error) {
        struct bpfstack_session *s = userdata;
        plugin_log_cpu_change(s->pl, "linux.bpf_stack", s->inst.id, (uint32_t) cpu, what, error);
}

const struct cpu_hotplug_ops bpfstack_hotplug_ops = {
        .close = hotplug_close,
        .open = hotplug_open,
        .changed = hotplug_changed,
};

/* A CPU that goes offline leaves its clock event silent for good, even
 * when it is back: on each drain period the shared tracker closes such an
 * event and opens it again once its CPU is online. */
static void check_hotplug(struct bpfstack_session *s) {
        if (s->cfg.on_cpu && s->skel)
                (void) cpu_hotplug_check(&s->hotplug);
        if (s->notes)
                perf_notes_check_cpus(s->notes);
}

uint64_t bpfstack_boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The unwind counters (with unwind tables) and the CPython ones (with
 * Python frames), at most once a second (and at the end): each one whose
 * value changed, all of them the first time. */
void bpfstack_write_counters(struct bpfstack_session *s, bool final) {
        if (!s->counters_writer)
                return;
        uint64_t now = bpfstack_boottime_ns();
        if (!final && now < s->counters_next_ns)
                return;
        s->counters_next_ns = now + 1000000000u;
        struct unwind_stats st = {};
        if (s->tables)
                unwind_tables_stats(s->tables, &st);
        int64_t v[UNWIND_COUNTER_MAX];
        unwind_counters_values(&st, s->stops, s->counters_seen[BPFSTACK_CNT_USTACK_FULL], v);
        v[UNWIND_COUNTER_PY_PROCESSES] = (int64_t) s->py_procs;
        v[UNWIND_COUNTER_PY_UNKNOWN] = (int64_t) s->py_unknown;
        v[UNWIND_COUNTER_PY_SAMPLES] = (int64_t) (s->py_stops[BPFSTACK_PY_END] + s->py_stops[BPFSTACK_PY_DEPTH]);
        const struct traced_host_api *api = s->pl->api;
        for (unsigned k = 0; k < UNWIND_COUNTER_MAX; k++) {
                bool py = k >= UNWIND_COUNTER_PY_PROCESSES;
                if ((py && !s->cfg.python_frames) || (!py && !s->tables))
                        continue;
                if (s->counters_described && v[k] == s->counters_sent[k])
                        continue;
                /* The descriptor again with each value: a ring buffer may
                 * have overwritten the first. */
                TracePacket pkt;
                if (api->begin_packet(s->counters_writer, &pkt.msg) >= 0) {
                        unwind_counter_descriptor(&pkt, s->counters_uuid, k);
                        (void) api->end_packet(s->counters_writer, &pkt.msg);
                }
                if (api->begin_packet(s->counters_writer, &pkt.msg) >= 0) {
                        unwind_counter_value(&pkt, s->counters_uuid, k, now, v[k]);
                        (void) api->end_packet(s->counters_writer, &pkt.msg);
                }
                s->counters_sent[k] = v[k];
        }
        s->counters_described = true;
}

void bpfstack_on_timer(void *userdata) {
        check_hotplug(userdata);
        bpfstack_drain(userdata, true);
        bpfstack_write_counters(userdata, false);
}

static int open_cpu_clock(uint32_t cpu, uint32_t hz);

/* The clock event of cpu with the on-CPU program attached. -ENODEV when
 * the CPU is offline. */
int bpfstack_open_cpu(struct bpfstack_session *s, uint32_t cpu) {
        int fd = open_cpu_clock(cpu, s->cfg.frequency);
        if (fd < 0)
                return fd;
        struct bpf_link *l = bpf_program__attach_perf_event(s->skel->progs.on_cpu, fd);
        if (!l) {
                int r = -errno;
                close(fd);
                return r;
        }
        s->perf_fds[cpu] = fd;
        s->perf_links[cpu] = l;
        s->n_cpus++;
        return 0;
}

static int open_cpu_clock(uint32_t cpu, uint32_t hz) {
        struct perf_event_attr a = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(a),
                .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_freq = hz,
                .freq = 1,
                .read_format = CPU_HOTPLUG_READ_FORMAT,
        };
        int fd = (int) syscall(SYS_perf_event_open, &a, -1, (int) cpu, -1, PERF_FLAG_FD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}
