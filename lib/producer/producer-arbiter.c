/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's side of the SMB: finding a free chunk for a writer
 * (waiting for one as its buffer-exhausted policy says), and the SMBs of
 * earlier connections that writers still hold. */

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "basic/macro.h"
#include "producer-internal.h"

void writer_note_thread(traced_trace_writer *w) {
        if (atomic_load_explicit(&w->used_on, memory_order_relaxed) == WRITER_USED_NOWHERE)
                atomic_store(&w->used_on, producer_on_loop(w->producer) ? WRITER_USED_ON_LOOP : WRITER_USED_ELSEWHERE);
}

bool writer_alive(const traced_trace_writer *w) {
        traced_producer *p = w->producer;
        return atomic_load(&p->ready) && w->generation == atomic_load(&p->generation);
}

void writer_begin_write(traced_trace_writer *w) {
        w->stalled_on_loop = false;
}

/* Whether the service's stop of w's instance waits behind w on the loop
 * thread (remembered: the instance is over). */
static bool loop_writer_sees_stop(traced_trace_writer *w) {
        if (!w->stop_seen && w->ends_at_stop && producer_on_loop(w->producer) &&
            producer_stop_pending(w->producer, w->instance_id))
                w->stop_seen = true;
        return w->stop_seen;
}

bool writer_instance_over(traced_trace_writer *w) {
        if (atomic_load(&w->ended) || w->stop_seen)
                return true;
        /* A writer that waited on the loop thread may have finished
         * after the session ended, its stop not handled yet. */
        return w->stalled_on_loop && loop_writer_sees_stop(w);
}

bool writer_ended_meanwhile(const traced_trace_writer *w) {
        return atomic_load(&w->ended);
}

int writer_fail(traced_trace_writer *w, int r) {
        writer_note_loss(w);
        return writer_instance_over(w) ? -ESHUTDOWN : r;
}

static struct smb_chunk try_acquire(traced_trace_writer *w, uint32_t chunk_id) {
        struct smb_abi *abi = &w->abi;
        /* The first free chunk from the start of the SMB, every time: the
         * pages in use stay the few at its start that the writers keep
         * busy, rather than every page of it in turn (a search resumed
         * where the last one ended walks the whole SMB, and each page it
         * touches stays resident in both processes for the session: 4 MiB
         * of a plugin host that writes a few KiB a second, and as much of
         * the service). The SMB's own compare-and-swap makes concurrent
         * writers safe. */
        for (size_t page = 0; page < abi->num_pages; page++) {
                if (smb_page_bitmap(abi, page) == 0)
                        (void) smb_try_partition_page(abi, page, SMB_PAGE_DIV4);
                uint32_t n = smb_bitmap_num_chunks(smb_page_bitmap(abi, page));
                for (uint32_t i = 0; i < n; i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_writing(abi, page, i, w->writer_id, chunk_id);
                        if (smb_chunk_is_valid(&c))
                                return c;
                }
        }
        return (struct smb_chunk) {};
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

struct smb_chunk writer_acquire_chunk(traced_trace_writer *w, uint32_t chunk_id) {
        traced_producer *p = w->producer;
        if (!writer_alive(w) || atomic_load(&w->ended) || w->stop_seen)
                return (struct smb_chunk) {};
        if (w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_DROP)
                return try_acquire(w, chunk_id);
        /* A writer that may wait, on the loop thread: the session may
         * have ended while the loop could not hear it (this writer or
         * an earlier write waited for long): its next chunk would go
         * nowhere. A look at what the service sent, once per chunk. */
        if (loop_writer_sees_stop(w))
                return (struct smb_chunk) {};
        struct smb_chunk c = try_acquire(w, chunk_id);
        if (smb_chunk_is_valid(&c))
                return c;

        /* Stall: get what is written to the service, which frees chunks as
         * it copies them, and look again with growing pauses. */
        uint64_t start = now_usec(), limit = p->stall_limit_usec ? p->stall_limit_usec : PRODUCER_STALL_LIMIT_USEC;
        unsigned pause_usec = PRODUCER_STALL_FIRST_SLEEP_USEC;
        bool on_loop = producer_on_loop(p);
        while (!smb_chunk_is_valid(&c)) {
                if (!writer_alive(w) || atomic_load(&w->ended))
                        return (struct smb_chunk) {};
                /* On the loop thread the service's commands wait behind
                 * this writer: a stop of its instance is looked for in
                 * what the service sent. */
                if (on_loop) {
                        w->stalled_on_loop = true;
                        if (loop_writer_sees_stop(w))
                                return (struct smb_chunk) {};
                }
                if (now_usec() - start >= limit) {
                        if (w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT)
                                abort();
                        return c;
                }
                if (on_loop)
                        (void) producer_commit(p, 0);
                else
                        producer_wake_loop(p);
                struct timespec ts = { .tv_nsec = (long) pause_usec * 1000 };
                (void) nanosleep(&ts, NULL);
                pause_usec = MIN(pause_usec * 2, PRODUCER_STALL_MAX_SLEEP_USEC);
                c = try_acquire(w, chunk_id);
        }
        return c;
}

void producer_release_retired(traced_producer *p) {
        for (size_t i = 0; i < p->n_retired;) {
                bool used = false;
                for (traced_trace_writer *w = p->writers; w && !used; w = w->next)
                        used = w->generation == p->retired[i].generation;
                if (used) {
                        i++;
                        continue;
                }
                munmap(p->retired[i].mem, p->retired[i].size);
                p->retired[i] = p->retired[--p->n_retired];
        }
}
