/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
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

const char *fixture_node_binary(void) {
        if (access("/usr/bin/node", X_OK) == 0)
                return "/usr/bin/node";
        if (access("/usr/bin/nodejs", X_OK) == 0)
                return "/usr/bin/nodejs";
        return NULL;
}

int fixture_start(struct traced_instance *inst, sd_event **ret_event) {
        const char *const args[] = { "--plugin-dir=" TOP_BUILDDIR "/plugins/.libs",
                                     "--plugin-host=" TOP_BUILDDIR "/tests/bin/traced-plugin-host", NULL };
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

static void lifecycle_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct fixture_lifecycle *l = userdata;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT)
                return;
        const Perfetto__Protos__TracingServiceEvent *e = p->service_event;
        switch (e->event_type_case) {
        case PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_STARTED:
                l->tracing_started = p->timestamp;
                break;
        case PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_ALL_DATA_SOURCES_STARTED:
                l->all_started = p->timestamp;
                break;
        case PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_DISABLED:
                l->disabled = p->timestamp;
                break;
        case PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_SLOW_STARTING_DATA_SOURCES:
                l->slow_starting += (unsigned) e->slow_starting_data_sources->n_data_source;
                break;
        case PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_LAST_FLUSH_SLOW_DATA_SOURCES:
                l->slow_flushes++;
                break;
        default:
                break;
        }
}

void fixture_lifecycle(int fd, struct fixture_lifecycle *ret) {
        *ret = (struct fixture_lifecycle) {};
        fixture_for_each_packet(fd, lifecycle_packet, ret);
}

/* An flock on a file under /tmp shared by every test program; *held says
 * whether this process holds it exclusively already (its own recordings
 * then take no second lock: flock would wait for itself). */
static int lock_file(const char *path, bool exclusive, bool *held) {
        if (*held)
                return -1;
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                return -1;
        while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
                if (errno != EINTR) {
                        close(fd);
                        return -1;
                }
        if (exclusive)
                *held = true;
        return fd;
}

static void unlock_file(int fd, bool *held) {
        if (fd < 0)
                return;
        close(fd);
        *held = false;
}

static bool hotplug_exclusive, root_held;

int fixture_hotplug_lock(bool exclusive) {
        return lock_file("/tmp/traced-tests-cpu-hotplug.lock", exclusive, &hotplug_exclusive);
}

void fixture_hotplug_unlock(int fd) {
        unlock_file(fd, &hotplug_exclusive);
}

int fixture_root_lock(void) {
        return lock_file("/tmp/traced-tests-ftrace-root.lock", true, &root_held);
}

void fixture_root_unlock(int fd) {
        unlock_file(fd, &root_held);
}

#define MAX_SAMPLE_RATE "/proc/sys/kernel/perf_event_max_sample_rate"
#define KERNEL_DEFAULT_SAMPLE_RATE 100000u

static unsigned read_uint(FILE *f) {
        unsigned v = 0;
        if (fscanf(f, "%u", &v) != 1)
                v = 0;
        return v;
}

static void write_sample_rate(unsigned v) {
        FILE *f = fopen(MAX_SAMPLE_RATE, "we");
        if (f) {
                fprintf(f, "%u\n", v);
                fclose(f);
        }
}

/* The kernel lowers kernel.perf_event_max_sample_rate by itself when
 * sampling interrupts took too long (a loaded machine, another test at a
 * high frequency, a sanitized build) and then refuses (EINVAL) frequencies
 * above it. A recording that samples gets the kernel's default back for
 * its length; the last such recording of every test program to end puts
 * back what the first found. The lock file holds that value while any
 * recording runs (shared flock each, exclusive to change it). Returns the
 * lock's fd, or -1 for a recording that does not sample. */
static int sample_rate_raise(const char *config) {
        if (!strstr(config, "\"linux.perf\"") && !strstr(config, "\"linux.bpf_stack\""))
                return -1;
        int fd = open("/tmp/traced-tests-sample-rate.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                return -1;
        while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
                ;
        FILE *saved = fdopen(dup(fd), "r+e");
        FILE *cur = fopen(MAX_SAMPLE_RATE, "re");
        if (saved && cur) {
                unsigned found = read_uint(cur), kept = read_uint(saved);
                if (kept == 0 && found > 0 && found < KERNEL_DEFAULT_SAMPLE_RATE) {
                        rewind(saved);
                        fprintf(saved, "%u\n", found);
                        fflush(saved);
                }
                if (found > 0 && found < KERNEL_DEFAULT_SAMPLE_RATE)
                        write_sample_rate(KERNEL_DEFAULT_SAMPLE_RATE);
        }
        if (saved)
                fclose(saved);
        if (cur)
                fclose(cur);
        while (flock(fd, LOCK_SH) < 0 && errno == EINTR)
                ;
        return fd;
}

static void sample_rate_restore(int fd) {
        if (fd < 0)
                return;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
                /* The last recording out: put back what the first found. */
                FILE *saved = fdopen(dup(fd), "r+e");
                if (saved) {
                        rewind(saved);
                        unsigned kept = read_uint(saved);
                        if (kept > 0)
                                write_sample_rate(kept);
                        fclose(saved);
                }
                if (ftruncate(fd, 0) < 0)
                        (void) 0;
        }
        close(fd);
}

