/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The tracing service core: producers with their shared memory buffers and
 * data sources, consumers with their tracing sessions and trace buffers.
 * The IPC adapters (producer-port.c, consumer-port.c) translate the wire
 * protocol into calls on these objects.
 */

#include <inttypes.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <systemd/sd-event.h>

#include "ipc/ipc.h"
#include "core/ports/quota.h"
#include "core/ports/relay-port.h"
#include "smb/smb-abi.h"

#include "perfetto/common/data_source_descriptor.pb-c.h"
#include "perfetto/config/trace_config.pb-c.h"

/* Limits, in line with upstream's defaults and guardrails. */
#define SERVICE_DEFAULT_SMB_SIZE (256u * 1024u)
#define SERVICE_MAX_SMB_SIZE (32u * 1024u * 1024u)
#define SERVICE_DEFAULT_SMB_PAGE_SIZE 4096u
#define SERVICE_MAX_SESSIONS 32u
#define SERVICE_MAX_SESSIONS_PER_UID 5u
#define SERVICE_MAX_BUFFERS_PER_SESSION 128u
#define SERVICE_MAX_TOTAL_BUFFER_BYTES (1024ull * 1024u * 1024u) /* per session */
#define SERVICE_MAX_DATA_SOURCES_PER_PRODUCER 1024u
#define SERVICE_MAX_PRODUCERS 512u
#define SERVICE_MAX_PRODUCERS_PER_MACHINE 128u /* per remote machine */
/* What a registration may hold (see man traced(8), LIMITS): one
 * descriptor (so a QueryServiceState reply with it fits an IPC frame),
 * names, and the memory all of a producer's, a uid's and everybody's
 * registrations take (name + descriptor + bookkeeping). */
#define SERVICE_MAX_DESCRIPTOR_SIZE (112u * 1024u)
#define SERVICE_MAX_NAME_LENGTH 1024u
#define SERVICE_DEFAULT_FLUSH_TIMEOUT_MS 5000u
#define SERVICE_DEFAULT_STOP_TIMEOUT_MS 5000u
#define SERVICE_DEFAULT_FILE_WRITE_PERIOD_MS 5000u
#define SERVICE_MIN_FILE_WRITE_PERIOD_MS 100u
#define SERVICE_MAX_DURATION_MS (7u * 24u * 3600u * 1000u)
#define SERVICE_SYNC_MARKER_PERIOD_USEC (5u * 1000000u)
#define SERVICE_MAX_TRIGGERS_PER_SESSION 1024u
#define SERVICE_MAX_TRIGGER_HISTORY 4096u
/* Per TraceConfig: every producer filter is tried against every producer
 * on EnableTracing and on each registration, so their number is bounded
 * (and each regex is, see lib/basic/regex-limits.h). */
#define SERVICE_MAX_CONFIG_DATA_SOURCES 1024u
#define SERVICE_MAX_CONFIG_REGEX_FILTERS 64u
#define SERVICE_CONFIG_REGEX_BUDGET 1024u /* expanded size of all of them, see regex_compile_budgeted */
#define SERVICE_MAX_CONFIG_NAME_FILTERS 4096u
#define SERVICE_MAX_CONFIG_TRIGGERS 256u
#define SERVICE_MAX_TRIGGERS_PER_REQUEST 64u /* names in one ActivateTriggers */
/* A write_into_file fd that takes nothing this long fails its session. */
#define SERVICE_OUTPUT_STALL_USEC (30u * 1000000u)
#define SERVICE_SEQUENCE_ID 1u /* trusted_packet_sequence_id of the service's own packets */

struct trace_buffer;
struct session;

struct compiled_regexes {
        regex_t *re;
        size_t n;
};
struct producer;
struct consumer;

struct data_source_reg {
        uint64_t id; /* descriptor id if the producer gave one */
        char *name;
        bool will_notify_on_start;
        bool will_notify_on_stop;
        bool handles_incremental_state_clear;
        /* The descriptor as the producer sent it, for QueryServiceState. */
        uint8_t *descriptor;
        size_t descriptor_size;
};

enum ds_instance_state {
        DS_CONFIGURED,
        DS_STARTING,
        DS_STARTED,
        DS_STOPPING,
        DS_STOPPED,
};

