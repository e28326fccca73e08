/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libtraced-client's side of the SMB: finding a free chunk for a writer
 * (waiting for one as its buffer-exhausted policy says), and the SMBs of
 * earlier connections that writers still hold. */

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

static struct smb_chunk try_acquire(traced_trace_writer *w, uint32_t chunk_id) {
        traced_producer *p = w->producer;
        struct smb_abi *abi = &w->abi;
        /* Start where the last search ended, so writers spread over pages.
         * The SMB's own compare-and-swap makes concurrent writers safe; the
         * hint is only a hint. */
        size_t hint = atomic_load_explicit(&p->next_page_hint, memory_order_relaxed);
        for (size_t k = 0; k < abi->num_pages; k++) {
                size_t page = (hint + k) % abi->num_pages;
                if (smb_page_bitmap(abi, page) == 0)
                        (void) smb_try_partition_page(abi, page, SMB_PAGE_DIV4);
                uint32_t n = smb_bitmap_num_chunks(smb_page_bitmap(abi, page));
                for (uint32_t i = 0; i < n; i++) {
                        struct smb_chunk c = smb_try_acquire_chunk_for_writing(abi, page, i, w->writer_id, chunk_id);
                        if (smb_chunk_is_valid(&c)) {
                                atomic_store_explicit(&p->next_page_hint, page, memory_order_relaxed);
                                return c;
                        }
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
        if (!writer_alive(w))
                return (struct smb_chunk) {};
        struct smb_chunk c = try_acquire(w, chunk_id);
        if (smb_chunk_is_valid(&c) || w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_DROP)
                return c;

        /* Stall: get what is written to the service, which frees chunks as
         * it copies them, and look again with growing pauses. */
        uint64_t start = now_usec(), limit = p->stall_limit_usec ? p->stall_limit_usec : PRODUCER_STALL_LIMIT_USEC;
        unsigned pause_usec = PRODUCER_STALL_FIRST_SLEEP_USEC;
        while (!smb_chunk_is_valid(&c)) {
                if (!writer_alive(w))
                        return (struct smb_chunk) {};
                if (now_usec() - start >= limit) {
                        if (w->exhausted_policy == TRACED_BUFFER_EXHAUSTED_STALL_THEN_ABORT)
                                abort();
                        return c;
                }
                if (producer_on_loop(p))
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
