/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the files of the sessions layer only (session*.c): the steps
 * of a session's life that one file starts and another finishes.
 */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <systemd/sd-event.h>

#include <regex.h>
#include <sys/uio.h>

#include "core/limits.h"
#include "core/service.h"
#include "core/sessions/machines.h"
#include "core/sessions/producer.h"
#include "core/sessions/session.h"
#include "perfetto/common/trace_stats.pb-c.h"
#include "traced/pbzero/perfetto/trace/perfetto/tracing_service_event.pbw.h"

struct compiled_regexes {
        regex_t *re;
        size_t n;
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

/* The TracingServiceEvents the service reports: which field is set. */
enum {
        SERVICE_EVENT_ALL_DATA_SOURCES_STARTED = TracingServiceEvent_FIELD_all_data_sources_started,
        SERVICE_EVENT_TRACING_STARTED = TracingServiceEvent_FIELD_tracing_started,
        SERVICE_EVENT_ALL_DATA_SOURCES_FLUSHED = TracingServiceEvent_FIELD_all_data_sources_flushed,
        SERVICE_EVENT_READ_BUFFERS_COMPLETED = TracingServiceEvent_FIELD_read_tracing_buffers_completed,
        SERVICE_EVENT_TRACING_DISABLED = TracingServiceEvent_FIELD_tracing_disabled,
        SERVICE_EVENT_SLOW_STARTING_DATA_SOURCES = TracingServiceEvent_FIELD_slow_starting_data_sources,
        SERVICE_EVENT_LAST_FLUSH_SLOW_DATA_SOURCES = TracingServiceEvent_FIELD_last_flush_slow_data_sources,
        SERVICE_EVENT_FLUSH_STARTED = TracingServiceEvent_FIELD_flush_started,
};

struct service_event {
        unsigned field;
        uint64_t ts;
        /* A message payload (e.g. DataSources), or NULL for a flag. */
        uint8_t *msg;
        size_t msg_len;
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
        /* Rotation into a directory (session-rotate.c), NULL without. */
        struct session_rotation *rot;
        /* The trusted sequence id of the producer packet a read pass hands
         * to its sink (0: a service packet), for the rotation's routing. */
        uint32_t read_seq;
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
        struct output_region *out_spare;  /* a rotation: the last file's writer's memory, for the next */
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
        /* duration_ms counts from when every data source acknowledged its
         * start (or from start_timer's expiry): armed then, pending until. */
        sd_event_source *start_timer;
        bool duration_pending;
        bool start_timed_out; /* start_timer expired with data sources still starting */

        struct pending_flush *flushes;
        bool stop_sent;
        bool all_started_notified;
        /* A plugin host ended before an instance of it started
         * (host-exits.h): the session never says all started. */
        bool instance_lost_before_start;
        bool waiting_for_start_trigger;
        uint64_t last_sync_marker_usec;

