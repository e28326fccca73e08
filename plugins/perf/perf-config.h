/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.perf's DataSourceConfig.perf_event_config, checked and turned into
 * what perf_event_open and the sampler need. Anything we do not support is
 * an error naming the field, never ignored. */

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum perf_unwind_mode { PERF_UNWIND_SKIP, PERF_UNWIND_DWARF, PERF_UNWIND_FP };

#define PERF_MAX_SCOPE 64

struct perf_config {
        struct perf_event_attr attr; /* sample_type etc. filled by the sampler */
        char tracepoint[128];        /* "group:name" when the timebase is one */
        char *tracepoint_filter;     /* owned */
        uint32_t clock_id;           /* BuiltinClock of the samples' timestamps */
        /* The timebase as configured, serialized (PerfSampleDefaults.timebase). */
        uint8_t *timebase;
        size_t timebase_size;
        bool callstacks;
        bool kernel_frames;
        enum perf_unwind_mode user_frames;
        bool python_frames; /* CPython's frames in place of its evaluation frames */
        /* scope */
        int32_t target_pid[PERF_MAX_SCOPE], exclude_pid[PERF_MAX_SCOPE];
        size_t n_target_pid, n_exclude_pid;
        char *target_cmdline[PERF_MAX_SCOPE], *exclude_cmdline[PERF_MAX_SCOPE]; /* owned */
        size_t n_target_cmdline, n_exclude_cmdline;
        uint32_t additional_cmdline_count;
        /* CPUs to sample; empty: all online */
        uint32_t *cpus;
        size_t n_cpus;
        bool ignore_open_failure;
        uint32_t ring_buffer_pages;
        uint32_t read_period_ms;
        uint64_t max_enqueued_bytes;
        uint32_t unwind_state_clear_period_ms;
};

/* Defaults and limits (man 7 traced-perf). */
#define PERF_DEFAULT_FREQUENCY 10u
#define PERF_DEFAULT_RING_PAGES 512u
/* With DWARF stacks every sample reserves the whole stack copy in the
 * ring: 63 samples of 4 MiB rings, as 2 MiB rings held 127 of 16 KiB. */
#define PERF_DEFAULT_RING_PAGES_DWARF 1024u
/* The notes on processes' ring of each CPU: 1 MiB, thousands of execs'
 * mappings between two reads. */
#define PERF_NOTES_RING_PAGES 256u
#define PERF_MAX_RING_PAGES 65536u
#define PERF_DEFAULT_READ_PERIOD_MS 100u
#define PERF_DEFAULT_MAX_ENQUEUED_KB (64u * 1024u)
/* The ring the stack copies come from first (perf-arena.h): a batch the
 * loop thread holds (perf-session.h, 128 copies of some 9 KiB on average)
 * and what the worker has still to unwind, with room for the queue's
 * first second; copies past it come from malloc. No larger than the byte
 * bound needs. */
#define PERF_ARENA_BYTES (4u << 20)
/* The user stack copied with each sample, as upstream traced_perf asks
 * for: the most the kernel allows (below 64 KiB, its low 8 bits clear)
 * with room left for the rest of the record. C++ compilers, browsers and
 * interpreters run 32 to 64 KiB deep (clang++ parsing and optimising:
 * about a third of its stacks were cut at 32 KiB, nearly all at 16 KiB). */
#define PERF_STACK_COPY_BYTES ((1u << 16) - 256u)

/* Parses a serialized DataSourceConfig. On error returns a negative errno
 * and writes the reason (naming the field) into err. */
int perf_config_parse(const uint8_t *buf, size_t size, struct perf_config *ret, char *err, size_t err_size);
void perf_config_done(struct perf_config *c);
/* Whether a process is in scope, by pid and command line (argv[0] as
 * given, or its basename; fnmatch patterns). *additional_left counts down
 * additional_cmdline_count. No scope at all: everything is. */
bool perf_config_in_scope(const struct perf_config *c, int pid, const char *cmdline, uint32_t *additional_left);