/* Whether a text config records linux.ftrace in the root instance. */
static bool records_in_root(const char *config) {
        return strstr(config, "\"linux.ftrace\"") && !strstr(config, "instance_name");
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
        if (h->hold > 0)
                h->held = kill(h->hold, SIGSTOP) == 0;
        h->wrote = write_online(h->online, "0");
        usleep(1000 * 1000);
        /* Back in any case: a machine left with one CPU is worse than a
         * failed test. */
        for (int i = 0; i < 50 && !write_online(h->online, "1"); i++)
                usleep(100 * 1000);
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        h->back = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
        if (h->held) {
                usleep(200 * 1000);
                (void) kill(h->hold, SIGCONT);
        }
        if (h->on_back)
                h->on_back(h);
        usleep(1500 * 1000);
}

/* A data source of the config whose plugin says in the log that its
 * instance runs, or reports why it does not. */
struct started_wait {
        bool named;
        const char *data_source;
        const char *a, *b; /* the line saying it runs */
        const char *silent;
        unsigned started, refused;
};

static unsigned refusals(const struct traced_instance *inst, const char *data_source) {
        char what[128];
        snprintf(what, sizeof(what), "reports for data source %s:", data_source);
        return fixture_log_count(inst, "Session ", what);
}

static void started_wait_count(const struct traced_instance *inst, struct started_wait *w) {
        if (!w->named)
                return;
        w->started = fixture_log_count(inst, w->a, w->b);
        w->refused = refusals(inst, w->data_source);
}

static void started_wait(const struct traced_instance *inst, sd_event *event, struct started_wait *w) {
        if (!w->named)
                return;
        /* A report need not be a refusal (an event ftrace does not know,
         * say): the line saying it runs may still follow, soon. */
        unsigned limit = 30000;
        bool reported = false;
        for (unsigned waited = 0; waited < limit; waited += 50) {
                if (fixture_log_count(inst, w->a, w->b) > w->started)
                        return;
                if (!reported && refusals(inst, w->data_source) > w->refused) {
                        reported = true;
                        limit = waited + 5000;
                }
                spin_ms(event, 50);
        }
        if (reported)
                return;
        /* (A warning fails the test's run: Criterion exits 1 after one.) */
        cr_log_warn("%s within 30 s", w->silent);
}

static void record(struct traced_instance *inst, sd_event *event, const char *wait_for, const char *config,
                   bool read_back, void (*action)(void *), void *action_data, fixture_packet_fn fn, void *userdata) {
        int root = records_in_root(config) ? fixture_root_lock() : -1;
        int hotplug = fixture_hotplug_lock(false);
        int rate = sample_rate_raise(config);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, event, inst->consumer_path), 0);
        cr_assert(fixture_wait_data_source(&cons, event, wait_for, 1, 5000), "%s never registered", wait_for);
        char path[512];
        snprintf(path, sizeof(path), "%s/recorded.pftrace", inst->dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        bool ftrace = strstr(config, "\"linux.ftrace\"") != NULL;
        bool journald = strstr(config, "\"linux.systemd_journald\"") != NULL;
        bool perf = strstr(config, "\"linux.perf\"") != NULL, bpf = strstr(config, "\"linux.bpf_stack\"") != NULL;
        bool heap = strstr(config, "\"android.heapprofd\"") != NULL;
        struct started_wait waits[] = {
                { ftrace, "linux.ftrace", FIXTURE_FTRACE_STARTED, "the ftrace plugin did not say it records" },
                { journald, "linux.systemd_journald", FIXTURE_JOURNALD_STARTED,
                  "the journald plugin did not say it reads" },
                { perf, "linux.perf", FIXTURE_PERF_STARTED, "the perf plugin did not say it samples" },
                { bpf, "linux.bpf_stack", FIXTURE_BPFSTACK_STARTED, "the bpfstack plugin did not say it samples" },
                { heap, "android.heapprofd", FIXTURE_HEAP_STARTED, "the heap plugin did not say it profiles" },
        };
        for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
                started_wait_count(inst, &waits[i]);
        fixture_enable_text(&cons, config, read_back ? -EBADF : fd);
        /* The plugins set their instances up after EnableTracing returned;
         * on a loaded machine that can take seconds. A test whose config
         * the plugin refuses sees the refusal instead and goes on to find
         * out what it was; the others record from here on. */
        for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
                started_wait(inst, event, &waits[i]);
        spin_ms(event, 500);
        action(action_data);
        Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
        cr_assert_eq(test_consumer_call(&cons, "DisableTracing", &dis.base,
                                        &perfetto__protos__disable_tracing_response__descriptor, NULL, 5000),
                     0);
        cr_assert(test_consumer_wait_disabled(&cons, 20000));
        if (read_back) {
                cr_assert_eq(test_consumer_read(&cons, 20000), 0, "ReadBuffers");
                cr_assert_eq(write(fd, cons.data, cons.len), (ssize_t) cons.len);
        }
        test_consumer_free(&cons);
        sample_rate_restore(rate);
        fixture_hotplug_unlock(hotplug);
        fixture_root_unlock(root);
        fixture_for_each_packet(fd, fn, userdata);
        close(fd);
}

