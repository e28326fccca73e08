/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config-error.h"
#include "perf-config.h"
#include "perfetto/config/data_source_config.pb-c.h"

/* BuiltinClock ids. */
#define CLOCK_ID_REALTIME 1u
#define CLOCK_ID_MONOTONIC 3u
#define CLOCK_ID_MONOTONIC_RAW 5u
#define CLOCK_ID_BOOTTIME 6u

static const struct {
        uint32_t type;
        uint64_t config;
} counters[] = {
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CPU_CLOCK] = { PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_PAGE_FAULTS] = { PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_TASK_CLOCK] = { PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CONTEXT_SWITCHES] = { PERF_TYPE_SOFTWARE,
                                                                          PERF_COUNT_SW_CONTEXT_SWITCHES },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CPU_MIGRATIONS] = { PERF_TYPE_SOFTWARE,
                                                                        PERF_COUNT_SW_CPU_MIGRATIONS },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_PAGE_FAULTS_MIN] = { PERF_TYPE_SOFTWARE,
                                                                         PERF_COUNT_SW_PAGE_FAULTS_MIN },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_PAGE_FAULTS_MAJ] = { PERF_TYPE_SOFTWARE,
                                                                         PERF_COUNT_SW_PAGE_FAULTS_MAJ },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_ALIGNMENT_FAULTS] = { PERF_TYPE_SOFTWARE,
                                                                          PERF_COUNT_SW_ALIGNMENT_FAULTS },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_EMULATION_FAULTS] = { PERF_TYPE_SOFTWARE,
                                                                          PERF_COUNT_SW_EMULATION_FAULTS },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_DUMMY] = { PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_CPU_CYCLES] = { PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_INSTRUCTIONS] = { PERF_TYPE_HARDWARE,
                                                                      PERF_COUNT_HW_INSTRUCTIONS },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_CACHE_REFERENCES] = { PERF_TYPE_HARDWARE,
                                                                          PERF_COUNT_HW_CACHE_REFERENCES },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_CACHE_MISSES] = { PERF_TYPE_HARDWARE,
                                                                      PERF_COUNT_HW_CACHE_MISSES },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_BRANCH_INSTRUCTIONS] = { PERF_TYPE_HARDWARE,
                                                                             PERF_COUNT_HW_BRANCH_INSTRUCTIONS },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_BRANCH_MISSES] = { PERF_TYPE_HARDWARE,
                                                                       PERF_COUNT_HW_BRANCH_MISSES },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_BUS_CYCLES] = { PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_STALLED_CYCLES_FRONTEND] = {
                PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_STALLED_CYCLES_BACKEND] = {
                PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND },
        [PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_REF_CPU_CYCLES] = { PERF_TYPE_HARDWARE,
                                                                        PERF_COUNT_HW_REF_CPU_CYCLES },
};

static int add_strings(char **to, size_t *n, char **from, size_t count, const char *field, char *err, size_t en) {
        for (size_t k = 0; k < count; k++) {
                if (*n == PERF_MAX_SCOPE)
                        return config_error(err, en, "%s: more than %u entries", field, PERF_MAX_SCOPE);
                if (!(to[*n] = strdup(from[k])))
                        return -ENOMEM;
                (*n)++;
        }
        return 0;
}

static int add_pids(int32_t *to, size_t *n, const int32_t *from, size_t count, const char *field, char *err,
                    size_t en) {
        for (size_t k = 0; k < count; k++) {
                if (*n == PERF_MAX_SCOPE)
                        return config_error(err, en, "%s: more than %u entries", field, PERF_MAX_SCOPE);
                if (from[k] <= 0)
                        return config_error(err, en, "%s: %d is not a process id", field, from[k]);
                to[(*n)++] = from[k];
        }
        return 0;
}

