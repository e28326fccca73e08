/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The IPC layer of the Perfetto tracing protocol: <u32 LE length><IPCFrame>
 * frames over UNIX stream sockets, services bound by name, methods invoked
 * by id with (possibly streaming) replies, file descriptors passed with
 * SCM_RIGHTS alongside the frame they belong to.
 *
 * Both the host side (a service accepting clients) and the client side are
 * driven by an sd-event loop. Library code: errors are returned as negative
 * errno, nothing is logged here.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>
#include <systemd/sd-event.h>

/* Largest frame, length prefix excluded, that either side accepts (the
 * upstream IPC buffer size). A larger header closes the connection. */
#define IPC_FRAME_MAX_SIZE (128u * 1024u)
/* Largest frame, length prefix excluded, that this side sends: upstream's
 * receive buffer of IPC_FRAME_MAX_SIZE bytes holds the 4-byte prefix too,
 * and a longer frame closes its connection. */
#define IPC_FRAME_MAX_SEND_SIZE (IPC_FRAME_MAX_SIZE - 4u)
/* Bytes queued for sending to one peer before it is considered stuck and
 * disconnected. */
#define IPC_SEND_QUEUE_MAX (8u * 1024u * 1024u)

/* ======================================================================
 * Host side
 * ====================================================================== */

typedef struct ipc_host ipc_host;
typedef struct ipc_host_conn ipc_host_conn;
typedef struct ipc_request ipc_request;

/*
 * A method handler. args is the decoded request (of the method's
 * request_desc type; the host frees it after the handler returns, so copy
 * what you keep). The handler must eventually answer req with
 * ipc_request_reply() / ipc_request_fail() (now or later: deferred and
 * streaming replies keep req alive until the last reply). If the client
 * asked for drop_reply, replies are swallowed but must still be made to
 * release req. The handler's return value is ignored.
 */
typedef void (*ipc_method_handler)(ipc_request *req, const ProtobufCMessage *args, void *userdata);

struct ipc_method_desc {
        const char *name;
        const ProtobufCMessageDescriptor *request_desc;
        const ProtobufCMessageDescriptor *reply_desc;
        ipc_method_handler handler;
};

struct ipc_service_desc {
        const char *name; /* e.g. "ProducerPort" */
        const struct ipc_method_desc *methods;
        size_t n_methods;
        /* Optional: a client connection bound this service / went away.
         * conn_userdata of the connection may be set in on_bind. */
        int (*on_bind)(ipc_host_conn *conn, void *userdata);
        void (*on_disconnect)(ipc_host_conn *conn, void *userdata);
};

int ipc_host_new(sd_event *event, ipc_host **ret);
ipc_host *ipc_host_free(ipc_host *host);

/* Registers a service. The desc must outlive the host. */
int ipc_host_add_service(ipc_host *host, const struct ipc_service_desc *desc, void *userdata);

/* Starts accepting on a listening socket; the host takes the fd. */
int ipc_host_add_listener(ipc_host *host, int listen_fd);

/* Listener flags. A listener that is not AF_UNIX is always remote. */
enum {
        IPC_LISTENER_RELAY = 1u << 0, /* connections may bind relay-only services */
};
int ipc_host_add_listener_flags(ipc_host *host, int listen_fd, unsigned flags);

/* The machine id of a SetPeerIdentity machine_id_hint: 64-bit FNV-1a over
 * its bytes, the low 32 bits, 0 becoming 1 (0 is the host). */
uint32_t ipc_machine_id_from_hint(const char *hint, size_t len);

/* Serves an already connected socket (e.g. one end of a socketpair); the
 * host takes the fd. ret may be NULL. */
int ipc_host_adopt(ipc_host *host, int fd, ipc_host_conn **ret);