        ipc_request *enable_req; /* answered when the session is disabled */
        char *disable_error;
        /* Why it ended early, when it did (TraceStats.traced_end_reason,
         * and the EnableTracing answer's): 0 when it ended as asked. */
        int end_reason;
        char *state_text; /* QueryServiceState's state with disable_error */
        char *output_text; /* QueryServiceState's output_path: the file as the core sees it */
        /* What producers reported they could not do for this session's data
         * sources (TraceStats.traced_data_source_errors), in order, at most
         * SERVICE_MAX_DS_ERRORS. */
        Perfetto__Protos__TraceStats__TracedDataSourceError **ds_errors;
        size_t n_ds_errors;

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
        int64_t start_realtime_ns; /* CLOCK_REALTIME at the start (QueryServiceState) */
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
        /* From a sessions.d file (session-resident.c): its path and the
         * packed config it had, to tell a changed file on reload.
         * retired: stopping because its file went or changed; no longer
         * found by its name. */
        bool resident;
        bool retired;
        char *resident_path;
        uint8_t *resident_config;
        size_t resident_config_size;
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

size_t session_count_instances(const struct session *s);
/* session-output.c: the write_into_file fd, never written with a
 * blocking call. session_output_open checks and takes fd (-EINVAL with
 * *ret_error for an fd that cannot take a trace). session_write_into_file
 * moves ready packets towards the fd; it returns 0 (written, or waiting
 * for the fd), -EFBIG at max_file_size_bytes, or the write error. */
int session_output_open(struct session *s, int fd, char **ret_error);
/* Puts everything read so far into the file and leaves it readable
 * through the fd, until session_output_unsync (for copying it). */
int session_output_sync(struct session *s);
void session_output_unsync(struct session *s);
/* For a session that has ended: writes all of it, waiting for a regular
 * file's writer (a pipe still takes the rest from the loop). */
int session_output_complete(struct session *s);
bool session_output_drained(const struct session *s);
/* Waits for a regular file's writer to write what it was handed, and
 * makes a write error the session's (one can come after the loop last
 * looked: the file is then cut after its last whole packet, not left
 * torn). The session's write error, or 0. */
int session_output_settle(struct session *s);
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
/* The Trace.packet field header of a packet of total bytes (at most 11). */
size_t session_packet_header(size_t total, uint8_t *hdr);
/* Puts a packet's header (hn bytes) and slices through put, in order.
 * 0, or put's error. */
typedef int (*session_put_fn)(struct session *s, const uint8_t *p, size_t n);
int session_put_packet(struct session *s, session_put_fn put, const uint8_t *hdr, size_t hn,
                       const struct iovec *iov, size_t n_iov);
/* Rotation: writes what the buffers hold for the file being written (the
 * rotation routes the rest to the next file), then the file's tail, into
 * its writer (waiting only while all of the writer's blocks are full); the
 * caller ends the file (output_writer_finish). 0 or -errno. */
int session_output_cut(struct session *s);
/* Rotation: the session writes into fd (taken) through w (taken) from
 * now on, over (taken, len of cap bytes) waiting for w first, with
 * bytes written so far; the old file's fd and writer become the
 * caller's. */
void session_output_swap(struct session *s, int fd, struct output_writer *w, uint8_t *over, size_t len, size_t cap,
                         uint64_t bytes, int *ret_old_fd, struct output_writer **ret_old_writer);
/* session.c: the finalizing session's output drained or failed. */
void session_output_finished(struct session *s);
uint32_t session_sequence_id(struct session *s, uint16_t producer_id, uint16_t writer_id, bool *ret_first);
/* The first packet looked up was not emitted after all (invalid): the
 * next one is the sequence's first. */
void session_sequence_unsee(struct session *s, uint16_t producer_id, uint16_t writer_id);
void session_add_service_event(struct session *s, unsigned field);
void session_clear_service_events(struct session *s);
/* Same, with a message payload (copied). */
void session_add_service_event_msg(struct session *s, unsigned field, const uint8_t *msg, size_t len);

uint64_t session_now_usec(clockid_t clk);
/* (Re)arms *src to call cb with s after ms on CLOCK_BOOTTIME. */
int session_add_timer_ms(struct session *s, sd_event_source **src, uint64_t ms, sd_event_time_handler_t cb);
/* -EINVAL with a copy of msg in *ret_error (may be NULL). */
int session_config_error(char **ret_error, const char *msg);
bool session_is_trigger_mode(const struct session *s, int mode);

/* session.c */
/* A new session in the service's list, with its own copy of cfg (and its
 * bytes, for the trace_config packet). */
int session_alloc(struct traced_service *svc, struct consumer *c, uid_t uid, enum session_state state,
                  const Perfetto__Protos__TraceConfig *cfg, struct session **ret);
/* Arms the periodic timers and starts every instance; duration_ms counts
 * from when they all run (session_start_complete). */
int session_start_now(struct session *s);
/* Every data source acknowledged its start, or the start timeout passed:
 * duration_ms counts from now. */
void session_start_complete(struct session *s);
/* Marks the session disabled and writes out what it still holds. */
void session_finalize(struct session *s);

/* session-instances.c */
void session_instance_free(struct ds_instance *i);
/* Bounds the work a config can ask for, then compiles its regexes once. */
int session_compile_regexes(struct session *s, char **ret_error);
void session_free_regexes(struct session *s);
void session_setup_data_sources(struct session *s);
int session_start_instance(struct session *s, struct ds_instance *inst);
void session_check_all_started(struct session *s);
/* SERVICE_DATA_SOURCE_START_TIMEOUT_MS after the start. */
int session_on_start_timeout(sd_event_source *src, uint64_t usec, void *userdata);
/* Adds to list a TracingServiceEvent.DataSources.DataSource naming each of
 * the session's instances in state (all of them with producer_id 0, else
 * that producer's); returns how many. */
size_t session_list_data_sources(struct session *s, enum ds_instance_state state, uint16_t producer_id,
                                 TracingServiceEvent_DataSources *list);
/* Whether i is started and its data source registered with
 * handles_incremental_state_clear. */
bool session_instance_clears(const struct ds_instance *i);
/* Asks every started data source that handles it to clear its
 * incremental state. */
void session_clear_incremental_state(struct session *s);
/* The incremental_state_config timer. */
int session_on_clear_timer(sd_event_source *src, uint64_t usec, void *userdata);

/* session-flush.c */
/* As session_flush, asking only the started instances that take
 * ClearIncrementalState (a rotation's cut waits for those alone); -ENOENT,
 * with nothing asked and done never called, when the session has none. */
int session_flush_clearing(struct session *s, flush_done_fn done, void *userdata);
void session_flush_ack(struct pending_flush *f, uint16_t producer_id);
void session_check_all_stopped(struct session *s);
void session_stop_all_instances(struct session *s);