struct ds_instance {
        struct ds_instance *next; /* in session */
        struct session *session;
        struct producer *producer; /* NULL once the producer is gone */
        uint16_t producer_id;
        uint64_t id;
        char *name;
        enum ds_instance_state state;
        bool will_notify_on_start;
        bool will_notify_on_stop;
        uint32_t target_buffer; /* global buffer id */
        /* The DataSourceConfig sent to the producer (packed). */
        uint8_t *config;
        size_t config_size;
};

struct ds_instance;

/* What sessions ask of a producer's connection. Sessions reach producers
 * only through these (producer-port.c implements them for IPC producers),
 * and the port reaches sessions only through the session_on_* calls: the
 * commit path runs one way, port -> chunk sink -> buffers. */
struct producer_ops {
        int (*setup_data_source)(struct producer *p, struct ds_instance *inst);
        int (*start_data_source)(struct producer *p, struct ds_instance *inst);
        int (*stop_data_source)(struct producer *p, struct ds_instance *inst);
        int (*flush)(struct producer *p, uint64_t request_id, const uint64_t *ds_ids, size_t n);
        int (*clear_incremental_state)(struct producer *p, const uint64_t *ds_ids, size_t n);
        /* Moves every Complete chunk of the producer's SMB (and, with
         * scrape_incomplete, those still being written) into the owning
         * trace buffers. */
        void (*scrape)(struct producer *p, bool scrape_incomplete);
};

struct producer {
        const struct producer_ops *ops;
        struct producer *next;
        struct traced_service *svc;
        ipc_host_conn *conn;
        uint16_t id;
        uid_t uid;
        pid_t pid;
        char *name;
        char *sdk_version;
        bool initialized;
        bool plugin_host; /* a connection traced made for its plugins */
        /* Relayed from another machine (a TCP or vsock listener): its uid
         * and pid are what the relay claims, and it has no SMB of ours
         * (shared memory emulation: chunks arrive inside CommitData). */
        bool remote;
        uint32_t machine_id; /* 0: this machine */
        char *machine_name;

        /* Shared memory buffer. */
        size_t smb_size_hint;
        size_t smb_page_size_hint;
        int producer_smb_fd; /* producer-provided SMB, until set up */
        bool smb_provided_by_producer;
        int smb_fd;
        uint8_t *smb;
        size_t smb_size;
        struct smb_abi abi;
        bool setup_tracing_sent;

        ipc_request *async_req; /* the GetAsyncCommand stream */
        /* Commands queued while no GetAsyncCommand is outstanding. */
        struct queued_cmd *cmd_head, *cmd_tail;
        size_t n_queued;

        struct data_source_reg *data_sources;
        size_t n_data_sources;
        size_t registration_bytes; /* charged against the quotas */

        /* writer id -> target buffer, from RegisterTraceWriter or the
         * first commit; used to route scraped chunks. */
        uint32_t *writer_targets; /* SMB_MAX_WRITER_ID + 1 entries, lazily */

        uint64_t chunks_committed;
        uint64_t commit_requests;
        /* Chunks of the CommitData being handled that are still read from
         * (CHUNK_SINK_MAY_HOLD): given back after chunk_sink_settle. */
        struct smb_chunk *held;
        size_t n_held, cap_held;
        uint64_t abi_violations;
};

enum session_state {
        SESSION_CONFIGURED, /* EnableTracing done, deferred start pending */
        SESSION_STARTED,
        SESSION_DISABLING, /* flushing and stopping data sources */
        SESSION_DISABLED,
};

struct session_buffer {
        uint32_t id; /* global id, as in DataSourceConfig.target_buffer */
        struct trace_buffer *tb;
};

/* Maps (producer, writer) to the trusted_packet_sequence_id in a session. */
struct sequence_map {
        uint16_t producer_id;
        uint16_t writer_id;
        uint32_t sequence_id; /* 0: an empty slot */
        bool seen; /* first packet already emitted */
};

typedef void (*flush_done_fn)(struct session *s, bool success, void *userdata);

