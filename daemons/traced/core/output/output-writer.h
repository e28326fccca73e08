/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Writing a trace into a regular file without the event loop ever waiting
 * for the disk. The loop fills fixed blocks of memory; a thread of the
 * writer's own writes the full ones into the file, in order (a thread
 * whose writer ended waits a minute for the next writer, a rotation's
 * next file, rather than one being made for it). When the
 * file allows it (its offset is block-aligned, no O_APPEND, a file system
 * that takes O_DIRECT) blocks go to the disk without a copy into the page
 * cache; otherwise they are written through it, and each written window
 * is pushed to the disk and dropped from the cache behind them. The file's
 * status flags are restored when the writer is freed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct output_writer;

/* Takes nothing: fd stays the caller's and must outlive the writer. */
int output_writer_new(int fd, struct output_writer **ret);
/* Waits until every submitted block is in the file; what was put but not
 * submitted is dropped. */
void output_writer_free(struct output_writer *w);

/* The memory of a writer's blocks, handed from one writer to the next
 * (a rotation's files, one after another): its pages are in place
 * already, where a new region would fault in and zero every page it
 * fills, which was most of the service's work per rotated file. */
struct output_region;
/* As output_writer_new, in region (taken, whatever the outcome; NULL: a
 * new one). */
int output_writer_new_in(int fd, struct output_region *region, struct output_writer **ret);
/* A region with its pages in place now (NULL: out of memory), for a
 * writer to come: its faults and zeroing are paid here, not when that
 * writer fills its first blocks. */
struct output_region *output_region_new(void);
/* As output_writer_free, handing back the writer's region. */
struct output_region *output_writer_free_keep(struct output_writer *w);
void output_region_free(struct output_region *region);

/* Readable (EPOLLIN) whenever a block was written or writing failed; the
 * loop calls output_writer_ack (which returns how many blocks were done
 * since the last call) before looking at the writer again. */
int output_writer_event_fd(const struct output_writer *w);
uint64_t output_writer_ack(struct output_writer *w);

/* Where up to *ret_avail more bytes go, or NULL when every block is full
 * and waiting for the disk. output_writer_commit says how many were put. */
uint8_t *output_writer_space(struct output_writer *w, size_t *ret_avail);
void output_writer_commit(struct output_writer *w, size_t n);
/* Copies what fits of p (n bytes) into the blocks (space, then commit, as
 * long as a block has room); returns how much went. */
size_t output_writer_fill(struct output_writer *w, const uint8_t *p, size_t n);

/* Hands what was put since the last call to the thread (full blocks go
 * as they fill anyway), so that the file shows it soon. In direct mode an
 * unaligned tail is written through the page cache and written again as
 * the start of the next block; final: the end of the trace. */
void output_writer_submit(struct output_writer *w, bool final);

/* Blocks until a block is free to fill (at once if one is): for a caller
 * that must not let data pile up elsewhere. 0, or the write error. */
int output_writer_wait_space(struct output_writer *w);

/* Blocks until the file holds everything put so far and the thread is
 * idle, and leaves the caller's fd readable as the caller opened it (no
 * O_DIRECT) until output_writer_resume; nothing may be put meanwhile.
 * 0, or the write error. */
int output_writer_sync(struct output_writer *w);
int output_writer_resume(struct output_writer *w);

/* The same for at most usec microseconds: -ETIMEDOUT then. */
int output_writer_wait_space_for(struct output_writer *w, uint64_t usec);

/* Blocks until every submitted block is written. 0, or the write error. */
int output_writer_wait_idle(struct output_writer *w);

/* Ends the file without the loop waiting for it: what was put is
 * submitted as the trace's end, and once the thread has written it, the
 * thread calls done(fd, userdata) (what makes the file whole: fsync,
 * rename) and stops. Its event fd is readable then, and
 * output_writer_finished says so. Nothing may be put afterwards. A write
 * that failed skips done(). */
void output_writer_finish(struct output_writer *w, int (*done)(int fd, void *userdata), void *userdata);
/* Whether the thread of a finishing writer is through; *ret: the first
 * write error, else what done() returned. */
bool output_writer_finished(struct output_writer *w, int *ret);
/* Blocks until it is; the same result. */
int output_writer_wait_finished(struct output_writer *w);

/* Bytes put but not yet in the file (submitted or not). */
size_t output_writer_pending(const struct output_writer *w);
/* The first write error (-errno), 0 if none. */
int output_writer_error(const struct output_writer *w);
/* Whether blocks bypass the page cache. */
bool output_writer_is_direct(const struct output_writer *w);
