/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config-error.h"
#include "bpfstack-config.h"
#include "perfetto/config/data_source_config.pb-c.h"

static int parse_id(const char *v, uint32_t *ret) {
        char *end;
        errno = 0;
        unsigned long x = strtoul(v, &end, 10);
        if (errno || end == v || *end || x == 0 || x > 0x3fffffff || v[0] == '-')
                return -EINVAL;
        *ret = (uint32_t) x;
        return 0;
}

static int add_filter(struct bpfstack_config *c, const char *f, char *err, size_t en) {
        const char *eq = strchr(f, '=');
        if (!eq || eq == f || !eq[1])
                return config_error(err, en, "filter: \"%s\" is not KEY=VALUE (keys: pid, tid, comm, cgroup)", f);
        size_t kl = (size_t) (eq - f);
        const char *v = eq + 1;
        if (kl == 3 && (!strncmp(f, "pid", 3) || !strncmp(f, "tid", 3))) {
                bool is_pid = f[0] == 'p';
                uint32_t *to = is_pid ? c->pids : c->tids;
                size_t *n = is_pid ? &c->n_pids : &c->n_tids;
                if (*n == BPFSTACK_MAX_PIDS)
                        return config_error(err, en, "filter: more than %u %.3s= entries", BPFSTACK_MAX_PIDS, f);
                if (parse_id(v, &to[*n]) < 0)
                        return config_error(err, en, "filter: \"%s\": not a process id", f);
                (*n)++;
                return 0;
        }
        if (kl == 4 && !strncmp(f, "comm", 4)) {
                if (c->n_comms == BPFSTACK_MAX_COMMS)
                        return config_error(err, en, "filter: more than %u comm= entries", BPFSTACK_MAX_COMMS);
                if (strlen(v) >= BPFSTACK_COMM_LEN)
                        return config_error(err, en, "filter: \"%s\": a comm is at most %u characters", f,
                                    BPFSTACK_COMM_LEN - 1);
                snprintf(c->comms[c->n_comms++], BPFSTACK_COMM_LEN, "%s", v);
                return 0;
        }
        if (kl == 6 && !strncmp(f, "cgroup", 6)) {
                if (c->cgroup[0])
                        return config_error(err, en, "filter: only one cgroup= entry");
                if (strlen(v) >= sizeof(c->cgroup))
                        return config_error(err, en, "filter: cgroup path too long");
                snprintf(c->cgroup, sizeof(c->cgroup), "%s", v);
                return 0;
        }
        return config_error(err, en, "filter: unknown filter \"%.*s\" in \"%s\" (keys: pid, tid, comm, cgroup)", (int) kl, f,
                    f);
}

