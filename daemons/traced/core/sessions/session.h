/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The sessions layer: tracing sessions from EnableTracing to their end,
 * the data source instances they run on producers, flushes and stops,
 * triggers and clones, and the reading of their buffers into packets.
 * Above it, the ports (ports/) turn the wire protocol into these calls;
 * below it, the trace buffers (buffers/) hold chunks and the output
 * module (output/) gets bytes into files. The sessions layer calls no
 * port: it asks producers through producer_ops and tells consumers
 * through session_consumer_ops, both registered by the ports. struct
 * session is opaque outside the session files (session-internal.h).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/ipc.h"

#include "perfetto/config/trace_config.pb-c.h"

struct consumer; /* the consumer port's, never looked into here */
struct data_source_reg;
struct producer;
struct session;
struct trace_buffer;
struct traced_service;

enum session_state {
        SESSION_CONFIGURED, /* EnableTracing done, deferred start pending */
        SESSION_STARTED,
        SESSION_DISABLING, /* flushing and stopping data sources */
        SESSION_DISABLED,
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

typedef void (*flush_done_fn)(struct session *s, bool success, void *userdata);


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

/* What sessions tell the consumer side, which alone speaks the consumer
 * protocol: consumer-port.c implements it, service_new registers it. */
/* The error the EnableTracing request of a consumer attached to a
 * session gets when another one attaches to it under its key. */
#define SESSION_TAKEN_OVER "The session was attached by another consumer"

struct session_consumer_ops {
        /* The session ended: answer the EnableTracing request waiting for
         * it (taken), with error (NULL: none) and why it ended early
         * (TraceStats.TracedEndReason; 0: it ended as asked). */
        void (*enable_done)(ipc_request *enable_req, const char *error, int end_reason);
        /* The session is freed while the request still waits (taken). */
        void (*enable_drop)(ipc_request *enable_req);
        /* Every data source of c's session started. */
        void (*all_started)(struct consumer *c);
        /* A CLONE_SNAPSHOT trigger hit session_id, its delay over. */
        void (*clone_trigger_hit)(struct consumer *c, uint64_t session_id, const struct received_trigger *t);
        /* s, which c was attached to, is being freed. */
        void (*session_freed)(struct consumer *c, struct session *s);
        /* Another consumer attached to s under its key: c no longer is. */
        void (*session_taken)(struct consumer *c, struct session *s);
};

/* c (may be NULL) is told of the session's events; uid owns it. */
int session_create(struct traced_service *svc, struct consumer *c, uid_t uid,
                   const Perfetto__Protos__TraceConfig *cfg, int file_fd, struct session **ret, char **ret_error);
void session_free(struct session *s);
void session_cancel_flushes(struct session *s);
int session_start(struct session *s);
/* Flush, stop data sources, then mark disabled and answer EnableTracing. */
void session_disable(struct session *s, const char *error);
/* Marks disabled now (no flush, no stop acks), writing the file out. */
void session_force_finalize(struct session *s, const char *error);
int session_flush(struct session *s, uint32_t timeout_ms, flush_done_fn done, void *userdata);
void session_on_producer_flush_ack(struct traced_service *svc, uint16_t producer_id, uint64_t request_id);
void session_on_ds_started(struct traced_service *svc, struct producer *p, uint64_t instance_id);
void session_on_ds_stopped(struct traced_service *svc, struct producer *p, uint64_t instance_id);
/* A producer could not do something for one of its instances: kept for
 * the session's TraceStats (what its consumer polls and what ends its
 * trace) and logged. field and message are the producer's text. */
void session_on_ds_error(struct traced_service *svc, struct producer *p, uint64_t instance_id, const char *field,
                         const char *message);
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
int session_write_into_file(struct session *s);
/* Tells the attached consumer that every data source started (again, for
 * a consumer that starts observing late). */
void session_notify_all_started(struct session *s);
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

/* The producer of that id, or NULL. */
struct producer *sessions_find_producer(struct traced_service *svc, uint16_t id);
/* Producers or sessions came or went: svc->state_changed (sd_notify). */
void sessions_state_changed(struct traced_service *svc);
/* Sessions in SESSION_STARTED. */
size_t sessions_count_started(const struct traced_service *svc);
/* The service stops (SIGTERM): every session that runs is ended as
 * DisableTracing ends it (its data sources flushed, then stopped, its file
 * finished), with the stop's bounds on the waits, and marked as ended by
 * the stop (TraceStats.traced_end_reason, the EnableTracing answer). */
void sessions_begin_shutdown(struct traced_service *svc);
/* Whether every session has ended, its file is written and a consumer
 * that reads its session back (no file) did so or went away. */
bool sessions_shutdown_done(const struct traced_service *svc);
/* Ends every session at once (final writes to files, waiting for the
 * disk; a pipe gets what it takes now), for shutdown. */
void sessions_shutdown(struct traced_service *svc);

/* What the consumer port reads of a session and does with it
 * (session-consumer.c). */
uint64_t session_id(const struct session *s);
uid_t session_uid(const struct session *s);
enum session_state session_state(const struct session *s);
/* Why it ended early (TraceStats.TracedEndReason), 0 if it did not. */
int session_end_reason(const struct session *s);
const Perfetto__Protos__TraceConfig *session_config(const struct session *s);
/* A write_into_file session with its fd still open. */
bool session_writes_file(const struct session *s);
/* Started by the service from a sessions.d file (session-resident.c). */
bool session_is_resident(const struct session *s);
/* Every data source started (and the consumer was told so). */
bool session_all_started(const struct session *s);
/* Inside session_free: flush callbacks must not use it. */
bool session_is_freeing(const struct session *s);
void session_uuid(const struct session *s, uint64_t *ret_msb, uint64_t *ret_lsb);
/* A clone made for a CLONE_SNAPSHOT trigger: the trigger (taken). */
void session_set_clone_trigger(struct session *s, struct received_trigger *t);
/* The EnableTracing request answered when the session ends (taken;
 * NULL: none): one waiting before is dropped. */
void session_set_enable_req(struct session *s, ipc_request *req);
/* Its consumer went away, or detached. */
void session_forget_consumer(struct session *s);
/* Detaches the session from its consumer under key (copied). */
int session_detach(struct session *s, const char *key);
/* Whether a session of uid is detached under key. */
bool sessions_detach_key_taken(struct traced_service *svc, uid_t uid, const char *key, const struct session *except);
/* Attaches c to the session of uid detached under key (taking it from the
 * consumer attached to it under that key, if any): NULL if none. */
struct session *sessions_attach(struct traced_service *svc, struct consumer *c, uid_t uid, const char *key);
struct session *sessions_find_by_id(struct traced_service *svc, uint64_t id);
struct session *sessions_find_by_unique_name(struct traced_service *svc, const char *name);
/* Resident sessions (session-resident.c): the whole set from the
 * sessions directory, each its name, the file it came from and its
 * packed TraceConfig (unique_session_name = name). Sessions whose file
 * went are stopped (their trace finished), those whose config changed
 * are stopped and started again, new ones and those that had ended on
 * their own are started; the others go on. They belong to the core's
 * user, and every consumer may list and clone them. */
struct resident_entry {
        const char *name;
        const char *path;
        const uint8_t *config;
        size_t size;
};
void sessions_set_resident(struct traced_service *svc, const struct resident_entry *v, size_t n);
/* Writes what s holds into fd (taken, closed after) at once. */
int session_write_into_fd(struct session *s, int fd);
