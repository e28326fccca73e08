/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* android.heapprofd's config (HeapprofdConfig, DataSourceConfig field
 * 105) as the plugin uses it. What upstream's message says that means
 * nothing here, or that the plugin does not do, is refused by name. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_DEFAULT_INTERVAL 4096u
#define HEAP_DEFAULT_SHMEM (8u << 20)
#define HEAP_MAX_SHMEM (512u << 20)
#define HEAP_DEFAULT_BLOCK_TIMEOUT_US 30000000u
#define HEAP_DEFAULT_STACK_BYTES (64u << 10)
#define HEAP_MAX_TARGETS 256u

struct heap_config {
        uint64_t interval;
        uint64_t *pids;
        size_t n_pids;
        char **cmdlines;
        size_t n_cmdlines;
        bool all;
        bool no_startup, no_running;
        uint64_t shmem_size;
        bool block_client;
        uint32_t block_timeout_us;
        uint32_t dump_phase_ms, dump_interval_ms; /* 0: no continuous dumps */
};

/* 0, or -EINVAL with the field and why in err. */
int heap_config_parse(const uint8_t *config, size_t size, struct heap_config *ret, char *err, size_t err_size);
void heap_config_done(struct heap_config *c);
/* Whether a process of this pid and command line (argv[0] first, NUL
 * separated, size bytes) is one the config names. A pattern with a '/'
 * is matched against argv[0]; one without, against argv[0]'s last
 * component; both as fnmatch(3) globs. */
bool heap_config_targets(const struct heap_config *c, int pid, const char *cmdline, size_t size);
