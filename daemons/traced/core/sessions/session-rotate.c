/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Rotation: when and how a session's file is cut (session-rotate.h). */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-read.h"
#include "core/sessions/session-rotate.h"
#include "core/output/output-dir.h"
#include "core/output/output-fd.h"
#include "core/output/output-writer.h"

static void stats_snapshot(struct session *s) {
        struct session_rotation *rot = s->rot;
        if (rot->n_base < s->n_buffers) {
                struct trace_buffer_stats *b = realloc(rot->base, s->n_buffers * sizeof(*b));
                if (!b)
                        return; /* the next file counts from the previous base */
                rot->base = b;
                rot->n_base = s->n_buffers;
        }
        for (size_t i = 0; i < s->n_buffers; i++)
                rot->base[i] = *trace_buffer_get_stats(s->buffers[i].tb);
        rot->base_invalid = s->packets_invalid;
        rot->base_discarded = s->chunks_discarded_no_buffer + s->chunks_torn;
        rot->base_patches = s->patches_discarded;
        rot->base_flushes_requested = s->flushes_requested;
        rot->base_flushes_succeeded = s->flushes_succeeded;
        rot->base_flushes_failed = s->flushes_failed;
}

void session_rotate_stats_base(const struct session *s, size_t buffer, const struct trace_buffer_stats **ret) {
        *ret = s->rot && buffer < s->rot->n_base ? &s->rot->base[buffer] : NULL;
}

/* Whether dir_fd is the trace directory or lies below it. */
static bool below_trace_dir(struct traced_service *svc, int dir_fd) {
        struct stat top, st;
        if (svc->trace_dir_fd < 0 || fstat(svc->trace_dir_fd, &top) < 0)
                return false;
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (unsigned depth = 0; fd >= 0 && depth <= OUTPUT_DIR_TREE_DEPTH + 1; depth++) {
                if (fstat(fd, &st) < 0)
                        break;
                if (st.st_dev == top.st_dev && st.st_ino == top.st_ino) {
                        safe_close(fd);
                        return true;
                }
                int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                safe_close(fd);
                fd = up;
        }
        safe_close(fd);
        return false;
}

int session_rotate_open(struct session *s, int dir_fd, char **ret_error) {
        _cleanup_close_ int dfd = dir_fd;
        const Perfetto__Protos__TraceConfig__TracedRotation *rc = s->config->traced_rotation;
        struct timespec rt;
        int r;

        if (!rc || ((!rc->has_file_size_bytes || rc->file_size_bytes == 0) && (!rc->has_period_ms || rc->period_ms == 0)))
                return session_config_error(ret_error, "The output is a directory, but the trace config asks for no "
                                                       "rotation (traced_rotation with file_size_bytes or period_ms)");
        if (s->config->has_max_file_size_bytes && s->config->max_file_size_bytes)
                return session_config_error(ret_error, "max_file_size_bytes ends a session at a size; with "
                                                       "traced_rotation the files are cut at file_size_bytes instead");
        if (rc->has_file_size_bytes && rc->file_size_bytes && rc->file_size_bytes < SERVICE_MIN_ROTATE_BYTES)
                return session_config_error(ret_error, "traced_rotation.file_size_bytes is below the service's "
                                                       "minimum of 64 KiB");
        if (rc->has_period_ms && rc->period_ms && rc->period_ms < SERVICE_MIN_ROTATE_PERIOD_MS)
                return session_config_error(ret_error, "traced_rotation.period_ms is below the service's minimum of "
                                                       "1 s");
        struct session_rotation *rot = calloc(1, sizeof(*rot));
        if (!rot)
                return -ENOMEM;
        *rot = (struct session_rotation) {
                .dir_fd = TAKE_FD(dfd),
                .index = 1,
                .size_limit = rc->has_file_size_bytes ? rc->file_size_bytes : 0,
                .period_ms = rc->has_period_ms ? rc->period_ms : 0,
                .keep_files = rc->has_keep_files ? rc->keep_files : 0,
                .keep_bytes = rc->has_keep_bytes ? rc->keep_bytes : 0,
                .next_fd = -EBADF,
        };
        s->rot = rot;
        rot->in_trace_dir = below_trace_dir(s->svc, rot->dir_fd);
        clock_gettime(CLOCK_REALTIME, &rt);
        output_dir_prefix(rt.tv_sec, rot->prefix);

        int fd = output_dir_create(rot->dir_fd, rot->prefix, rot->index);
        if (fd < 0) {
                if (ret_error && asprintf(ret_error,
                                          "The service cannot create a trace file in the directory: %s (it writes as "
                                          "the service's user: give the traced group write access, e.g. chgrp traced "
                                          "DIR && chmod 2770 DIR)",
                                          strerror(-fd)) < 0)
                        *ret_error = NULL;
                return fd;
        }
        r = session_output_open(s, fd, ret_error);
        if (r < 0) {
                output_dir_remove_part(rot->dir_fd, rot->prefix, rot->index);
                return r;
        }
        /* The first cut's file is written while the first file closes, in
         * a second region: it is faulted in now, not by the loop in the
         * middle of that cut (where, zeroed page by page, it held the
         * producers' commits back by milliseconds). Without it the cut
         * allocates one. */
        if (!s->out_spare)
                s->out_spare = output_region_new();
        return 0;
}

