/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One framed, fd-carrying, non-blocking stream connection on an sd-event
 * loop. Shared by the host and the client sides. */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "ipc/ipc-frame.h"

typedef struct ipc_conn ipc_conn;

struct ipc_conn_ops {
        /* A whole frame arrived. The frame, and what the callback unpacks
         * with ipc_conn_frame_allocator, is dropped after return. The
         * callback may close the connection. */
        void (*on_frame)(ipc_conn *c, const Perfetto__Protos__IPCFrame *frame, void *userdata);
        /* The connection closed (peer hangup, I/O error, protocol error or
         * ipc_conn_close()). error is 0 for a clean hangup/close. Called once. */
        void (*on_closed)(ipc_conn *c, int error, void *userdata);
        /* Optional: the send queue emptied into the socket (after it had
         * held back what the socket did not take). */
        void (*on_drained)(ipc_conn *c, void *userdata);
};

/* Takes fd (a connected SOCK_STREAM socket; made non-blocking here). */
int ipc_conn_new(sd_event *event, int fd, const struct ipc_conn_ops *ops, void *userdata, ipc_conn **ret);
ipc_conn *ipc_conn_ref(ipc_conn *c);
ipc_conn *ipc_conn_unref(ipc_conn *c);

/* Queues a frame; fd >= 0 is duplicated and sent with the frame's first
 * byte. -ENOTCONN once closed, -ENOBUFS (and the connection is closed) when
 * the peer stopped reading and the queue bound is exceeded. */
int ipc_conn_send_frame(ipc_conn *c, const Perfetto__Protos__IPCFrame *frame, int fd);

/* Memory for messages unpacked while a frame of c is dispatched (on_frame):
 * nothing to free, it goes when on_frame returns; a steady stream of frames
 * allocates nothing. */
ProtobufCAllocator *ipc_conn_frame_allocator(ipc_conn *c);

/* The fd received with the most recent data, handed to the caller. */
int ipc_conn_take_fd(ipc_conn *c);

/* Closes now: stops I/O, drops queued data, calls on_closed. */
void ipc_conn_close(ipc_conn *c, int error);
/* A send failed and closed the connection; on_closed comes from the event
 * loop (or from the owner's own ipc_conn_close, whichever is first). */
bool ipc_conn_close_pending(const ipc_conn *c);
bool ipc_conn_is_open(const ipc_conn *c);

int ipc_conn_fd(const ipc_conn *c);
uid_t ipc_conn_peer_uid(const ipc_conn *c);
pid_t ipc_conn_peer_pid(const ipc_conn *c);
size_t ipc_conn_queued_bytes(const ipc_conn *c);
/* For a caller that holds the loop thread: reads what the socket holds
 * now into the frame buffer, without dispatching it, and hands fn each
 * whole frame buffered (its serialized IPCFrame) that was not dispatched
 * yet. They are dispatched as usual once the loop runs again. A read
 * error is kept for the loop to act on. -ENOTCONN once closed. */
typedef void (*ipc_conn_peek_fn)(const uint8_t *frame, size_t size, void *userdata);
int ipc_conn_read_ahead(ipc_conn *c, ipc_conn_peek_fn fn, void *userdata);

/* Sends what the socket takes of the queue now, without waiting for the
 * event loop (a caller that holds the loop thread). -ENOTCONN once the
 * connection failed (it is closed then). */
int ipc_conn_flush(ipc_conn *c);
