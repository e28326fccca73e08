/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "basic/macro.h"
#include "ipc/ipc-arena.h"
#include "ipc/ipc-conn.h"
#include "ipc/ipc.h"

#define IPC_MAX_FDS_PER_MSG 8
/* Frames up to this size (replies, mostly) are encoded on the stack and,
 * when nothing is queued before them, sent from there. */
#define IPC_SEND_INLINE_MAX 512u

struct tx_item {
        struct tx_item *next;
        uint8_t *data;
        size_t len;
        size_t off;
        int fd; /* sent with the first byte, then closed */
};

struct ipc_conn {
        unsigned n_ref;
        sd_event *event;
        sd_event_source *io;
        int fd;
        bool open;
        uid_t uid;
        pid_t pid;

        struct ipc_frame_decoder dec;
        /* The frame being dispatched and what its handler unpacks from it:
         * dropped together once the handler returns. */
        struct ipc_arena arena;
        /* Stream offset of dec.buf[0], and of the frame being dispatched. */
        uint64_t rx_abs;
        uint64_t cur_frame_abs;
        /* An fd belongs to the frame whose first bytes came with it: the
         * last frame starting within the read that delivered the fd. */
        int pending_fd;
        uint64_t pending_fd_frame;

        struct tx_item *tx_head, *tx_tail;
        size_t tx_bytes;

        const struct ipc_conn_ops *ops;
        void *userdata;
        /* A close that happened inside a send: reported from the loop, not
         * from under the caller, who may be in the middle of using what
         * on_closed frees. */
        sd_event_source *close_defer;
        int close_error;
        /* Frames read ahead (ipc_conn_read_ahead) are dispatched from
         * here, and a read error it met is acted on. */
        sd_event_source *rx_defer;
        int rx_error;
};

static void tx_item_free(struct tx_item *t) {
        safe_close(t->fd);
        free(t->data);
        free(t);
}

static void tx_clear(ipc_conn *c) {
        while (c->tx_head) {
                struct tx_item *t = c->tx_head;
                c->tx_head = t->next;
                tx_item_free(t);
        }
        c->tx_tail = NULL;
        c->tx_bytes = 0;
}

static void conn_free(ipc_conn *c) {
        tx_clear(c);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->rx_defer);
        safe_close(c->fd);
        safe_close(c->pending_fd);
        ipc_frame_decoder_done(&c->dec);
        ipc_arena_done(&c->arena);
        sd_event_unref(c->event);
        free(c);
}

ProtobufCAllocator *ipc_conn_frame_allocator(ipc_conn *c) {
        return &c->arena.allocator;
}

ipc_conn *ipc_conn_ref(ipc_conn *c) {
        if (c)
                c->n_ref++;
        return c;
}

ipc_conn *ipc_conn_unref(ipc_conn *c) {
        if (c && --c->n_ref == 0)
                conn_free(c);
        return NULL;
}

bool ipc_conn_is_open(const ipc_conn *c) {
        return c->open;
}
int ipc_conn_fd(const ipc_conn *c) {
        return c->fd;
}
uid_t ipc_conn_peer_uid(const ipc_conn *c) {
        return c->uid;
}
pid_t ipc_conn_peer_pid(const ipc_conn *c) {
        return c->pid;
}
size_t ipc_conn_queued_bytes(const ipc_conn *c) {
        return c->tx_bytes;
}

int ipc_conn_take_fd(ipc_conn *c) {
        if (c->pending_fd < 0 || c->pending_fd_frame != c->cur_frame_abs)
                return -EBADF;
        return TAKE_FD(c->pending_fd);
}

/* Finds the frame an fd received with the bytes [read_start, read_end) of
 * the stream belongs to. */
static uint64_t fd_owner_frame(const ipc_conn *c, uint64_t read_start, uint64_t read_end) {
        uint64_t target = UINT64_MAX, before = c->rx_abs;
        size_t pos = 0;
        while (pos < c->dec.len) {
                uint64_t abs = c->rx_abs + pos;
                if (abs >= read_end)
                        break;
                if (abs >= read_start)
                        target = abs;
                else
                        before = abs;
                if (pos + IPC_FRAME_HEADER_SIZE > c->dec.len)
                        break;
                const uint8_t *h = c->dec.buf + pos;
                uint32_t len = (uint32_t) h[0] | ((uint32_t) h[1] << 8) | ((uint32_t) h[2] << 16) | ((uint32_t) h[3] << 24);
                pos += IPC_FRAME_HEADER_SIZE + (size_t) len;
        }
        return target != UINT64_MAX ? target : before;
}

