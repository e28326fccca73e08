/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "basic/hash.h"
#include "basic/macro.h"
#include "ipc/ipc-conn.h"
#include "ipc/ipc.h"

#define IPC_HOST_MAX_SERVICES 8

struct host_service {
        const struct ipc_service_desc *desc;
        void *userdata;
};

struct listener {
        struct listener *next;
        int fd;
        sd_event_source *src;
        ipc_host *host;
        unsigned flags;
        bool remote;
};

struct ipc_host {
        sd_event *event;
        struct host_service services[IPC_HOST_MAX_SERVICES];
        size_t n_services;
        struct listener *listeners;
        ipc_host_conn *conns;
        uint64_t next_conn_id;
        bool freeing;
};

struct ipc_host_conn {
        ipc_host_conn *prev, *next;
        ipc_host *host;
        ipc_conn *conn;
        uint64_t id;
        uint32_t bound_mask; /* bit i: service i bound */
        void *userdata;
        pid_t pid_override; /* > 0: set by whoever handed the socket over */
        bool remote;
        bool relay_allowed;
        bool saw_frame; /* SetPeerIdentity is only valid as the first frame */
        bool has_identity;
        uid_t identity_uid;
        uint32_t machine_id;
        char *machine_name;
        ipc_request *requests; /* outstanding, not yet finally answered */
        ipc_request *spare; /* the last request done with, for the next one */
        ipc_host_drained_cb drained_cb;
        void *drained_userdata;
        sd_event_source *defer; /* frees the connection after it closed */
};

struct ipc_request {
        unsigned n_ref;
        ipc_request *prev, *next;
        ipc_host_conn *hc; /* NULL once the connection went away */
        uint64_t request_id;
        const struct ipc_method_desc *method;
        bool drop_reply;
        bool finished;
        int fd;
        const uint8_t *args; /* during the handler */
        size_t args_len;
        uint8_t *kept_args; /* ipc_request_postpone: a copy, for the redispatch */
        size_t kept_len;
        bool postponed;
};

static void request_unlink(ipc_request *req) {
        if (!req->hc)
                return;
        if (req->prev)
                req->prev->next = req->next;
        else
                req->hc->requests = req->next;
        if (req->next)
                req->next->prev = req->prev;
        req->prev = req->next = NULL;
        req->hc = NULL;
}

ipc_request *ipc_request_ref(ipc_request *req) {
        if (req)
                req->n_ref++;
        return req;
}

ipc_request *ipc_request_unref(ipc_request *req) {
        if (!req || --req->n_ref > 0)
                return NULL;
        ipc_host_conn *hc = req->hc;
        request_unlink(req);
        req->fd = safe_close(req->fd);
        free(req->kept_args);
        req->kept_args = NULL;
        /* Requests answered one after the other reuse one allocation. */
        if (hc && !hc->spare)
                hc->spare = req;
        else
                free(req);
        return NULL;
}

ipc_host_conn *ipc_request_conn(const ipc_request *req) {
        return req->hc;
}

bool ipc_request_connected(const ipc_request *req) {
        return req->hc && ipc_conn_is_open(req->hc->conn);
}

int ipc_request_take_fd(ipc_request *req) {
        return TAKE_FD(req->fd);
}

static int send_reply(ipc_host_conn *hc, uint64_t request_id, bool success, const uint8_t *data, size_t len,
                      bool has_more, int fd) {
        Perfetto__Protos__IPCFrame__InvokeMethodReply reply = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;

        reply.has_success = true;
        reply.success = success;
        if (has_more) {
                reply.has_has_more = true;
                reply.has_more = true;
        }
        if (data) {
                reply.has_reply_proto = true;
                reply.reply_proto.data = (uint8_t *) data;
                reply.reply_proto.len = len;
        }
        frame.has_request_id = true;
        frame.request_id = request_id;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
        frame.msg_invoke_method_reply = &reply;
        return ipc_conn_send_frame(hc->conn, &frame, fd);
}

size_t ipc_reply_frame_max_size(size_t reply_len) {
        Perfetto__Protos__IPCFrame__InvokeMethodReply reply = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;

        /* As send_reply frames it; only the length of the reply's bytes
         * counts for the size. */
        reply.has_success = reply.success = true;
        reply.has_has_more = reply.has_more = true;
        reply.has_reply_proto = true;
        reply.reply_proto.len = reply_len;
        frame.has_request_id = true;
        frame.request_id = UINT64_MAX;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
        frame.msg_invoke_method_reply = &reply;
        return perfetto__protos__ipcframe__get_packed_size(&frame);
}

