/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl snapshot: what a running session (a resident one, or any ring
 * buffer session) holds now, written into a file that opens alone,
 * without stopping it. The service flushes the session and clones it
 * (CloneSession); the clone is read back (or, for a session writing a
 * file, written by the service into ours), then a TracedSnapshot packet
 * says what the snapshot is of. The file appears complete or not at all. */

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "record-output.h"
#include "snapshot-store.h"
#include "snapshot-unit.h"
#include "tracectl.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "traced/pbzero/perfetto/trace/trace.pbw.h"

#define SNAPSHOT_TIMEOUT_MS 60000u

static void snapshot_help(void) {
        printf("Usage: tracectl snapshot NAME [-o FILE] [--unit UNIT] [--directory DIR]\n"
               "\n"
               "Writes what the running session NAME (a resident session of the\n"
               "sessions directory, or any session with that unique_session_name) holds\n"
               "now into a trace file that opens alone; the session goes on. Without\n"
               "-o the file goes into DIR (default " SNAPSHOT_STORE_DEFAULT_DIR ")\n"
               "as NAME-TIME.pftrace, or UNIT-TIME.pftrace with --unit; older snapshots\n"
               "there are removed, oldest first, to keep it within traced.conf's max_use=\n"
               "and keep_free=.\n"
               "\n"
               "  -o, --output FILE    the file to write (replaced only once complete)\n"
               "  --unit UNIT          record that UNIT failed (its state, result, main\n"
               "                       process and invocation id, asked of systemd):\n"
               "                       OnFailure=traced-snapshot@%%n.service runs this\n"
               "  --directory DIR      where snapshots go without -o\n"
               "\n"
               "Prints the file written. Exits 0 once it is complete.\n");
}

struct writer {
        int fd;
        uint64_t packets, bytes;
        struct pb_buf buf; /* the Trace.packet field being written */
        bool by_service;   /* the service wrote the clone into fd */
};

/* The Trace.packet field begun in w->buf (by the caller, on Trace t) is
 * written out. */
static int write_field(struct writer *w, Trace *t) {
        int r = traced_pb_msg_finish(&t->msg);
        if (r >= 0)
                r = write_full(w->fd, pb_buf_data(&w->buf), pb_buf_len(&w->buf));
        if (r >= 0) {
                w->packets++;
                w->bytes += pb_buf_len(&w->buf);
        }
        pb_buf_reset(&w->buf);
        return r;
}

/* One packet as it came, an element of Trace.packet. */
static int write_packet(struct writer *w, const uint8_t *packet, size_t len) {
        Trace t;
        Trace_init(&t, pb_buf_stream(&w->buf));
        Trace_add_packet_serialized(&t, packet, len);
        return write_field(w, &t);
}

static int on_packet(const uint8_t *packet, size_t len, void *userdata) {
        return write_packet(userdata, packet, len);
}

/* The TracedSnapshot packet, last in the file. */
static int write_snapshot_packet(struct writer *w, const char *name, const Perfetto__Protos__TracedSnapshot__Unit *u) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        Trace t;
        TracePacket p;
        TracedSnapshot snap;
        Trace_init(&t, pb_buf_stream(&w->buf));
        Trace_begin_packet(&t, &p);
        TracePacket_begin_traced_snapshot(&p, &snap);
        TracedSnapshot_set_session_name(&snap, name);
        TracedSnapshot_set_snapshot_realtime_ns(&snap, (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec);
        if (u) {
                TracedSnapshot_Unit unit;
                TracedSnapshot_begin_unit(&snap, &unit);
                if (u->name)
                        TracedSnapshot_Unit_set_name(&unit, u->name);
                if (u->active_state)
                        TracedSnapshot_Unit_set_active_state(&unit, u->active_state);
                if (u->result)
                        TracedSnapshot_Unit_set_result(&unit, u->result);
                if (u->has_failed_realtime_ns)
                        TracedSnapshot_Unit_set_failed_realtime_ns(&unit, u->failed_realtime_ns);
                if (u->has_main_pid)
                        TracedSnapshot_Unit_set_main_pid(&unit, u->main_pid);
                if (u->has_exit_code)
                        TracedSnapshot_Unit_set_exit_code(&unit, u->exit_code);
                if (u->has_exit_status)
                        TracedSnapshot_Unit_set_exit_status(&unit, u->exit_status);
                if (u->invocation_id)
                        TracedSnapshot_Unit_set_invocation_id(&unit, u->invocation_id);
                if (u->error)
                        TracedSnapshot_Unit_set_error(&unit, u->error);
                TracedSnapshot_end_unit(&snap, &unit);
        }
        TracePacket_end_traced_snapshot(&p, &snap);
        Trace_end_packet(&t, &p);
        return write_field(w, &t);
}