static void shut(ipc_conn *c) {
        c->open = false;
        tx_clear(c);
        c->io = sd_event_source_disable_unref(c->io);
        (void) shutdown(c->fd, SHUT_RDWR);
        c->pending_fd = safe_close(c->pending_fd);
}

static void report_closed(ipc_conn *c, int error) {
        if (c->ops && c->ops->on_closed) {
                ipc_conn_ref(c);
                c->ops->on_closed(c, error, c->userdata);
                ipc_conn_unref(c);
        }
}

/* Reports a deferred close now (the owner closes or lets go). */
static void flush_close_defer(ipc_conn *c) {
        if (!c->close_defer)
                return;
        c->close_defer = sd_event_source_disable_unref(c->close_defer);
        report_closed(c, c->close_error);
        ipc_conn_unref(c); /* the deferral's reference */
}

void ipc_conn_close(ipc_conn *c, int error) {
        if (!c->open) {
                flush_close_defer(c);
                return;
        }
        shut(c);
        report_closed(c, error);
}

static int on_close_defer(sd_event_source *s, void *userdata) {
        flush_close_defer(userdata);
        return 0;
}

/* Closes now, reports from the event loop. */
static void close_from_send(ipc_conn *c, int error) {
        if (!c->open)
                return;
        shut(c);
        c->close_error = error;
        ipc_conn_ref(c);
        if (sd_event_add_defer(c->event, &c->close_defer, on_close_defer, c) < 0) {
                /* Cannot defer: report at once, as before. */
                report_closed(c, error);
                ipc_conn_unref(c);
        }
}

/* A send failed with r: the connection closes (a peer that hung up is a
 * clean close) and the caller gets -ENOTCONN. */
static int send_failed(ipc_conn *c, int r) {
        close_from_send(c, r == -EPIPE || r == -ECONNRESET ? 0 : r);
        return -ENOTCONN;
}

bool ipc_conn_close_pending(const ipc_conn *c) {
        return c->close_defer != NULL;
}

static int update_events(ipc_conn *c) {
        if (!c->io)
                return 0;
        return sd_event_source_set_io_events(c->io, EPOLLIN | (c->tx_head ? EPOLLOUT : 0));
}

static int flush_tx(ipc_conn *c) {
        while (c->tx_head) {
                struct tx_item *t = c->tx_head;
                struct iovec iov = {
                        .iov_base = t->data + t->off,
                        .iov_len = t->len - t->off,
                };
                union {
                        struct cmsghdr cmsg;
                        uint8_t buf[CMSG_SPACE(sizeof(int))];
                } control = {};
                struct msghdr mh = {
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                };
                if (t->fd >= 0 && t->off == 0) {
                        mh.msg_control = &control;
                        mh.msg_controllen = sizeof(control.buf);
                        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                        cm->cmsg_level = SOL_SOCKET;
                        cm->cmsg_type = SCM_RIGHTS;
                        cm->cmsg_len = CMSG_LEN(sizeof(int));
                        memcpy(CMSG_DATA(cm), &t->fd, sizeof(int));
                }
                ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                if (t->off == 0)
                        t->fd = safe_close(t->fd);
                t->off += (size_t) n;
                c->tx_bytes -= (size_t) n;
                if (t->off == t->len) {
                        c->tx_head = t->next;
                        if (!c->tx_head)
                                c->tx_tail = NULL;
                        tx_item_free(t);
                }
        }
        return update_events(c);
}

static void keep_received_fds(ipc_conn *c, struct msghdr *mh, uint64_t owner) {
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        /* At most one fd rides with a frame: the newest
                         * replaces an unclaimed one, surplus ones in the
                         * same message are closed. */
                        if (i == 0) {
                                safe_close(c->pending_fd);
                                c->pending_fd = fd;
                                c->pending_fd_frame = owner;
                        } else
                                safe_close(fd);
                }
        }
}

/* Reads at most this many times per wakeup so that one busy peer cannot
 * starve the others on the loop. */
#define IPC_MAX_READS_PER_WAKEUP 16

/* One read into the frame buffer: 1 when bytes came, 0 when there were
 * none (EAGAIN), -ECONNRESET at the end of the stream, else -errno. */
