/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef TRACED_PRODUCER_H
#define TRACED_PRODUCER_H

/*
 * libtraced-client, producer side: connect to a tracing service speaking
 * the Perfetto protocol (traced, or upstream Perfetto's traced), register
 * data sources, and write TracePackets into the shared memory buffer the
 * service hands over, in the Perfetto page/chunk/fragment layout.
 *
 * The producer runs on the caller's sd-event loop. Functions return 0 or
 * a negative errno.
 *
 * Versions: "Since X.Y" below names the symbol version node that brought a
 * function or field (LIBTRACED_CLIENT_X.Y in the library); the Version of
 * libtraced-client.pc is the newest node the library has, so
 * `pkg-config --atleast-version=X.Y libtraced-client` holds for a library
 * with everything marked "Since X.Y". Manual: libtraced-client(3).
 *
 * Threads: traced_producer_* functions and the callbacks belong to the
 * loop's thread (the one that called traced_producer_connect). Trace
 * writers may be created and freed on any thread and used on one thread
 * each (make one writer per thread). The thread of a writer's first write
 * is its thread for good: a writer made on the loop thread (e.g. in the
 * start callback) may be handed to another thread before it writes, and
 * one that wrote on the loop thread stays there. Chunks they fill off the
 * loop thread are committed by the loop thread, which must keep running.
 * A writer used off the loop thread is flushed by its own thread
 * (traced_trace_writer_flush or _free), not by the library on the
 * service's flush or stop requests: free such writers before returning
 * from the stop callback or soon after.
 *
 * A writer whose buffer-exhausted policy stalls waits on its own thread.
 * On the loop thread the loop cannot run meanwhile, so the writer sends
 * the CommitData itself (the socket write is attempted at once); should
 * the socket to the service be full, that data only leaves when the loop
 * runs again, and the stall ends with a drop after its bound. Writers
 * that may stall are best kept off the loop thread.
 *
 * When the connection to the service is lost, every running instance gets
 * its stop callback, writers of that connection drop what they are given
 * (-ENOTCONN), and, unless TRACED_PRODUCER_NO_RECONNECT is set, the
 * producer connects again with backoff (100 ms doubling to 10 s) and
 * registers its data sources again; ops.connected tells when.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_event sd_event;
typedef struct traced_producer traced_producer;
typedef struct traced_trace_writer traced_trace_writer;

/* Data source flags. */
#define TRACED_DS_WILL_NOTIFY_ON_STOP 0x1u
/* Needs ops.clear_incremental_state: registering without it is -EINVAL. */
#define TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR 0x2u
/* Default to TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP for this data source
 * (a session's DataSourceConfig.buffer_exhausted_policy overrides it). */
#define TRACED_DS_STALL_WHEN_FULL 0x4u

/* What a writer does when the shared memory buffer is full. No function
 * takes these: they name the policies, which are chosen per data source
 * instance by the session (DataSourceConfig.buffer_exhausted_policy) and,
 * when the session leaves it unspecified, by the data source's
 * registration: TRACED_BUFFER_EXHAUSTED_DROP, or STALL_THEN_DROP with
 * TRACED_DS_STALL_WHEN_FULL. The two stall values are those of the proto's
 * BufferExhaustedPolicy; its BUFFER_EXHAUSTED_DROP (1) means
 * TRACED_BUFFER_EXHAUSTED_DROP. */
/* What each costs: DROP costs packets, never time; a STALL costs the
 * writer's thread time (on the loop thread, everything the loop runs),
 * up to 5 s per chunk. */
#define TRACED_BUFFER_EXHAUSTED_DROP 0u /* drop the packet; the loss is visible in the trace */
#define TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT 2u /* wait up to 5 s for room, then abort() */
#define TRACED_BUFFER_EXHAUSTED_STALL_THEN_DROP 3u  /* wait up to 5 s for room, then drop */

