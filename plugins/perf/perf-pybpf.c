/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf's BPF program of the Python frames: loading, one output
 * event per CPU into the sampling ring, and the table of CPython
 * processes (see perf-pybpf.h and perfpy.h). */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"
#include "bpfstack-pyproc.h"
#include "perf-ds.h"
#include "perf-pybpf.h"
#include "perfpy.h"
#include "perfpy.skel.h"
#include "common/libbpf-log.h"
#include "common/plugin-common.h"

struct perf_pybpf {
        struct perfpy *skel;
        int out_map, procs_map, prog;
};

int perf_pybpf_new(struct perf_plugin *pl, struct perf_pybpf **ret) {
        struct perf_pybpf *b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        libbpf_log_to(pl->api, pl->host);
        b->skel = perfpy__open_and_load();
        if (!b->skel) {
                int r = negative_errno();
                free(b);
                return r < 0 ? r : -EINVAL;
        }
        b->out_map = bpf_map__fd(b->skel->maps.py_out);
        b->procs_map = bpf_map__fd(b->skel->maps.py_procs);
        b->prog = bpf_program__fd(b->skel->progs.py_sample);
        *ret = b;
        return 0;
}

void perf_pybpf_free(struct perf_pybpf *b) {
        if (!b)
                return;
        perfpy__destroy(b->skel);
        free(b);
}

int perf_pybpf_attach(struct perf_pybpf *b, const struct perf_event_attr *sampling, int cpu, int sampling_fd,
                      int *ret_fd, uint64_t *ret_id) {
        struct perf_event_attr a = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(a),
                .config = PERF_COUNT_SW_BPF_OUTPUT,
                .sample_period = 1,
                .sample_type = PERF_PYBPF_SAMPLE_TYPE,
                /* One ring takes both events' records only on one clock. */
                .use_clockid = sampling->use_clockid,
                .clockid = sampling->clockid,
        };
        int fd = (int) syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        uint64_t id = 0;
        uint32_t key = (uint32_t) cpu;
        int r = 0;
        if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, sampling_fd) < 0 || ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
                r = negative_errno();
        else if (bpf_map_update_elem(b->out_map, &key, &fd, BPF_ANY) < 0)
                r = negative_errno();
        else if (ioctl(sampling_fd, PERF_EVENT_IOC_SET_BPF, b->prog) < 0) {
                r = negative_errno();
                (void) bpf_map_delete_elem(b->out_map, &key);
        }
        if (r < 0) {
                close(fd);
                return r;
        }
        *ret_fd = fd;
        *ret_id = id;
        return 0;
}

void perf_pybpf_detach(struct perf_pybpf *b, int cpu, int fd) {
        uint32_t key = (uint32_t) cpu;
        if (b)
                (void) bpf_map_delete_elem(b->out_map, &key);
        safe_close(fd);
}

int perf_pybpf_set(struct perf_pybpf *b, int pid, const struct py_proc_info *in) {
        uint32_t key = (uint32_t) pid;
        if (!in || in->kind != PY_KNOWN) {
                if (bpf_map_delete_elem(b->procs_map, &key) < 0 && errno != ENOENT)
                        return negative_errno();
                return 0;
        }
        struct bpfstack_pyproc v = bpfstack_pyproc_of(in);
        if (bpf_map_update_elem(b->procs_map, &key, &v, BPF_ANY) < 0)
                return negative_errno();
        return 0;
}

int perf_pybpf_stats(struct perf_pybpf *b, uint64_t *ret_ns, uint64_t *ret_runs) {
        struct bpf_prog_info info = {0};
        uint32_t len = sizeof(info);
        *ret_ns = *ret_runs = 0;
        if (bpf_obj_get_info_by_fd(b->prog, &info, &len) < 0)
                return negative_errno();
        *ret_ns = info.run_time_ns;
        *ret_runs = info.run_cnt;
        return 0;
}