static int parse_timebase(const Perfetto__Protos__PerfEvents__Timebase *tb, struct perf_config *c, char *err,
                          size_t en) {
        struct perf_event_attr *a = &c->attr;
        switch (tb->interval_case) {
        case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY:
                if (tb->frequency == 0 || tb->frequency > 100000)
                        return config_error(err, en, "timebase.frequency: %llu is not within 1..100000 Hz",
                                    (unsigned long long) tb->frequency);
                a->freq = 1;
                a->sample_freq = tb->frequency;
                break;
        case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_PERIOD:
                if (tb->period == 0)
                        return config_error(err, en, "timebase.period: must be at least 1");
                a->sample_period = tb->period;
                break;
        case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_POLL_PERIOD_MS:
                return config_error(err, en, "timebase.poll_period_ms: counting without sampling is not supported");
        default:
                a->freq = 1;
                a->sample_freq = PERF_DEFAULT_FREQUENCY;
                break;
        }
        switch (tb->event_case) {
        case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_COUNTER:
                if ((size_t) tb->counter >= sizeof(counters) / sizeof(counters[0]) ||
                    tb->counter == PERFETTO__PROTOS__PERF_EVENTS__COUNTER__UNKNOWN_COUNTER)
                        return config_error(err, en, "timebase.counter: unknown counter %d", (int) tb->counter);
                a->type = counters[tb->counter].type;
                a->config = counters[tb->counter].config;
                break;
        case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_TRACEPOINT: {
                const char *name = tb->tracepoint->name;
                if (!name || !strchr(name, ':') || strlen(name) >= sizeof(c->tracepoint) || strchr(name, '/') ||
                    strstr(name, ".."))
                        return config_error(err, en, "timebase.tracepoint.name: \"%s\" is not \"group:name\"",
                                    name ? name : "");
                snprintf(c->tracepoint, sizeof(c->tracepoint), "%s", name);
                if (tb->tracepoint->filter && *tb->tracepoint->filter &&
                    !(c->tracepoint_filter = strdup(tb->tracepoint->filter)))
                        return -ENOMEM;
                a->type = PERF_TYPE_TRACEPOINT; /* config: the id, found by the sampler */
                break;
        }
        case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_RAW_EVENT:
                if (tb->raw_event->pmu_name && *tb->raw_event->pmu_name)
                        return config_error(err, en, "timebase.raw_event.pmu_name: PMUs by name are not supported; give type");
                a->type = tb->raw_event->type;
                a->config = tb->raw_event->config;
                a->config1 = tb->raw_event->config1;
                a->config2 = tb->raw_event->config2;
                break;
        default:
                a->type = PERF_TYPE_SOFTWARE;
                a->config = PERF_COUNT_SW_CPU_CLOCK;
                break;
        }
        for (size_t k = 0; k < tb->n_modifiers; k++) {
                if (k == 0)
                        a->exclude_user = a->exclude_kernel = a->exclude_hv = 1;
                switch (tb->modifiers[k]) {
                case PERFETTO__PROTOS__PERF_EVENTS__EVENT_MODIFIER__EVENT_MODIFIER_COUNT_USERSPACE:
                        a->exclude_user = 0;
                        break;
                case PERFETTO__PROTOS__PERF_EVENTS__EVENT_MODIFIER__EVENT_MODIFIER_COUNT_KERNEL:
                        a->exclude_kernel = 0;
                        break;
                case PERFETTO__PROTOS__PERF_EVENTS__EVENT_MODIFIER__EVENT_MODIFIER_COUNT_HYPERVISOR:
                        a->exclude_hv = 0;
                        break;
                default:
                        return config_error(err, en, "timebase.modifiers: unknown modifier %d", (int) tb->modifiers[k]);
                }
        }
        a->use_clockid = 1;
        a->clockid = CLOCK_BOOTTIME;
        c->clock_id = CLOCK_ID_BOOTTIME;
        if (tb->has_timestamp_clock) {
                switch (tb->timestamp_clock) {
                case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_REALTIME:
                        a->clockid = CLOCK_REALTIME, c->clock_id = CLOCK_ID_REALTIME;
                        break;
                case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC:
                        a->clockid = CLOCK_MONOTONIC, c->clock_id = CLOCK_ID_MONOTONIC;
                        break;
                case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC_RAW:
                        a->clockid = CLOCK_MONOTONIC_RAW, c->clock_id = CLOCK_ID_MONOTONIC_RAW;
                        break;
                case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_BOOTTIME:
                case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__UNKNOWN_PERF_CLOCK:
                        break;
                default:
                        return config_error(err, en, "timebase.timestamp_clock: unknown clock %d", (int) tb->timestamp_clock);
                }
        }
        return 0;
}