static int on_period(sd_event_source *src, uint64_t usec, void *userdata);

static void arm_period(struct session *s) {
        if (s->rot->period_ms && session_add_timer_ms(s, &s->rot->period_timer, s->rot->period_ms, on_period) < 0)
                log_warning("Session %" PRIu64 ": cannot arm the rotation period; files are cut by size only.", s->id);
}

void session_rotate_started(struct session *s) {
        if (!s->rot)
                return;
        stats_snapshot(s);
        arm_period(s);
}

static bool seq_crossed(const struct session_rotation *rot, uint32_t seq) {
        return seq / 8 < rot->crossed_bytes && (rot->crossed[seq / 8] & (1u << (seq % 8)));
}

static void seq_cross(struct session_rotation *rot, uint32_t seq) {
        if (seq / 8 >= rot->crossed_bytes) {
                size_t n = MAX((size_t) seq / 8 + 1, rot->crossed_bytes * 2);
                uint8_t *c = realloc(rot->crossed, n);
                if (!c)
                        return; /* the sequence moves over at the end of the cut */
                memset(c + rot->crossed_bytes, 0, n - rot->crossed_bytes);
                rot->crossed = c;
                rot->crossed_bytes = n;
        }
        rot->crossed[seq / 8] |= (uint8_t) (1u << (seq % 8));
}

bool session_rotate_to_next(struct session *s, const struct iovec *iov, size_t n_iov, size_t total) {
        struct session_rotation *rot = s->rot;
        uint32_t seq = s->read_seq;
        if (!rot || !rot->cutting || seq == 0)
                return false;
        if (seq_crossed(rot, seq))
                return true;
        if (!(packet_sequence_flags(iov, n_iov, total) & SEQ_INCREMENTAL_STATE_CLEARED))
                return false;
        seq_cross(rot, seq);
        return true;
}

int session_rotate_put_next(struct session *s, const uint8_t *p, size_t n) {
        struct session_rotation *rot = s->rot;
        size_t k = rot->next_len == 0 ? output_writer_fill(rot->next_writer, p, n) : 0;
        rot->next_bytes += n;
        if (k == n)
                return 0;
        if (rot->next_len + n - k > rot->next_cap) {
                size_t cap = MAX(rot->next_cap * 2, rot->next_len + n - k);
                uint8_t *b = realloc(rot->next_over, cap);
                if (!b)
                        return -ENOMEM;
                rot->next_over = b;
                rot->next_cap = cap;
        }
        memcpy(rot->next_over + rot->next_len, p + k, n - k);
        rot->next_len += n - k;
        return 0;
}