int ipc_request_reply_packed(ipc_request *req, const uint8_t *data, size_t len, bool has_more, int fd) {
        int r = 0;

        if (!req || req->finished)
                return -EINVAL;
        if (!req->hc || !ipc_conn_is_open(req->hc->conn))
                r = -ENOTCONN;
        else if (!req->drop_reply)
                r = send_reply(req->hc, req->request_id, true, data ? data : (const uint8_t *) "", len, has_more, fd);
        if (!has_more) {
                req->finished = true;
                ipc_request_unref(req);
        }
        return r;
}

int ipc_request_reply(ipc_request *req, const ProtobufCMessage *msg, bool has_more, int fd) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len = 0;

        if (!req || req->finished)
                return -EINVAL;
        if (msg && !req->drop_reply && req->hc && ipc_conn_is_open(req->hc->conn)) {
                len = protobuf_c_message_get_packed_size(msg);
                buf = malloc(len ? len : 1);
                if (!buf)
                        return -ENOMEM;
                protobuf_c_message_pack(msg, buf);
        }
        return ipc_request_reply_packed(req, buf, len, has_more, fd);
}

const uint8_t *ipc_request_args(const ipc_request *req, size_t *ret_len) {
        *ret_len = req->args_len;
        return req->args;
}

int ipc_request_postpone(ipc_request *req) {
        if (!req || req->finished || req->postponed)
                return -EINVAL;
        if (!req->args)
                return -EBUSY; /* only from its handler */
        uint8_t *copy = malloc(req->args_len ? req->args_len : 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, req->args, req->args_len);
        req->kept_args = copy;
        req->kept_len = req->args_len;
        req->postponed = true;
        ipc_request_ref(req);
        return 0;
}

void ipc_request_redispatch(ipc_request *req, ipc_method_handler handler, void *userdata) {
        if (!req || !req->postponed)
                return;
        req->postponed = false;
        _cleanup_free_ uint8_t *bytes = TAKE_PTR(req->kept_args);
        size_t len = req->kept_len;
        /* It decoded when it came: only memory can be short now. */
        ProtobufCMessage *args = ipc_request_connected(req) ?
                                         protobuf_c_message_unpack(req->method->request_desc, NULL, len,
                                                                   bytes ? bytes : (const uint8_t *) "") :
                                         NULL;
        if (!args) {
                /* Releases the handler's reference (a no-op reply when the
                 * client is gone), then postpone's. */
                (void) ipc_request_fail(req);
                ipc_request_unref(req);
                return;
        }
        /* Postpone's reference stands for the frame's: the handler sees
         * what it saw when the request came. */
        req->args = bytes ? bytes : (const uint8_t *) "";
        req->args_len = len;
        handler(req, args, userdata);
        req->args = NULL;
        req->args_len = 0;
        protobuf_c_message_free_unpacked(args, NULL);
        ipc_request_unref(req);
}

int ipc_request_fail(ipc_request *req) {
        int r = 0;

        if (!req || req->finished)
                return -EINVAL;
        if (!req->hc || !ipc_conn_is_open(req->hc->conn))
                r = -ENOTCONN;
        else if (!req->drop_reply)
                r = send_reply(req->hc, req->request_id, false, NULL, 0, false, -EBADF);
        req->finished = true;
        ipc_request_unref(req);
        return r;
}

uint64_t ipc_host_conn_id(const ipc_host_conn *hc) {
        return hc->id;
}
uid_t ipc_host_conn_uid(const ipc_host_conn *hc) {
        if (hc->remote)
                return hc->has_identity ? hc->identity_uid : (uid_t) -1;
        return ipc_conn_peer_uid(hc->conn);
}
bool ipc_host_conn_is_remote(const ipc_host_conn *hc) {
        return hc->remote;
}
bool ipc_host_conn_relay_allowed(const ipc_host_conn *hc) {
        return hc->relay_allowed;
}
uint32_t ipc_host_conn_machine_id(const ipc_host_conn *hc) {
        return hc->machine_id;
}
const char *ipc_host_conn_machine_name(const ipc_host_conn *hc) {
        return hc->machine_name;
}

uint32_t ipc_machine_id_from_hint(const char *hint, size_t len) {
        uint32_t id = (uint32_t) fnv1a64(hint, len);
        return id == 0 ? 1 : id;
}