/* Producer option flags. */
#define TRACED_PRODUCER_NO_RECONNECT 0x1u /* a lost connection stays lost */
/* Since 1.1: socket_fd holds the socket, 0 included (without this flag
 * only a socket_fd above 0 is one, so zeroed options connect by path). */
#define TRACED_PRODUCER_SOCKET_FD 0x2u

/*
 * Both structures start with their size, a uint32_t as in the plugin ABI
 * (it was a size_t before 1.1: the same bytes on little-endian and 32-bit
 * targets, and the library still reads a 64-bit big-endian caller's old
 * size_t). A caller built against an older header passes a shorter
 * structure; one built against a newer header may pass a longer one as
 * long as the fields this library does not know are zero, else the call
 * fails with -E2BIG. Unknown flag bits fail with -EINVAL. An ops table
 * (which may be NULL: a producer that registers no data source) must
 * reach at least stop, else -EINVAL.
 */
struct traced_producer_ops {
        uint32_t struct_size; /* sizeof(struct traced_producer_ops) */
        /* An instance of a registered data source starts. config is the
         * serialized DataSourceConfig. The service hears the instance runs
         * when this returns (since 1.1: data sources are registered with
         * will_notify_on_start), so what it must have in place before the
         * session counts as started is done here. */
        void (*start)(traced_producer *p, uint64_t instance_id, const char *data_source, const uint8_t *config,
                      size_t config_size, void *userdata);
        /* It stops. With TRACED_DS_WILL_NOTIFY_ON_STOP the data source calls
         * traced_producer_notify_stopped() when done, else the library
         * acknowledges after this returns. */
        void (*stop)(traced_producer *p, uint64_t instance_id, void *userdata);
        /* Optional: write out anything pending; the library then commits
         * every writer of the instance and acknowledges the flush. */
        void (*flush)(traced_producer *p, uint64_t instance_id, void *userdata);
        /* Optional: the connection to the service was lost. */
        void (*disconnected)(traced_producer *p, void *userdata);
        /* Since 1.0, optional: connected again after a loss, data
         * sources registered again. */
        void (*connected)(traced_producer *p, void *userdata);
        /* Since 1.1, optional: the service asks a running instance
         * of a data source registered with
         * TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR to forget its
         * incremental state (TraceConfig.incremental_state_config), so that
         * what a ring buffer overwrote is defined again: the next packet
         * of each of its sequences carries SEQ_INCREMENTAL_STATE_CLEARED
         * and re-emits the interned data later packets refer to. */
        void (*clear_incremental_state)(traced_producer *p, uint64_t instance_id, void *userdata);
};

struct traced_producer_options {
        uint32_t struct_size;     /* sizeof(struct traced_producer_options) */
        /* NULL: $PERFETTO_PRODUCER_SOCK_NAME, else /run/traced/producer.sock.
         * A path, "@abstract", "HOST:PORT", "[V6]:PORT" or
         * "vsock://CID:PORT": over TCP and vsock (and behind traced_relay)
         * the service asks for shared memory emulation, and the library's
         * buffer is then private, its chunks sent inside CommitData. */
        const char *socket_path;
        const char *name;         /* producer name, e.g. "com.example.myproducer" */
        uint32_t smb_size_hint;   /* bytes, 0 for the service's default */
        uint32_t page_size_hint;  /* bytes, 0 for the service's default */
        /* Since 1.0 (readers check struct_size): an already connected
         * socket to the service (e.g. one end of a socketpair handed over
         * by a supervisor) used instead of socket_path; the producer takes
         * it. Without TRACED_PRODUCER_SOCKET_FD in flags, 0 or negative
         * means connect by path; with it, any fd >= 0 is the socket (a
         * negative one fails with -EBADF). Such a producer does not
         * reconnect. */
        int socket_fd;
        uint32_t flags; /* TRACED_PRODUCER_* */
};

