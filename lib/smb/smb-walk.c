/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <unistd.h>

#include "smb/smb-walk.h"

struct smb_walk smb_walk_start(const struct smb_abi *abi, unsigned state_mask) {
        return (struct smb_walk) {
                .abi = abi,
                .state_mask = state_mask,
                .fd = -EBADF,
        };
}

struct smb_walk smb_walk_start_fd(const struct smb_abi *abi, int fd, unsigned state_mask) {
        struct smb_walk w = smb_walk_start(abi, state_mask);
        w.fd = fd;
        return w;
}

/* The first page from w->next_page on whose header the file has data, in
 * w->next_page; false when there is none. */
static bool skip_to_data(struct smb_walk *w) {
        uint64_t at = (uint64_t) w->next_page * w->abi->page_size;
        if (at >= w->data_start && at < w->data_end)
                return true;
        off_t data = lseek(w->fd, (off_t) at, SEEK_DATA);
        if (data < 0) {
                if (errno == ENXIO) /* nothing written from here on */
                        return false;
                w->fd = -EBADF; /* cannot tell: every page */
                return true;
        }
        off_t hole = lseek(w->fd, data, SEEK_HOLE);
        if (hole < 0 || hole <= data) {
                w->fd = -EBADF;
                return true;
        }
        /* The page the data starts in (its header may be in it, or not:
         * then it reads as a page with no chunks). */
        w->next_page = (size_t) ((uint64_t) data / w->abi->page_size);
        w->data_start = (uint64_t) w->next_page * w->abi->page_size;
        w->data_end = (uint64_t) hole;
        return true;
}

/* Whether c ends inside page page_idx of abi. */
static bool chunk_in_page(const struct smb_abi *abi, size_t page_idx, const struct smb_chunk *c) {
        const uint8_t *page = abi->start + abi->page_size * page_idx;
        return c->begin >= page + SMB_PAGE_HEADER_SIZE && (size_t) (c->begin - page) + c->size <= abi->page_size;
}

/* Enters the next page; false when there is none. */
static bool enter_next_page(struct smb_walk *w) {
        if (!w->abi || w->next_page >= w->abi->num_pages)
                return false;
        if (w->fd >= 0 && (!skip_to_data(w) || w->next_page >= w->abi->num_pages))
                return false;
        w->page = w->next_page++;
        w->bitmap = smb_page_bitmap(w->abi, w->page);
        w->n_chunks = smb_bitmap_num_chunks(w->bitmap);
        if (w->n_chunks > SMB_MAX_CHUNKS_PER_PAGE)
                w->n_chunks = SMB_MAX_CHUNKS_PER_PAGE;
        w->next_chunk = 0;
        return true;
}

bool smb_walk_next(struct smb_walk *w) {
        for (;;) {
                while (w->next_chunk >= w->n_chunks)
                        if (!enter_next_page(w))
                                return false;
                uint32_t i = w->next_chunk++;
                enum smb_chunk_state st = smb_bitmap_chunk_state(w->bitmap, i);
                if (!(w->state_mask & SMB_STATE_BIT(st)))
                        continue;
                struct smb_chunk c = smb_get_chunk_unchecked(w->abi, w->page, w->bitmap, i);
                if (!smb_chunk_is_valid(&c) || !chunk_in_page(w->abi, w->page, &c))
                        continue;
                w->chunk_idx = i;
                w->state = st;
                w->chunk = c;
                return true;
        }
}