static int receive_some(ipc_conn *c) {
        for (;;) {
                uint8_t *space;
                size_t avail;
                int r = ipc_frame_decoder_space(&c->dec, &space, &avail);
                if (r < 0)
                        return r;

                struct iovec iov = {
                        .iov_base = space,
                        .iov_len = avail,
                };
                union {
                        struct cmsghdr cmsg;
                        uint8_t buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS_PER_MSG)];
                } control;
                struct msghdr mh = {
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = &control,
                        .msg_controllen = sizeof(control.buf),
                };
                ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -errno;
                }
                uint64_t read_start = c->rx_abs + c->dec.len;
                if (n > 0)
                        ipc_frame_decoder_commit(&c->dec, (size_t) n);
                keep_received_fds(c, &mh, fd_owner_frame(c, read_start, read_start + (uint64_t) MAX(n, 0)));
                if (mh.msg_flags & MSG_CTRUNC) {
                        /* Some fds were dropped by the kernel: the peer is
                         * misbehaving. */
                        return -EPROTO;
                }
                if (n == 0)
                        return -ECONNRESET;
                return 1;
        }
}

/* Dispatches the whole frames in the buffer. */
static int dispatch_buffered(ipc_conn *c) {
        for (;;) {
                Perfetto__Protos__IPCFrame *f = NULL;
                size_t before = c->dec.len;
                uint64_t start = c->rx_abs;
                int r = ipc_frame_decoder_pop_into(&c->dec, &c->arena.allocator, &f);
                if (r < 0) {
                        ipc_arena_reset(&c->arena);
                        return r;
                }
                if (r == 0)
                        return 0;
                c->rx_abs += before - c->dec.len;
                c->cur_frame_abs = start;
                if (c->ops && c->ops->on_frame)
                        c->ops->on_frame(c, f, c->userdata);
                ipc_arena_reset(&c->arena);
                if (!c->open)
                        return 0;
                /* An fd its frame did not claim is closed. */
                if (c->pending_fd >= 0 && c->pending_fd_frame == start)
                        c->pending_fd = safe_close(c->pending_fd);
        }
}

static int receive(ipc_conn *c) {
        /* What was read ahead first, then what the socket holds. */
        int r = dispatch_buffered(c);
        if (r < 0 || !c->open)
                return r;
        if (c->rx_error < 0)
                return c->rx_error;
        for (unsigned iter = 0; iter < IPC_MAX_READS_PER_WAKEUP; iter++) {
                r = receive_some(c);
                if (r <= 0)
                        return r;
                r = dispatch_buffered(c);
                if (r < 0 || !c->open)
                        return r;
        }
        return 0;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ipc_conn *c = userdata;
        int r = 0;

        ipc_conn_ref(c);
        if (revents & EPOLLIN) {
                r = receive(c);
                if (r == -ECONNRESET) {
                        ipc_conn_close(c, 0);
                        goto out;
                }
                if (r < 0) {
                        ipc_conn_close(c, r);
                        goto out;
                }
        }
        if (c->open && (revents & EPOLLOUT)) {
                bool had_queue = c->tx_head;
                r = flush_tx(c);
                if (r < 0) {
                        ipc_conn_close(c, r == -EPIPE ? 0 : r);
                        goto out;
                }
                if (had_queue && !c->tx_head && c->ops && c->ops->on_drained)
                        c->ops->on_drained(c, c->userdata);
        }
        if (c->open && (revents & (EPOLLHUP | EPOLLERR)) && !(revents & EPOLLIN))
                ipc_conn_close(c, 0);
out:
        ipc_conn_unref(c);
        return 0;
}

static int on_rx_defer(sd_event_source *s, void *userdata) {
        ipc_conn *c = userdata;
        c->rx_defer = sd_event_source_disable_unref(c->rx_defer);
        if (c->open)
                (void) on_io(NULL, c->fd, EPOLLIN, c);
        return 0;
}

int ipc_conn_read_ahead(ipc_conn *c, ipc_conn_peek_fn fn, void *userdata) {
        if (!c->open)
                return -ENOTCONN;
        for (unsigned iter = 0; iter < IPC_MAX_READS_PER_WAKEUP && c->rx_error == 0; iter++) {
                int r = receive_some(c);
                if (r == 0 || r == -EMSGSIZE)
                        break; /* nothing more, or the buffer is full until the loop takes frames */
                if (r < 0)
                        c->rx_error = r;
        }
        size_t off = 0, size;
        const uint8_t *frame;
        while (ipc_frame_decoder_peek(&c->dec, &off, &frame, &size) > 0)
                fn(frame, size, userdata);
        /* The socket may hold nothing more to wake the loop with. */
        if ((c->dec.len > 0 || c->rx_error < 0) && !c->rx_defer) {
                int r = sd_event_add_defer(c->event, &c->rx_defer, on_rx_defer, c);
                if (r < 0)
                        return r;
        }
        return 0;
}

