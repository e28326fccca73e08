/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ipc/ipc.h"
#include "smb/smb-abi.h"
#include "traced/pbzero.h"
#include "traced/producer.h"

#define PRODUCER_MAX_PENDING_COMMITS 4096u
#define PRODUCER_MAX_RETIRED 16u
/* Reconnection: first retry after this, doubling up to the cap. */
#define PRODUCER_BACKOFF_FIRST_USEC 100000u
#define PRODUCER_BACKOFF_MAX_USEC (10u * 1000000u)
/* How long a stalling writer waits for a free chunk in all. */
#define PRODUCER_STALL_LIMIT_USEC (5u * 1000000u)
#define PRODUCER_STALL_MAX_SLEEP_USEC 100000u
/* The first pause of a stalled writer: the service frees chunks within
 * microseconds of a commit when it keeps up, and a writer that sleeps a
 * millisecond each time loses more than the SMB holds at GB/s. Pauses
 * double from here. */
#define PRODUCER_STALL_FIRST_SLEEP_USEC 50u
/* Shared memory emulation (a connection over TCP or vsock, where no fd
 * crosses): the private SMB's size when no hint says otherwise (as
 * upstream's), and how many chunk bytes one CommitData carries at most, to
 * stay well inside the 128 KiB IPC frame. */
#define PRODUCER_EMULATED_SMB_SIZE (1024u * 1024u)
/* Its chunks all fit the commit queue (4 KiB pages of four chunks). */
#define PRODUCER_EMULATED_SMB_MAX (PRODUCER_MAX_PENDING_COMMITS * 1024u)
#define PRODUCER_EMULATED_COMMIT_BYTES (64u * 1024u)
/* Commits wait while more than this is queued on the socket, and are
 * tried again after the pause. */
#define PRODUCER_EMULATED_QUEUE_MAX (256u * 1024u)
#define PRODUCER_EMULATED_RETRY_USEC 1000u

struct producer_instance {
        struct producer_instance *next;
        uint64_t id;
        uint32_t target_buffer;
        char *data_source;
        bool notify_on_stop;
        bool stopped;
        uint32_t exhausted_policy; /* TRACED_BUFFER_EXHAUSTED_* */
};

/* An SMB of an earlier connection, kept mapped while writers of that
 * connection still hold chunks in it. */
struct retired_smb {
        void *mem;
        size_t size;
        unsigned generation;
};

struct traced_producer {
        sd_event *event;
        ipc_client *client;
        struct traced_producer_ops ops;
        void *userdata;
        char *name;

        /* Guards what writer threads share with the loop thread: the
         * writer list, the instance list, the commit and patch queues,
         * the SMB and its generation. Recursive; never held while calling
         * back into the user. */
        pthread_mutex_t lock;
        pthread_t loop_thread;
        int wake_fd; /* eventfd: writer threads ask the loop to commit */
        sd_event_source *wake_src;

        uint8_t *smb;
        size_t smb_size;
        struct smb_abi abi;
        /* The service asked for shared memory emulation: the SMB is
         * private, and CommitData carries the chunks' bytes. */
        bool emulate;
        uint8_t *emu_buf; /* chunk bytes of the CommitData being built */
        atomic_bool ready;
        /* Bumped when a connection ends: writers of an older generation
         * write nothing more. */
        atomic_uint generation;
        struct retired_smb retired[PRODUCER_MAX_RETIRED];
        size_t n_retired;

        /* Reconnection. */
        bool reconnect;
        char *socket_path;
        uint32_t smb_size_hint, page_size_hint;
        sd_event_source *retry;
        ipc_client *dead_client; /* freed outside its own callbacks */
        uint64_t backoff_usec;
        uint64_t stall_limit_usec;
        unsigned reconnects;

        struct producer_instance *instances;
        struct {
                char *name;
                uint32_t flags;
        } ds[64];
        size_t n_ds;

        /* Completed chunks not yet reported with CommitData. */
        struct {
                uint32_t page, chunk, target_buffer;
        } pending[PRODUCER_MAX_PENDING_COMMITS];
        size_t n_pending;
        sd_event_source *commit_defer;
        sd_event_source *commit_retry; /* emulation: the link was busy */
        uint64_t flush_request_id;     /* acknowledged with the last commit */

        struct pending_patch *patches;
        size_t n_patches, cap_patches;

        /* The GetAsyncCommand call whose replies are the service's
         * commands. */
        int64_t commands_request_id;

        traced_trace_writer *writers;
        uint16_t last_writer_id;

        struct producer_sync *syncs; /* traced_producer_sync calls not answered yet */
};

