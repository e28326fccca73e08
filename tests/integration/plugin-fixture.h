/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* For tests that run traced with this build's plugins (the ftrace plugin):
 * starting it, waiting for a data source, recording a text config while
 * something happens, and walking the packets of the trace written. */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/trace/trace_packet.pb-c.h"

/* Whether tracefs is mounted, or can be mounted here. */
bool fixture_tracefs_usable(void);
/* node (Debian's nodejs), or NULL when it is not installed. */
const char *fixture_node_binary(void);
/* tests/data/jit-busy.js: busyLoop under outer, as JIT
 * code, for argv[2] ms. */
#define FIXTURE_NODE_PROGRAM TEST_DATA_DIR "/jit-busy.js"
/* Starts a socket-activated traced with the plugins of this build and an
 * event loop. Returns -errno. */
int fixture_start(struct traced_instance *inst, sd_event **ret_event);
/* Stops both and removes the instance's directory (nothing if event is
 * NULL), dumping the log if traced did not exit cleanly; false then. */
bool fixture_stop(struct traced_instance *inst, sd_event **event);

/* Data sources named name that producers registered (QueryServiceState). */
unsigned fixture_count_data_source(struct test_consumer *c, const char *name);
/* Waits until at least n are registered. */
bool fixture_wait_data_source(struct test_consumer *c, sd_event *event, const char *name, unsigned n,
                              unsigned timeout_ms);

/* Starts a session from a text TraceConfig, its trace written into fd. */
void fixture_enable_text(struct test_consumer *c, const char *text, int fd);

typedef void (*fixture_packet_fn)(const Perfetto__Protos__TracePacket *p, void *userdata);
/* Calls fn for every packet of the trace file fd. */
void fixture_for_each_packet(int fd, fixture_packet_fn fn, void *userdata);

/* A session's life as its trace tells it: when its service events came
 * (boot time ns, 0: not in the trace), the data sources named as slow to
 * start, the flushes that timed out. */
struct fixture_lifecycle {
        uint64_t tracing_started, all_started, disabled;
        unsigned slow_starting, slow_flushes;
};
void fixture_lifecycle(int fd, struct fixture_lifecycle *ret);

/*
 * Records: waits for data source wait_for, starts the text config
 * (written into a file under inst->dir), runs action, disables the
 * session, then calls fn for every packet of the trace.
 */
void fixture_record(struct traced_instance *inst, sd_event *event, const char *wait_for, const char *config,
                    void (*action)(void *), void *action_data, fixture_packet_fn fn, void *userdata);
/* The same for a config without write_into_file: the buffers are read
 * back (ReadBuffers) once the session is disabled, as tracectl does, so
 * that a RING_BUFFER holds what it kept after wrapping. */
void fixture_record_read_back(struct traced_instance *inst, sd_event *event, const char *wait_for,
                              const char *config, void (*action)(void *), void *action_data, fixture_packet_fn fn,
                              void *userdata);

/*
 * A test that takes a CPU offline holds the CPU hotplug lock exclusively;
 * a recording that samples CPUs holds it shared (fixture_record does so by
 * itself), so no recording of another test sees a CPU go away. Returns the
 * lock's fd (-1 when the lock file cannot be opened: then nothing is
 * locked), for fixture_hotplug_unlock.
 */
int fixture_hotplug_lock(bool exclusive);
void fixture_hotplug_unlock(int fd);

