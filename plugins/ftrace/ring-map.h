/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One CPU's ring buffer read through the kernel's memory mapping of
 * per_cpu/cpuN/trace_pipe_raw (Linux 6.10 and later): a meta page, then
 * the sub-buffers, each laid out as a page read from that file. The reader
 * sub-buffer named by the meta page is the consumer's alone: the writer
 * never overwrites it, though while it is also the page the writer fills it
 * may still grow. Its records are parsed where they lie, no copy. The
 * kernel refuses to resize the buffer or take a snapshot while it is
 * mapped: map after sizing it, unmap before sizing it back. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#include "page.h"

/* The meta page's layout (uapi linux/trace_mmap.h, struct
 * trace_buffer_meta), declared here as older headers lack it. */
struct ring_map_meta {
        uint32_t meta_page_size;
        uint32_t meta_struct_len;
        uint32_t subbuf_size;
        uint32_t nr_subbufs; /* the reader's included */
        struct {
                uint64_t lost_events; /* lost when the reader was swapped in */
                uint32_t id;          /* the reader sub-buffer */
                uint32_t read;        /* bytes of it consumed, as the kernel counts them */
        } reader;
        uint64_t flags;
        uint64_t entries;
        uint64_t overrun;
        uint64_t read;
        uint64_t reserved1;
        uint64_t reserved2;
};
_Static_assert(sizeof(struct ring_map_meta) == 80, "the kernel's trace_buffer_meta is 80 bytes");

/* _IO('R', 0x20): swap in the next reader sub-buffer once the current one
 * is consumed (the kernel takes it as consumed whole from then on). */
#define RING_MAP_IOCTL_GET_READER _IO('R', 0x20)

struct ring_map {
        int fd; /* not owned: the trace_pipe_raw it maps */
        uint8_t *base;
        size_t len;
        bool mapped; /* base is an mmap of fd, unmapped by ring_map_close */
        uint32_t subbuf_size, nr_subbufs, meta_page_size;
        uint32_t id;  /* the reader sub-buffer last parsed */
        uint32_t pos; /* bytes of its data handed out already */
};

/* What one ring_map_parse found. */
struct ring_map_read {
        bool new_subbuf; /* a sub-buffer not seen before */
        uint64_t lost;   /* events lost before it (1 when the kernel could not count them) */
        struct page_info info;
};

/* Maps fd (a trace_pipe_raw opened O_RDONLY|O_NONBLOCK): -errno when the
 * kernel does not offer it (older kernels, an instance with a snapshot,
 * a CPU without a buffer) or its meta page makes no sense (-EPROTO). */
int ring_map_open(struct ring_map *m, int fd);
/* Checks the layout of the mapping at base (len bytes) and starts at the
 * reader position the meta page gives: what ring_map_open does once
 * mapped, and what tests do on memory of their own. */
int ring_map_attach(struct ring_map *m, void *base, size_t len);
void ring_map_close(struct ring_map *m);
/* Asks the kernel for the next reader sub-buffer (no wait). */
int ring_map_get_reader(struct ring_map *m);
/* Passes to fn the records of the reader sub-buffer not passed before: 0
 * when there were none, 1 when there were (or a sub-buffer came in with
 * losses), -EBADMSG for a sub-buffer that breaks the ring buffer ABI (ret
 * says why; it is skipped from then on). */
int ring_map_parse(struct ring_map *m, page_record_fn fn, void *userdata, struct ring_map_read *ret);