/* Connection accessors. */
uint64_t ipc_host_conn_id(const ipc_host_conn *conn);
uid_t ipc_host_conn_uid(const ipc_host_conn *conn);
pid_t ipc_host_conn_pid(const ipc_host_conn *conn);
/* For an adopted socketpair, SO_PEERCRED names the process that created
 * the pair; the one that handed it over may name the real peer. */
void ipc_host_conn_set_pid(ipc_host_conn *conn, pid_t pid);
/* A connection accepted on a non-UNIX (TCP, vsock) listener: no fd can
 * cross it and its peer credentials are what the peer claims. */
bool ipc_host_conn_is_remote(const ipc_host_conn *conn);
/* Accepted on a listener with IPC_LISTENER_RELAY. */
bool ipc_host_conn_relay_allowed(const ipc_host_conn *conn);
/* From the connection's SetPeerIdentity (remote connections only): the
 * machine (0: none given, the host) and its name (NULL if none). */
uint32_t ipc_host_conn_machine_id(const ipc_host_conn *conn);
const char *ipc_host_conn_machine_name(const ipc_host_conn *conn);
/* Bytes queued for sending that the peer has not taken yet. */
size_t ipc_host_conn_queued_bytes(const ipc_host_conn *conn);
/* The same, summed over every connection of host. */
size_t ipc_host_queued_bytes(const ipc_host *host);
/* cb runs each time the bytes queued for the peer have all gone into the
 * socket (after some had to wait): a sender pacing itself by
 * ipc_host_conn_queued_bytes sends more from there. NULL stops it. */
typedef void (*ipc_host_drained_cb)(ipc_host_conn *conn, void *userdata);
void ipc_host_conn_set_drained_cb(ipc_host_conn *conn, ipc_host_drained_cb cb, void *userdata);
void ipc_host_conn_set_userdata(ipc_host_conn *conn, void *userdata);
void *ipc_host_conn_get_userdata(const ipc_host_conn *conn);
/* Closes the connection (deferred to a safe point of the loop). Pending
 * requests are released; their later replies become no-ops. */
void ipc_host_conn_close(ipc_host_conn *conn);

/* The largest frame (length header excluded) a reply of reply_len bytes
 * can take: the longest request id, more replies to follow. A reply is
 * sent only when its frame is within IPC_FRAME_MAX_SEND_SIZE. */
size_t ipc_reply_frame_max_size(size_t reply_len);

/* Request accessors. */
ipc_host_conn *ipc_request_conn(const ipc_request *req);
/* The fd that arrived with the InvokeMethod frame, handed over to the
 * caller (-EBADF when none). */
int ipc_request_take_fd(ipc_request *req);
/* The serialized arguments, while the method handler runs (NULL, 0
 * afterwards): for checks protobuf-c does not make. */
const uint8_t *ipc_request_args(const ipc_request *req, size_t *ret_len);
bool ipc_request_connected(const ipc_request *req);

/*
 * Sends one reply. has_more=true keeps the request open for more replies
 * (streaming); the final reply (has_more=false) releases req. fd >= 0 is
 * sent with the reply (not taken: the caller keeps its copy). Returns
 * -ENOTCONN (and releases req when final) if the client has gone.
 */
int ipc_request_reply(ipc_request *req, const ProtobufCMessage *reply, bool has_more, int fd);
/* The same with the reply already packed (len bytes of the method's reply
 * type). */
int ipc_request_reply_packed(ipc_request *req, const uint8_t *data, size_t len, bool has_more, int fd);
/* Final failed reply (success=false); releases req. */
int ipc_request_fail(ipc_request *req);
/*
 * Postpones req, from its handler: the handler returns without answering,
 * and the service calls ipc_request_redispatch() later (once it can serve
 * it, e.g. when it finished starting). The serialized arguments are copied
 * and the fd that came with the request stays with it. Takes a reference
 * that the redispatch drops. -EBUSY outside the handler.
 */
int ipc_request_postpone(ipc_request *req);
/* Calls handler with a postponed request's arguments, decoded again, and
 * ipc_request_args() valid during the call, as when it came. A request
 * whose client went away meanwhile is only released. */