/* CPU hotplug during a recording (with the lock held exclusively): */
struct fixture_hotplug {
        const char *online; /* e.g. /sys/devices/system/cpu/cpu1/online */
        uint64_t back;      /* CLOCK_BOOTTIME when the CPU was online again */
        bool wrote;         /* it did go offline */
        /* Called once the CPU is back (e.g. to start work pinned to it:
         * the scheduler may take its time to move running tasks back). */
        void (*on_back)(struct fixture_hotplug *h);
        void *userdata;
        /* A process held stopped (SIGSTOP) from before the CPU goes offline
         * until 0.2 s after it is back, as a loaded machine can hold up a
         * plugin's loop past a short offline stretch; 0 for none. */
        pid_t hold;
        bool held; /* it was stopped */
};
/* Lines of inst's log holding a (and b after it, when not NULL). */
unsigned fixture_log_count(const struct traced_instance *inst, const char *a, const char *b);
/* The last such line (malloc'd), or NULL. */
char *fixture_log_last(const struct traced_instance *inst, const char *a, const char *b);
/* Runs the loop until more than `before` such lines are in the log, or
 * timeout_ms passed; whether they are. */
bool fixture_wait_log(const struct traced_instance *inst, sd_event *event, const char *a, const char *b,
                      unsigned before, unsigned timeout_ms);

/* The ftrace plugin's line once an instance records ("linux.ftrace
 * instance N: M events, ..."): what a test that writes markers or starts
 * work right after EnableTracing waits for. */
#define FIXTURE_FTRACE_STARTED "linux.ftrace instance ", " events, "
/* The journald plugin's, once an instance reads the journal from its
 * start on. */
#define FIXTURE_JOURNALD_STARTED "linux.systemd_journald instance ", ": reading the journal"
/* The profilers', once an instance samples (the BPF programs loaded and
 * verified, which takes seconds on a loaded machine). */
#define FIXTURE_PERF_STARTED "linux.perf instance ", " pages per ring, "
#define FIXTURE_BPFSTACK_STARTED "linux.bpf_stack instance ", ": on-CPU "
/* The heap plugin's, once an instance takes processes in. */
#define FIXTURE_HEAP_STARTED "android.heapprofd instance ", ": profiling "

/* Whether pid descends from ancestor. */
bool fixture_descends_from(pid_t pid, pid_t ancestor);
/* The traced-plugin-host running plugin (e.g. "perf.so") under inst, or 0. */
pid_t fixture_plugin_host_pid(const struct traced_instance *inst, const char *plugin);

/* 0.8 s, the CPU offline for 1 s, back (retried until it is), 1.5 s. */

void fixture_cpu_offline_and_back(struct fixture_hotplug *h);

/*
 * Writes text into the trace_marker at path (reopened each try). A shared
 * instance's tracing_on may be 0 for a moment while another session sets it
 * up or puts it back, and the kernel then fails marker writes with EBADF:
 * those are retried for up to 5 s. Returns 0 or a negative errno.
 */
int fixture_write_marker(const char *path, const char *text);

/*
 * Whether this kernel lets a tracefs instance's sub-buffers be sized
 * (buffer_subbuf_size_kb, Linux 6.8 and later; some 6.18 kernels refuse
 * every write of it with EPERM): asked of a scratch instance made and
 * removed here. 0 when it does, else a negative errno (-ENOENT without
 * the file).
 */
int fixture_subbuf_resizable(void);

/*
 * Writes text into the root instance's trace_marker whatever the root's
 * tracing_on was before the test (a user's choice, or what upstream's
 * traced_probes leaves after a session: 0, when the kernel refuses marker
 * writes with EBADF). With no session holding the root (its flock free),
 * tracing is switched on for the write and put back as it was; a session
 * holding the root has switched it on itself. Returns 0 or a negative errno.
 */
int fixture_write_root_marker(const char *text);

/*
 * Recordings in the root ftrace instance (linux.ftrace without
 * instance_name, the default) of different tests do not run beside each
 * other: the second would record in a private instance. fixture_record
 * holds this lock around such a recording by itself; a test that records
 * in the root some other way, or looks at the root's state between
 * recordings, holds it around all of that. Returns the lock's fd, or -1
 * when this process holds it already (or it cannot be opened: then
 * nothing is locked), for fixture_root_unlock.
 */
int fixture_root_lock(void);
void fixture_root_unlock(int fd);
