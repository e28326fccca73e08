/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "basic/macro.h"
#include "basic/socket-address.h"
#include "ipc/ipc-conn.h"
#include "ipc/ipc.h"

struct pending {
        struct pending *next;
        uint64_t request_id;
        const ProtobufCMessageDescriptor *reply_desc;
        ipc_reply_cb cb;
        void *userdata;
};

struct method {
        uint32_t id;
        char *name;
};

struct ipc_client {
        unsigned n_ref;
        sd_event *event;
        ipc_conn *conn;
        bool connected;
        bool destroying;

        uint64_t next_request_id;
        uint64_t bind_request_id;
        ipc_bind_cb bind_cb;
        void *bind_userdata;
        bool bound;
        uint32_t service_id;
        struct method *methods;
        size_t n_methods;

        struct pending *pending;

        ipc_disconnect_cb disconnect_cb;
        void *disconnect_userdata;
};

static ipc_client *client_ref(ipc_client *c) {
        c->n_ref++;
        return c;
}

static void client_destroy(ipc_client *c) {
        c->destroying = true;
        while (c->pending) {
                struct pending *p = c->pending;
                c->pending = p->next;
                free(p);
        }
        for (size_t i = 0; i < c->n_methods; i++)
                free(c->methods[i].name);
        free(c->methods);
        if (c->conn) {
                ipc_conn_close(c->conn, 0);
                ipc_conn_unref(c->conn);
        }
        sd_event_unref(c->event);
        free(c);
}

static void client_unref(ipc_client *c) {
        if (c && --c->n_ref == 0)
                client_destroy(c);
}

ipc_client *ipc_client_free(ipc_client *c) {
        if (!c)
                return NULL;
        /* No callbacks after the owner let go. */
        c->disconnect_cb = NULL;
        c->bind_cb = NULL;
        for (struct pending *p = c->pending; p; p = p->next)
                p->cb = NULL;
        client_unref(c);
        return NULL;
}

static struct pending *pending_take(ipc_client *c, uint64_t request_id) {
        for (struct pending **pp = &c->pending; *pp; pp = &(*pp)->next)
                if ((*pp)->request_id == request_id) {
                        struct pending *p = *pp;
                        *pp = p->next;
                        p->next = NULL;
                        return p;
                }
        return NULL;
}

void ipc_client_cancel(ipc_client *c, int64_t request_id) {
        if (!c || request_id <= 0)
                return;
        for (struct pending *p = c->pending; p; p = p->next)
                if (p->request_id == (uint64_t) request_id)
                        p->cb = NULL;
}

static struct pending *pending_find(ipc_client *c, uint64_t request_id) {
        for (struct pending *p = c->pending; p; p = p->next)
                if (p->request_id == request_id)
                        return p;
        return NULL;
}

static void handle_bind_reply(ipc_client *c, const Perfetto__Protos__IPCFrame *f) {
        const Perfetto__Protos__IPCFrame__BindServiceReply *r = f->msg_bind_service_reply;
        int error = 0;

        if (c->bound || f->request_id != c->bind_request_id || c->bind_request_id == 0)
                return;
        c->bind_request_id = 0;

        if (!(r->has_success && r->success) || !r->has_service_id)
                error = -ENOENT;
        else {
                c->methods = calloc(r->n_methods ? r->n_methods : 1, sizeof(struct method));
                if (!c->methods)
                        error = -ENOMEM;
                for (size_t i = 0; !error && i < r->n_methods; i++) {
                        const Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *m = r->methods[i];
                        if (!m->name || !m->has_id)
                                continue;
                        c->methods[c->n_methods].id = m->id;
                        c->methods[c->n_methods].name = strdup(m->name);
                        if (!c->methods[c->n_methods].name)
                                error = -ENOMEM;
                        else
                                c->n_methods++;
                }
                if (!error) {
                        c->bound = true;
                        c->service_id = r->service_id;
                }
        }
        if (c->bind_cb)
                c->bind_cb(c, error, c->bind_userdata);
}

static void handle_invoke_reply(ipc_client *c, const Perfetto__Protos__IPCFrame *f) {
        const Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f->msg_invoke_method_reply;
        _cleanup_close_ int fd = ipc_conn_take_fd(c->conn);
        struct pending *p = pending_find(c, f->request_id);
        ProtobufCMessage *msg = NULL;
        int error = 0;

        if (!p)
                return; /* a reply nobody waits for (dropped or unknown): ignore */

        bool has_more = r->has_has_more && r->has_more;
        if (!(r->has_success && r->success)) {
                error = -EREMOTEIO;
                has_more = false;
        } else if (r->has_reply_proto && p->reply_desc) {
                /* Dropped with the frame, once the callback returned. */
                msg = protobuf_c_message_unpack(p->reply_desc, ipc_conn_frame_allocator(c->conn), r->reply_proto.len,
                                                r->reply_proto.data);
                if (!msg) {
                        error = -EBADMSG;
                        has_more = false;
                }
        }
        if (!has_more)
                (void) pending_take(c, f->request_id);
        if (p->cb)
                p->cb(c, error, msg, has_more, TAKE_FD(fd), p->userdata);
        if (!has_more)
                free(p);
}