void ipc_request_redispatch(ipc_request *req, ipc_method_handler handler, void *userdata);
/* Keeps req alive across a deferred reply; pair with ipc_request_unref
 * only if you never reply. Replying releases the handler's reference. */
ipc_request *ipc_request_ref(ipc_request *req);
ipc_request *ipc_request_unref(ipc_request *req);

/* ======================================================================
 * Client side
 * ====================================================================== */

typedef struct ipc_client ipc_client;

/* Called when the bind of a service completed (error 0) or failed. */
typedef void (*ipc_bind_cb)(ipc_client *c, int error, void *userdata);
/*
 * Called for each reply of an invocation. error < 0: the call failed
 * (success=false, RequestError, or disconnect: -ECONNRESET) and no more
 * replies follow. reply is the decoded message (freed after the callback),
 * NULL when the reply carried none. fd (or -EBADF) is owned by the callback.
 */
typedef void (*ipc_reply_cb)(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd,
                             void *userdata);
typedef void (*ipc_disconnect_cb)(ipc_client *c, void *userdata);

/* Connects (blocking connect, non-blocking I/O after) to a UNIX path,
 * "@abstract", "HOST:PORT", "[V6]:PORT" or "vsock://CID:PORT" (the syntax
 * of basic/socket-address.h). */
int ipc_client_connect(sd_event *event, const char *address, ipc_client **ret);
/* Uses an already connected socket; takes the fd. */
int ipc_client_from_fd(sd_event *event, int fd, ipc_client **ret);
ipc_client *ipc_client_free(ipc_client *c);

void ipc_client_set_disconnect_cb(ipc_client *c, ipc_disconnect_cb cb, void *userdata);
bool ipc_client_is_connected(const ipc_client *c);

/* Binds one service by name (one client binds one service). */
int ipc_client_bind(ipc_client *c, const char *service_name, ipc_bind_cb cb, void *userdata);
/* True once the bind succeeded. */
bool ipc_client_is_bound(const ipc_client *c);
/* Whether the bound service offers method_name. */
bool ipc_client_has_method(const ipc_client *c, const char *method_name);

/*
 * Invokes method_name with args. reply_desc decodes the replies. fd >= 0 is
 * sent along (not taken). cb may be NULL: then drop_reply is set. Returns
 * the request id (> 0) or -errno (-ENOENT for an unknown method, -ENOTCONN
 * when not bound).
 */
/* Bytes of requests queued that the socket has not taken yet. */
size_t ipc_client_queued_bytes(const ipc_client *c);
/* Sends what the socket takes of the queue now (see ipc_conn_flush). */
int ipc_client_flush(ipc_client *c);

int64_t ipc_client_invoke(ipc_client *c, const char *method_name, const ProtobufCMessage *args,
                          const ProtobufCMessageDescriptor *reply_desc, int fd, ipc_reply_cb cb, void *userdata);

/* For a caller that holds the loop thread (a writer waiting for room):
 * reads ahead what the peer sent and calls fn with each reply to
 * request_id that arrived and was not handed to its callback yet,
 * decoded with the request's reply_desc. The callback still gets each of
 * them, in order, once the loop runs. -ENOTCONN when closed. */
typedef void (*ipc_peek_reply_fn)(const ProtobufCMessage *reply, void *userdata);
int ipc_client_peek_replies(ipc_client *c, int64_t request_id, ipc_peek_reply_fn fn, void *userdata);

/* Forgets the callback of a request the caller gave up on (a timeout):
 * a late reply is then dropped and the callback's userdata is the
 * caller's to free. */
void ipc_client_cancel(ipc_client *c, int64_t request_id);

/* Blocking helpers for simple tools: run the loop until the bind / the
 * first final reply. */
int ipc_client_bind_sync(ipc_client *c, const char *service_name, uint64_t timeout_usec);
