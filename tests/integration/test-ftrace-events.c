/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ftrace plugin's syscall_events and kprobe_events on the real kernel,
 * through the real traced (socket-activated) and its plugin host: the
 * test's own system calls must come back as typed events, filtered to the
 * calls asked for, and a kernel probe must fire on them and be removed
 * when the session ends. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "pbtxt/pbtxt.h"
#include "plugin-fixture.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define N_CALLS 50

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        if (fixture_tracefs_usable())
                cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(ftrace_events, .init = setup, .fini = teardown, .timeout = 90);

/* Criterion runs no .fini after a skip: stop traced (started by .init)
 * first, or its socket activator would stay behind. */
#define SKIP(...)                                \
        do {                                     \
                teardown();                      \
                cr_skip_test(__VA_ARGS__);       \
        } while (0)

typedef void (*event_fn)(const Perfetto__Protos__FtraceEvent *e, void *userdata);
typedef fixture_packet_fn packet_fn;

struct action {
        void (*fn)(void);
};

/* Runs the test's action, then lets the last drain happen. */
static void run_action(void *userdata) {
        ((struct action *) userdata)->fn();
        spin_ms(ev, 300);
}

/* Records with the given FtraceConfig body while running action, then
 * calls fn for every packet of the trace, in order. */
static void record_packets(const char *ftrace_config, void (*action)(void), packet_fn fn, void *userdata) {
        char text[2048];
        snprintf(text, sizeof(text),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config { %s drain_period_ms: 50 } } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 ftrace_config);
        struct action a = { action };
        fixture_record(&inst, ev, "linux.ftrace", text, run_action, &a, fn, userdata);
}

struct each_event {
        event_fn fn;
        void *userdata;
};

static void each_event(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct each_event *e = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                for (size_t k = 0; k < p->ftrace_events->n_event; k++)
                        e->fn(p->ftrace_events->event[k], e->userdata);
}

/* The same, calling fn for every FtraceEvent of the trace. */
static void record(const char *ftrace_config, void (*action)(void), event_fn fn, void *userdata) {
        struct each_event e = { fn, userdata };
        record_packets(ftrace_config, action, each_event, &e);
}

static void call_getpid(void) {
        for (int i = 0; i < N_CALLS; i++)
                (void) syscall(SYS_getpid);
}

struct syscall_count {
        unsigned enter_ours, exit_ours, other_ids;
};

static void count_syscalls(const Perfetto__Protos__FtraceEvent *e, void *userdata) {
        struct syscall_count *c = userdata;
        if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_ENTER) {
                if (e->sys_enter->id != SYS_getpid)
                        c->other_ids++;
                else if (e->pid == (uint32_t) getpid())
                        c->enter_ours++;
        } else if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_EXIT) {
                if (e->sys_exit->id != SYS_getpid)
                        c->other_ids++;
                else if (e->pid == (uint32_t) getpid() && e->sys_exit->ret == getpid())
                        c->exit_ours++;
        }
}

Test(ftrace_events, syscall_events_are_filtered_to_the_named_calls) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct stat st;
        if (stat("/sys/kernel/tracing/events/raw_syscalls/sys_enter", &st) < 0)
                SKIP("this kernel has no raw_syscalls tracepoints (CONFIG_FTRACE_SYSCALLS)");
        struct syscall_count c = {};
        record("syscall_events: \"sys_getpid\" syscall_events: \"sys_no_such_call\"", call_getpid, count_syscalls, &c);
        cr_assert_geq(c.enter_ours, N_CALLS, "%u of our %d getpid() calls entered", c.enter_ours, N_CALLS);
        cr_assert_geq(c.exit_ours, N_CALLS, "%u of our %d getpid() calls returned our pid", c.exit_ours, N_CALLS);
        cr_assert_eq(c.other_ids, 0, "%u events of other system calls passed the filter", c.other_ids);
}

