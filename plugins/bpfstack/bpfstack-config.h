/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.bpf_stack's config (DataSourceConfig.bpf_stack_config, our field
 * 7013), checked and turned into what the BPF programs' .rodata and the
 * drainer need; and the decoding of one ring buffer record. Anything
 * unsupported is an error naming the field. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpfstack.h"

#define BPFSTACK_DEFAULT_FREQUENCY 99u
#define BPFSTACK_MAX_FREQUENCY 100000u
#define BPFSTACK_DEFAULT_DRAIN_MS 100u
#define BPFSTACK_DEFAULT_RING_KB 4096u
#define BPFSTACK_DEFAULT_STACK_ENTRIES 16384u
#define BPFSTACK_DEFAULT_BTF_PATH "/sys/kernel/btf/vmlinux"
#define BPFSTACK_DEFAULT_UNWIND_ROWS (1u << 20)
#define BPFSTACK_DEFAULT_UNWIND_PROCS 1024u

struct bpfstack_config {
        uint32_t frequency;
        bool on_cpu, off_cpu;
        bool with_preempted;
        uint64_t min_blocked_ns;
        bool kernel_frames, user_frames;
        uint32_t max_depth;
        uint32_t drain_period_ms;
        uint32_t ring_buffer_kb;
        uint32_t stack_map_entries;
        uint32_t pids[BPFSTACK_MAX_PIDS], tids[BPFSTACK_MAX_PIDS];
        size_t n_pids, n_tids;
        char comms[BPFSTACK_MAX_COMMS][BPFSTACK_COMM_LEN];
        size_t n_comms;
        char cgroup[256]; /* "" : any */
        char btf_path[256];
        bool walk_tables; /* user_unwind: DWARF_TABLES */
        uint32_t unwind_rows, unwind_procs;
        bool python_frames; /* CPython's frames in place of its evaluation frames */
};

/* Parses a serialized DataSourceConfig. On error returns -EINVAL and the
 * reason (naming the field) in err; -ENOMEM. */
int bpfstack_config_parse(const uint8_t *buf, size_t size, struct bpfstack_config *ret, char *err, size_t err_size);

/* One ring buffer record, checked. -EBADMSG when it is not one of ours. */
int bpfstack_record_decode(const void *data, size_t size, struct bpfstack_record *ret);
