/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>

#include "test-packets.h"
#include "traced/pbzero.h"

int32_t (*test_packets_sink)(struct traced_writer *w, const void *packet, size_t size);

/* Larger than any packet a plugin test writes (the writer's -ENOBUFS
 * would fail it). */
static uint8_t buf[8u << 20];
static struct traced_pb_stream stream;
static struct traced_pb_msg *open_root;

int32_t test_begin_packet(struct traced_writer *w, struct traced_pb_msg *root) {
        (void) w;
        if (open_root)
                return -EBUSY;
        traced_pb_stream_init_buffer(&stream, buf, sizeof(buf));
        traced_pb_msg_init(root, &stream);
        open_root = root;
        return 0;
}

int32_t test_end_packet(struct traced_writer *w, struct traced_pb_msg *root) {
        if (!open_root || root != open_root)
                return -EINVAL;
        open_root = NULL;
        int32_t r = traced_pb_msg_finish(root);
        if (r < 0)
                return r;
        return test_packets_sink ? test_packets_sink(w, buf, (size_t) traced_pb_msg_size(root)) : 0;
}

struct TracePacket *test_packet_begin(struct test_packet *tp) {
        if (!tp->buf && !(tp->buf = malloc(TEST_PACKET_MAX)))
                abort();
        traced_pb_stream_init_buffer(&tp->s, tp->buf, TEST_PACKET_MAX);
        traced_pb_msg_init(&tp->root, &tp->s);
        /* TracePacket is the root message: its one member. */
        return (struct TracePacket *) &tp->root;
}

ssize_t test_packet_end(struct test_packet *tp) {
        int32_t r = traced_pb_msg_finish(&tp->root);
        return r < 0 ? r : (ssize_t) traced_pb_msg_size(&tp->root);
}

void test_packet_done(struct test_packet *tp) {
        free(tp->buf);
        tp->buf = NULL;
}
