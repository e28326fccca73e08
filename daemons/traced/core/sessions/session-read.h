/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Turning a session's buffers into trace packets: the service's own
 * packets (config, clocks, system info, stats, sync markers), then the
 * producers' packets, validated and stamped with the trusted fields. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

struct session;

/* Receives one packet as a list of byte ranges (the TracePacket message,
 * without the Trace.packet field header), valid during the call. Negative
 * return aborts. */
typedef int (*packet_sink_fn)(const struct iovec *iov, size_t n_iov, size_t total, void *userdata);

/* Emits every packet that is ready. Returns the number of packets, or
 * -errno from the sink. */
int session_read_packets(struct session *s, packet_sink_fn sink, void *userdata);
/* The same, but a sink that returns 1 (packet taken) stops the reading of
 * the trace buffers there: *ret_paused is set, and the next call goes on
 * where this one stopped. */
int session_read_packets_paced(struct session *s, packet_sink_fn sink, void *userdata, bool *ret_paused);

/* The trusted fields the service appends to a producer's packet of
 * sequence seq (first: the sequence's first packet written), at most
 * SESSION_TRAILER_MAX bytes into buf. */
#define SESSION_TRAILER_MAX 64u
struct trace_buffer_packet_info;
size_t session_packet_trailer(const struct trace_buffer_packet_info *info, uint32_t seq, bool first, uint8_t *buf);

/* Whether a producer-written packet is acceptable: well-formed at the top
 * level and free of the fields only the service may set. */
bool packet_is_valid(const struct iovec *iov, size_t n_iov, size_t total);

/* TracePacket.sequence_flags of a packet (0 when it has none). */
#define SEQ_INCREMENTAL_STATE_CLEARED 1u
uint64_t packet_sequence_flags(const struct iovec *iov, size_t n_iov, size_t total);

/* Rotation (session-rotate.c): the service's packets that open a file
 * (clocks, config, uuid, system info, relayed machines) and those that
 * close one (service events, clocks, the file's TraceStats). The number
 * of packets, or -errno from the sink. */
int session_emit_file_head(struct session *s, packet_sink_fn sink, void *userdata);
int session_emit_file_tail(struct session *s, packet_sink_fn sink, void *userdata);