struct pending_flush {
        struct pending_flush *next;
        struct session *session;
        uint64_t request_id;
        /* Producers we are waiting for (ids), acked ones are removed. */
        uint16_t *producers;
        size_t n_producers;
        /* Every producer asked, scraped when the flush completes. */
        uint16_t *producers_all;
        size_t n_producers_all;
        sd_event_source *timeout;
        sd_event_source *defer;
        flush_done_fn done;
        void *userdata;
};

/* TracingServiceEvent fields (Perfetto ABI) the service reports. */
enum {
        SERVICE_EVENT_ALL_DATA_SOURCES_STARTED = 1,
        SERVICE_EVENT_TRACING_STARTED = 2,
        SERVICE_EVENT_ALL_DATA_SOURCES_FLUSHED = 3,
        SERVICE_EVENT_READ_BUFFERS_COMPLETED = 4,
        SERVICE_EVENT_TRACING_DISABLED = 5,
        SERVICE_EVENT_FLUSH_STARTED = 9,
        SERVICE_EVENT_LAST_FLUSH_SLOW_DATA_SOURCES = 8,
};

struct service_event {
        unsigned field;
        uint64_t ts;
        /* A message payload (e.g. DataSources), or NULL for a flag. */
        uint8_t *msg;
        size_t msg_len;
};

/* A trigger that matched a session: written into its trace as a
 * TracePacket.trigger, and for CLONE_SNAPSHOT sessions told to the
 * consumer (ObservableEvents.clone_trigger_hit) after its stop_delay_ms. */
struct received_trigger {
        char *trigger_name;
        char *producer_name;
        uid_t producer_uid;
        uint64_t boot_time_ns;
        uint32_t stop_delay_ms;
};

struct clone_trigger_hit {
        struct clone_trigger_hit *next;
        struct session *session;
        sd_event_source *timer;
        struct received_trigger trigger;
};

struct session {
        struct session *next;
        struct traced_service *svc;
        uint64_t id;
        struct consumer *consumer; /* NULL while detached */
        char *detach_key;
        uid_t uid;
        enum session_state state;

        Perfetto__Protos__TraceConfig *config;
        /* config->data_sources[i]->producer_name_regex_filter, compiled
         * once: ds_regex[i] holds n_producer_name_regex_filter of them.
         * trigger_regex[t] is the trigger's producer_name_regex (NULL:
         * none). */
        struct compiled_regexes *ds_regex;
        regex_t **trigger_regex;
        uint8_t *config_bytes; /* packed, for the trace_config packet */
        size_t config_size;

        struct session_buffer *buffers;
        size_t n_buffers;

        struct ds_instance *instances;

        struct sequence_map *seqs; /* open addressing, seq_cap slots (a power of 2) */
        size_t n_seqs, seq_cap;
        uint32_t next_sequence_id;
        /* A packet's slices and its trailer, as read passes hand them to a
         * sink (session-read.c). */
        struct iovec *read_iov;
        size_t read_iov_cap;

        /* write_into_file (session-output.c) */
        int file_fd;
        uint64_t file_bytes; /* taken from the buffers for the file */
        uint64_t max_file_size;
        sd_event_source *file_timer;
        uint8_t *out_buf; /* bytes the fd has not taken yet: out_buf[out_off..out_len) */
        uint8_t *take_buf; /* a packet taken at commit that spans the writer's blocks */
        size_t take_cap;
        uint64_t chunks_taken, chunks_stored; /* committed chunks, by the way they went */
        uint64_t take_waits; /* commits that waited for the writer */
        uint64_t chunks_held; /* taken, their end read on from the next chunk */
        bool take_slow; /* a wait for the writer timed out: not again until it has room */
        size_t out_off, out_len, out_cap;
        bool out_pollable; /* a pipe, socket or device: written without blocking, driven by out_io */
        bool out_more; /* the buffers hold more than out_buf could take */
        bool out_full; /* max_file_size reached */
        bool out_finalizing; /* the session is over once the output drained */
        bool out_pressure; /* file_timer moved forward: a buffer is filling */
        struct output_writer *out_writer; /* regular files: the thread that writes them */
        int out_error; /* the first write error, -errno */
        sd_event_source *out_io;
        sd_event_source *out_stall;