static void handle_request_error(ipc_client *c, const Perfetto__Protos__IPCFrame *f) {
        struct pending *p = pending_take(c, f->request_id);

        if (p) {
                if (p->cb)
                        p->cb(c, -EPROTO, NULL, false, -EBADF, p->userdata);
                free(p);
                return;
        }
        if (c->bind_request_id && f->request_id == c->bind_request_id) {
                c->bind_request_id = 0;
                if (c->bind_cb)
                        c->bind_cb(c, -EPROTO, c->bind_userdata);
        }
}

static void on_frame(ipc_conn *conn, const Perfetto__Protos__IPCFrame *f, void *userdata) {
        ipc_client *c = userdata;

        client_ref(c);
        switch (f->msg_case) {
        case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY:
                handle_bind_reply(c, f);
                break;
        case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY:
                handle_invoke_reply(c, f);
                break;
        case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR:
                handle_request_error(c, f);
                break;
        default:
                break;
        }
        client_unref(c);
}

struct peek {
        const struct pending *pending;
        ipc_peek_reply_fn fn;
        void *userdata;
};

static void peek_frame(const uint8_t *data, size_t size, void *userdata) {
        struct peek *k = userdata;
        Perfetto__Protos__IPCFrame *f = perfetto__protos__ipcframe__unpack(NULL, size, data);
        if (!f)
                return; /* the loop will find it bad */
        const Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f->msg_invoke_method_reply;
        if (f->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY &&
            f->request_id == k->pending->request_id && r->has_success && r->success && r->has_reply_proto) {
                ProtobufCMessage *m =
                        protobuf_c_message_unpack(k->pending->reply_desc, NULL, r->reply_proto.len, r->reply_proto.data);
                if (m) {
                        k->fn(m, k->userdata);
                        protobuf_c_message_free_unpacked(m, NULL);
                }
        }
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
}

int ipc_client_peek_replies(ipc_client *c, int64_t request_id, ipc_peek_reply_fn fn, void *userdata) {
        if (!c || !fn || request_id <= 0)
                return -EINVAL;
        if (!c->connected)
                return -ENOTCONN;
        const struct pending *p = pending_find(c, (uint64_t) request_id);
        if (!p || !p->reply_desc)
                return -ENOENT;
        struct peek k = { .pending = p, .fn = fn, .userdata = userdata };
        return ipc_conn_read_ahead(c->conn, peek_frame, &k);
}

static void on_closed(ipc_conn *conn, int error, void *userdata) {
        ipc_client *c = userdata;

        c->connected = false;
        if (c->destroying)
                return;
        client_ref(c);
        if (c->bind_request_id) {
                c->bind_request_id = 0;
                if (c->bind_cb)
                        c->bind_cb(c, -ECONNRESET, c->bind_userdata);
        }
        while (c->pending) {
                struct pending *p = c->pending;
                c->pending = p->next;
                if (p->cb)
                        p->cb(c, -ECONNRESET, NULL, false, -EBADF, p->userdata);
                free(p);
        }
        if (c->disconnect_cb)
                c->disconnect_cb(c, c->disconnect_userdata);
        client_unref(c);
}

static const struct ipc_conn_ops client_conn_ops = {
        .on_frame = on_frame,
        .on_closed = on_closed,
};

int ipc_client_from_fd(sd_event *event, int fd, ipc_client **ret) {
        _cleanup_close_ int owned = fd;
        int r;

        if (!event || fd < 0 || !ret)
                return -EINVAL;
        ipc_client *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->event = sd_event_ref(event);
        r = ipc_conn_new(event, TAKE_FD(owned), &client_conn_ops, c, &c->conn);
        if (r < 0) {
                client_destroy(c);
                return r;
        }
        c->connected = true;
        *ret = c;
        return 0;
}

int ipc_client_connect(sd_event *event, const char *address, ipc_client **ret) {
        if (!event || !address || !ret)
                return -EINVAL;
        int fd = socket_address_connect(address);
        if (fd < 0)
                return fd;
        return ipc_client_from_fd(event, fd, ret);
}

