/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl snapshot: what a running session (a resident one, or any ring
 * buffer session) holds now, written into a file that opens alone,
 * without stopping it. The service flushes the session and clones it
 * (CloneSession); the clone is read back (or, for a session writing a
 * file, written by the service into ours), then a TracedSnapshot packet
 * says what the snapshot is of. The file appears complete or not at all. */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbw.h"
#include "record-output.h"
#include "snapshot-store.h"
#include "snapshot-unit.h"
#include "tracectl.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/trace/trace.pb-c.h"
#include "perfetto/trace/trace_packet.pb-c.h"

#define SNAPSHOT_TIMEOUT_MS 60000u

static void snapshot_help(void) {
        printf("Usage: tracectl snapshot NAME [-o FILE] [--unit UNIT] [--directory DIR]\n"
               "\n"
               "Writes what the running session NAME (a resident session of the\n"
               "sessions directory, or any session with that unique_session_name) holds\n"
               "now into a trace file that opens alone; the session goes on. Without\n"
               "-o the file goes into DIR (default " SNAPSHOT_STORE_DEFAULT_DIR ")\n"
               "as NAME-TIME.pftrace, or UNIT-TIME.pftrace with --unit.\n"
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
        int error;
        uint32_t packet_field; /* Trace.packet */
};

static int write_all(int fd, const void *p, size_t n) {
        const uint8_t *b = p;
        while (n > 0) {
                ssize_t k = write(fd, b, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                b += k;
                n -= (size_t) k;
        }
        return 0;
}

/* One packet as an element of Trace.packet. */
static int write_packet(struct writer *w, const uint8_t *packet, size_t len) {
        uint8_t hdr[16];
        size_t h = pbw_put_varint(hdr, (uint64_t) w->packet_field << 3 | 2);
        h += pbw_put_varint(hdr + h, len);
        int r = write_all(w->fd, hdr, h);
        if (r >= 0)
                r = write_all(w->fd, packet, len);
        if (r < 0)
                return r;
        w->packets++;
        w->bytes += h + len;
        return 0;
}

static int on_packet(const uint8_t *packet, size_t len, void *userdata) {
        return write_packet(userdata, packet, len);
}

/* The TracedSnapshot packet, last in the file. */
static int write_snapshot_packet(struct writer *w, const char *name, Perfetto__Protos__TracedSnapshot__Unit *unit) {
        Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__TracedSnapshot snap = PERFETTO__PROTOS__TRACED_SNAPSHOT__INIT;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snap.session_name = (char *) name;
        snap.has_snapshot_realtime_ns = true;
        snap.snapshot_realtime_ns = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
        snap.unit = unit;
        p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACED_SNAPSHOT;
        p.traced_snapshot = &snap;
        size_t n = protobuf_c_message_get_packed_size(&p.base);
        _cleanup_free_ uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(&p.base, buf);
        return write_packet(w, buf, n);
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
        struct record_output file = RECORD_OUTPUT_INIT;
        r = record_output_open(&file, out);
        if (r < 0) {
                fprintf(stderr, "tracectl snapshot: cannot create %s: %s\n", out, strerror(-r));
                tracectl_disconnect(t);
                snapshot_unit_done(&u);
                return EXIT_OTHER;
        }
        struct writer w = {
                .fd = file.fd,
                .packet_field = protobuf_c_message_descriptor_get_field_by_name(&perfetto__protos__trace__descriptor,
                                                                                 "packet")->id,
        };
        _cleanup_free_ char *error = NULL;
        r = clone_and_read(t, name, &w, &error);
        tracectl_disconnect(t);
        if (r >= 0)
                r = write_snapshot_packet(&w, name, unit ? &u : NULL);
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
                (void) snapshot_store_committed(dir, out);
        printf("%s\n", out);
        fprintf(stderr, "tracectl snapshot: %s: %llu bytes%s\n", out, (unsigned long long) w.bytes,
                w.packets ? "" : " (written by the service)");
        return EXIT_OK;
}