        uint32_t file_period_ms;
        sd_event_source *duration_timer;
        sd_event_source *flush_timer;
        sd_event_source *stop_timer;
        sd_event_source *sync_timer;
        sd_event_source *clear_timer;
        sd_event_source *trigger_timer;

        struct pending_flush *flushes;
        bool stop_sent;
        bool all_started_notified;
        bool waiting_for_start_trigger;
        uint64_t last_sync_marker_usec;

        ipc_request *enable_req; /* answered when the session is disabled */
        char *disable_error;
        char *state_text; /* QueryServiceState's state with disable_error */

        uint64_t uuid_msb, uuid_lsb;
        struct service_event events[32];
        size_t n_events;

        bool initial_packets_emitted;
        /* Relayed machines whose system_info / remote_clock_sync packets
         * this session has. */
        uint32_t machines_emitted[RELAY_MAX_MACHINES];
        size_t n_machines_emitted;
        bool sync_marker_due;
        bool clock_snapshot_due;
        uint64_t start_boottime_ns;
        uint64_t started_ns;
        bool stop_trigger_hit;
        bool final_stats_emitted;
        char *triggered_by;
        /* Triggers received, the first n_triggers_emitted already in the
         * trace. */
        struct received_trigger *triggers;
        size_t n_triggers, n_triggers_emitted;
        uint64_t n_triggers_received; /* ever, clones included */
        /* A clone made for a CLONE_SNAPSHOT trigger: the trigger, written
         * as TracePacket.clone_snapshot_trigger. */
        struct received_trigger clone_trigger;
        bool is_clone;
        bool freeing; /* in session_free: flush callbacks must not use it */
        struct clone_trigger_hit *clone_hits; /* waiting for their delay */
        /* Freed once disabled when no consumer is attached (the duration
         * or a trigger ended it, as upstream's FlushAndDisableTracing). */
        bool free_if_detached;
        sd_event_source *free_defer;

        /* stats beyond the buffers' own */
        uint64_t packets_invalid;
        uint64_t chunks_discarded_no_buffer;
        /* Chunks a producer was still writing when it went away. */
        uint64_t chunks_torn;
        uint64_t patches_discarded;
        uint64_t flushes_requested, flushes_succeeded, flushes_failed;
};

struct consumer {
        struct traced_service *svc;
        ipc_host_conn *conn;
        uid_t uid;
        struct session *session;
        ipc_request *observe_req;
        uint32_t observe_mask;
        /* A ReadBuffers in progress, paced by what the consumer takes. */
        ipc_request *read_req;
        sd_event_source *read_timer;
};

/* What sessions tell the consumer side, which alone speaks the consumer
 * protocol: consumer-port.c implements it, service_new registers it. */
struct session_consumer_ops {
        /* The session ended: answer the EnableTracing request waiting for
         * it (taken), with error (NULL: none). */
        void (*enable_done)(ipc_request *enable_req, const char *error);
        /* The session is freed while the request still waits (taken). */
        void (*enable_drop)(ipc_request *enable_req);
        /* Every data source of c's session started. */
        void (*all_started)(struct consumer *c);
        /* A CLONE_SNAPSHOT trigger hit session_id, its delay over. */
        void (*clone_trigger_hit)(struct consumer *c, uint64_t session_id, const struct received_trigger *t);
        /* s, which c was attached to, is being freed. */
        void (*session_freed)(struct consumer *c, struct session *s);
};

struct traced_service {
        sd_event *event;
        const struct session_consumer_ops *consumer_ops;
        ipc_host *producer_host;
        ipc_host *consumer_host;

        struct producer *producers;
        size_t n_producers;
        uint16_t last_producer_id;

        struct session *sessions;
        size_t n_sessions;
        uint64_t last_session_id;
        uint64_t last_ds_instance_id;
        uint32_t last_buffer_id;
        uint64_t last_flush_request_id;

        /* Triggers that matched a session in the last 24 hours, oldest
         * first, for TriggerConfig.Trigger.max_per_24_h. */
        struct trigger_history {
                uint64_t ts_ns;
                uint64_t name_hash;
        } *trigger_history;
        size_t n_trigger_history;

