/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One page of the kernel's per-CPU ring buffer, as read from
 * per_cpu/cpuN/trace_pipe_raw: a header (timestamp, commit) and records
 * with 5-bit type_len / 27-bit time deltas. Nothing is trusted: a bad page
 * ends with -EBADMSG, never a read outside it. */

#include <stddef.h>
#include <stdint.h>

#define PAGE_HEADER_SIZE 16u /* u64 timestamp + 8-byte commit (64-bit kernels) */
#define PAGE_COMMIT_MISSED_EVENTS (1ull << 31)
#define PAGE_COMMIT_MISSED_STORED (1ull << 30)

/* Called for each data record: its timestamp and payload. */
typedef void (*page_record_fn)(uint64_t ts, const uint8_t *data, size_t len, void *userdata);

/* Why a page was refused: FtraceParseStatus values (Perfetto ABI). */
enum {
        PAGE_STATUS_OK = 1,
        PAGE_STATUS_UNEXPECTED_READ_ERROR = 2,
        PAGE_STATUS_PARTIAL_PAGE_READ = 3,
        PAGE_STATUS_INVALID_PAGE_HEADER = 4,
        PAGE_STATUS_SHORT_PADDING_LENGTH = 7,
        PAGE_STATUS_INVALID_PADDING_LENGTH = 8,
        PAGE_STATUS_SHORT_TIME_EXTEND = 9,
        PAGE_STATUS_SHORT_TIME_STAMP = 10,
        PAGE_STATUS_SHORT_DATA_LENGTH = 11,
        PAGE_STATUS_ZERO_DATA_LENGTH = 12,
        PAGE_STATUS_INVALID_DATA_LENGTH = 13,
        PAGE_STATUS_SHORT_EVENT_ID = 14,
};

struct page_info {
        unsigned status; /* PAGE_STATUS_*, also filled when the page is refused */
        uint64_t records;
        uint64_t lost_events; /* reported by the kernel for before this page */
        int missed;           /* the kernel dropped events before this page */
        size_t data_len;      /* bytes of records the page holds (its commit), once the header is valid */
};

/* -EBADMSG for a page that breaks the ring buffer ABI; ret_info (if not
 * NULL) is filled either way, with the reason in status. */
int page_parse(const uint8_t *page, size_t page_size, page_record_fn fn, void *userdata, struct page_info *ret_info);

/* As page_parse, for a page the kernel may still be appending to (a mapped
 * reader sub-buffer): records are walked from the start of the data, for
 * their time deltas, but only those that begin at or after byte from of the
 * data are passed to fn, and none past byte to (what the caller saw
 * committed; SIZE_MAX for all). info.records counts those passed. */
int page_parse_range(const uint8_t *page, size_t page_size, size_t from, size_t to, page_record_fn fn, void *userdata,
                     struct page_info *ret_info);