static bool kernel_has_symbol(const char *name) {
        FILE *f = fopen("/proc/kallsyms", "r");
        char line[512];
        bool found = false;
        while (f && !found && fgets(line, sizeof(line), f)) {
                char *sym = strrchr(line, ' ');
                if (sym && strncmp(sym + 1, name, strlen(name)) == 0 && (sym[1 + strlen(name)] == '\n'))
                        found = true;
        }
        if (f)
                fclose(f);
        return found;
}

struct kprobe_count {
        unsigned begin, end;
};

static void count_kprobes(const Perfetto__Protos__FtraceEvent *e, void *userdata) {
        struct kprobe_count *c = userdata;
        if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_KPROBE_EVENT || e->pid != (uint32_t) getpid())
                return;
        cr_assert_str_eq(e->kprobe_event->name, KPROBE_FUNC);
        if (e->kprobe_event->type == PERFETTO__PROTOS__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_BEGIN)
                c->begin++;
        else if (e->kprobe_event->type == PERFETTO__PROTOS__KPROBE_EVENT__KPROBE_TYPE__KPROBE_TYPE_END)
                c->end++;
}

static bool probes_of_ours_left(void) {
        FILE *f = fopen("/sys/kernel/tracing/kprobe_events", "r");
        char line[512];
        bool found = false;
        while (f && fgets(line, sizeof(line), f))
                if (strstr(line, ":traced_kp_"))
                        found = true;
        if (f)
                fclose(f);
        return found;
}

Test(ftrace_events, kprobes_fire_and_are_removed) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct stat st;
        if (stat("/sys/kernel/tracing/kprobe_events", &st) < 0)
                SKIP("this kernel has no kprobe_events (CONFIG_KPROBE_EVENTS)");
        if (!kernel_has_symbol(KPROBE_FUNC))
                SKIP("this kernel has no function " KPROBE_FUNC " to probe");
        struct kprobe_count c = {};
        record("kprobe_events { probe: \"" KPROBE_FUNC "\" type: KPROBE_TYPE_BOTH }", call_getpid, count_kprobes, &c);
        cr_assert_geq(c.begin, N_CALLS, "%u kprobe hits of our %d calls", c.begin, N_CALLS);
        cr_assert_geq(c.end, N_CALLS, "%u kretprobe hits of our %d calls", c.end, N_CALLS);
        cr_assert_not(probes_of_ours_left(), "the session's probes were not removed");
}

/* symbolize_ksyms: workqueue functions come back as iids whose names, sent
 * in the packets' InternedData.kernel_symbols, are kernel functions. The
 * plugin reads /proc/kallsyms with CAP_SYSLOG, which its host must keep. */
#define MAX_IID 4096

struct ksyms_check {
        char *names[MAX_IID + 1]; /* the sequence's current table */
        bool cleared;             /* a packet cleared the state before any name */
        unsigned packets_with_names, names_seen;
        unsigned events, resolved, raw_addresses, unresolved_functions;
        char first_function[128];
};

static void ksyms_reset(struct ksyms_check *c) {
        for (size_t i = 0; i <= MAX_IID; i++) {
                free(c->names[i]);
                c->names[i] = NULL;
        }
}