/* A Sync waiting for its reply (producer-commands.c). */
struct producer_sync {
        struct producer_sync *next;
        traced_producer *p;
        void (*cb)(traced_producer *p, int error, void *userdata);
        void *userdata;
};
void producer_syncs_free(traced_producer *p);

/* An open message of the traced_msg calls: a message of the stream. */
struct traced_msg {
        traced_trace_writer *w;
        unsigned depth; /* 0: the packet itself */
        struct traced_pb_msg pb;
};

/* The size field of a message still open when its chunk was handed over:
 * the size, written here when the message ends, reaches the service as a
 * patch of that chunk. */
struct patch_slot {
        uint32_t chunk_id;
        uint32_t offset; /* in the chunk's payload */
        uint8_t data[TRACED_PB_SIZE_FIELD_BYTES]; /* 0 until written */
        bool used;
};

struct pending_patch {
        uint16_t writer_id;
        uint32_t chunk_id;
        uint32_t target_buffer;
        uint32_t offset;
        uint8_t data[4];
        bool more; /* more patches of this chunk will follow */
};

struct traced_trace_writer {
        traced_trace_writer *next;
        traced_producer *producer;
        /* The SMB of the connection the writer was made on. */
        struct smb_abi abi;
        unsigned generation;
        /* WRITER_USED_*: set by the first thread that writes (before it
         * touches anything else), so that the loop thread only ever
         * completes chunks of writers it uses itself. */
        atomic_uchar used_on;
        uint32_t exhausted_policy;
        uint64_t instance_id;
        uint32_t target_buffer;
        uint16_t writer_id;
        uint32_t next_chunk_id;
        struct smb_chunk cur;
        size_t cur_off;
        uint16_t cur_count;
        uint8_t cur_flags;
        uint64_t dropped;
        /* The data source instance ended (its stop acknowledged): what is
         * written now does not reach its session. Set by the loop thread. */
        atomic_bool ended;
        /* The instance does not wait for its data source to say it
         * stopped: the service's StopDataSource ends it. */
        bool ends_at_stop;
        /* A writer of the loop thread, waiting for room or going on after
         * a wait, saw that StopDataSource waiting to be handled (the loop
         * cannot handle it meanwhile): the instance is over for it. */
        bool stop_seen;
        bool stalled_on_loop; /* this write waited for room on the loop thread */
        /* Packets were lost: the next packet written says so
         * (previous_packet_dropped). */
        bool signal_loss;
        bool packet_marks_loss; /* the packet being streamed says so */
        /* streaming (traced_trace_writer_begin_pb_packet, and the
         * traced_msg calls on top of it) */
        bool in_packet;
        size_t frag_off; /* payload offset of the fragment's size field */
        struct traced_pb_stream stream;
        struct patch_slot slots[TRACED_MSG_MAX_DEPTH];
        bool slots_overflow; /* a message deeper than the slots: the packet is lost */
        uint8_t sink[TRACED_PB_SIZE_FIELD_BYTES]; /* what is written where nothing waits */
        struct traced_msg stack[TRACED_MSG_MAX_DEPTH];
        unsigned depth; /* open traced_msg messages, the packet included */
};

enum {
        WRITER_USED_NOWHERE = 0,
        WRITER_USED_ON_LOOP = 1,
        WRITER_USED_ELSEWHERE = 2,
};

/* Guards what the writer threads share with the loop thread (see lock). */
static inline void producer_lock(traced_producer *p) {
        pthread_mutex_lock(&p->lock);
}
static inline void producer_unlock(traced_producer *p) {
        pthread_mutex_unlock(&p->lock);
}

/* The files of the library, by what they do:
 *   producer.c           the connection: connect, hello, reconnect with backoff, free
 *   producer-commands.c  the service's commands and the data source instances
 *   producer-arbiter.c   free chunks for writers, retired SMBs
 *   producer-commit.c    the commit queue, CommitData, the emulated scrape
 *   trace-writer.c, msg-writer.c  the writers */

/* Called by each writing entry point before it touches w. */
void writer_note_thread(traced_trace_writer *w);

/* Sets up the lock and the wake-up channel; the calling thread is the
 * loop's. */
int producer_init(traced_producer *p);
struct producer_instance *producer_find_instance(traced_producer *p, uint64_t id);
bool producer_on_loop(const traced_producer *p);
/* Queues a completed chunk of w for the next CommitData (nothing if w
 * belongs to an earlier connection). */
int writer_queue_commit(traced_trace_writer *w, size_t page, size_t chunk);
/* Sends CommitData for everything queued (flush_request_id 0: none).
 * Loop thread only; elsewhere the loop is woken to do it. */
