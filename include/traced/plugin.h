/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef TRACED_PLUGIN_H
#define TRACED_PLUGIN_H

/*
 * The traced producer plugin ABI (C89).
 *
 * A plugin is a shared object exporting one function, traced_plugin_entry,
 * that returns a constant descriptor; use TRACED_PLUGIN_DEFINE to write it.
 * The host (traced-plugin-host, started by traced for each plugin) checks
 * the descriptor, then calls ops->create with a table of host services: an
 * event loop (fds, timers), data source registration and trace writers on
 * the plugin's own shared memory buffer.
 *
 * Evolution rules (traced-plugin(7), ABI POLICY): structures only grow at
 * their end; every structure starts with its size (a uint32_t) and readers
 * check it before touching a later field. A plugin whose abi_major is not
 * the host's is refused. One built against a newer minor loads as long as
 * what the host does not know of its descriptor and ops is zero (it uses
 * nothing the host lacks), and is refused by name otherwise; a plugin
 * checks api->struct_size before calling a host function newer than 1.0.
 * Flag bits the host does not know are refused (-EINVAL). Fixed-width
 * types only.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRACED_PLUGIN_MAGIC 0x44435254u /* "TRCD" little-endian */
#define TRACED_PLUGIN_ABI_MAJOR 1u
#define TRACED_PLUGIN_ABI_MINOR 3u
#define TRACED_PLUGIN_ENTRY_SYMBOL "traced_plugin_entry"

/* Log levels (syslog's). */
#define TRACED_LOG_ERR 3
#define TRACED_LOG_WARNING 4
#define TRACED_LOG_INFO 6
#define TRACED_LOG_DEBUG 7

/* Capabilities a plugin needs (bit = Linux capability number). */
#define TRACED_CAP(n) ((uint64_t) 1 << (n))

/* The largest packet the service takes; a writer carries at most that
 * when its data source stalls for room (a session's
 * DataSourceConfig.buffer_exhausted_policy says so), else what its shared
 * memory buffer holds at once (write_packet below). Since 1.2. */
#define TRACED_PLUGIN_MAX_PACKET_SIZE (64u * 1024u * 1024u)

/* Data source flags for register_data_source. */
#define TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP 0x1u
/* Since 1.1: the plugin's ops have clear_incremental_state. */
#define TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR 0x2u
/* Since 1.3 (set it only when api->abi_minor >= 3: an older host refuses
 * the bit with -EINVAL): when the shared memory buffer is full, the data
 * source's writers wait for a free chunk rather than drop the packet, up
 * to 5 s in all per chunk, then drop it (-ENOBUFS). The wait blocks the
 * host's event loop, which meanwhile hands what was written to the
 * service, whose copying frees chunks; a packet may then be as large as
 * TRACED_PLUGIN_MAX_PACKET_SIZE. What a session's
 * DataSourceConfig.buffer_exhausted_policy says wins over this default.
 * Without the flag the writers drop (BUFFER_EXHAUSTED_DROP): a full
 * buffer costs packets, counted and marked in the trace, never time. */
#define TRACED_PLUGIN_DS_STALL_WHEN_FULL 0x4u

struct traced_host;   /* opaque: the host's state */
struct traced_pb_msg; /* traced/pbzero.h: a message of the typed writers */
struct traced_writer; /* opaque: one packet sequence */
struct traced_source; /* opaque: an fd or timer registration */

typedef void (*traced_fd_cb)(int fd, uint32_t revents, void *userdata);
typedef void (*traced_timer_cb)(void *userdata);