int bpfstack_config_parse(const uint8_t *buf, size_t size, struct bpfstack_config *ret, char *err, size_t en) {
        struct bpfstack_config c = {
                .frequency = BPFSTACK_DEFAULT_FREQUENCY,
                .on_cpu = true,
                .off_cpu = true,
                .kernel_frames = true,
                .user_frames = true,
                .max_depth = BPFSTACK_MAX_DEPTH,
                .drain_period_ms = BPFSTACK_DEFAULT_DRAIN_MS,
                .ring_buffer_kb = BPFSTACK_DEFAULT_RING_KB,
                .stack_map_entries = BPFSTACK_DEFAULT_STACK_ENTRIES,
                .btf_path = BPFSTACK_DEFAULT_BTF_PATH,
                .walk_tables = true,
                .unwind_rows = BPFSTACK_DEFAULT_UNWIND_ROWS,
                .unwind_procs = BPFSTACK_DEFAULT_UNWIND_PROCS,
                .python_frames = true,
        };
        int r = 0;
        err[0] = '\0';
        Perfetto__Protos__DataSourceConfig *ds = perfetto__protos__data_source_config__unpack(NULL, size, buf);
        if (!ds)
                return config_error(err, en, "the DataSourceConfig does not decode");
        const Perfetto__Protos__BpfStackConfig *b = ds->bpf_stack_config;
        if (b) {
                if (b->base.n_unknown_fields > 0) {
                        r = config_error(err, en, "field %u: not a field of BpfStackConfig",
                                 b->base.unknown_fields[0].tag);
                        goto out;
                }
                if (b->has_frequency) {
                        if (b->frequency == 0 || b->frequency > BPFSTACK_MAX_FREQUENCY) {
                                r = config_error(err, en, "frequency: %u Hz is out of range (1..%u)", b->frequency,
                                         BPFSTACK_MAX_FREQUENCY);
                                goto out;
                        }
                        c.frequency = b->frequency;
                }
                if (b->has_on_cpu)
                        c.on_cpu = b->on_cpu;
                if (b->has_off_cpu)
                        c.off_cpu = b->off_cpu;
                if (b->has_with_preempted)
                        c.with_preempted = b->with_preempted;
                if (b->has_min_blocked_us) {
                        if (b->min_blocked_us > UINT64_MAX / 1000) {
                                r = config_error(err, en, "min_blocked_us: too large");
                                goto out;
                        }
                        c.min_blocked_ns = b->min_blocked_us * 1000;
                }
                if (b->has_kernel_frames)
                        c.kernel_frames = b->kernel_frames;
                if (b->has_user_frames)
                        c.user_frames = b->user_frames;
                if (b->has_max_depth) {
                        if (b->max_depth == 0 || b->max_depth > BPFSTACK_MAX_DEPTH) {
                                r = config_error(err, en, "max_depth: %u is out of range (1..%u)", b->max_depth,
                                         BPFSTACK_MAX_DEPTH);
                                goto out;
                        }
                        c.max_depth = b->max_depth;
                }
                if (b->has_drain_period_ms) {
                        if (b->drain_period_ms == 0 || b->drain_period_ms > 10000) {
                                r = config_error(err, en, "drain_period_ms: %u is out of range (1..10000)",
                                         b->drain_period_ms);
                                goto out;
                        }
                        c.drain_period_ms = b->drain_period_ms;
                }
                if (b->has_ring_buffer_kb) {
                        uint32_t v = b->ring_buffer_kb;
                        if (v < 64 || v > 262144 || (v & (v - 1))) {
                                r = config_error(err, en, "ring_buffer_kb: %u is not a power of two in 64..262144", v);
                                goto out;
                        }
                        c.ring_buffer_kb = v;
                }
                if (b->has_stack_map_entries) {
                        if (b->stack_map_entries < 256 || b->stack_map_entries > (1u << 20)) {
                                r = config_error(err, en, "stack_map_entries: %u is out of range (256..1048576)",
                                         b->stack_map_entries);
                                goto out;
                        }
                        c.stack_map_entries = b->stack_map_entries;
                }
                if (b->has_user_unwind) {
                        if (b->user_unwind == PERFETTO__PROTOS__BPF_STACK_CONFIG__USER_UNWIND__FRAME_POINTER)
                                c.walk_tables = false;
                        else if (b->user_unwind != PERFETTO__PROTOS__BPF_STACK_CONFIG__USER_UNWIND__DWARF_TABLES &&
                                 b->user_unwind !=
                                         PERFETTO__PROTOS__BPF_STACK_CONFIG__USER_UNWIND__USER_UNWIND_UNSPECIFIED) {
                                r = config_error(err, en, "user_unwind: %d is not DWARF_TABLES or FRAME_POINTER",
                                         (int) b->user_unwind);
                                goto out;
                        }
                }
                if (b->has_unwind_table_rows) {
                        if (b->unwind_table_rows < (1u << 16) || b->unwind_table_rows > (1u << 24)) {
                                r = config_error(err, en, "unwind_table_rows: %u is out of range (65536..16777216)",
                                         b->unwind_table_rows);
                                goto out;
                        }
                        c.unwind_rows = b->unwind_table_rows;
                }
                if (b->has_unwind_processes) {
                        if (b->unwind_processes < 16 || b->unwind_processes > 65536) {
                                r = config_error(err, en, "unwind_processes: %u is out of range (16..65536)",
                                         b->unwind_processes);
                                goto out;
                        }
                        c.unwind_procs = b->unwind_processes;
                }
                if (b->has_python_frames)
                        c.python_frames = b->python_frames;
                for (size_t k = 0; k < b->n_filter; k++)
                        if ((r = add_filter(&c, b->filter[k], err, en)) < 0)
                                goto out;
                if (b->btf_path) {
                        if (!b->btf_path[0] || strlen(b->btf_path) >= sizeof(c.btf_path)) {
                                r = config_error(err, en, "btf_path: empty or too long");
                                goto out;
                        }
                        snprintf(c.btf_path, sizeof(c.btf_path), "%s", b->btf_path);
                }
        }
        if (!c.on_cpu && !c.off_cpu) {
                r = config_error(err, en, "on_cpu, off_cpu: both off, nothing to record");
                goto out;
        }
        if (!c.kernel_frames && !c.user_frames) {
                r = config_error(err, en, "kernel_frames, user_frames: both off, no stacks to record");
                goto out;
        }
        /* Python frames are user frames: none without them (and no
         * process looked at for them). */
        if (!c.user_frames)
                c.python_frames = false;
        *ret = c;
out:
        perfetto__protos__data_source_config__free_unpacked(ds, NULL);
        return r;
}

int bpfstack_record_decode(const void *data, size_t size, struct bpfstack_record *ret) {
        if (size < sizeof(*ret))
                return -EBADMSG;
        memcpy(ret, data, sizeof(*ret));
        if (ret->n_uframes > BPFSTACK_MAX_DEPTH || (ret->n_uframes > 0 && ret->ustack_id != BPFSTACK_USTACK_WALKED) ||
            ret->n_pyframes > BPFSTACK_MAX_PYFRAMES ||
            size != sizeof(*ret) + (size_t) ret->n_uframes * sizeof(uint64_t) +
                            (size_t) ret->n_pyframes * sizeof(struct bpfstack_pyframe) ||
            ret->ustop >= BPFSTACK_STOP_MAX || ret->pystop >= BPFSTACK_PY_MAX)
                return -EBADMSG;
        if (ret->kind != BPFSTACK_ON_CPU && ret->kind != BPFSTACK_OFF_CPU)
                return -EBADMSG;
        if (ret->kind == BPFSTACK_ON_CPU && ret->blocked_ns != 0)
                return -EBADMSG;
        if (ret->tid == 0)
                return -EBADMSG;
        ret->comm[BPFSTACK_COMM_LEN - 1] = '\0';
        return 0;
}