int producer_commit(traced_producer *p, uint64_t flush_request_id);
int writer_queue_patch(traced_trace_writer *w, const struct pending_patch *patch);
/* Wakes the loop thread, which then commits what is queued. */
void producer_wake_loop(traced_producer *p);
/* The loop's side of the wake-up eventfd. */
int producer_on_wake(sd_event_source *s, int fd, uint32_t revents, void *userdata);
/* The replies of the GetAsyncCommand stream: the service's commands. */
void producer_on_async_command(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                               void *ud);
/* Forgets the data source instance id, if there is one. */
void producer_remove_instance(traced_producer *p, uint64_t id);
/* Shared memory emulation, on Flush: sends the chunks that writers of the
 * given instances are still writing, flagged incomplete. Loop thread. */
int producer_scrape(traced_producer *p, const uint64_t *ids, size_t n_ids);
/* A free chunk for w with chunk_id, waiting for one as the writer's
 * buffer-exhausted policy says; an invalid chunk when there is none (the
 * caller drops and counts) or w's connection is gone. */
struct smb_chunk writer_acquire_chunk(traced_trace_writer *w, uint32_t chunk_id);
/* With the lock held: unmaps the SMBs of earlier connections no writer
 * uses any more. */
void producer_release_retired(traced_producer *p);
/* Whether w may still write (its connection is the current one). */
bool writer_alive(const traced_trace_writer *w);

/* What the writer puts in TracePacket.previous_packet_dropped:
 * DATA_LOSS_PRESENT | DATA_LOSS_SMB_FULL. */
#define WRITER_LOSS_SMB_FULL (TracePacket_DATA_LOSS_PRESENT | TracePacket_DATA_LOSS_SMB_FULL)
#define WRITER_LOSS_MARKER_MAX 8u
/* The serialized field; returns its length. */
size_t writer_loss_marker(uint8_t buf[static WRITER_LOSS_MARKER_MAX]);
/* Stores the packet count and flags of w's current chunk and hands it to
 * the service (queued for CommitData). */
int writer_complete_chunk(traced_trace_writer *w);
/* Stores the packet count of w's current chunk so far, the packet being
 * written included, as upstream's writers do: a scraped copy of the chunk
 * then shows every packet before that one (a reader of an incomplete chunk
 * leaves its last fragment alone). */
void writer_publish_count(traced_trace_writer *w);
/* Whether a new packet can start in the current chunk. */
bool writer_new_packet_fits(const traced_trace_writer *w);
/* The largest packet w can ever carry (see producer.h): bigger ones are
 * refused with -EMSGSIZE before anything is written. */
size_t writer_max_packet_size(const traced_trace_writer *w);
/* A packet of w was dropped. */
void writer_note_loss(traced_trace_writer *w);
/* A write begins. */
void writer_begin_write(traced_trace_writer *w);
/* Whether w's instance ended, or (after a stall on the loop thread, which
 * the command cannot reach) the service's StopDataSource for it waits to
 * be handled: a packet written now is not in the session's trace. */
bool writer_instance_over(traced_trace_writer *w);
/* After a packet was written whole: whether w's instance ended
 * meanwhile (its stop was acknowledged while another thread wrote). A
 * stop that waited to be handled behind a writer on the loop thread does
 * not count: the service reads the buffer once more after the loop
 * acknowledges it, and finds the packet. */
bool writer_ended_meanwhile(const traced_trace_writer *w);
/* A write of w failed with r: counts the loss; -ESHUTDOWN instead of r
 * when it failed because the instance was over. */
int writer_fail(traced_trace_writer *w, int r);
/* The loop thread: the instance id ended, its writers write nothing more. */
void producer_end_instance_writers(traced_producer *p, uint64_t id);
/* Whether a StopDataSource for instance id arrived and waits to be
 * handled (read ahead from the socket). Loop thread. */
bool producer_stop_pending(traced_producer *p, uint64_t id);
/* A fresh chunk for a new packet; the current one is handed over either
 * way. -ENOBUFS when there is none. */
int writer_start_chunk(traced_trace_writer *w);
/* The fragment at frag_off of the current chunk is full and the packet
 * goes on: gets the next chunk first; then closes the fragment, flags the
 * chunk as continuing (before_release may add to it) and hands it over.
 * Without a next chunk, the fragment is closed with the drop-packet size
 * instead, the chunk is handed over without the continues flag, and
 * -ENOBUFS returned. */
int writer_continue_in_next_chunk(traced_trace_writer *w, size_t frag_off,
                                  void (*before_release)(traced_trace_writer *w));
/* Gives up the packet being streamed (writer freed mid-packet). */
void writer_abandon_packet(traced_trace_writer *w);