static int head_sink(const struct iovec *iov, size_t n_iov, size_t total, void *userdata) {
        struct session *s = userdata;
        uint8_t hdr[11];
        size_t hn = session_packet_header(total, hdr);
        return session_put_packet(s, session_rotate_put_next, hdr, hn, iov, n_iov);
}

/* The disk is full: the session ends with what it has, every file whole. */
static void disk_full(struct session *s, const char *why) {
        s->end_reason = PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_DISK_FULL;
        _cleanup_free_ char *msg = NULL;
        if (asprintf(&msg, "The disk the trace files go to is full (%s): the session stopped; every file is whole",
                     why) < 0)
                msg = NULL;
        session_disable(s, msg ? msg : "The disk the trace files go to is full");
}

/* The cut is given up: the next file goes (it holds nothing of the
 * producers' yet). */
static void drop_next(struct session_rotation *rot) {
        output_writer_free(rot->next_writer);
        rot->next_writer = NULL;
        if (rot->next_fd >= 0)
                output_dir_remove_part(rot->dir_fd, rot->prefix, rot->index + 1);
        rot->next_fd = safe_close(rot->next_fd);
        free(rot->next_over);
        rot->next_over = NULL;
        rot->next_len = rot->next_cap = 0;
        rot->next_bytes = 0;
        rot->cutting = false;
}

static void cut_flushed(struct session *s, bool success, void *userdata) {
        if (!success)
                log_debug("Session %" PRIu64 ": the flush of a rotation did not complete; the sequences that did "
                          "not answer go on in the next file from now.",
                          s->id);
        session_rotate_finish(s);
}

static bool retention_room(struct session *s);
static void prune_trace_dir(struct session *s);

static void rotate_begin(struct session *s) {
        struct session_rotation *rot = s->rot;
        int r;

        if (rot->cutting || s->state != SESSION_STARTED || s->out_error < 0 || !s->initial_packets_emitted)
                return;
        /* Room for the next file first (traced.conf's retention). */
        if (!retention_room(s))
                return;
        rot->next_fd = output_dir_create(rot->dir_fd, rot->prefix, rot->index + 1);
        if (rot->next_fd < 0) {
                r = rot->next_fd;
                log_error("Session %" PRIu64 ": cannot create the next trace file: %s", s->id, strerror(-r));
                if (r == -ENOSPC || r == -EDQUOT)
                        disk_full(s, strerror(-r));
                else
                        session_disable(s, "The service cannot create the next trace file of the rotation");
                return;
        }
        r = output_writer_new_in(rot->next_fd, TAKE_PTR(s->out_spare), &rot->next_writer);
        if (r >= 0) {
                rot->cutting = true;
                if (rot->crossed)
                        memset(rot->crossed, 0, rot->crossed_bytes);
                r = session_emit_file_head(s, head_sink, s);
        }
        if (r < 0) {
                drop_next(rot);
                log_error("Session %" PRIu64 ": cannot start the next trace file: %s", s->id, strerror(-r));
                session_disable(s, "The service cannot start the next trace file of the rotation");
                return;
        }
        session_clear_incremental_state(s);
        /* The cut waits for the data sources that keep incremental state
         * alone: each of their sequences goes on in the next file from its
         * first packet after the clear, and a flush makes them write it
         * now. The other data sources' packets go to the old file up to the
         * cut and to the next one after it, wherever their producers stand:
         * flushing them would only make them read out and commit early
         * what the next file takes anyway (linux.ftrace: each CPU's partly
         * filled sub-buffer, at every cut). */
        r = session_flush_clearing(s, cut_flushed, NULL);
        if (r < 0)
                session_rotate_finish(s);
}

static int on_begin(sd_event_source *src, void *userdata) {
        struct session *s = userdata;
        s->rot->begin_defer = sd_event_source_disable_unref(s->rot->begin_defer);
        rotate_begin(s);
        return 0;
}

