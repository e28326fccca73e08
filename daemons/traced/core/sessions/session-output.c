/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* write_into_file: the session's packets go to the consumer's fd as a
 * Trace proto stream. The service core never blocks on that fd: a pipe,
 * socket or device is put in non-blocking mode and written when the event
 * loop says it can take data; what it has not taken waits in a bounded
 * buffer while the trace buffers keep the rest (ring buffers overwrite, as
 * they would for a slow ReadBuffers). An fd that takes nothing for
 * SERVICE_OUTPUT_STALL_USEC, or that fails a write, fails its session with
 * the reason. Regular files cannot say "would block": their writes go
 * through output-writer.c, a thread that takes full blocks to the disk
 * (O_DIRECT where the file allows it) while the loop goes on; when its
 * blocks are all waiting, reading pauses as for a full pipe, and a trace
 * buffer filling up meanwhile makes the commit that fills it wait for the
 * disk (session_output_pressure), so a fast writer stalls on its SMB
 * instead of losing data. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "traced/pbzero/perfetto/trace/trace.pbw.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-read.h"
#include "core/sessions/session-rotate.h"
#include "core/output/output-fd.h"
#include "core/output/output-writer.h"
#include "core/buffers/trace-buffer.h"

/* Packets are gathered up to this much before a write; reading stops
 * while this much waits for the fd. */
#define OUT_CHUNK (256u * 1024u)
/* A buffer this full (1/N of its size) is drained without waiting for
 * file_write_period_ms. */
#define OUT_PRESSURE_DIVISOR 4u
/* ... and this full (1/N) right away, from the commit that filled it. */
#define OUT_DRAIN_NOW_DIVISOR 2u
/* A regular file's writer takes the buffer's data once this much (or the
 * quarter) is there, without waiting for the disk. */
#define OUT_DRAIN_EAGER_BYTES (1024u * 1024u)
/* How long a commit waits for the file's writer to free a block (about
 * one block's write on a slow disk) before the buffer takes the chunk. */
#define OUT_TAKE_WAIT_USEC 20000u
/* While a packet is copied out of a producer's shared memory, the lines of
 * what follows it are asked for: from TAKE_PREFETCH_SKIP bytes past its end,
 * as many bytes as it had, at most TAKE_PREFETCH_MAX. With many producers
 * their buffers no longer fit in the caches and each copy waits for memory
 * line by line; asked for ahead, the lines arrive together. Measured with
 * 64 producers (1 KB packets, 1 MiB buffers each): 30-45 % less time per
 * chunk taken; one producer: 10-20 % less with a 4 MiB buffer, no change
 * with 1 MiB; 64 KB packets: no change. */
#define TAKE_PREFETCH_SKIP 256u
#define TAKE_PREFETCH_MAX 2048u

int session_output_open(struct session *s, int fd, char **ret_error) {
        _cleanup_close_ int owned = fd;
        bool regular = false;

        const char *why = output_fd_check(fd, &s->out_pollable, &regular);
        if (!why && regular && output_writer_new(fd, &s->out_writer) < 0)
                why = "The output file cannot be set up for writing (out of memory?)";
        if (why) {
                if (ret_error)
                        *ret_error = strdup(why);
                return -EINVAL;
        }
        s->file_fd = TAKE_FD(owned);
        return 0;
}

bool session_output_drained(const struct session *s) {
        return s->out_error < 0 || (s->out_off == s->out_len && !s->out_more &&
                                    (!s->out_writer || output_writer_pending(s->out_writer) == 0));
}

void session_output_free(struct session *s) {
        s->out_io = sd_event_source_disable_unref(s->out_io);
        s->out_stall = sd_event_source_disable_unref(s->out_stall);
        free(s->out_buf);
        s->out_buf = NULL;
        free(s->take_buf);
        s->take_buf = NULL;
        s->take_cap = 0;
        s->out_off = s->out_len = s->out_cap = 0;
        output_writer_free(s->out_writer);
        s->out_writer = NULL;
        output_region_free(s->out_spare);
        s->out_spare = NULL;
}

static int on_out_io(sd_event_source *src, int fd, uint32_t revents, void *userdata);
static int on_out_stall(sd_event_source *src, uint64_t usec, void *userdata);

/* Records the first write error. While running the session is disabled
 * with it; a finalizing session completes with it. */
