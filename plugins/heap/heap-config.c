/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "common/config-error.h"
#include "heap-config.h"
#include "perfetto/config/profiling/heapprofd_config.pb-c.h"

/* DataSourceConfig.heapprofd_config */
#define DATA_SOURCE_CONFIG_HEAPPROFD_CONFIG 105

/* Only heapprofd_config of the DataSourceConfig is decoded with generated
 * code (its occurrences concatenated: their merge), as journald does. */
static int extract(const uint8_t *config, size_t size, uint8_t **ret, size_t *ret_n) {
        struct pbr_field f;
        size_t pos = 0, n = 0;
        int k;
        uint8_t *buf = NULL;
        while ((k = pbr_next(config, size, &pos, &f)) > 0) {
                if (f.number != DATA_SOURCE_CONFIG_HEAPPROFD_CONFIG)
                        continue;
                if (f.wire_type != 2)
                        break;
                uint8_t *b = realloc(buf, n + f.len + 1);
                if (!b) {
                        free(buf);
                        return -ENOMEM;
                }
                buf = b;
                memcpy(buf + n, f.data, f.len);
                n += f.len;
        }
        if (k < 0 || (k > 0 && f.wire_type != 2)) {
                free(buf);
                return -EBADMSG;
        }
        *ret = buf;
        *ret_n = n;
        return 0;
}

/* What upstream's heapprofd does and this plugin does not: refused. */
static int refuse(const Perfetto__Protos__HeapprofdConfig *h, char *err, size_t en) {
        static const char why_android[] = "is about Android's packages and heaps; not on Linux";
        if (h->n_target_installed_by)
                return config_error(err, en, "target_installed_by: %s", why_android);
        for (size_t k = 0; k < h->n_heaps; k++)
                if (strcmp(h->heaps[k], "libc.malloc") != 0)
                        return config_error(err, en, "heaps: \"%s\": only libc.malloc is profiled here", h->heaps[k]);
        if (h->n_exclude_heaps)
                return config_error(err, en, "exclude_heaps: only libc.malloc is profiled here");
        if (h->n_heap_sampling_intervals)
                return config_error(err, en, "heap_sampling_intervals: not supported (one heap, libc.malloc: "
                                             "use sampling_interval_bytes)");
        if (h->has_stream_allocations && h->stream_allocations)
                return config_error(err, en, "stream_allocations: not supported");
        if (h->has_adaptive_sampling_shmem_threshold || h->has_adaptive_sampling_max_sampling_interval_bytes)
                return config_error(err, en, "adaptive_sampling_shmem_threshold: not supported (the interval is "
                                             "fixed)");
        if (h->has_min_anonymous_memory_kb && h->min_anonymous_memory_kb)
                return config_error(err, en, "min_anonymous_memory_kb: not supported");
        if (h->has_max_heapprofd_memory_kb && h->max_heapprofd_memory_kb)
                return config_error(err, en, "max_heapprofd_memory_kb: not supported");
        if (h->has_max_heapprofd_cpu_secs && h->max_heapprofd_cpu_secs)
                return config_error(err, en, "max_heapprofd_cpu_secs: not supported");
        if (h->n_skip_symbol_prefix)
                return config_error(err, en, "skip_symbol_prefix: not supported");
        if (h->has_dump_at_max && h->dump_at_max)
                return config_error(err, en, "dump_at_max: not supported (peaks are not tracked: dumps give "
                                             "allocated and freed bytes)");
        if (h->has_disable_fork_teardown && h->disable_fork_teardown)
                return config_error(err, en, "disable_fork_teardown: not supported (a forked child is profiled "
                                             "only when the config names it)");
        return 0;
}