static int on_period(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        rotate_begin(s);
        return 0;
}

void session_rotate_check_size(struct session *s) {
        struct session_rotation *rot = s->rot;
        if (!rot || rot->cutting || rot->begin_defer || !rot->size_limit || s->file_bytes < rot->size_limit ||
            s->state != SESSION_STARTED)
                return;
        if (sd_event_add_defer(s->svc->event, &rot->begin_defer, on_begin, s) < 0)
                log_debug("Session %" PRIu64 ": cannot schedule a rotation now; at the next write.", s->id);
}

/* Keeps the session's closed files within --keep. */
static void prune(struct session *s) {
        struct session_rotation *rot = s->rot;
        struct dir_file *files = NULL;
        size_t n = 0;
        if (!rot->keep_files && !rot->keep_bytes)
                return;
        int r = output_dir_list(rot->dir_fd, rot->prefix, &files, &n);
        if (r < 0) {
                log_warning("Session %" PRIu64 ": cannot list its trace files to keep their number down: %s", s->id,
                            strerror(-r));
                return;
        }
        uint64_t freed;
        size_t removed = dir_files_prune(rot->dir_fd, files, n, rot->keep_files, rot->keep_bytes, &freed);
        if (removed)
                log_debug("Session %" PRIu64 ": removed %zu old trace file(s), %" PRIu64 " bytes.", s->id, removed,
                          freed);
        free(files);
}

/* traced.conf's max_use: the closed files of rotations in the trace
 * directory, oldest first across its sessions. */
static void prune_trace_dir(struct session *s) {
        struct traced_service *svc = s->svc;
        struct dir_file *files = NULL;
        size_t n = 0;
        if (!s->rot->in_trace_dir || !svc->max_use || svc->trace_dir_fd < 0)
                return;
        int r = output_dir_list_tree(svc->trace_dir_fd, &files, &n);
        if (r < 0) {
                log_warning("Cannot list the trace directory %s to keep it within max_use: %s", svc->trace_dir,
                            strerror(-r));
                return;
        }
        uint64_t freed;
        size_t removed = dir_files_prune(svc->trace_dir_fd, files, n, 0, svc->max_use, &freed);
        if (removed)
                log_info("Removed %zu trace file(s) (%" PRIu64 " bytes) from %s: it holds more than max_use=.",
                         removed, freed, svc->trace_dir);
        free(files);
}

/* traced.conf's keep_free: while the file system holds less, the
 * session's oldest closed files go (in the trace directory, the oldest of
 * any session); with none left the session stops, its files whole. False
 * then. */
static bool retention_room(struct session *s) {
        struct traced_service *svc = s->svc;
        struct session_rotation *rot = s->rot;
        prune_trace_dir(s);
        if (!svc->keep_free)
                return true;
        for (;;) {
                int64_t avail = dir_files_free_bytes(rot->dir_fd);
                if (avail < 0 || (uint64_t) avail >= svc->keep_free)
                        return true;
                struct dir_file *files = NULL;
                size_t n = 0;
                int top = rot->in_trace_dir && svc->trace_dir_fd >= 0 ? svc->trace_dir_fd : rot->dir_fd;
                int r = top == rot->dir_fd ? output_dir_list(top, rot->prefix, &files, &n)
                                           : output_dir_list_tree(top, &files, &n);
                if (r >= 0 && n > 0)
                        r = dir_files_remove(top, files[0].name);
                if (r >= 0 && n > 0)
                        log_info("Session %" PRIu64 ": removed %s: the file system has less than keep_free= "
                                 "free.",
                                 s->id, files[0].name);
                free(files);
                if (r < 0 || n == 0) {
                        log_warning("Session %" PRIu64 ": %" PRId64 " bytes free where the trace files go, below "
                                    "keep_free=%" PRIu64 ", and no closed file of its own is left to remove.",
                                    s->id, avail, svc->keep_free);
                        disk_full(s, "less free than keep_free= in traced.conf");
                        return false;
                }
        }
}