int traced_producer_connect(sd_event *event, const struct traced_producer_options *options,
                            const struct traced_producer_ops *ops, void *userdata, traced_producer **ret);
traced_producer *traced_producer_free(traced_producer *p);

int traced_producer_register_data_source(traced_producer *p, const char *name, uint32_t flags);
int traced_producer_notify_stopped(traced_producer *p, uint64_t instance_id);
/* Whether the service set up the shared memory buffer. */
int traced_producer_is_ready(const traced_producer *p);
/* Since 1.1: tells the service what an instance could not do, so its
 * consumer learns it and the trace records it (TraceStats): field is the
 * config field at fault, with the value when that helps (e.g.
 * `ftrace_events "sched/sched_swich"`, `callstack_sampling.user_frames`),
 * message what went wrong ("no such event"). Either may be NULL. Call it
 * from the start callback or later, on the loop thread. -EOPNOTSUPP when
 * the service does not offer it (upstream Perfetto's does not): log it
 * then. */
int traced_producer_report_error(traced_producer *p, uint64_t instance_id, const char *field, const char *message);
/* Since 1.1: activates the named triggers (TraceConfig.trigger_config) in
 * every session that waits for them, as `tracectl trigger` does. */
int traced_producer_activate_triggers(traced_producer *p, const char *const *names, size_t n_names);
/* Since 1.1: asks the service to answer once it has handled everything
 * this producer sent before (its data source registrations among it), as
 * ProducerPort.Sync does; cb then runs on the loop thread with 0, or a
 * negative errno when the connection went away first. cb may be NULL
 * (nothing is told). traced's plugin host calls it once the plugin has
 * registered its data sources: the service holds the sessions of its
 * first moments until then. No callback runs after traced_producer_free. */
typedef void (*traced_producer_sync_cb)(traced_producer *p, int error, void *userdata);
int traced_producer_sync(traced_producer *p, traced_producer_sync_cb cb, void *userdata);

/* A writer of one sequence of packets for a data source instance. */
int traced_producer_new_writer(traced_producer *p, uint64_t instance_id, traced_trace_writer **ret);
traced_trace_writer *traced_trace_writer_free(traced_trace_writer *w);
/* The largest packet the service takes (its fragments are put together
 * in at most this much). A writer whose data source drops packets when
 * the shared memory buffer is full (TRACED_BUFFER_EXHAUSTED_DROP) carries
 * at most what its buffer holds at once: the buffer's size less 20 bytes
 * of headers per page (4 MiB buffers of 32 KiB pages, the plugin hosts',
 * hold packets up to 4 MiB - 2560 bytes). A stalling writer (the two
 * STALL policies) carries up to TRACED_MAX_PACKET_SIZE, as the service
 * frees chunks while it waits; the session's buffer must hold the packet
 * too. Since 1.2. */
#define TRACED_MAX_PACKET_SIZE (64u * 1024u * 1024u)

/* Appends one serialized TracePacket (fragmented across chunks as
 * needed). -ENOBUFS when the buffer was full and the packet was dropped;
 * -ESHUTDOWN once the writer's instance ended (the library acknowledged
 * the service's stop: after the stop callback returned, or at
 * traced_producer_notify_stopped for TRACED_DS_WILL_NOTIFY_ON_STOP), as
 * the packet would be in no trace; a writer waiting for room then wakes
 * with it (on the loop thread, without WILL_NOTIFY_ON_STOP, it finds the
 * service's stop among what the service sent while it waits, or when it
 * needs a new chunk; a packet already written whole returns 0). A packet
 * another thread finished as the stop was acknowledged gets -ESHUTDOWN
 * and may still be in the trace;
 * -EMSGSIZE, at once, for a packet larger than the writer can ever carry
 * (TRACED_MAX_PACKET_SIZE above): nothing of it is written, and the next
 * packet succeeds as if it had not been tried (it carries
 * previous_packet_dropped). Both count in traced_trace_writer_dropped. */
