/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A walk over the chunks of an SMB, for the side that reads what the other
 * side wrote (the service scraping a producer's buffer, a producer looking
 * for what its own writers still hold). Nothing in the buffer is trusted:
 *
 *   - each page header is loaded once (acquire), when the walk enters the
 *     page, and every chunk of that page is judged on that one snapshot;
 *     the peer rewriting the header meanwhile changes nothing for the page;
 *   - a page that is not partitioned, or whose layout is a reserved value,
 *     has no chunks; state bits past the layout's chunk count are ignored;
 *   - a chunk is only handed out when it lies inside its page;
 *   - every page is entered exactly once: the walk ends after num_pages
 *     pages and at most SMB_MAX_CHUNKS_PER_PAGE chunks each.
 *
 * Walked with the SMB's file (smb_walk_start_fd, a memfd), pages that
 * were never written are skipped without being read: reading a page of
 * shared memory nobody wrote gives it memory of its own, and a service
 * scraping every page header at each flush would keep a page of every
 * SMB page resident that its producer never used.
 *
 * The walk changes no chunk state: a caller that takes a chunk (for reading,
 * say) does so itself with the chunk's page and index.
 *
 *     for (struct smb_walk w = smb_walk_start(abi, SMB_STATE_BIT(SMB_CHUNK_COMPLETE)); smb_walk_next(&w);)
 *             use(w.page, w.chunk_idx, &w.chunk);
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smb/smb-abi.h"

/* The state_mask bit that selects chunks in state s. */
#define SMB_STATE_BIT(s) (1u << (unsigned) (s))

struct smb_walk {
        const struct smb_abi *abi;
        unsigned state_mask;

        /* The chunk the last successful smb_walk_next stopped at. */
        size_t page;
        uint32_t bitmap; /* the page header, as loaded on entering the page */
        uint32_t chunk_idx;
        enum smb_chunk_state state; /* its state in bitmap */
        struct smb_chunk chunk;

        /* Where the walk goes on from. */
        size_t next_page;
        uint32_t next_chunk;
        uint32_t n_chunks; /* of the current page, per bitmap */

        /* With the SMB's file: pages whose header lies in [data_start,
         * data_end) of it hold data; fd < 0 enters every page. */
        int fd;
        uint64_t data_start, data_end;
};

/* A walk over the chunks of abi whose state is one of state_mask's. */
struct smb_walk smb_walk_start(const struct smb_abi *abi, unsigned state_mask);

/* The same, skipping the pages fd (the file abi maps from its offset 0)
 * has no data at: never written, they hold no chunk. A file that cannot
 * say where its data is (lseek SEEK_DATA fails other than with ENXIO)
 * has every page entered. */
struct smb_walk smb_walk_start_fd(const struct smb_abi *abi, int fd, unsigned state_mask);

/* Moves to the next chunk selected; false once every page was seen. */
bool smb_walk_next(struct smb_walk *w);