/* The file written into fd becomes whole under its final name, and that
 * name durable with every name closed before it: the directory is synced
 * here, not at each cut (close_done). */
static int close_file(struct session *s, int fd, uint64_t index) {
        int r = output_dir_close(s->rot->dir_fd, fd, s->rot->prefix, index, true);
        if (r < 0)
                log_error("Session %" PRIu64 ": cannot complete trace file %" PRIu64 ": %s", s->id, index,
                          strerror(-r));
        else
                s->rot->files_closed++;
        return r;
}

/* As close_file, for a file whose writing failed (err < 0): it is cut
 * after its last whole packet first, and removed if nothing of it is left.
 * 1 closed, 0 removed, or -errno. */
static int close_file_after(struct session *s, int fd, uint64_t index, int err) {
        if (err < 0) {
                struct stat st;
                int r = output_dir_trim(fd);
                if (r < 0)
                        log_warning("Session %" PRIu64 ": cannot cut trace file %" PRIu64
                                    " after its last whole packet: %s",
                                    s->id, index, strerror(-r));
                else if (fstat(fd, &st) == 0 && st.st_size == 0) {
                        /* Nothing of it reached the disk. */
                        output_dir_remove_part(s->rot->dir_fd, s->rot->prefix, index);
                        return 0;
                }
        }
        int r = close_file(s, fd, index);
        return r < 0 ? r : 1;
}

/* A file cut from the session: its writer's thread writes what is left of
 * it, then fsyncs and renames it (close_done), so that the loop never waits
 * for the disk at a cut; the loop hears of it on the writer's event fd. */
struct rotate_closing {
        struct rotate_closing *next;
        struct session *s;
        struct output_writer *w;
        int fd;
        uint64_t index;
        sd_event_source *src;
};

/* On the writer's thread: rot's directory and prefix stay as they are
 * until every closing has been waited for (session_rotate_free). The file
 * is synced; the directory is not (its final name reaches the disk with
 * the file system's next commit, at the latest when the session's last
 * file closes): on a file system without a journal a directory's fsync
 * is some 35 us of synchronous writes, a third of what a cut's sync
 * costs, for a name whose file is whole either way. */
static int close_done(int fd, void *userdata) {
        struct rotate_closing *c = userdata;
        struct session_rotation *rot = c->s->rot;
        return output_dir_close(rot->dir_fd, fd, rot->prefix, c->index, false);
}

/* The closing is over (r: how it went): its writer's memory goes to the
 * next cut, and the file counts. A file that could not be made whole stops
 * a running session, as any failed write does (unless act is false: the
 * session is being freed). */
static void closing_end(struct rotate_closing *c, int r, bool act) {
        struct session *s = c->s;
        struct session_rotation *rot = s->rot;
        for (struct rotate_closing **p = &rot->closing; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        c->src = sd_event_source_disable_unref(c->src);
        struct output_region *region = output_writer_free_keep(c->w);
        if (!s->out_spare && s->state == SESSION_STARTED)
                s->out_spare = region;
        else
                output_region_free(region);
        if (r < 0) {
                log_error("Session %" PRIu64 ": cannot complete trace file %" PRIu64 ": %s", s->id, c->index,
                          strerror(-r));
                /* Whole up to where the writing failed, here and now. */
                (void) close_file_after(s, c->fd, c->index, r);
                safe_close(c->fd);
                if (act && (r == -ENOSPC || r == -EDQUOT))
                        disk_full(s, strerror(-r));
                else if (act && s->state == SESSION_STARTED)
                        session_disable(s, output_error_message(r));
        } else {
                safe_close(c->fd);
                rot->files_closed++;
                if (act) {
                        prune(s);
                        prune_trace_dir(s);
                }
        }
        free(c);
}

static int on_closing_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct rotate_closing *c = userdata;
        int r;
        (void) output_writer_ack(c->w);
        if (output_writer_finished(c->w, &r))
                closing_end(c, r, true);
        return 0;
}