/* traced.conf's retention caps (max_use=, keep_free=) as the service
 * tells them: 0 for none, and for a service that does not say. */
static void query_retention(struct tracectl *t, uint64_t *ret_max_use, uint64_t *ret_keep_free) {
        Perfetto__Protos__QueryServiceStateRequest rq = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        *ret_max_use = *ret_keep_free = 0;
        rq.has_sessions_only = true;
        rq.sessions_only = true;
        int r = tracectl_call(t, "QueryServiceState", &rq.base,
                              &perfetto__protos__query_service_state_response__descriptor, -EBADF, &reply,
                              SNAPSHOT_TIMEOUT_MS);
        if (r < 0 || !reply) {
                fprintf(stderr, "tracectl snapshot: the service did not say its retention caps (%s); older "
                                "snapshots stay\n",
                        strerror(r < 0 ? -r : EIO));
                return;
        }
        const Perfetto__Protos__TracingServiceState *st =
                ((Perfetto__Protos__QueryServiceStateResponse *) reply)->service_state;
        if (st) {
                *ret_max_use = st->traced_max_use;
                *ret_keep_free = st->traced_keep_free;
        }
        protobuf_c_message_free_unpacked(reply, NULL);
}

/* The snapshot directory within the caps, the new snapshot kept. */
static void apply_retention(const char *dir, const char *path, uint64_t max_use, uint64_t keep_free) {
        struct snapshot_store_pruned pr;
        int r = snapshot_store_committed(dir, path, max_use, keep_free, &pr);
        if (r < 0) {
                fprintf(stderr, "tracectl snapshot: cannot keep %s within traced.conf's max_use= and keep_free=: %s\n",
                        dir, strerror(-r));
                return;
        }
        if (pr.removed)
                fprintf(stderr,
                        "tracectl snapshot: removed %zu older snapshot(s) (%llu bytes) from %s: traced.conf's "
                        "max_use=%llu, keep_free=%llu\n",
                        pr.removed, (unsigned long long) pr.freed, dir, (unsigned long long) max_use,
                        (unsigned long long) keep_free);
        if (pr.still_over)
                fprintf(stderr,
                        "tracectl snapshot: %s is still beyond traced.conf's max_use=%llu or keep_free=%llu with no "
                        "older snapshot left to remove; %s is kept (free space, or raise the caps)\n",
                        dir, (unsigned long long) max_use, (unsigned long long) keep_free, path);
}

static int clone_and_read(struct tracectl *t, const char *name, struct writer *w, char **ret_error) {
        Perfetto__Protos__CloneSessionRequest rq = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
        ProtobufCMessage *reply = NULL;
        rq.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
        rq.unique_session_name = (char *) name;
        int r = tracectl_call(t, "CloneSession", &rq.base, &perfetto__protos__clone_session_response__descriptor,
                              w->fd, &reply, SNAPSHOT_TIMEOUT_MS);
        if (r < 0 || !reply) {
                if (asprintf(ret_error, "CloneSession failed: %s", strerror(r < 0 ? -r : EIO)) < 0)
                        *ret_error = NULL;
                return -EIO;
        }
        Perfetto__Protos__CloneSessionResponse *resp = (void *) reply;
        if (!resp->success) {
                if (asprintf(ret_error, "%s", resp->error ? resp->error : "the service did not clone the session") < 0)
                        *ret_error = NULL;
                r = resp->error && strstr(resp->error, "not found") ? -ENOENT : -EIO;
                protobuf_c_message_free_unpacked(reply, NULL);
                return r;
        }
        bool in_file = resp->has_was_write_into_file && resp->was_write_into_file;
        protobuf_c_message_free_unpacked(reply, NULL);
        if (in_file) {
                /* The service wrote the clone into our file. */
                off_t end = lseek(w->fd, 0, SEEK_END);
                if (end < 0)
                        return -errno;
                w->bytes = (uint64_t) end;
                w->by_service = true;
                return 0;
        }
        r = consumer_read_buffers(t->event, t->client, on_packet, w, SNAPSHOT_TIMEOUT_MS);
        if (r < 0 && asprintf(ret_error, "Reading the snapshot failed: %s", strerror(-r)) < 0)
                *ret_error = NULL;
        return r;
}

