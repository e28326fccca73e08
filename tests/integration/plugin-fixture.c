/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/pbr.h"
#include "pbtxt/pbtxt.h"
#include "plugin-fixture.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

bool fixture_tracefs_usable(void) {
        struct stat st;
        if (stat("/sys/kernel/tracing/trace_marker", &st) == 0)
                return true;
        /* The plugin would mount it; see whether that is possible here. */
        return system("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") == 0 &&
               stat("/sys/kernel/tracing/trace_marker", &st) == 0;
}

int fixture_start(struct traced_instance *inst, sd_event **ret_event) {
        const char *const args[] = { "--plugin-dir=" TOP_BUILDDIR "/plugins/.libs",
                                     "--plugin-host=" TOP_BUILDDIR "/traced-plugin-host", NULL };
        int r = sd_event_new(ret_event);
        if (r < 0)
                return r;
        r = traced_instance_start_args(inst, true, args);
        if (r < 0)
                *ret_event = sd_event_unref(*ret_event);
        return r;
}

bool fixture_stop(struct traced_instance *inst, sd_event **event) {
        if (!*event)
                return true;
        int st = traced_instance_destroy(inst);
        *event = sd_event_unref(*event);
        return st == 0;
}

unsigned fixture_count_data_source(struct test_consumer *c, const char *name) {
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        unsigned n = 0;
        if (test_consumer_call(c, "QueryServiceState", &rq.base, &perfetto__protos__query_service_state_response__descriptor,
                               &reply, 5000) != 0 || !reply)
                return 0;
        const Perfetto__Protos__TracingServiceState *st = ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        for (size_t i = 0; st && i < st->n_data_sources; i++)
                if (st->data_sources[i]->ds_descriptor && strcmp(st->data_sources[i]->ds_descriptor->name, name) == 0)
                        n++;
        protobuf_c_message_free_unpacked(reply, NULL);
        return n;
}

bool fixture_wait_data_source(struct test_consumer *c, sd_event *event, const char *name, unsigned n,
                              unsigned timeout_ms) {
        for (unsigned waited = 0;; waited += 50) {
                if (fixture_count_data_source(c, name) >= n)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                spin_ms(event, 50);
        }
}

void fixture_enable_text(struct test_consumer *c, const char *text, int fd) {
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        cr_assert_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, strlen(text), "cfg", &m, &err), 0,
                     "%s", err);
        cr_assert_eq(test_consumer_enable(c, (Perfetto__Protos__TraceConfig *) m, fd), 0);
        protobuf_c_message_free_unpacked(m, NULL);
}

void fixture_for_each_packet(int fd, fixture_packet_fn fn, void *userdata) {
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t) st.st_size + 1);
        cr_assert_not_null(buf);
        cr_assert_eq(pread(fd, buf, (size_t) st.st_size, 0), st.st_size);
        /* Packet by packet: a trace may hold any number of them. */
        size_t pos = 0;
        struct pbr_field f;
        int r, i = 0;
        while ((r = pbr_next(buf, (size_t) st.st_size, &pos, &f)) > 0) {
                cr_assert(f.number == 1 && f.wire_type == 2, "the trace does not parse at packet %d", i);
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, f.len, f.data);
                cr_assert_not_null(p, "packet %d does not decode", i);
                fn(p, userdata);
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
                i++;
        }
        cr_assert_geq(r, 0, "the trace does not parse after packet %d", i);
        free(buf);
}

/* Whether this process holds the hotplug lock exclusively (its own
 * recordings then take no shared lock: flock would wait for itself). */
static bool hotplug_exclusive;

int fixture_hotplug_lock(bool exclusive) {
        if (!exclusive && hotplug_exclusive)
                return -1;
        int fd = open("/tmp/traced-tests-cpu-hotplug.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                return -1;
        while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
                if (errno != EINTR) {
                        close(fd);
                        return -1;
                }
        if (exclusive)
                hotplug_exclusive = true;
        return fd;
}

void fixture_hotplug_unlock(int fd) {
        if (fd < 0)
                return;
        close(fd);
        hotplug_exclusive = false;
}

static bool write_online(const char *path, const char *v) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        bool ok = write(fd, v, 1) == 1;
        close(fd);
        return ok;
}

void fixture_cpu_offline_and_back(struct fixture_hotplug *h) {
        usleep(800 * 1000);
        h->wrote = write_online(h->online, "0");
        usleep(1000 * 1000);
        /* Back in any case: a machine left with one CPU is worse than a
         * failed test. */
        for (int i = 0; i < 50 && !write_online(h->online, "1"); i++)
                usleep(100 * 1000);
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        h->back = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
        if (h->on_back)
                h->on_back(h);
        usleep(1500 * 1000);
}

void fixture_record(struct traced_instance *inst, sd_event *event, const char *wait_for, const char *config,
                    void (*action)(void *), void *action_data, fixture_packet_fn fn, void *userdata) {
        int hotplug = fixture_hotplug_lock(false);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, event, inst->consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, event, wait_for, 1, 5000), "%s never registered", wait_for);
        char path[512];
        snprintf(path, sizeof(path), "%s/recorded.pftrace", inst->dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        fixture_enable_text(&cons, config, fd);
        spin_ms(event, 500); /* the plugin sets up its instances */
        action(action_data);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        test_consumer_free(&cons);
        fixture_hotplug_unlock(hotplug);
        fixture_for_each_packet(fd, fn, userdata);
        close(fd);
}

int fixture_write_marker(const char *path, const char *text) {
        size_t len = strlen(text);
        for (int attempt = 0;; attempt++) {
                int fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                ssize_t n = write(fd, text, len);
                int r = n == (ssize_t) len ? 0 : n < 0 ? -errno : -EIO;
                close(fd);
                if (r != -EBADF || attempt >= 500)
                        return r;
                usleep(10 * 1000);
        }
}