/* Returns false when the frame breaks the rules and the connection must go. */
static bool handle_peer_identity(ipc_host_conn *hc, const Perfetto__Protos__IPCFrame *f) {
        const Perfetto__Protos__IPCFrame__SetPeerIdentity *id = f->set_peer_identity;

        /* On a UNIX socket the kernel's SO_PEERCRED is the truth; elsewhere
         * the identity comes once, before anything else. */
        if (!hc->remote || hc->saw_frame || hc->has_identity || !id)
                return false;
        if (id->machine_name && strlen(id->machine_name) > 255)
                return false;
        hc->has_identity = true;
        hc->identity_uid = id->has_uid ? (uid_t) id->uid : (uid_t) -1;
        if (id->has_pid && id->pid > 0)
                hc->pid_override = id->pid;
        if (id->machine_id_hint && id->machine_id_hint[0])
                hc->machine_id = ipc_machine_id_from_hint(id->machine_id_hint, strlen(id->machine_id_hint));
        if (id->machine_name && id->machine_name[0]) {
                hc->machine_name = strdup(id->machine_name);
                if (!hc->machine_name)
                        return false;
        }
        return true;
}

pid_t ipc_host_conn_pid(const ipc_host_conn *hc) {
        if (hc->pid_override > 0)
                return hc->pid_override;
        return ipc_conn_peer_pid(hc->conn);
}
void ipc_host_conn_set_drained_cb(ipc_host_conn *hc, ipc_host_drained_cb cb, void *userdata) {
        hc->drained_cb = cb;
        hc->drained_userdata = userdata;
}

size_t ipc_host_conn_queued_bytes(const ipc_host_conn *hc) {
        return hc->conn ? ipc_conn_queued_bytes(hc->conn) : 0;
}

size_t ipc_host_queued_bytes(const ipc_host *host) {
        size_t n = 0;
        for (const ipc_host_conn *hc = host ? host->conns : NULL; hc; hc = hc->next)
                n += ipc_host_conn_queued_bytes(hc);
        return n;
}
void ipc_host_conn_set_pid(ipc_host_conn *hc, pid_t pid) {
        hc->pid_override = pid;
}
void ipc_host_conn_set_userdata(ipc_host_conn *hc, void *userdata) {
        hc->userdata = userdata;
}
void *ipc_host_conn_get_userdata(const ipc_host_conn *hc) {
        return hc->userdata;
}

void ipc_host_conn_close(ipc_host_conn *hc) {
        ipc_conn_close(hc->conn, 0);
}

static void handle_bind(ipc_host_conn *hc, const Perfetto__Protos__IPCFrame *f) {
        ipc_host *h = hc->host;
        Perfetto__Protos__IPCFrame__BindServiceReply reply = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;
        Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo infos[64];
        Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *ptrs[64];
        const char *name = f->msg_bind_service->service_name;
        struct host_service *svc = NULL;
        size_t idx = 0;

        for (size_t i = 0; name && i < h->n_services; i++)
                if (strcmp(h->services[i].desc->name, name) == 0) {
                        svc = &h->services[i];
                        idx = i;
                        break;
                }

        reply.has_success = true;
        reply.success = false;
        if (svc) {
                bool first = !(hc->bound_mask & (1u << idx));
                int r = 0;
                if (first && svc->desc->on_bind)
                        r = svc->desc->on_bind(hc, svc->userdata);
                if (r >= 0) {
                        size_t n = MIN(svc->desc->n_methods, ELEMENTSOF(infos));
                        hc->bound_mask |= 1u << idx;
                        reply.success = true;
                        reply.has_service_id = true;
                        reply.service_id = (uint32_t) idx + 1;
                        for (size_t i = 0; i < n; i++) {
                                infos[i] = (Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo)
                                        PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__METHOD_INFO__INIT;
                                infos[i].has_id = true;
                                infos[i].id = (uint32_t) i + 1;
                                infos[i].name = (char *) svc->desc->methods[i].name;
                                ptrs[i] = &infos[i];
                        }
                        reply.n_methods = n;
                        reply.methods = ptrs;
                }
        }
        frame.has_request_id = f->has_request_id;
        frame.request_id = f->request_id;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
        frame.msg_bind_service_reply = &reply;
        (void) ipc_conn_send_frame(hc->conn, &frame, -EBADF);
}