/* Every file still closing is whole (or failed) before this returns. */
static void closings_wait(struct session *s, bool act) {
        while (s->rot->closing) {
                struct rotate_closing *c = s->rot->closing;
                closing_end(c, output_writer_wait_finished(c->w), act);
        }
}

/* The session's old file (fd and writer, taken) is ended off the loop. */
static void closing_start(struct session *s, struct rotate_closing *c, int fd, struct output_writer *w,
                          uint64_t index) {
        struct session_rotation *rot = s->rot;
        *c = (struct rotate_closing) { .s = s, .w = w, .fd = fd, .index = index };
        struct rotate_closing **tail = &rot->closing;
        while (*tail)
                tail = &(*tail)->next;
        *tail = c;
        output_writer_finish(w, close_done, c);
        if (sd_event_add_io(s->svc->event, &c->src, output_writer_event_fd(w), EPOLLIN, on_closing_io, c) < 0) {
                /* Without a wakeup: it is waited for here. */
                log_debug("Session %" PRIu64 ": trace file %" PRIu64 " is closed without the loop going on.", s->id,
                          index);
                closing_end(c, output_writer_wait_finished(w), true);
        }
}

void session_rotate_finish(struct session *s) {
        struct session_rotation *rot = s->rot;
        if (!rot || !rot->cutting)
                return;
        rot->begin_defer = sd_event_source_disable_unref(rot->begin_defer);
        /* What is left for the old file, then its end. */
        struct rotate_closing *c = calloc(1, sizeof(*c));
        int r = c ? session_output_cut(s) : -ENOMEM;
        if (r < 0) {
                free(c);
                drop_next(rot);
                if (r == -ENOSPC || r == -EDQUOT)
                        disk_full(s, strerror(-r));
                else if (s->state == SESSION_STARTED)
                        session_disable(s, output_error_message(r));
                return;
        }
        /* The next file is the file from now on; the old one is made whole
         * by its writer. */
        int old_fd;
        struct output_writer *old_writer;
        session_output_swap(s, rot->next_fd, rot->next_writer, rot->next_over, rot->next_len, rot->next_cap,
                            rot->next_bytes, &old_fd, &old_writer);
        rot->next_fd = -EBADF;
        rot->next_writer = NULL;
        rot->next_over = NULL;
        rot->next_len = rot->next_cap = 0;
        rot->next_bytes = 0;
        rot->cutting = false;
        rot->index++;
        stats_snapshot(s);
        log_debug("Session %" PRIu64 ": trace file %" PRIu64 " started.", s->id, rot->index);
        closing_start(s, c, old_fd, old_writer, rot->index - 1);
        if (s->state == SESSION_STARTED) {
                arm_period(s);
                (void) session_write_into_file(s);
                session_rotate_check_size(s);
        }
}

void session_rotate_close_last(struct session *s, int err) {
        if (!s->rot)
                return;
        closings_wait(s, true);
        if (s->file_fd < 0)
                return;
        if (close_file_after(s, s->file_fd, s->rot->index, err) > 0)
                log_info("Session %" PRIu64 ": %" PRIu64 " trace file(s) written, the last %s-%06" PRIu64
                         OUTPUT_DIR_SUFFIX ".",
                         s->id, s->rot->files_closed, s->rot->prefix, s->rot->index);
        prune(s);
        prune_trace_dir(s);
}

void session_rotate_free(struct session *s) {
        struct session_rotation *rot = s->rot;
        if (!rot)
                return;
        rot->period_timer = sd_event_source_disable_unref(rot->period_timer);
        rot->begin_defer = sd_event_source_disable_unref(rot->begin_defer);
        closings_wait(s, false);
        drop_next(rot);
        safe_close(rot->dir_fd);
        free(rot->crossed);
        free(rot->base);
        free(rot);
        s->rot = NULL;
}