void ipc_client_set_disconnect_cb(ipc_client *c, ipc_disconnect_cb cb, void *userdata) {
        c->disconnect_cb = cb;
        c->disconnect_userdata = userdata;
}

bool ipc_client_is_connected(const ipc_client *c) {
        return c && c->connected;
}

size_t ipc_client_queued_bytes(const ipc_client *c) {
        return c && c->conn ? ipc_conn_queued_bytes(c->conn) : 0;
}

int ipc_client_flush(ipc_client *c) {
        if (!c || !c->conn)
                return -ENOTCONN;
        return ipc_conn_flush(c->conn);
}

bool ipc_client_is_bound(const ipc_client *c) {
        return c && c->bound;
}

static const struct method *find_method(const ipc_client *c, const char *name) {
        for (size_t i = 0; i < c->n_methods; i++)
                if (strcmp(c->methods[i].name, name) == 0)
                        return &c->methods[i];
        return NULL;
}

bool ipc_client_has_method(const ipc_client *c, const char *method_name) {
        return c && method_name && find_method(c, method_name);
}

int ipc_client_bind(ipc_client *c, const char *service_name, ipc_bind_cb cb, void *userdata) {
        Perfetto__Protos__IPCFrame__BindService bind = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;

        if (!c || !service_name)
                return -EINVAL;
        if (!c->connected)
                return -ENOTCONN;
        if (c->bound || c->bind_request_id)
                return -EALREADY;

        bind.service_name = (char *) service_name;
        frame.has_request_id = true;
        frame.request_id = ++c->next_request_id;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        frame.msg_bind_service = &bind;
        c->bind_request_id = frame.request_id;
        c->bind_cb = cb;
        c->bind_userdata = userdata;
        int r = ipc_conn_send_frame(c->conn, &frame, -EBADF);
        if (r < 0)
                c->bind_request_id = 0;
        return r;
}

int64_t ipc_client_invoke(ipc_client *c, const char *method_name, const ProtobufCMessage *args,
                          const ProtobufCMessageDescriptor *reply_desc, int fd, ipc_reply_cb cb, void *userdata) {
        Perfetto__Protos__IPCFrame__InvokeMethod inv = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;
        _cleanup_free_ uint8_t *buf = NULL;
        struct pending *p = NULL;
        int r;

        if (!c || !method_name)
                return -EINVAL;
        if (!c->connected || !c->bound)
                return -ENOTCONN;
        const struct method *m = find_method(c, method_name);
        if (!m)
                return -ENOENT;

        size_t len = args ? protobuf_c_message_get_packed_size(args) : 0;
        buf = malloc(len ? len : 1);
        if (!buf)
                return -ENOMEM;
        if (args)
                protobuf_c_message_pack(args, buf);

        inv.has_service_id = true;
        inv.service_id = c->service_id;
        inv.has_method_id = true;
        inv.method_id = m->id;
        inv.has_args_proto = true;
        inv.args_proto.data = buf;
        inv.args_proto.len = len;
        if (!cb) {
                inv.has_drop_reply = true;
                inv.drop_reply = true;
        }
        frame.has_request_id = true;
        frame.request_id = ++c->next_request_id;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
        frame.msg_invoke_method = &inv;

        if (cb) {
                p = calloc(1, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                *p = (struct pending) {
                        .request_id = frame.request_id,
                        .reply_desc = reply_desc,
                        .cb = cb,
                        .userdata = userdata,
                        .next = c->pending,
                };
                c->pending = p;
        }
        r = ipc_conn_send_frame(c->conn, &frame, fd);
        if (r < 0) {
                /* A failed send closed the connection and reported the
                 * pending call through on_closed already, unless the frame
                 * itself was refused. */
                if (p && pending_take(c, frame.request_id))
                        free(p);
                return r;
        }
        return (int64_t) frame.request_id;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

struct bind_sync_state {
        bool done;
        int error;
};

static void bind_sync_cb(ipc_client *c, int error, void *userdata) {
        struct bind_sync_state *st = userdata;
        st->done = true;
        st->error = error;
}

int ipc_client_bind_sync(ipc_client *c, const char *service_name, uint64_t timeout_usec) {
        struct bind_sync_state st = {};
        int r;

        r = ipc_client_bind(c, service_name, bind_sync_cb, &st);
        if (r < 0)
                return r;
        uint64_t deadline = now_usec() + timeout_usec;
        while (!st.done) {
                uint64_t now = now_usec();
                if (now >= deadline) {
                        c->bind_cb = NULL;
                        return -ETIMEDOUT;
                }
                r = sd_event_run(c->event, deadline - now);
                if (r < 0) {
                        c->bind_cb = NULL;
                        return r;
                }
        }
        c->bind_cb = NULL;
        return st.error;
}