int heap_config_parse(const uint8_t *config, size_t size, struct heap_config *ret, char *err, size_t en) {
        *ret = (struct heap_config) { .interval = HEAP_DEFAULT_INTERVAL, .shmem_size = HEAP_DEFAULT_SHMEM,
                                      .block_timeout_us = HEAP_DEFAULT_BLOCK_TIMEOUT_US };
        uint8_t *buf = NULL;
        size_t n = 0;
        int r = extract(config, size, &buf, &n);
        if (r == -EBADMSG)
                return config_error(err, en, "DataSourceConfig does not decode");
        if (r < 0)
                return r;
        if (!buf)
                return config_error(err, en, "heapprofd_config: missing (it names the processes to profile)");
        Perfetto__Protos__HeapprofdConfig *h = perfetto__protos__heapprofd_config__unpack(NULL, n, buf);
        free(buf);
        if (!h)
                return config_error(err, en, "heapprofd_config does not decode");
        if ((r = refuse(h, err, en)) < 0)
                goto out;
        if (h->has_sampling_interval_bytes && h->sampling_interval_bytes)
                ret->interval = h->sampling_interval_bytes;
        ret->all = h->has_all && h->all;
        if (!ret->all && h->n_pid == 0 && h->n_process_cmdline == 0) {
                r = config_error(err, en, "pid: no process named (pid, process_cmdline or all)");
                goto out;
        }
        if (h->n_pid + h->n_process_cmdline > HEAP_MAX_TARGETS) {
                r = config_error(err, en, "pid: %zu targets, at most %u", h->n_pid + h->n_process_cmdline,
                                 HEAP_MAX_TARGETS);
                goto out;
        }
        for (size_t k = 0; k < h->n_pid; k++)
                if (h->pid[k] == 0 || h->pid[k] > INT32_MAX) {
                        r = config_error(err, en, "pid: %llu is not a process id", (unsigned long long) h->pid[k]);
                        goto out;
                }
        for (size_t k = 0; k < h->n_process_cmdline; k++)
                if (!h->process_cmdline[k][0] || strlen(h->process_cmdline[k]) > 4096) {
                        r = config_error(err, en, "process_cmdline: \"%s\" is not a command line pattern",
                                         h->process_cmdline[k]);
                        goto out;
                }
        if (h->has_shmem_size_bytes && h->shmem_size_bytes) {
                if (h->shmem_size_bytes < 65536 || h->shmem_size_bytes > HEAP_MAX_SHMEM) {
                        r = config_error(err, en, "shmem_size_bytes: %llu is not between 64 KiB and %u MiB",
                                         (unsigned long long) h->shmem_size_bytes, HEAP_MAX_SHMEM >> 20);
                        goto out;
                }
                ret->shmem_size = h->shmem_size_bytes;
        }
        ret->block_client = h->has_block_client && h->block_client;
        if (h->has_block_client_timeout_us && h->block_client_timeout_us)
                ret->block_timeout_us = h->block_client_timeout_us;
        ret->no_startup = h->has_no_startup && h->no_startup;
        ret->no_running = h->has_no_running && h->no_running;
        if (ret->no_startup && ret->no_running) {
                r = config_error(err, en, "no_running: with no_startup too, no process is profiled");
                goto out;
        }
        if (h->continuous_dump_config) {
                const Perfetto__Protos__HeapprofdConfig__ContinuousDumpConfig *d = h->continuous_dump_config;
                ret->dump_phase_ms = d->dump_phase_ms;
                ret->dump_interval_ms = d->dump_interval_ms;
                if (ret->dump_interval_ms && ret->dump_interval_ms < 100) {
                        r = config_error(err, en, "continuous_dump_config.dump_interval_ms: %u is under 100",
                                         ret->dump_interval_ms);
                        goto out;
                }
        }
        if (h->n_pid && !(ret->pids = calloc(h->n_pid, sizeof(*ret->pids)))) {
                r = -ENOMEM;
                goto out;
        }
        if (h->n_pid)
                memcpy(ret->pids, h->pid, h->n_pid * sizeof(*ret->pids));
        ret->n_pids = h->n_pid;
        if (h->n_process_cmdline && !(ret->cmdlines = calloc(h->n_process_cmdline, sizeof(char *)))) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t k = 0; k < h->n_process_cmdline; k++) {
                if (!(ret->cmdlines[k] = strdup(h->process_cmdline[k]))) {
                        r = -ENOMEM;
                        goto out;
                }
                ret->n_cmdlines = k + 1;
        }
out:
        perfetto__protos__heapprofd_config__free_unpacked(h, NULL);
        if (r < 0)
                heap_config_done(ret);
        return r;
}

void heap_config_done(struct heap_config *c) {
        for (size_t k = 0; k < c->n_cmdlines; k++)
                free(c->cmdlines[k]);
        free(c->cmdlines);
        free(c->pids);
        *c = (struct heap_config) { 0 };
}

bool heap_config_targets(const struct heap_config *c, int pid, const char *cmdline, size_t size) {
        if (c->all)
                return true;
        for (size_t k = 0; k < c->n_pids; k++)
                if (c->pids[k] == (uint64_t) pid)
                        return true;
        if (!cmdline || size == 0 || !c->n_cmdlines)
                return false;
        /* argv[0]: up to the first NUL (the buffer may end without one). */
        char argv0[4097];
        size_t n = strnlen(cmdline, MIN(size, sizeof(argv0) - 1));
        memcpy(argv0, cmdline, n);
        argv0[n] = '\0';
        const char *base = strrchr(argv0, '/');
        base = base ? base + 1 : argv0;
        for (size_t k = 0; k < c->n_cmdlines; k++) {
                const char *pat = c->cmdlines[k];
                if (fnmatch(pat, strchr(pat, '/') ? argv0 : base, 0) == 0)
                        return true;
        }
        return false;
}