int ipc_conn_new(sd_event *event, int fd, const struct ipc_conn_ops *ops, void *userdata, ipc_conn **ret) {
        _cleanup_close_ int owned = fd;
        int r;

        if (!event || fd < 0 || !ret)
                return -EINVAL;

        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return negative_errno();
        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);

        ipc_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (ipc_conn) {
                .n_ref = 1,
                .event = sd_event_ref(event),
                .fd = TAKE_FD(owned),
                .open = true,
                .uid = (uid_t) -1,
                .pid = 0,
                .pending_fd = -EBADF,
                .ops = ops,
                .userdata = userdata,
        };
        ipc_frame_decoder_init(&c->dec, IPC_FRAME_MAX_SIZE);
        ipc_arena_init(&c->arena);

        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred)) {
                c->uid = cred.uid;
                c->pid = cred.pid;
        }

        r = sd_event_add_io(event, &c->io, c->fd, EPOLLIN, on_io, c);
        if (r < 0) {
                c->open = false;
                conn_free(c);
                return r;
        }
        (void) sd_event_source_set_description(c->io, "ipc-conn");
        *ret = c;
        return 0;
}

int ipc_conn_flush(ipc_conn *c) {
        if (!c->open)
                return -ENOTCONN;
        int r = flush_tx(c);
        if (r < 0) {
                return send_failed(c, r);
        }
        return 0;
}

int ipc_conn_send_frame(ipc_conn *c, const Perfetto__Protos__IPCFrame *frame, int fd) {
        _cleanup_free_ uint8_t *heap = NULL;
        uint8_t inline_buf[IPC_SEND_INLINE_MAX];
        size_t len, sent = 0;
        bool tried = false;
        int r;

        if (!c->open)
                return -ENOTCONN;
        r = ipc_frame_encoded_len(frame, &len);
        if (r < 0)
                return r;
        uint8_t *data = inline_buf;
        if (len > sizeof(inline_buf)) {
                data = heap = malloc(len);
                if (!heap)
                        return -ENOMEM;
        }
        r = ipc_frame_encode_to(frame, data, len);
        if (r < 0)
                return r;

        if (!c->tx_head && fd < 0) {
                /* Nothing queued before it: straight to the socket, and only
                 * what it does not take is queued. */
                ssize_t n;
                do
                        n = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                while (n < 0 && errno == EINTR);
                if (n == (ssize_t) len)
                        return 0;
                if (n < 0 && errno != EAGAIN)
                        return send_failed(c, -errno);
                sent = n > 0 ? (size_t) n : 0;
                tried = true;
        }
        if (c->tx_bytes + (len - sent) > IPC_SEND_QUEUE_MAX) {
                /* The peer does not read: cut it off rather than buffer
                 * without bound. */
                close_from_send(c, -ENOBUFS);
                return -ENOBUFS;
        }

        struct tx_item *t = calloc(1, sizeof(*t));
        if (t) {
                *t = (struct tx_item) { .fd = -EBADF };
                if (data == inline_buf) {
                        t->len = len - sent;
                        t->data = malloc(t->len);
                        if (t->data)
                                memcpy(t->data, inline_buf + sent, t->len);
                } else {
                        t->data = TAKE_PTR(heap);
                        t->len = len;
                        t->off = sent;
                }
                if (!t->data) {
                        free(t);
                        t = NULL;
                }
        }
        if (!t) {
                if (sent == 0)
                        return -ENOMEM;
                /* Part of the frame is out: the stream is lost. */
                close_from_send(c, -ENOMEM);
                return -ENOTCONN;
        }
        if (fd >= 0) {
                t->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (t->fd < 0) {
                        r = negative_errno();
                        tx_item_free(t);
                        return r;
                }
        }
        if (c->tx_tail)
                c->tx_tail->next = t;
        else
                c->tx_head = t;
        c->tx_tail = t;
        c->tx_bytes += len - sent;

        /* Try to send right away (unless that was just done); what does not
         * fit waits for EPOLLOUT. */
        r = tried ? update_events(c) : flush_tx(c);
        if (r < 0)
                return send_failed(c, r);
        return 0;
}
