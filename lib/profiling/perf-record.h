/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Records of a perf_event mmap ring (struct perf_event_header + body, as
 * perf_event_open(2) lays them out for the sample_type we ask for), parsed
 * into views of the input: nothing is copied, every length is checked
 * against the record. Also the copy of records out of the ring, where a
 * record may wrap around its end. Pure functions: any thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a sample carries: the attr's sample_type and, for REGS_USER, how
 * many registers sample_regs_user selects. */
struct perf_layout {
        uint64_t sample_type;
        uint32_t n_user_regs;
        bool sample_id_all;
};

#define PERF_MAX_USER_REGS 32

struct perf_sample_view {
        uint64_t ip;
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu;
        uint64_t period;
        const uint64_t *callchain; /* may be unaligned in fuzzed input: read with memcpy */
        uint64_t callchain_len;
        uint64_t regs_abi; /* PERF_SAMPLE_REGS_ABI_*: 0 none (kernel thread) */
        uint64_t regs[PERF_MAX_USER_REGS];
        const uint8_t *stack;
        uint64_t stack_size; /* bytes valid (dyn_size) */
        const uint8_t *raw;  /* PERF_SAMPLE_RAW: what a BPF program sent (padding included) */
        uint32_t raw_size;
};

enum perf_rec_kind {
        PERF_REC_OTHER,
        PERF_REC_SAMPLE,
        PERF_REC_MMAP2,
        PERF_REC_COMM,
        PERF_REC_FORK,
        PERF_REC_EXIT,
        PERF_REC_LOST,
        PERF_REC_THROTTLE,
        PERF_REC_UNTHROTTLE,
        PERF_REC_LOST_SAMPLES,
};

struct perf_record {
        enum perf_rec_kind kind;
        uint16_t misc;
        uint64_t time; /* from the sample or sample_id (0 when absent) */
        union {
                struct perf_sample_view sample;
                struct {
                        uint32_t pid, tid;
                        uint64_t addr, len, pgoff;
                        uint32_t maj, min;
                        uint64_t ino;
                        uint32_t prot, flags;
                        const char *filename; /* NUL-terminated inside the record */
                } mmap2;
                struct {
                        uint32_t pid, tid;
                        const char *comm;
                        bool exec;
                } comm;
                struct {
                        uint32_t pid, ppid, tid, ptid;
                        uint64_t time;
                } task; /* FORK, EXIT */
                struct {
                        uint64_t id, lost;
                } lost; /* LOST, LOST_SAMPLES (lost only) */
                struct {
                        uint64_t time, id, stream_id;
                } throttle;
        } u;
};

/* Parses one whole record (header included; len = header.size). -EBADMSG
 * when it does not hold what its type and the layout say. */
int perf_record_parse(const uint8_t *rec, size_t len, const struct perf_layout *layout, struct perf_record *ret);

/* The id a sample record starts with when the layout asks for
 * PERF_SAMPLE_IDENTIFIER (which event of those writing into one ring
 * wrote it, and so its layout): false for another record, or without. */
bool perf_record_sample_id(const uint8_t *rec, size_t len, const struct perf_layout *layout, uint64_t *ret);

/* Where the time of a record of this type and size lies in it (to order
 * the records of several rings without parsing them): false when it has
 * none. */
bool perf_record_time_offset(const struct perf_layout *l, uint32_t type, size_t size, size_t *ret_off);

/* Copies the record at the ring's tail offset into buf (the ring data area
 * is a power of two, size bytes). Returns the record length, 0 when fewer
 * than a header's bytes are available, -EBADMSG for a header whose size is
 * impossible (below a header, above what is available or what buf holds). */
int perf_ring_copy(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head, uint8_t *buf, size_t buf_size);

/* The kernel reserves the whole user stack copy in every sample but fills
 * only its first dyn_size bytes. Returns the length of the record without
 * the unfilled part (rounded up to 8 bytes, the size field and the record
 * header rewritten to match) and, when out is not NULL, writes that record
 * to out (which must hold len bytes). A record with nothing to cut keeps
 * its length and is copied as it is. -EBADMSG when it does not parse. */
int perf_record_compact(const uint8_t *rec, size_t len, const struct perf_layout *layout, uint8_t *out);
/* The same, of a record parsed already (r, by perf_record_parse of rec:
 * its views point into rec). */
int perf_record_compact_parsed(const uint8_t *rec, size_t len, const struct perf_record *r, uint8_t *out);
