/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The walk over a page's records behind page_parse and page_parse_range,
 * inline so that a caller that runs it for every page of a busy buffer
 * (the drain) gets its record function inlined too, with no call per
 * record. Same contract as page_parse_range. */

#include <errno.h>
#include <string.h>

#include "page.h"

enum {
        PAGE_TYPE_PADDING = 29,
        PAGE_TYPE_TIME_EXTEND = 30,
        PAGE_TYPE_TIME_STAMP = 31,
};

static inline uint32_t page_rd32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
}

static inline uint64_t page_rd64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
}

#define PAGE_REFUSE(st)                   \
        do {                              \
                info.status = (st);       \
                if (ret_info)             \
                        *ret_info = info; \
                return -EBADMSG;          \
        } while (0)

static inline __attribute__((always_inline)) int page_walk(const uint8_t *page, size_t page_size, size_t from,
                                                           size_t to, page_record_fn fn, void *userdata,
                                                           struct page_info *ret_info) {
        struct page_info info = { .status = PAGE_STATUS_OK };
        if (page_size < PAGE_HEADER_SIZE)
                PAGE_REFUSE(PAGE_STATUS_INVALID_PAGE_HEADER);
        uint64_t ts = page_rd64(page);
        uint64_t commit = page_rd64(page + 8);
        size_t size = (size_t) (commit & ~(PAGE_COMMIT_MISSED_EVENTS | PAGE_COMMIT_MISSED_STORED) & 0xffffffffull);
        const uint8_t *data = page + PAGE_HEADER_SIZE, *end;

        if (commit & PAGE_COMMIT_MISSED_EVENTS)
                info.missed = 1;
        if (size > page_size - PAGE_HEADER_SIZE)
                PAGE_REFUSE(PAGE_STATUS_INVALID_PAGE_HEADER);
        if ((commit & PAGE_COMMIT_MISSED_STORED) && size + 8 <= page_size - PAGE_HEADER_SIZE)
                info.lost_events = page_rd64(data + size);
        if (size > to)
                size = to;
        info.data_len = size;
        end = data + size;
        const uint8_t *first = data + (from < size ? from : size);

        const uint8_t *p = data;
        while (p + 4 <= end) {
                const uint8_t *rec = p;
                uint32_t hdr = page_rd32(p);
                unsigned type_len = hdr & 0x1f;
                uint32_t delta = hdr >> 5;
                p += 4;
                switch (type_len) {
                case PAGE_TYPE_PADDING:
                        if (delta == 0)
                                goto page_done; /* the rest of the page is padding */
                        if (p + 4 > end)
                                PAGE_REFUSE(PAGE_STATUS_SHORT_PADDING_LENGTH);
                        {
                                uint32_t skip = page_rd32(p);
                                if (skip > (size_t) (end - p))
                                        PAGE_REFUSE(PAGE_STATUS_INVALID_PADDING_LENGTH);
                                if (skip == 0)
                                        PAGE_REFUSE(PAGE_STATUS_INVALID_PADDING_LENGTH); /* would loop forever */
                                p += skip;
                        }
                        break;
                case PAGE_TYPE_TIME_EXTEND:
                        if (p + 4 > end)
                                PAGE_REFUSE(PAGE_STATUS_SHORT_TIME_EXTEND);
                        ts += (uint64_t) delta | ((uint64_t) page_rd32(p) << 27);
                        p += 4;
                        break;
                case PAGE_TYPE_TIME_STAMP:
                        if (p + 4 > end)
                                PAGE_REFUSE(PAGE_STATUS_SHORT_TIME_STAMP);
                        /* Absolute: the low 59 bits; keep the page's top bits. */
                        ts = (ts & ~((1ull << 59) - 1)) | ((uint64_t) delta | ((uint64_t) page_rd32(p) << 27));
                        p += 4;
                        break;
                default: {
                        size_t len;
                        ts += delta;
                        if (type_len == 0) {
                                if (p + 4 > end)
                                        PAGE_REFUSE(PAGE_STATUS_SHORT_DATA_LENGTH);
                                uint32_t l = page_rd32(p);
                                p += 4;
                                if (l == 0)
                                        PAGE_REFUSE(PAGE_STATUS_ZERO_DATA_LENGTH);
                                if (l < 4)
                                        PAGE_REFUSE(PAGE_STATUS_INVALID_DATA_LENGTH);
                                len = l - 4;
                        } else
                                len = (size_t) type_len * 4;
                        if (len > (size_t) (end - p))
                                PAGE_REFUSE(PAGE_STATUS_INVALID_DATA_LENGTH);
                        if (rec >= first) {
                                if (fn)
                                        fn(ts, p, len, userdata);
                                info.records++;
                        }
                        size_t adv = (len + 3) & ~(size_t) 3;
                        if (adv > (size_t) (end - p))
                                adv = (size_t) (end - p);
                        p += adv;
                        break;
                }
                }
        }
page_done:
        if (ret_info)
                *ret_info = info;
        return 0;
}

#undef PAGE_REFUSE
