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
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define N_CALLS 50

static struct traced_instance inst;
static sd_event *ev;

static bool tracefs_usable(void) {
        struct stat st;
        if (stat("/sys/kernel/tracing/trace_marker", &st) == 0)
                return true;
        return system("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") == 0 &&
               stat("/sys/kernel/tracing/trace_marker", &st) == 0;
}

static void setup(void) {
        if (!tracefs_usable())
                return;
        const char *const args[] = { "--plugin-dir=" TOP_BUILDDIR "/plugins/.libs",
                                     "--plugin-host=" TOP_BUILDDIR "/traced-plugin-host", NULL };
        cr_assert_eq(sd_event_new(&ev), 0);
        cr_assert_eq(traced_instance_start_args(&inst, true, args), 0);
}

static void teardown(void) {
        if (!ev)
                return;
        int st = traced_instance_stop(&inst);
        if (st != 0)
                traced_instance_dump_log(&inst);
        cr_expect_eq(st, 0);
        ev = sd_event_unref(ev);
}

TestSuite(ftrace_events, .init = setup, .fini = teardown, .timeout = 90);

/* Criterion runs no .fini after a skip: stop traced (started by .init)
 * first, or its socket activator would stay behind. */
#define SKIP(...)                                \
        do {                                     \
                teardown();                      \
                cr_skip_test(__VA_ARGS__);       \
        } while (0)

static bool ftrace_registered(struct test_consumer *c) {
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        bool found = false;
        if (test_consumer_call(c, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                               &reply, 5000) == 0 &&
            reply) {
                const Perfetto__Protos__TracingServiceState *st = ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
                for (size_t i = 0; st && i < st->n_data_sources; i++)
                        if (st->data_sources[i]->ds_descriptor &&
                            strcmp(st->data_sources[i]->ds_descriptor->name, "linux.ftrace") == 0)
                                found = true;
                protobuf_c_message_free_unpacked(reply, NULL);
        }
        return found;
}

typedef void (*event_fn)(const Perfetto__Protos__FtraceEvent *e, void *userdata);
typedef void (*packet_fn)(const Perfetto__Protos__TracePacket *p, void *userdata);

/* Records with the given FtraceConfig body while running action, then
 * calls fn for every packet of the trace, in order. */
static void record_packets(const char *ftrace_config, void (*action)(void), packet_fn fn, void *userdata) {
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        bool ready = false;
        for (int i = 0; i < 100 && !ready; i++) {
                ready = ftrace_registered(&cons);
                if (!ready)
                        spin_ms(ev, 50);
        }
        cr_assert(ready, "linux.ftrace never registered");
        char path[512], text[2048];
        snprintf(path, sizeof(path), "%s/events.pftrace", inst.dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        snprintf(text, sizeof(text),
                 "buffers { size_kb: 16384 }\n"
                 "data_sources { config { name: \"linux.ftrace\" ftrace_config { %s drain_period_ms: 50 } } }\n"
                 "write_into_file: true file_write_period_ms: 200\n",
                 ftrace_config);
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        cr_assert_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), "cfg", &m, &err), 0,
                     "%s", err);
        cr_assert_eq(test_consumer_enable(&cons, (Perfetto__Protos__TraceConfig *) m, fd), 0);
        protobuf_c_message_free_unpacked(m, NULL);
        spin_ms(ev, 500); /* the plugin sets up its instance */
        action();
        spin_ms(ev, 300);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        test_consumer_free(&cons);

        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t) st.st_size + 1);
        cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        close(fd);
        static struct pbr_field pkts[200000];
        int n = pbr_split_trace(buf, (size_t) st.st_size, pkts, 200000);
        cr_assert_geq(n, 0);
        for (int i = 0; i < n; i++) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, pkts[i].len, pkts[i].data);
                cr_assert_not_null(p);
                fn(p, userdata);
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
        free(buf);
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
