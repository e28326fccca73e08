/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Packets for unit tests.
 *
 * The zero-copy packets of a fake plugin host (traced_host_api's
 * begin_packet and end_packet) for unit tests of plugins: each packet is
 * written into a heap buffer and handed, when it ends, to
 * test_packets_sink, as the test's fake write_packet would be. One packet
 * open at a time. */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "traced/pbzero.h"
#include "traced/plugin.h"

extern int32_t (*test_packets_sink)(struct traced_writer *w, const void *packet, size_t size);

int32_t test_begin_packet(struct traced_writer *w, struct traced_pb_msg *root);
int32_t test_end_packet(struct traced_writer *w, struct traced_pb_msg *root);

/* A TracePacket written by the code under test into a buffer of 1 MiB
 * (more is -ENOBUFS): begin gives the packet to write into, end ends it
 * and returns its size (or the writer's error); the bytes are at buf. */
struct TracePacket;
struct test_packet {
        struct traced_pb_stream s;
        struct traced_pb_msg root; /* the TracePacket's */
        uint8_t *buf;
};

#define TEST_PACKET_MAX (1u << 20)

struct TracePacket *test_packet_begin(struct test_packet *tp);
ssize_t test_packet_end(struct test_packet *tp);
void test_packet_done(struct test_packet *tp);