        void (*state_changed)(struct traced_service *svc); /* for sd_notify STATUS= */

        /* Where TraceConfig.output_path may point (output-path.h). */
        char *trace_dir;
        int trace_dir_fd;
        /* Reserved data source names (NAME or PREFIX*) and who besides the
         * plugin hosts and root may register them. */
        const char *const *trusted_names;
        size_t n_trusted_names;
        const uid_t *trusted_uids;
        size_t n_trusted_uids;
        /* Connections traced made for its plugins (ipc_host_conn_id),
         * until their producer binds. */
        uint64_t *plugin_conns;
        size_t n_plugin_conns;
        /* Machines behind traced_relay (RelayPort). */
        struct relay_machines machines;
};

int service_new(sd_event *event, struct traced_service **ret);
struct traced_service *service_free(struct traced_service *svc);
int service_attach_listeners(struct traced_service *svc, int producer_fd, bool producer_relay, int consumer_fd);
/* Serves an already connected producer socket (a plugin host's end of a
 * socketpair); pid names the process behind it when known. Takes fd. */
int service_adopt_producer(struct traced_service *svc, int fd, pid_t pid);
/* Disables every session (final writes to files) for shutdown. */
void service_shutdown(struct traced_service *svc);
void service_state_changed(struct traced_service *svc);
/* The trace directory from now on (path NULL or fd < 0: none). Takes fd. */
int service_set_trace_directory(struct traced_service *svc, const char *path, int fd);
/* Whether name is reserved (trusted_names), and whether p may register
 * reserved names. */
bool service_name_is_reserved(const struct traced_service *svc, const char *name);
/* Whether p may register (or call itself) name, reserved or not. */
bool service_producer_may_use_name(const struct traced_service *svc, const struct producer *p, const char *name);
bool service_producer_is_trusted(const struct traced_service *svc, const struct producer *p);
/* Whether conn is one traced made for a plugin (consumes the mark). */
bool service_take_plugin_conn(struct traced_service *svc, uint64_t conn_id);

/* producer-port.c */
extern const struct ipc_service_desc producer_port_desc;
struct producer *service_find_producer(struct traced_service *svc, uint16_t id);
int producer_setup_smb(struct producer *p);

/* consumer-port.c */
extern const struct ipc_service_desc consumer_port_desc;
extern const struct session_consumer_ops consumer_port_session_ops;

/* session.c */
/* c (may be NULL) is told of the session's events; uid owns it. */
int session_create(struct traced_service *svc, struct consumer *c, uid_t uid,
                   const Perfetto__Protos__TraceConfig *cfg, int file_fd, struct session **ret, char **ret_error);
void session_free(struct session *s);
void session_cancel_flushes(struct session *s);
size_t session_count_instances(const struct session *s);
int session_start(struct session *s);
/* Flush, stop data sources, then mark disabled and answer EnableTracing. */
void session_disable(struct session *s, const char *error);
/* Marks disabled now (no flush, no stop acks), writing the file out. */
void session_force_finalize(struct session *s, const char *error);
int session_flush(struct session *s, uint32_t timeout_ms, flush_done_fn done, void *userdata);
void session_on_producer_flush_ack(struct traced_service *svc, uint16_t producer_id, uint64_t request_id);
void session_on_ds_started(struct traced_service *svc, struct producer *p, uint64_t instance_id);
void session_on_ds_stopped(struct traced_service *svc, struct producer *p, uint64_t instance_id);
void session_on_producer_gone(struct traced_service *svc, struct producer *p);
void session_on_data_source_registered(struct traced_service *svc, struct producer *p, struct data_source_reg *ds);
void session_on_triggers(struct traced_service *svc, struct producer *p, char **names, size_t n);
/* For the chunk sink (ports/chunk-sink.c), which hands chunks down and
 * leaves the counting to the sessions: the session owning buffer_id when
 * producer_id may write into it (its trace buffer in *ret_tb), else NULL. */
struct session *sessions_writable_buffer(struct traced_service *svc, uint32_t buffer_id, uint16_t producer_id,
                                         struct trace_buffer **ret_tb);