void fixture_record(struct traced_instance *inst, sd_event *event, const char *wait_for, const char *config,
                    void (*action)(void *), void *action_data, fixture_packet_fn fn, void *userdata) {
        record(inst, event, wait_for, config, false, action, action_data, fn, userdata);
}

void fixture_record_read_back(struct traced_instance *inst, sd_event *event, const char *wait_for,
                              const char *config, void (*action)(void *), void *action_data, fixture_packet_fn fn,
                              void *userdata) {
        record(inst, event, wait_for, config, true, action, action_data, fn, userdata);
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

int fixture_subbuf_resizable(void) {
        char dir[128], path[192];
        snprintf(dir, sizeof(dir), "/sys/kernel/tracing/instances/traced-test-subbuf-%d", (int) getpid());
        if (mkdir(dir, 0755) < 0)
                return -errno;
        snprintf(path, sizeof(path), "%s/buffer_subbuf_size_kb", dir);
        int r = 0, fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "8", 1) != 1)
                r = -errno;
        if (fd >= 0)
                close(fd);
        (void) rmdir(dir);
        return r;
}

static int read_small(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int r = n < 0 ? -errno : 0;
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return r;
}

static int write_small(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int r = n == (ssize_t) strlen(text) ? 0 : n < 0 ? -errno : -EIO;
        close(fd);
        return r;
}

#define ROOT "/sys/kernel/tracing"

int fixture_write_root_marker(const char *text) {
        int lock = open(ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock < 0)
                return -errno;
        if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
                /* A session holds the root and switches tracing on. */
                close(lock);
                return fixture_write_marker(ROOT "/trace_marker", text);
        }
        char on[16];
        int r = read_small(ROOT "/tracing_on", on, sizeof(on));
        bool was_off = r == 0 && on[0] == '0';
        if (r == 0 && was_off)
                r = write_small(ROOT "/tracing_on", "1");
        if (r == 0)
                r = write_small(ROOT "/trace_marker", text);
        if (was_off) {
                int q = write_small(ROOT "/tracing_on", "0");
                if (r == 0)
                        r = q;
        }
        close(lock); /* drops the flock */
        return r;
}

/* Whether pid descends from ancestor. */
bool fixture_descends_from(pid_t pid, pid_t ancestor) {
        for (int depth = 0; pid > 1 && depth < 16; depth++) {
                if (pid == ancestor)
                        return true;
                char path[64], buf[512];
                snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
                FILE *f = fopen(path, "re");
                if (!f)
                        return false;
                size_t n = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                buf[n] = '\0';
                const char *rp = strrchr(buf, ')');
                int ppid;
                if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1)
                        return false;
                pid = ppid;
        }
        return false;
}

pid_t fixture_plugin_host_pid(const struct traced_instance *inst, const char *plugin) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t found = 0;
        while (d && (de = readdir(d)) && !found) {
                long pid = strtol(de->d_name, NULL, 10);
                if (pid <= 0 || !fixture_descends_from((pid_t) pid, inst->pid))
                        continue;
                char path[64], cmd[4096];
                snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
                close(fd);
                for (ssize_t i = 0; i < n; i++)
                        if (cmd[i] == '\0')
                                cmd[i] = ' ';
                cmd[n > 0 ? n : 0] = '\0';
                if (strstr(cmd, "plugin-host") && strstr(cmd, plugin))
                        found = (pid_t) pid;
        }
        if (d)
                closedir(d);
        return found;
}

/* Calls fn for each line of inst's log holding a (and b after it). */
static unsigned log_lines(const struct traced_instance *inst, const char *a, const char *b,
                          void (*fn)(const char *line, void *userdata), void *userdata) {
        FILE *f = fopen(inst->log_path, "re");
        char line[4096];
        unsigned n = 0;
        while (f && fgets(line, sizeof(line), f)) {
                const char *at = strstr(line, a);
                if (!at || (b && !strstr(at, b)))
                        continue;
                n++;
                if (fn)
                        fn(line, userdata);
        }
        if (f)
                fclose(f);
        return n;
}

unsigned fixture_log_count(const struct traced_instance *inst, const char *a, const char *b) {
        return log_lines(inst, a, b, NULL, NULL);
}

static void keep_line(const char *line, void *userdata) {
        char **last = userdata;
        free(*last);
        *last = strdup(line);
}

char *fixture_log_last(const struct traced_instance *inst, const char *a, const char *b) {
        char *last = NULL;
        (void) log_lines(inst, a, b, keep_line, &last);
        return last;
}

bool fixture_wait_log(const struct traced_instance *inst, sd_event *event, const char *a, const char *b,
                      unsigned before, unsigned timeout_ms) {
        for (unsigned waited = 0;; waited += 50) {
                if (fixture_log_count(inst, a, b) > before)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                spin_ms(event, 50);
        }
}
