/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading a linux.bpf_stack (or linux.perf) trace in the integration tests: each
 * PerfSample with its callstack's function names (interned per packet
 * sequence), and the unwind counter tracks with their last values. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interned-names.h"
#include "perfetto/trace/trace_packet.pb-c.h"

struct seqstate {
        uint32_t id;
        bool off_cpu; /* its timebase is the off-CPU one */
        struct interned_names names;
};

struct sample {
        bool off_cpu;
        uint32_t pid, tid, cpu;
        uint64_t ts, blocked_ns;
        char **names; /* leaf first */
        size_t n_names;
};

/* A counter track and its last value. */
struct counter {
        uint64_t uuid;
        char *name;
        int64_t value;
        bool has_value;
};

struct collect {
        struct seqstate seq[8];
        size_t n_seq;
        struct sample *s;
        size_t n_s, cap_s;
        struct counter counters[32];
        size_t n_counters;
        /* Counter values whose track descriptor did not come first, and
         * samples whose callstack was not interned before, are counted
         * here (without their value or stack) instead of failing the
         * test: a packet the plugin could not write while the shared
         * memory was full (under a flood of off-CPU samples) may have
         * held the descriptor or the interned data. */
        bool orphans_ok;
        size_t orphans;
        /* linux.perf's trace (its timebase is the config's, unnamed: every
         * sample on-CPU) rather than linux.bpf_stack's */
        bool linux_perf;
};

/* The last value of the counter track named name; false if none. */
bool counter_value(const struct collect *c, const char *name, int64_t *ret);
/* A fixture_record packet callback; userdata: a struct collect. */
void collect_packet(const Perfetto__Protos__TracePacket *p, void *userdata);
void collect_free(struct collect *c);
/* Whether frame k (0: the leaf) is named name. */
bool name_is(const struct sample *s, size_t k, const char *name);
/* Whether the outermost frame is _start. */
bool ends_at_start(const struct sample *s);