/* A committed chunk for tb of s: into the file (taken) or into tb.
 * chunk_sink_copy's return values. */
struct trace_buffer_chunk;
int session_commit_chunk(struct session *s, struct trace_buffer *tb, const struct trace_buffer_chunk *chunk);
/* Counts a chunk of producer_id that had no buffer any more against
 * every session it serves. */
void sessions_count_chunk_without_buffer(struct traced_service *svc, uint16_t producer_id);
/* Counts a chunk producer_id left being written for buffer_id against
 * its session; false when no session of it takes it. */
bool sessions_count_torn_chunk(struct traced_service *svc, uint32_t buffer_id, uint16_t producer_id);
void session_count_discarded_patch(struct session *s);
/* Every buffer's trace_buffer_settle. */
void sessions_settle(struct traced_service *svc);
/* session-output.c: the write_into_file fd, never written with a
 * blocking call. session_output_open checks and takes fd (-EINVAL with
 * *ret_error for an fd that cannot take a trace). session_write_into_file
 * moves ready packets towards the fd; it returns 0 (written, or waiting
 * for the fd), -EFBIG at max_file_size_bytes, or the write error. */
int session_output_open(struct session *s, int fd, char **ret_error);
int session_write_into_file(struct session *s);
/* Puts everything read so far into the file and leaves it readable
 * through the fd, until session_output_unsync (for copying it). */
int session_output_sync(struct session *s);
void session_output_unsync(struct session *s);
/* For a session that has ended: writes all of it, waiting for a regular
 * file's writer (a pipe still takes the rest from the loop). */
int session_output_complete(struct session *s);
bool session_output_drained(const struct session *s);
/* A chunk went into tb: once it holds a quarter of its size the file is
 * written at the next turn of the loop instead of at the next period, and
 * at half its size at once, so that a fast writer fills its SMB and waits
 * rather than the buffer losing data between periods. */
void session_output_pressure(struct session *s, const struct trace_buffer *tb);
/* A chunk committed for tb: when the session writes a regular file and
 * nothing waits to be read before it, its whole packets go from the
 * producer's memory straight into the file's blocks (one copy, validated
 * there) instead of through tb. 1 when taken (2 when its payload is still
 * read from: see trace_buffer_settle), 0 when it must go into tb, or
 * -errno. */
int session_output_take_chunk(struct session *s, struct trace_buffer *tb, const struct trace_buffer_chunk *chunk);
void session_output_free(struct session *s);
/* A message for a write error (static storage). */
const char *session_output_error_message(int error);
/* session.c: the finalizing session's output drained or failed. */
void session_output_finished(struct session *s);
uint32_t session_sequence_id(struct session *s, uint16_t producer_id, uint16_t writer_id, bool *ret_first);
/* The first packet looked up was not emitted after all (invalid): the
 * next one is the sequence's first. */
void session_sequence_unsee(struct session *s, uint16_t producer_id, uint16_t writer_id);
/* Tells the attached consumer that every data source started (again, for
 * a consumer that starts observing late). */
void session_notify_all_started(struct session *s);
void session_add_service_event(struct session *s, unsigned field);
void session_clear_service_events(struct session *s);
/* Same, with a message payload (copied). */
void session_add_service_event_msg(struct session *s, unsigned field, const uint8_t *msg, size_t len);
/* A read-only copy of src's buffers for consumer c. For a write_into_file
 * source, out_fd (taken) receives what the source already wrote to its
 * file, then the copy's packets; *ret_wrote_file says so. */
int session_clone(struct session *src, struct consumer *c, uid_t uid, int out_fd, struct session **ret,
                  bool *ret_wrote_file, char **ret_error);
/* The started session with the highest TraceConfig.bugreport_score > 0,
 * or NULL. */
struct session *service_find_bugreport_session(struct traced_service *svc);
/* Whether the trace is held back until a trigger: a session with triggers
 * that received none, or a CLONE_SNAPSHOT session (read through clones). */
bool session_waiting_for_trigger(const struct session *s);
void received_trigger_done(struct received_trigger *t);
/* Applies new producer filters of a running session's data sources. */
int session_change_config(struct session *s, const Perfetto__Protos__TraceConfig *cfg);