static int output_fail(struct session *s, int error) {
        if (s->out_error < 0)
                return s->out_error;
        s->out_error = error;
        if (error == -ENOSPC || error == -EDQUOT)
                s->end_reason = PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_DISK_FULL;
        s->out_io = sd_event_source_disable_unref(s->out_io);
        s->out_stall = sd_event_source_disable_unref(s->out_stall);
        log_warning("Session %" PRIu64 ": %s.", s->id, output_error_message(error));
        return error;
}

/* Arms (or disarms) the wait for the fd and the stall timer. */
static int output_wait(struct session *s, bool wait, bool progress) {
        int r;
        if (!wait) {
                s->out_io = sd_event_source_disable_unref(s->out_io);
                s->out_stall = sd_event_source_disable_unref(s->out_stall);
                return 0;
        }
        if (!s->out_io) {
                /* A regular file: its writer thread says when it took a block. */
                if (s->out_writer)
                        r = sd_event_add_io(s->svc->event, &s->out_io, output_writer_event_fd(s->out_writer), EPOLLIN,
                                            on_out_io, s);
                else
                        r = sd_event_add_io(s->svc->event, &s->out_io, s->file_fd, EPOLLOUT, on_out_io, s);
                if (r < 0)
                        return r;
        } else
                (void) sd_event_source_set_enabled(s->out_io, SD_EVENT_ON);
        if (!s->out_stall || progress) {
                s->out_stall = sd_event_source_disable_unref(s->out_stall);
                r = sd_event_add_time_relative(s->svc->event, &s->out_stall, CLOCK_MONOTONIC,
                                               SERVICE_OUTPUT_STALL_USEC, 1000000, on_out_stall, s);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Writes what the fd takes: 0 when out_buf is empty, 1 when the fd would
 * block, -errno on a write error. */
static int output_flush(struct session *s, bool *ret_progress) {
        int r = output_fd_write(s->file_fd, s->out_pollable, s->out_buf, &s->out_off, s->out_len, ret_progress);
        if (r == 0)
                s->out_off = s->out_len = 0;
        return r;
}

struct file_ctx {
        struct session *s;
        int error;
};

static int out_reserve(struct session *s, size_t need) {
        if (s->out_len + need <= s->out_cap)
                return 0;
        if (s->out_off > 0) {
                memmove(s->out_buf, s->out_buf + s->out_off, s->out_len - s->out_off);
                s->out_len -= s->out_off;
                s->out_off = 0;
                if (s->out_len + need <= s->out_cap)
                        return 0;
        }
        size_t cap = MAX(s->out_cap ? s->out_cap : (size_t) OUT_CHUNK, s->out_len + need);
        uint8_t *b = realloc(s->out_buf, cap);
        if (!b)
                return -ENOMEM;
        s->out_buf = b;
        s->out_cap = cap;
        return 0;
}

size_t session_packet_header(size_t total, uint8_t *hdr) {
        struct traced_pb_stream st;
        Trace trace;
        traced_pb_stream_init_buffer(&st, hdr, 11);
        Trace_init(&trace, &st);
        traced_pb_msg_len_header(&trace.msg, Trace_FIELD_packet, total); /* the packet's bytes follow */
        return (size_t) traced_pb_msg_size(&trace.msg);
}

/* The Trace.packet field header of a packet of total bytes, or 0 when the
 * file may not grow by it (max_file_size_bytes). */
static size_t packet_header(struct session *s, size_t total, uint8_t hdr[static 11]) {
        if (s->out_full)
                return 0;
        size_t hn = session_packet_header(total, hdr);
        if (s->max_file_size && s->file_bytes + hn + total > s->max_file_size) {
                s->out_full = true;
                return 0;
        }
        return hn;
}

/* Pipes, sockets, devices: packets are copied into out_buf, which the fd
 * takes when it can. (Writing straight from the trace buffer's chunks with
 * writev was measured and lost: the kernel copies 1 KiB iovecs, and writes
 * of one 64 KiB packet each, far slower than one copy here.) */
static int file_sink(const struct iovec *iov, size_t n_iov, size_t total, void *userdata) {
        struct file_ctx *k = userdata;
        struct session *s = k->s;
        uint8_t hdr[11];
        int r;

        size_t hn = packet_header(s, total, hdr);
        if (hn == 0)
                return 0;
        r = out_reserve(s, hn + total);
        if (r < 0)
                return r;
        memcpy(s->out_buf + s->out_len, hdr, hn);
        s->out_len += hn;
        for (size_t i = 0; i < n_iov; i++) {
                memcpy(s->out_buf + s->out_len, iov[i].iov_base, iov[i].iov_len);
                s->out_len += iov[i].iov_len;
        }
        s->file_bytes += hn + total;
        if (s->out_len - s->out_off < OUT_CHUNK)
                return 0;
        /* A chunk is ready: write it, and stop reading if the fd is full. */
        r = output_flush(s, NULL);
        if (r < 0) {
                k->error = r;
                return r;
        }
        return r > 0 ? 1 : 0;
}

/* Regular files: bytes go into the writer's blocks; what does not fit
 * waits in out_buf (in order), and reading stops until it went on too. */
static int writer_put(struct session *s, const uint8_t *p, size_t n) {
        size_t k = s->out_off == s->out_len ? output_writer_fill(s->out_writer, p, n) : 0;
        if (k < n) {
                int r = out_reserve(s, n - k);
                if (r < 0)
                        return r;
                memcpy(s->out_buf + s->out_len, p + k, n - k);
                s->out_len += n - k;
        }
        return 0;
}

/* Moves what waits in out_buf into the writer: 0 when it all went, 1 when
 * some still waits. */
static int writer_drain_overflow(struct session *s) {
        s->out_off += output_writer_fill(s->out_writer, s->out_buf + s->out_off, s->out_len - s->out_off);
        if (s->out_off < s->out_len)
                return 1;
        s->out_off = s->out_len = 0;
        return 0;
}

static int writer_sink(const struct iovec *iov, size_t n_iov, size_t total, void *userdata) {
        struct file_ctx *k = userdata;
        struct session *s = k->s;
        uint8_t hdr[11];

        size_t hn = packet_header(s, total, hdr);
        if (hn == 0)
                return 0;
        /* During a cut, a sequence that cleared its state goes on in the
         * next file. */
        if (s->rot && session_rotate_to_next(s, iov, n_iov, total)) {
                int r = session_put_packet(s, session_rotate_put_next, hdr, hn, iov, n_iov);
                return r < 0 ? (k->error = r) : 0;
        }
        /* The common case: the packet fits the block being filled. */
        size_t avail;
        uint8_t *dst = s->out_off == s->out_len ? output_writer_space(s->out_writer, &avail) : NULL;
        if (dst && avail >= hn + total) {
                memcpy(dst, hdr, hn);
                size_t at = hn;
                for (size_t i = 0; i < n_iov; i++) {
                        memcpy(dst + at, iov[i].iov_base, iov[i].iov_len);
                        at += iov[i].iov_len;
                }
                output_writer_commit(s->out_writer, at);
                s->file_bytes += at;
                return 0;
        }
        int r = session_put_packet(s, writer_put, hdr, hn, iov, n_iov);
        if (r < 0)
                return k->error = r;
        s->file_bytes += hn + total;
        /* Blocks full: stop reading; the writer's event brings us back. */
        return s->out_off < s->out_len ? 1 : 0;
}

/* ---- chunks taken at commit (session_output_take_chunk) ---------------- */

struct take_ctx {
        struct session *s;
        uint16_t producer_id, writer_id;
        bool have_seq;
        uint32_t seq;
        bool first; /* the sequence's first packet is still to be written */
};

/* A hint only: prefetching never faults, so the lines may lie past the
 * chunk or the mapping (computed as integers, not as pointers). */
static void prefetch_following(const struct iovec *last) {
        uintptr_t from = (uintptr_t) last->iov_base + last->iov_len + TAKE_PREFETCH_SKIP;
        size_t n = MIN(last->iov_len, (size_t) TAKE_PREFETCH_MAX);
        for (size_t off = 0; off < n; off += 64)
                __builtin_prefetch((const void *) (from + off), 0, 0);
}

/* Gathers slices into dst. */
static void gather(uint8_t *dst, const struct iovec *iov, size_t n_iov) {
        for (size_t i = 0; i < n_iov; i++) {
                memcpy(dst, iov[i].iov_base, iov[i].iov_len);
                dst += iov[i].iov_len;
        }
}

/* Writes one packet of a chunk being committed: copied once, from the
 * producer's memory into the block being filled (through take_buf when it
 * spans blocks), validated in that copy, and kept only if valid. */
static int take_packet(const struct iovec *iov, size_t n_iov, size_t size, const struct trace_buffer_packet_info *info,
                       void *userdata) {
        struct take_ctx *k = userdata;
        struct session *s = k->s;
        uint8_t hdr[11], tail[SESSION_TRAILER_MAX];

        if (!k->have_seq) {
                k->seq = session_sequence_id(s, info->producer_id, info->writer_id, &k->first);
                k->producer_id = info->producer_id;
                k->writer_id = info->writer_id;
                k->have_seq = true;
        }
        /* An invalid packet is not written: the flag of the sequence's
         * first packet then goes on the next one. */
        size_t tn = session_packet_trailer(info, k->seq, k->first, tail);
        size_t hn = packet_header(s, size + tn, hdr);
        if (hn == 0)
                return 0;

        size_t avail;
        uint8_t *dst = s->out_off == s->out_len ? output_writer_space(s->out_writer, &avail) : NULL;
        const uint8_t *copy;
        bool in_place = dst && avail >= hn + size + tn;
        if (n_iov > 0)
                prefetch_following(&iov[n_iov - 1]);
        if (in_place) {
                gather(dst + hn, iov, n_iov);
                copy = dst + hn;
        } else {
                if (size > s->take_cap) {
                        uint8_t *b = realloc(s->take_buf, size);
                        if (!b)
                                return -ENOMEM;
                        s->take_buf = b;
                        s->take_cap = size;
                }
                gather(s->take_buf, iov, n_iov);
                copy = s->take_buf;
        }
        if (!packet_is_valid(&(struct iovec) { .iov_base = (void *) copy, .iov_len = size }, 1, size)) {
                if (!info->unfinished) /* left out, as in session-read.c */
                        s->packets_invalid++;
                return 0;
        }
        k->first = false;
        s->file_bytes += hn + size + tn;
        if (in_place) {
                memcpy(dst, hdr, hn);
                memcpy(dst + hn + size, tail, tn);
                output_writer_commit(s->out_writer, hn + size + tn);
                return 0;
        }
        int r = writer_put(s, hdr, hn);
        if (r >= 0)
                r = writer_put(s, copy, size);
        if (r >= 0)
                r = writer_put(s, tail, tn);
        return r;
}

int session_output_take_chunk(struct session *s, struct trace_buffer *tb, const struct trace_buffer_chunk *chunk) {
        size_t avail;
        int r;

        /* Only while packets flow straight on: a regular file, no size
         * limit to watch and the session's own packets written first (the
         * buffer's path handles the rest). */
        if (!s->out_writer || s->out_error < 0 || s->out_full || s->out_finalizing || s->max_file_size ||
            !s->initial_packets_emitted || (s->state != SESSION_STARTED && s->state != SESSION_DISABLING))
                return 0;
        /* During a rotation's cut, packets are routed as they are read. */
        if (s->rot && s->rot->cutting)
                return 0;
        /* Room in the writer, after what spilled over. When the disk is
         * behind, wait for it a little: the producer's commits (and so its
         * writers) are then paced by the disk and every byte is copied once,
         * instead of twice through the buffer. A writer that frees no block
         * within OUT_TAKE_WAIT_USEC leaves the chunks to the buffer until it
         * has room again. */
        for (;;) {
                bool spilled = s->out_off != s->out_len && writer_drain_overflow(s) > 0;
                if (!spilled && output_writer_space(s->out_writer, &avail)) {
                        s->take_slow = false;
                        break;
                }
                if (s->take_slow)
                        return 0;
                s->take_waits++;
                r = output_writer_wait_space_for(s->out_writer, OUT_TAKE_WAIT_USEC);
                if (r == -ETIMEDOUT)
                        s->take_slow = true;
                if (r < 0)
                        return 0; /* a write error is the timer's to report */
        }
        struct take_ctx k = { .s = s };
        r = trace_buffer_take_chunk(tb, chunk, take_packet, &k);
        /* Every packet of the sequence's first chunk was invalid. */
        if (k.have_seq && k.first)
                session_sequence_unsee(s, k.producer_id, k.writer_id);
        if (s->rot)
                session_rotate_check_size(s);
        return r;
}

/* show: the file should show what was read (the period, the end), so a
 * partly filled block goes out too; a drain for room only sends full ones. */
static int write_into_writer(struct session *s, bool show) {
        struct file_ctx k = { .s = s };
        bool paused = false;
        int r;

        bool progress = output_writer_ack(s->out_writer) > 0;
        r = output_writer_error(s->out_writer);
        if (r < 0)
                return output_fail(s, r);
        s->out_more = writer_drain_overflow(s) > 0;
        if (!s->out_more) {
                r = session_read_packets_paced(s, writer_sink, &k, &paused);
                if (r < 0)
                        return output_fail(s, k.error < 0 ? k.error : r);
                s->out_more = paused;
        }
        /* A session that has ended sends everything, its unaligned tail too. */
        if (show || s->state == SESSION_DISABLED)
                output_writer_submit(s->out_writer, s->state == SESSION_DISABLED && !s->out_more);
        /* Woken by the writer when blocks must free up for more, or when an
         * ended session waits for its last bytes to reach the file. */
        r = output_wait(s, s->out_more || (s->state == SESSION_DISABLED && output_writer_pending(s->out_writer) > 0),
                        progress);
        if (r < 0)
                return output_fail(s, r);
        if (s->rot)
                session_rotate_check_size(s);
        return s->out_full ? -EFBIG : 0;
}

int session_put_packet(struct session *s, session_put_fn put, const uint8_t *hdr, size_t hn,
                       const struct iovec *iov, size_t n_iov) {
        int r = put(s, hdr, hn);
        for (size_t i = 0; r >= 0 && i < n_iov; i++)
                r = put(s, iov[i].iov_base, iov[i].iov_len);
        return r;
}

static int tail_sink(const struct iovec *iov, size_t n_iov, size_t total, void *userdata) {
        struct session *s = userdata;
        uint8_t hdr[11];
        size_t hn = session_packet_header(total, hdr);
        s->file_bytes += hn + total;
        return session_put_packet(s, writer_put, hdr, hn, iov, n_iov);
}

int session_output_cut(struct session *s) {
        int r = 0;
        if (!s->out_writer)
                return -EBADF;
        if (s->out_error < 0)
                return s->out_error;
        /* Everything the buffers hold for this file: paced by its writer. */
        for (;;) {
                r = write_into_writer(s, false);
                if (r < 0 || !s->out_more)
                        break;
                r = output_writer_wait_space(s->out_writer);
                if (r < 0)
                        break;
        }
        if (r >= 0) {
                r = session_emit_file_tail(s, tail_sink, s);
                while (r >= 0 && writer_drain_overflow(s) > 0) {
                        output_writer_submit(s->out_writer, false);
                        r = output_writer_wait_space(s->out_writer);
                }
        }
        if (r < 0)
                return output_fail(s, r);
        return 0;
}

void session_output_swap(struct session *s, int fd, struct output_writer *w, uint8_t *over, size_t len, size_t cap,
                         uint64_t bytes, int *ret_old_fd, struct output_writer **ret_old_writer) {
        s->out_io = sd_event_source_disable_unref(s->out_io);
        s->out_stall = sd_event_source_disable_unref(s->out_stall);
        *ret_old_fd = s->file_fd;
        *ret_old_writer = s->out_writer;
        free(s->out_buf);
        s->file_fd = fd;
        s->out_writer = w;
        s->out_buf = over;
        s->out_off = 0;
        s->out_len = len;
        s->out_cap = cap;
        s->file_bytes = bytes;
        s->out_more = false;
        s->take_slow = false;
}

int session_write_into_file(struct session *s) {
        bool progress = false, paused = false;
        int r;

        if (s->file_fd < 0)
                return 0;
        if (s->out_error < 0)
                return s->out_error;
        if (s->out_writer)
                return write_into_writer(s, true);
        r = output_flush(s, &progress);
        if (r == 0) {
                struct file_ctx k = { .s = s };
                s->out_more = false;
                r = session_read_packets_paced(s, file_sink, &k, &paused);
                if (r < 0)
                        return output_fail(s, k.error < 0 ? k.error : r);
                s->out_more = paused;
                r = output_flush(s, &progress);
        }
        if (r < 0)
                return output_fail(s, r);
        r = output_wait(s, r > 0 || s->out_more, progress);
        if (r < 0)
                return output_fail(s, r);
        return s->out_full ? -EFBIG : 0;
}

void session_output_pressure(struct session *s, const struct trace_buffer *tb) {
        if (!s->file_timer || s->out_error < 0 || s->out_full)
                return;
        size_t size = trace_buffer_get_stats(tb)->buffer_size, used = trace_buffer_used_bytes(tb);
        if (used >= size / OUT_DRAIN_NOW_DIVISOR) {
                /* The loop may not come back to the timer before a fast
                 * producer wraps the buffer: its commits keep arriving in
                 * the same wakeup. Write now; chunks still waiting for
                 * patches stay where they are. When the file's writer is
                 * itself behind, wait for it here: the producer's SMB then
                 * fills and its writers stall, rather than the buffer
                 * wrapping. Errors are left to the timer, which ends the
                 * session properly. */
                for (;;) {
                        if (session_write_into_file(s) < 0)
                                break;
                        if (!s->out_writer || !s->out_more || trace_buffer_used_bytes(tb) < size / OUT_DRAIN_NOW_DIVISOR)
                                return;
                        if (output_writer_wait_space(s->out_writer) < 0)
                                break;
                }
        } else if (s->out_writer && used >= MIN(size / OUT_PRESSURE_DIVISOR, (size_t) OUT_DRAIN_EAGER_BYTES)) {
                /* A regular file takes the data while it is still in the
                 * cache: far cheaper to copy than once the buffer has cycled
                 * through memory. Only when the writer has room: otherwise
                 * its event brings the loop back. */
                if (!s->out_more)
                        (void) write_into_writer(s, false);
                return;
        } else if (s->out_pressure || used < size / OUT_PRESSURE_DIVISOR)
                return;
        if (sd_event_source_set_time_relative(s->file_timer, 0) < 0 ||
            sd_event_source_set_enabled(s->file_timer, SD_EVENT_ONESHOT) < 0)
                return; /* the period still drains it */
        s->out_pressure = true;
}

int session_commit_chunk(struct session *s, struct trace_buffer *tb, const struct trace_buffer_chunk *chunk) {
        /* A file being written takes whole packets at once, else the
         * chunk waits in the buffer to be read. */
        int r = s->file_fd >= 0 ? session_output_take_chunk(s, tb, chunk) : 0;
        if (r != 0) {
                s->chunks_taken++;
                s->chunks_held += r == 2;
                return r < 0 ? r : r == 2;
        }
        s->chunks_stored++;
        r = trace_buffer_copy_chunk(tb, chunk);
        if (r >= 0 && s->file_fd >= 0)
                session_output_pressure(s, tb);
        return r;
}

int session_output_sync(struct session *s) {
        if (!s->out_writer || s->out_error < 0)
                return s->out_error;
        for (;;) {
                bool more = writer_drain_overflow(s) > 0;
                if (!more)
                        break;
                output_writer_submit(s->out_writer, false);
                int r = output_writer_wait_space(s->out_writer);
                if (r < 0)
                        return output_fail(s, r);
        }
        int r = output_writer_sync(s->out_writer);
        return r < 0 ? output_fail(s, r) : 0;
}

void session_output_unsync(struct session *s) {
        if (s->out_writer && output_writer_resume(s->out_writer) < 0)
                log_debug("Session %" PRIu64 ": the output file stays without O_DIRECT.", s->id);
}

int session_output_complete(struct session *s) {
        int r = session_write_into_file(s);
        while (s->out_writer && r >= 0 && !session_output_drained(s)) {
                r = s->out_more ? output_writer_wait_space(s->out_writer) : output_writer_wait_idle(s->out_writer);
                if (r < 0)
                        return output_fail(s, r);
                r = session_write_into_file(s);
        }
        return r;
}

int session_output_settle(struct session *s) {
        if (s->out_writer && s->out_error == 0) {
                int r = output_writer_wait_idle(s->out_writer);
                if (r < 0)
                        (void) output_fail(s, r);
        }
        return s->out_error;
}

static void output_progressed(struct session *s, int r) {
        if (r < 0 || session_output_drained(s)) {
                if (s->out_finalizing)
                        session_output_finished(s);
                else if (r < 0 && r != -EFBIG)
                        session_disable(s, output_error_message(r));
        }
}

static int on_out_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct session *s = userdata;
        (void) sd_event_source_set_enabled(src, SD_EVENT_OFF);
        int r = session_write_into_file(s);
        if (r == -EFBIG)
                r = 0;
        output_progressed(s, r);
        return 0;
}

static int on_out_stall(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        output_progressed(s, output_fail(s, -ETIMEDOUT));
        return 0;
}

int session_write_into_fd(struct session *s, int fd) {
        s->file_fd = fd;
        int r = session_write_into_file(s);
        s->file_fd = safe_close(s->file_fd);
        return r;
}