static int parse(const Perfetto__Protos__PerfEventConfig *pc, struct perf_config *c, char *err, size_t en) {
        int r;
        if (pc->n_followers)
                return config_error(err, en, "followers: follower events are not supported");
        if (pc->n_cpuid)
                return config_error(err, en, "cpuid: not supported");
        if (pc->n_target_installed_by)
                return config_error(err, en, "target_installed_by: Android packages are not supported");
        if (pc->has_max_daemon_memory_kb && pc->max_daemon_memory_kb)
                return config_error(err, en, "max_daemon_memory_kb: not supported (use max_enqueued_footprint_kb)");
        if (pc->has_remote_descriptor_timeout_ms && pc->remote_descriptor_timeout_ms)
                return config_error(err, en, "remote_descriptor_timeout_ms: Android's remote unwinding is not supported");
        if (pc->has_all_cpus && !pc->all_cpus && pc->n_target_cpu == 0)
                return config_error(err, en, "all_cpus: false without target_cpu names no CPU");

        Perfetto__Protos__PerfEvents__Timebase def = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INIT;
        const Perfetto__Protos__PerfEvents__Timebase *tb = pc->timebase ? pc->timebase : &def;
        if (!pc->timebase && pc->has_sampling_frequency) {
                def.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY;
                def.frequency = pc->sampling_frequency;
        }
        if (!pc->timebase && !pc->has_sampling_frequency) {
                def.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY;
                def.frequency = PERF_DEFAULT_FREQUENCY;
        }
        if ((r = parse_timebase(tb, c, err, en)) < 0)
                return r;
        c->timebase_size = protobuf_c_message_get_packed_size(&tb->base);
        if (!(c->timebase = malloc(c->timebase_size + 1)))
                return -ENOMEM;
        protobuf_c_message_pack(&tb->base, c->timebase);

        const Perfetto__Protos__PerfEventConfig__CallstackSampling *cs = pc->callstack_sampling;
        bool legacy_scope = pc->n_target_pid || pc->n_target_cmdline || pc->n_exclude_pid || pc->n_exclude_cmdline ||
                            pc->has_additional_cmdline_count || pc->has_kernel_frames;
        if (cs && legacy_scope)
                return config_error(err, en, "callstack_sampling: cannot be combined with the older flat target_*/"
                                     "exclude_*/kernel_frames fields");
        /* linux.perf's own field: on unless said otherwise. */
        c->python_frames = !cs || !cs->has_traced_python_frames || cs->traced_python_frames;
        if (cs) {
                c->callstacks = true;
                c->kernel_frames = cs->has_kernel_frames && cs->kernel_frames;
                switch (cs->has_user_frames ? cs->user_frames
                                            : PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_UNKNOWN) {
                case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_UNKNOWN:
                case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_DWARF:
                        c->user_frames = PERF_UNWIND_DWARF;
                        break;
                case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_SKIP:
                        c->user_frames = PERF_UNWIND_SKIP;
                        break;
                case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_FRAME_POINTER:
                        c->user_frames = PERF_UNWIND_FP;
                        break;
                default: {
                        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
                                &perfetto__protos__perf_event_config__unwind_mode__descriptor, (int) cs->user_frames);
                        if (v)
                                return config_error(err, en, "callstack_sampling.user_frames: %s is not supported (use "
                                                     "UNWIND_DWARF, UNWIND_FRAME_POINTER or UNWIND_SKIP)", v->name);
                        return config_error(err, en, "callstack_sampling.user_frames: mode %d is not supported",
                                    (int) cs->user_frames);
                }
                }
                const Perfetto__Protos__PerfEventConfig__Scope *s = cs->scope;
                if (s) {
                        if (s->has_process_shard_count && s->process_shard_count)
                                return config_error(err, en, "callstack_sampling.scope.process_shard_count: not supported");
                        if ((r = add_pids(c->target_pid, &c->n_target_pid, s->target_pid, s->n_target_pid,
                                          "scope.target_pid", err, en)) < 0 ||
                            (r = add_pids(c->exclude_pid, &c->n_exclude_pid, s->exclude_pid, s->n_exclude_pid,
                                          "scope.exclude_pid", err, en)) < 0 ||
                            (r = add_strings(c->target_cmdline, &c->n_target_cmdline, s->target_cmdline,
                                             s->n_target_cmdline, "scope.target_cmdline", err, en)) < 0 ||
                            (r = add_strings(c->exclude_cmdline, &c->n_exclude_cmdline, s->exclude_cmdline,
                                             s->n_exclude_cmdline, "scope.exclude_cmdline", err, en)) < 0)
                                return r;
                        c->additional_cmdline_count = s->additional_cmdline_count;
                }
        } else if (legacy_scope || !pc->timebase) {
                /* The flat form always sampled callstacks. */
                c->callstacks = true;
                c->kernel_frames = pc->has_kernel_frames && pc->kernel_frames;
                c->user_frames = PERF_UNWIND_DWARF;
                if ((r = add_pids(c->target_pid, &c->n_target_pid, pc->target_pid, pc->n_target_pid, "target_pid",
                                  err, en)) < 0 ||
                    (r = add_pids(c->exclude_pid, &c->n_exclude_pid, pc->exclude_pid, pc->n_exclude_pid,
                                  "exclude_pid", err, en)) < 0 ||
                    (r = add_strings(c->target_cmdline, &c->n_target_cmdline, pc->target_cmdline,
                                     pc->n_target_cmdline, "target_cmdline", err, en)) < 0 ||
                    (r = add_strings(c->exclude_cmdline, &c->n_exclude_cmdline, pc->exclude_cmdline,
                                     pc->n_exclude_cmdline, "exclude_cmdline", err, en)) < 0)
                        return r;
                c->additional_cmdline_count = pc->additional_cmdline_count;
        }
        if (pc->n_target_cpu) {
                if (!(c->cpus = calloc(pc->n_target_cpu, sizeof(*c->cpus))))
                        return -ENOMEM;
                for (size_t k = 0; k < pc->n_target_cpu; k++) {
                        if (pc->target_cpu[k] >= 4096)
                                return config_error(err, en, "target_cpu: %u is not a CPU", pc->target_cpu[k]);
                        c->cpus[k] = pc->target_cpu[k];
                }
                c->n_cpus = pc->n_target_cpu;
        }
        c->ignore_open_failure = pc->has_ignore_open_failure && pc->ignore_open_failure;
        c->ring_buffer_pages = pc->has_ring_buffer_pages && pc->ring_buffer_pages ? pc->ring_buffer_pages
                               : c->callstacks && c->user_frames == PERF_UNWIND_DWARF ? PERF_DEFAULT_RING_PAGES_DWARF
                                                                                    : PERF_DEFAULT_RING_PAGES;
        if (c->ring_buffer_pages & (c->ring_buffer_pages - 1) || c->ring_buffer_pages > PERF_MAX_RING_PAGES)
                return config_error(err, en, "ring_buffer_pages: %u is not a power of two up to %u", c->ring_buffer_pages,
                            PERF_MAX_RING_PAGES);
        c->read_period_ms = pc->has_ring_buffer_read_period_ms && pc->ring_buffer_read_period_ms
                                    ? pc->ring_buffer_read_period_ms
                                    : PERF_DEFAULT_READ_PERIOD_MS;
        if (c->read_period_ms > 60000)
                return config_error(err, en, "ring_buffer_read_period_ms: %u is above 60000", c->read_period_ms);
        c->max_enqueued_bytes = (pc->has_max_enqueued_footprint_kb && pc->max_enqueued_footprint_kb
                                         ? pc->max_enqueued_footprint_kb
                                         : PERF_DEFAULT_MAX_ENQUEUED_KB) *
                                1024u;
        c->unwind_state_clear_period_ms = pc->has_unwind_state_clear_period_ms ? pc->unwind_state_clear_period_ms : 0;
        return 0;
}