int traced_trace_writer_write_packet(traced_trace_writer *w, const void *packet, size_t size);
/*
 * Zero-copy packets: fields are appended straight into the shared memory
 * buffer. Nested messages get a 4-byte size field that is filled in when
 * the message ends; if the message spilled into later chunks by then, the
 * size is delivered to the service as a patch of the earlier chunk.
 * Nesting depth is limited to TRACED_MSG_MAX_DEPTH.
 */
#define TRACED_MSG_MAX_DEPTH 32
typedef struct traced_msg traced_msg;
int traced_trace_writer_begin_packet(traced_trace_writer *w, traced_msg **ret_root);
int traced_msg_append_varint(traced_msg *m, uint32_t field, uint64_t value);
int traced_msg_append_bytes(traced_msg *m, uint32_t field, const void *data, size_t size);
int traced_msg_begin_nested(traced_msg *m, uint32_t field, traced_msg **ret_child);
int traced_msg_end_nested(traced_msg *child);
/* Ends the packet (and any nested message still open). */
int traced_trace_writer_end_packet(traced_trace_writer *w);

/*
 * Since 1.2: packets written with the typed writers, generated from
 * traced's .proto files (installed with traced-protos.pc; see
 * traced/pbzero.h), straight into the shared memory buffer:
 *
 *     #include <traced/pbzero/perfetto/trace/trace_packet.pbw.h>
 *     TracePacket pkt;
 *     TestEvent ev;
 *     if (traced_trace_writer_begin_pb_packet(w, &pkt.msg) == 0) {
 *             TracePacket_set_timestamp(&pkt, ts);
 *             TracePacket_begin_for_testing(&pkt, &ev);
 *             TestEvent_set_str(&ev, "hello");
 *             TracePacket_end_for_testing(&pkt, &ev);
 *             r = traced_trace_writer_end_pb_packet(w, &pkt.msg);
 *     }
 *
 * root (the packet's handle) is the caller's and must live until the
 * packet ends; the fields are written inline, the writer only called when
 * a chunk fills up. Nested messages get a 4-byte size field, filled in
 * place when they end (or sent as a patch of an earlier chunk); messages
 * still open are ended by end_pb_packet. begin: -EBUSY while a packet is
 * open, -ENOTCONN, -ENOBUFS, -ESHUTDOWN as write_packet; end: -ENOBUFS when
 * the buffer filled up and the packet was dropped, -ESHUTDOWN when the
 * instance ended before the packet did (-EMSGSIZE: the packet grew past
 * what the writer can carry, see TRACED_MAX_PACKET_SIZE, and was given up
 * there, its fragments so far marked dropped, which the service then
 * drops from the session's buffer and counts; -E2BIG: more than
 * TRACED_MSG_MAX_DEPTH messages open across a chunk boundary), counted in
 * traced_trace_writer_dropped. The traced_msg
 * calls above are these packets, written field by field through calls.
 */
struct traced_pb_msg;
int traced_trace_writer_begin_pb_packet(traced_trace_writer *w, struct traced_pb_msg *root);
int traced_trace_writer_end_pb_packet(traced_trace_writer *w, struct traced_pb_msg *root);

/* Completes the current chunk and commits everything written. -EBUSY
 * between begin_packet and end_packet (a packet cannot be handed over half
 * written). */
int traced_trace_writer_flush(traced_trace_writer *w);
/* Packets dropped because the buffer was full or the connection was lost
 * (also a packet left open when its writer is freed). A packet given up
 * after part of it went into the buffer is marked for the service to
 * discard, and the next packet the writer writes carries
 * previous_packet_dropped, so the loss shows in the trace. */
uint64_t traced_trace_writer_dropped(const traced_trace_writer *w);
/* How many times the producer connected again after losing the service. */
unsigned traced_producer_reconnects(const traced_producer *p);

#ifdef __cplusplus
}
#endif

#endif