static void handle_invoke(ipc_host_conn *hc, const Perfetto__Protos__IPCFrame *f) {
        ipc_host *h = hc->host;
        const Perfetto__Protos__IPCFrame__InvokeMethod *inv = f->msg_invoke_method;
        _cleanup_close_ int fd = ipc_conn_take_fd(hc->conn);
        struct host_service *svc = NULL;
        const struct ipc_method_desc *m = NULL;

        if (inv->has_service_id && inv->service_id >= 1 && inv->service_id <= h->n_services &&
            (hc->bound_mask & (1u << (inv->service_id - 1))))
                svc = &h->services[inv->service_id - 1];
        if (svc && inv->has_method_id && inv->method_id >= 1 && inv->method_id <= svc->desc->n_methods)
                m = &svc->desc->methods[inv->method_id - 1];

        ProtobufCMessage *args = NULL;
        if (m) {
                /* Dropped with the frame, when the handler has returned. */
                args = protobuf_c_message_unpack(m->request_desc, ipc_conn_frame_allocator(hc->conn),
                                                 inv->has_args_proto ? inv->args_proto.len : 0,
                                                 inv->has_args_proto ? inv->args_proto.data : (const uint8_t *) "");
        }
        if (!m || !args || !m->handler) {
                if (!(inv->has_drop_reply && inv->drop_reply))
                        (void) send_reply(hc, f->request_id, false, NULL, 0, false, -EBADF);
                return;
        }

        ipc_request *req = TAKE_PTR(hc->spare);
        if (!req)
                req = malloc(sizeof(*req));
        if (!req) {
                (void) send_reply(hc, f->request_id, false, NULL, 0, false, -EBADF);
                return;
        }
        *req = (ipc_request) {
                .n_ref = 1,
                .hc = hc,
                .request_id = f->request_id,
                .method = m,
                .drop_reply = inv->has_drop_reply && inv->drop_reply,
                .fd = TAKE_FD(fd),
        };
        req->next = hc->requests;
        if (hc->requests)
                hc->requests->prev = req;
        hc->requests = req;

        /* The frame outlives the handler call, not the request. */
        ipc_request_ref(req);
        req->args = inv->has_args_proto ? inv->args_proto.data : (const uint8_t *) "";
        req->args_len = inv->has_args_proto ? inv->args_proto.len : 0;
        m->handler(req, args, svc->userdata);
        req->args = NULL;
        req->args_len = 0;
        ipc_request_unref(req);
}

static void on_frame(ipc_conn *c, const Perfetto__Protos__IPCFrame *f, void *userdata) {
        ipc_host_conn *hc = userdata;

        switch (f->msg_case) {
        case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE:
                handle_bind(hc, f);
                break;
        case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD:
                handle_invoke(hc, f);
                break;
        case PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY:
                if (!handle_peer_identity(hc, f)) {
                        ipc_conn_close(c, -EPERM);
                        return;
                }
                break;
        default:
                /* Replies and errors are not valid towards a host; ignore
                 * them like an unknown message. */
                break;
        }
        hc->saw_frame = true;
}

static void host_conn_free(ipc_host_conn *hc) {
        ipc_host *h = hc->host;

        if (h) {
                if (hc->prev)
                        hc->prev->next = hc->next;
                else
                        h->conns = hc->next;
                if (hc->next)
                        hc->next->prev = hc->prev;
        }
        while (hc->requests)
                request_unlink(hc->requests);
        sd_event_source_disable_unref(hc->defer);
        ipc_conn_unref(hc->conn);
        free(hc->machine_name);
        free(hc->spare);
        free(hc);
}

static int on_conn_gone_deferred(sd_event_source *s, void *userdata) {
        host_conn_free(userdata);
        return 0;
}

static void on_closed(ipc_conn *c, int error, void *userdata) {
        ipc_host_conn *hc = userdata;
        ipc_host *h = hc->host;

        for (size_t i = 0; h && i < h->n_services; i++)
                if ((hc->bound_mask & (1u << i)) && h->services[i].desc->on_disconnect)
                        h->services[i].desc->on_disconnect(hc, h->services[i].userdata);
        hc->bound_mask = 0;
        /* Requests still held by services stay valid; their replies become
         * no-ops. */
        while (hc->requests)
                request_unlink(hc->requests);
        /* Free outside of the connection's own callback. */
        if (!h || h->freeing || sd_event_add_defer(h->event, &hc->defer, on_conn_gone_deferred, hc) < 0) {
                /* No loop to defer to (host going away): free now; the
                 * ipc_conn itself stays alive until its caller drops its
                 * reference. */
                host_conn_free(hc);
        }
}

