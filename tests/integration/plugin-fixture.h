/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* For tests that run traced with this build's plugins (the ftrace plugin):
 * starting it, waiting for a data source, recording a text config while
 * something happens, and walking the packets of the trace written. */

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/trace/trace_packet.pb-c.h"

/* Whether tracefs is mounted, or can be mounted here. */
bool fixture_tracefs_usable(void);
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

/*
 * Records: waits for data source wait_for, starts the text config
 * (written into a file under inst->dir), runs action, disables the
 * session, then calls fn for every packet of the trace.
 */
void fixture_record(struct traced_instance *inst, sd_event *event, const char *wait_for, const char *config,
                    void (*action)(void *), void *action_data, fixture_packet_fn fn, void *userdata);

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
};
/* 0.8 s, the CPU offline for 1 s, back (retried until it is), 1.5 s. */
void fixture_cpu_offline_and_back(struct fixture_hotplug *h);

/*
 * Writes text into the trace_marker at path (reopened each try). A shared
 * instance's tracing_on may be 0 for a moment while another session sets it
 * up or puts it back, and the kernel then fails marker writes with EBADF:
 * those are retried for up to 5 s. Returns 0 or a negative errno.
 */
int fixture_write_marker(const char *path, const char *text);