int perf_config_parse(const uint8_t *buf, size_t size, struct perf_config *c, char *err, size_t en) {
        *c = (struct perf_config) {};
        Perfetto__Protos__DataSourceConfig *dsc = perfetto__protos__data_source_config__unpack(NULL, size, buf);
        if (!dsc)
                return config_error(err, en, "DataSourceConfig does not decode");
        int r;
        if (!dsc->perf_event_config) {
                /* Everything by default: 10 Hz on cpu-clock, stacks. */
                Perfetto__Protos__PerfEventConfig pc = PERFETTO__PROTOS__PERF_EVENT_CONFIG__INIT;
                r = parse(&pc, c, err, en);
        } else
                r = parse(dsc->perf_event_config, c, err, en);
        perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
        if (r < 0)
                perf_config_done(c);
        return r;
}

void perf_config_done(struct perf_config *c) {
        free(c->tracepoint_filter);
        free(c->timebase);
        free(c->cpus);
        for (size_t k = 0; k < c->n_target_cmdline; k++)
                free(c->target_cmdline[k]);
        for (size_t k = 0; k < c->n_exclude_cmdline; k++)
                free(c->exclude_cmdline[k]);
        *c = (struct perf_config) {};
}

static bool cmdline_matches(char *const *patterns, size_t n, const char *cmdline) {
        if (!cmdline || !*cmdline)
                return false;
        const char *base = strrchr(cmdline, '/');
        base = base ? base + 1 : cmdline;
        for (size_t k = 0; k < n; k++)
                if (fnmatch(patterns[k], cmdline, 0) == 0 || fnmatch(patterns[k], base, 0) == 0)
                        return true;
        return false;
}

bool perf_config_in_scope(const struct perf_config *c, int pid, const char *cmdline, uint32_t *additional_left) {
        for (size_t k = 0; k < c->n_exclude_pid; k++)
                if (c->exclude_pid[k] == pid)
                        return false;
        if (cmdline_matches(c->exclude_cmdline, c->n_exclude_cmdline, cmdline))
                return false;
        bool targeted = c->n_target_pid || c->n_target_cmdline || c->additional_cmdline_count;
        if (!targeted)
                return true;
        for (size_t k = 0; k < c->n_target_pid; k++)
                if (c->target_pid[k] == pid)
                        return true;
        if (cmdline_matches(c->target_cmdline, c->n_target_cmdline, cmdline))
                return true;
        if (additional_left && *additional_left > 0 && pid > 0 && cmdline && *cmdline) {
                (*additional_left)--;
                return true;
        }
        return false;
}