static void on_drained(ipc_conn *c, void *userdata) {
        ipc_host_conn *hc = userdata;
        if (hc->drained_cb)
                hc->drained_cb(hc, hc->drained_userdata);
}

static const struct ipc_conn_ops host_conn_ops = {
        .on_frame = on_frame,
        .on_closed = on_closed,
        .on_drained = on_drained,
};

int ipc_host_adopt(ipc_host *h, int fd, ipc_host_conn **ret) {
        _cleanup_close_ int owned = fd;
        int r;

        ipc_host_conn *hc = calloc(1, sizeof(*hc));
        if (!hc)
                return -ENOMEM;
        r = ipc_conn_new(h->event, TAKE_FD(owned), &host_conn_ops, hc, &hc->conn);
        if (r < 0) {
                free(hc);
                return r;
        }
        hc->host = h;
        hc->id = ++h->next_conn_id;
        hc->next = h->conns;
        if (h->conns)
                h->conns->prev = hc;
        h->conns = hc;
        if (ret)
                *ret = hc;
        return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct listener *l = userdata;

        for (unsigned i = 0; i < 32; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0)
                        break; /* EAGAIN, or a transient error: retried on the next wakeup */
                ipc_host_conn *hc = NULL;
                if (ipc_host_adopt(l->host, cfd, &hc) < 0)
                        continue;
                hc->remote = l->remote;
                hc->relay_allowed = l->flags & IPC_LISTENER_RELAY;
        }
        return 0;
}

int ipc_host_add_listener(ipc_host *h, int listen_fd) {
        return ipc_host_add_listener_flags(h, listen_fd, 0);
}

int ipc_host_add_listener_flags(ipc_host *h, int listen_fd, unsigned flags) {
        _cleanup_close_ int owned = listen_fd;
        int r;

        if (!h || listen_fd < 0)
                return -EINVAL;
        /* Sockets passed by systemd may be blocking: accepting in a loop
         * must never block the event loop. */
        int fl = fcntl(listen_fd, F_GETFL);
        if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return negative_errno();
        (void) fcntl(listen_fd, F_SETFD, FD_CLOEXEC);
        struct listener *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->host = h;
        l->flags = flags;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        l->remote = getsockname(listen_fd, (struct sockaddr *) &ss, &sl) == 0 && ss.ss_family != AF_UNIX;
        l->fd = TAKE_FD(owned);
        r = sd_event_add_io(h->event, &l->src, l->fd, EPOLLIN, on_accept, l);
        if (r < 0) {
                safe_close(l->fd);
                free(l);
                return r;
        }
        (void) sd_event_source_set_description(l->src, "ipc-listener");
        l->next = h->listeners;
        h->listeners = l;
        return 0;
}

int ipc_host_new(sd_event *event, ipc_host **ret) {
        if (!event || !ret)
                return -EINVAL;
        ipc_host *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(event);
        *ret = h;
        return 0;
}

int ipc_host_add_service(ipc_host *h, const struct ipc_service_desc *desc, void *userdata) {
        if (!h || !desc || !desc->name || desc->n_methods > 64)
                return -EINVAL;
        if (h->n_services >= IPC_HOST_MAX_SERVICES)
                return -ENOSPC;
        for (size_t i = 0; i < h->n_services; i++)
                if (strcmp(h->services[i].desc->name, desc->name) == 0)
                        return -EEXIST;
        h->services[h->n_services++] = (struct host_service) {
                .desc = desc,
                .userdata = userdata,
        };
        return 0;
}

ipc_host *ipc_host_free(ipc_host *h) {
        if (!h)
                return NULL;
        while (h->listeners) {
                struct listener *l = h->listeners;
                h->listeners = l->next;
                sd_event_source_disable_unref(l->src);
                safe_close(l->fd);
                free(l);
        }
        /* Services see every connection go away (on_disconnect), then the
         * connection is freed at once (no deferral while freeing). */
        h->freeing = true;
        while (h->conns) {
                ipc_host_conn *hc = h->conns;
                if (hc->conn && (ipc_conn_is_open(hc->conn) || ipc_conn_close_pending(hc->conn))) {
                        ipc_conn_ref(hc->conn);
                        ipc_conn *c = hc->conn;
                        ipc_conn_close(c, 0); /* frees hc, unlinking it */
                        ipc_conn_unref(c);
                } else
                        host_conn_free(hc);
        }
        sd_event_unref(h->event);
        free(h);
        return NULL;
}