int cmd_snapshot(struct tracectl *t, int argc, char **argv) {
        static const struct option opts[] = {
                { "output", required_argument, NULL, 'o' },
                { "unit", required_argument, NULL, 'u' },
                { "directory", required_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *out = NULL, *unit = NULL, *dir = SNAPSHOT_STORE_DEFAULT_DIR;
        int c, r;
        while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) >= 0) {
                switch (c) {
                case 'o':
                        out = optarg;
                        break;
                case 'u':
                        unit = optarg;
                        break;
                case 'd':
                        dir = optarg;
                        break;
                case 'h':
                        snapshot_help();
                        return EXIT_OK;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 1 != argc) {
                fprintf(stderr, "tracectl snapshot: name one session (tracectl query lists them)\n");
                return EXIT_USAGE;
        }
        const char *name = argv[optind];
        _cleanup_free_ char *path = NULL;
        if (!out) {
                r = snapshot_store_path(dir, unit ? unit : name, &path);
                if (r < 0) {
                        fprintf(stderr, "tracectl snapshot: cannot write into %s: %s%s\n", dir, strerror(-r),
                                r == -ENOENT ? " (make it, or pass -o FILE or --directory DIR)" : "");
                        return EXIT_OTHER;
                }
                out = path;
        }

        Perfetto__Protos__TracedSnapshot__Unit u = PERFETTO__PROTOS__TRACED_SNAPSHOT__UNIT__INIT;
        if (unit && snapshot_unit_query(unit, &u) < 0) {
                fprintf(stderr, "tracectl snapshot: out of memory\n");
                return EXIT_OTHER;
        }
        if (u.error)
                fprintf(stderr, "tracectl snapshot: about unit %s: %s (the snapshot names the unit only)\n", unit,
                        u.error);

        r = tracectl_connect(t);
        if (r != 0) {
                snapshot_unit_done(&u);
                return r;
        }
        uint64_t max_use = 0, keep_free = 0;
        if (path)
                query_retention(t, &max_use, &keep_free);
        struct record_output file = RECORD_OUTPUT_INIT;
        r = record_output_open(&file, out);
        if (r < 0) {
                fprintf(stderr, "tracectl snapshot: cannot create %s: %s\n", out, strerror(-r));
                tracectl_disconnect(t);
                snapshot_unit_done(&u);
                return EXIT_OTHER;
        }
        struct writer w = { .fd = file.fd };
        _cleanup_free_ char *error = NULL;
        r = clone_and_read(t, name, &w, &error);
        tracectl_disconnect(t);
        if (r >= 0)
                r = write_snapshot_packet(&w, name, unit ? &u : NULL);
        pb_buf_done(&w.buf);
        snapshot_unit_done(&u);
        if (r >= 0 && fsync(file.fd) < 0 && errno != EINVAL)
                r = -errno;
        if (r >= 0)
                r = record_output_commit(&file);
        if (r < 0) {
                fprintf(stderr, "tracectl snapshot: no snapshot of %s: %s%s\n", name,
                        error ? error : strerror(-r), r == -ENOENT ? " (tracectl query lists the sessions)" : "");
                record_output_free(&file);
                return r == -ENOENT ? EXIT_SESSION_FAILED : EXIT_OTHER;
        }
        record_output_free(&file);
        if (path)
                apply_retention(dir, out, max_use, keep_free);
        printf("%s\n", out);
        fprintf(stderr, "tracectl snapshot: %s: %llu bytes%s\n", out, (unsigned long long) w.bytes,
                w.by_service ? " (the clone written by the service)" : "");
        return EXIT_OK;
}