static void check_ksyms_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct ksyms_check *c = userdata;
        if (p->has_sequence_flags && (p->sequence_flags & 1)) {
                ksyms_reset(c);
                c->cleared = true;
        }
        if (p->interned_data && p->interned_data->n_kernel_symbols) {
                cr_assert(c->cleared, "kernel symbols before any SEQ_INCREMENTAL_STATE_CLEARED");
                c->packets_with_names++;
                for (size_t i = 0; i < p->interned_data->n_kernel_symbols; i++) {
                        const Perfetto__Protos__InternedString *s = p->interned_data->kernel_symbols[i];
                        cr_assert(s->has_iid && s->iid >= 1 && s->iid <= MAX_IID, "iid %llu", (unsigned long long) s->iid);
                        cr_assert(s->has_str && s->str.len > 0);
                        free(c->names[s->iid]);
                        c->names[s->iid] = strndup((const char *) s->str.data, s->str.len);
                        c->names_seen++;
                }
        }
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                return;
        for (size_t k = 0; k < p->ftrace_events->n_event; k++) {
                const Perfetto__Protos__FtraceEvent *e = p->ftrace_events->event[k];
                if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_EXECUTE_START)
                        continue;
                c->events++;
                uint64_t fn = e->workqueue_execute_start->function, work = e->workqueue_execute_start->work;
                if (fn > MAX_IID || work > MAX_IID) {
                        c->raw_addresses++;
                        continue;
                }
                if (!c->names[fn]) {
                        c->unresolved_functions++;
                        continue;
                }
                c->resolved++;
                if (!c->first_function[0])
                        snprintf(c->first_function, sizeof(c->first_function), "%s", c->names[fn]);
        }
}

static void queue_some_work(void) {
        /* Writeback, vmstat and friends run on workqueues; sync() and a
         * second of time make sure some of them do. */
        for (int i = 0; i < 10; i++) {
                sync();
                usleep(100 * 1000);
        }
}

Test(ftrace_events, symbolize_ksyms_names_workqueue_functions) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct stat st;
        if (stat("/sys/kernel/tracing/events/workqueue/workqueue_execute_start", &st) < 0)
                SKIP("this kernel has no workqueue tracepoints");
        struct ksyms_check *c = calloc(1, sizeof(*c));
        cr_assert_not_null(c);
        record_packets("ftrace_events: \"workqueue/workqueue_execute_start\" symbolize_ksyms: true", queue_some_work,
                       check_ksyms_packet, c);
        cr_assert_gt(c->events, 0, "no workqueue_execute_start in the trace");
        cr_assert_eq(c->raw_addresses, 0, "%u of %u events carry raw addresses, not iids", c->raw_addresses,
                     c->events);
        cr_assert_gt(c->packets_with_names, 0, "no InternedData.kernel_symbols in the trace");
        cr_assert_eq(c->unresolved_functions, 0, "%u of %u functions have no name", c->unresolved_functions,
                     c->events);
        cr_assert_eq(c->resolved, c->events);
        cr_assert(kernel_has_symbol(c->first_function), "\"%s\" is not a kernel symbol", c->first_function);
        fprintf(stderr, "%u workqueue_execute_start, %u names in %u packets, e.g. %s\n", c->events, c->names_seen,
                    c->packets_with_names, c->first_function);
        ksyms_reset(c);
        free(c);
}

struct raw_check {
        unsigned events, kernel_addresses;
};

static void check_raw(const Perfetto__Protos__FtraceEvent *e, void *userdata) {
        struct raw_check *c = userdata;
        if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_EXECUTE_START)
                return;
        c->events++;
#if defined(__x86_64__)
        /* x86_64 kernel text and modules live in the top 2 GiB. */
        if (e->workqueue_execute_start->function >= 0xffffffff80000000ull)
#else
        if (e->workqueue_execute_start->function > MAX_IID)
#endif
                c->kernel_addresses++;
}

Test(ftrace_events, without_symbolize_ksyms_addresses_stay) {
        if (!ev)
                cr_skip_test("tracefs is not mounted and cannot be mounted here: the kernel lacks ftrace access");
        struct stat st;
        if (stat("/sys/kernel/tracing/events/workqueue/workqueue_execute_start", &st) < 0)
                SKIP("this kernel has no workqueue tracepoints");
        struct raw_check c = {};
        record("ftrace_events: \"workqueue/workqueue_execute_start\"", queue_some_work, check_raw, &c);
        cr_assert_gt(c.events, 0, "no workqueue_execute_start in the trace");
        cr_assert_eq(c.kernel_addresses, c.events, "%u of %u functions are kernel text addresses", c.kernel_addresses,
                     c.events);
}