struct traced_host_api {
        uint32_t struct_size;
        uint32_t abi_minor;
        void (*log)(struct traced_host *host, int level, const char *message);
        int32_t (*register_data_source)(struct traced_host *host, const char *name, uint32_t flags);
        /* events: EPOLLIN etc. */
        int32_t (*add_fd)(struct traced_host *host, int fd, uint32_t events, traced_fd_cb cb, void *userdata,
                          struct traced_source **ret);
        /* Calls cb every period_ms milliseconds until removed. */
        int32_t (*add_timer)(struct traced_host *host, uint32_t period_ms, traced_timer_cb cb, void *userdata,
                             struct traced_source **ret);
        void (*remove_source)(struct traced_host *host, struct traced_source *source);
        int32_t (*new_writer)(struct traced_host *host, uint64_t instance_id, struct traced_writer **ret);
        /* One serialized TracePacket. -ENOBUFS: the shared memory buffer
         * was full and the packet was dropped. -EMSGSIZE, at once: the
         * packet is larger than the writer can ever carry, and nothing of
         * it was written (the next one goes in as usual). The limit is
         * TRACED_PLUGIN_MAX_PACKET_SIZE for a data source that stalls when
         * the buffer is full; one that drops (the default) carries at most
         * what the host's buffer holds at once: 4 MiB - 2560 bytes unless
         * TraceConfig.producers sizes it (traced-plugin(7), LIMITS).
         * -ESHUTDOWN: the instance ended (its stop returned, or
         * notify_stopped was called), or, for a writer waiting for room,
         * the service's stop of it came before the packet was written
         * whole: the packet is in no trace (traced-plugin(7), for a
         * packet another thread writes as the stop returns). */
        int32_t (*write_packet)(struct traced_writer *writer, const void *packet, size_t size);
        int32_t (*flush_writer)(struct traced_writer *writer);
        void (*free_writer)(struct traced_writer *writer);
        int32_t (*notify_stopped)(struct traced_host *host, uint64_t instance_id);
        /* End of ABI 1.0. */
        /* ABI 1.1 (call it only when struct_size covers it): tells the
         * service what instance_id could not do, for its consumer and its
         * trace: field is the config field at fault, with the value when it
         * helps (`ftrace_events "sched/sched_swich"`), message what went
         * wrong ("no such event"); either may be NULL. Negative errno when
         * the service does not take such reports (log it then). */
        int32_t (*report_error)(struct traced_host *host, uint64_t instance_id, const char *field,
                                const char *message);
        /* End of ABI 1.1. */
        /* ABI 1.2 (call them only when struct_size covers them): a packet
         * written with the typed writers (traced/pbzero.h, and the headers
         * generated from traced's protos that pkg-config traced-plugin
         * brings) straight into the writer's shared memory, without the
         * copy of write_packet:
         *
         *     TracePacket pkt;
         *     if (api->begin_packet(writer, &pkt.msg) == 0) {
         *             TracePacket_set_timestamp(&pkt, ts);
         *             ...
         *             r = api->end_packet(writer, &pkt.msg);
         *     }
         *
         * root is the caller's and lives until end_packet, which ends any
         * message still open. begin: -EBUSY while a packet of the writer is
         * open, else as write_packet; end: negative errno when the packet
         * was lost (the buffer was full: -ENOBUFS; -EMSGSIZE: it grew past
         * what the writer can carry, and the service drops what it had of
         * it; -ESHUTDOWN: the instance ended first). libtraced-client's
         * traced_trace_writer_begin_pb_packet(3) says more. */
        int32_t (*begin_packet)(struct traced_writer *writer, struct traced_pb_msg *root);
        int32_t (*end_packet)(struct traced_writer *writer, struct traced_pb_msg *root);
        /* End of ABI 1.2. */
};

struct traced_plugin_ops {
        uint32_t struct_size;
        /* Returns 0 and the plugin's state, or a negative errno (the plugin
         * is then reported and skipped). */
        int32_t (*create)(const struct traced_host_api *api, struct traced_host *host, void **ret_state);
        void (*destroy)(void *state);
        /* config: serialized DataSourceConfig. */
        void (*start)(void *state, uint64_t instance_id, const char *data_source, const uint8_t *config,
                      size_t config_size);
        void (*stop)(void *state, uint64_t instance_id);
        /* Optional: write out what is pending; the host then commits. */
        void (*flush)(void *state, uint64_t instance_id);
        /* End of ABI 1.0. */
        /* Since 1.1, optional: the service asks the instance (of a data
         * source registered with
         * TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR) to forget its
         * incremental state: the next packet of each of its sequences
         * carries SEQ_INCREMENTAL_STATE_CLEARED and the interned data
         * later packets refer to is emitted again. */
        void (*clear_incremental_state)(void *state, uint64_t instance_id);
        /* End of ABI 1.1. */
};

struct traced_plugin_descriptor {
        uint32_t magic;
        uint32_t abi_major;
        uint32_t abi_minor;
        uint32_t struct_size;
        const char *name;
        const char *version;
        uint64_t capabilities; /* TRACED_CAP() bits the plugin needs */
        const struct traced_plugin_ops *ops;
        /* End of ABI 1.0. */
};

typedef const struct traced_plugin_descriptor *(*traced_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define TRACED_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TRACED_PLUGIN_EXPORT
#endif

/* Defines the entry point; authors never spell the magic or the sizes. */
#define TRACED_PLUGIN_DEFINE(plugin_name, plugin_version, plugin_caps, plugin_ops)                     \
        TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void);         \
        TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void) {        \
                static const struct traced_plugin_descriptor d = {                                       \
                        TRACED_PLUGIN_MAGIC,                                                           \
                        TRACED_PLUGIN_ABI_MAJOR,                                                       \
                        TRACED_PLUGIN_ABI_MINOR,                                                       \
                        sizeof(struct traced_plugin_descriptor),                                       \
                        plugin_name,                                                                   \
                        plugin_version,                                                                \
                        plugin_caps,                                                                   \
                        &plugin_ops,                                                                   \
                };                                                                                     \
                return &d;                                                                             \
        }

#ifdef __cplusplus
}
#endif

#endif
