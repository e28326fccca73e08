/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"

/* A BindService frame in f (its message in b). */
static void bind_frame(const char *name, uint64_t id, Perfetto__Protos__IPCFrame__BindService *b,
                       Perfetto__Protos__IPCFrame *f) {
        perfetto__protos__ipcframe__bind_service__init(b);
        perfetto__protos__ipcframe__init(f);
        b->service_name = (char *) name;
        f->has_request_id = true;
        f->request_id = id;
        f->msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        f->msg_bind_service = b;
}

static size_t encode_bind(const char *name, uint64_t id, uint8_t **ret) {
        Perfetto__Protos__IPCFrame__BindService b;
        Perfetto__Protos__IPCFrame f;
        size_t len;

        bind_frame(name, id, &b, &f);
        cr_assert_eq(ipc_frame_encode(&f, ret, &len), 0);
        return len;
}

Test(ipc_frame, encode_matches_upstream_bytes) {
        /* The first frame upstream's traced_probes sends (fixture
         * 01-producer.hex): BindService("ProducerPort") with request id 1. */
        static const uint8_t expected[] = { 0x12, 0x00, 0x00, 0x00, 0x10, 0x01, 0x1a, 0x0e, 0x0a, 0x0c, 'P', 'r',
                                            'o',  'd',  'u',  'c',  'e',  'r',  'P',  'o',  'r',  't' };
        uint8_t *buf;
        size_t len = encode_bind("ProducerPort", 1, &buf);
        cr_assert_eq(len, sizeof(expected));
        cr_assert_arr_eq(buf, expected, sizeof(expected));
        free(buf);
}

Test(ipc_frame, round_trip) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        uint8_t *buf;
        size_t len = encode_bind("ConsumerPort", 77, &buf);

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, buf, len), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 1);
        cr_assert_eq(f->request_id, 77);
        cr_assert_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
        cr_assert_str_eq(f->msg_bind_service->service_name, "ConsumerPort");
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 0);
        ipc_frame_decoder_done(&d);
        free(buf);
}

Test(ipc_frame, split_byte_by_byte) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        uint8_t *buf;
        size_t len = encode_bind("ProducerPort", 5, &buf);

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        for (size_t i = 0; i < len; i++) {
                cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 0, "frame complete too early at %zu", i);
                cr_assert_eq(ipc_frame_decoder_feed(&d, buf + i, 1), 0);
        }
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 1);
        cr_assert_eq(f->request_id, 5);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        ipc_frame_decoder_done(&d);
        free(buf);
}

Test(ipc_frame, many_frames_in_one_read) {
        struct ipc_frame_decoder d;
        uint8_t all[4096];
        size_t total = 0;

        for (uint64_t i = 1; i <= 50; i++) {
                uint8_t *buf;
                size_t len = encode_bind("S", i, &buf);
                memcpy(all + total, buf, len);
                total += len;
                free(buf);
        }
        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, all, total), 0);
        for (uint64_t i = 1; i <= 50; i++) {
                Perfetto__Protos__IPCFrame *f = NULL;
                cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 1);
                cr_assert_eq(f->request_id, i);
                perfetto__protos__ipcframe__free_unpacked(f, NULL);
        }
        Perfetto__Protos__IPCFrame *f = NULL;
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 0);
        ipc_frame_decoder_done(&d);
}

Test(ipc_frame, oversized_header_rejected_without_allocation) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        uint32_t big = IPC_FRAME_MAX_SIZE + 1;
        uint8_t hdr[4] = { (uint8_t) big, (uint8_t) (big >> 8), (uint8_t) (big >> 16), (uint8_t) (big >> 24) };

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, hdr, 4), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), -EMSGSIZE);
        cr_assert_leq(d.cap, 4096u, "decoder grew its buffer for a refused frame");
        ipc_frame_decoder_done(&d);

        /* 0xffffffff as well. */
        uint8_t ff[4] = { 0xff, 0xff, 0xff, 0xff };
        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, ff, 4), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), -EMSGSIZE);
        ipc_frame_decoder_done(&d);
}

Test(ipc_frame, largest_frame_accepted) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        /* A frame of exactly the bound: field 1 (data_for_testing, bytes)
         * holding bound - 4 bytes (tag 1 byte + 3-byte length). */
        size_t payload = IPC_FRAME_MAX_SIZE - 4;
        uint8_t *buf = calloc(1, IPC_FRAME_MAX_SIZE + 4);
        uint32_t size = IPC_FRAME_MAX_SIZE;
        buf[0] = (uint8_t) size;
        buf[1] = (uint8_t) (size >> 8);
        buf[2] = (uint8_t) (size >> 16);
        buf[3] = 0;
        buf[4] = 0x0a;
        buf[5] = (uint8_t) (0x80 | (payload & 0x7f));
        buf[6] = (uint8_t) (0x80 | ((payload >> 7) & 0x7f));
        buf[7] = (uint8_t) (payload >> 14);

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, buf, IPC_FRAME_MAX_SIZE + 4), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 1);
        cr_assert_eq(f->n_data_for_testing, 1);
        cr_assert_eq(f->data_for_testing[0].len, payload);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        ipc_frame_decoder_done(&d);
        free(buf);
}

Test(ipc_frame, encoder_refuses_oversized) {
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        ProtobufCBinaryData blob = { .len = IPC_FRAME_MAX_SIZE, .data = calloc(1, IPC_FRAME_MAX_SIZE) };
        uint8_t *buf = NULL;
        size_t len;

        f.n_data_for_testing = 1;
        f.data_for_testing = &blob;
        cr_assert_eq(ipc_frame_encode(&f, &buf, &len), -EMSGSIZE);
        cr_assert_null(buf);
        free(blob.data);
}

/* What is sent stays within what upstream's peers take: their buffer of
 * IPC_FRAME_MAX_SIZE holds the length prefix too. */
Test(ipc_frame, encoder_sends_what_upstream_takes) {
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        /* Field 1 (tag 1 byte, 3-byte length) with its bytes: the frame is
         * exactly the bound, then one byte over it. */
        ProtobufCBinaryData blob = { .len = IPC_FRAME_MAX_SEND_SIZE - 4,
                                     .data = calloc(1, IPC_FRAME_MAX_SEND_SIZE) };
        uint8_t *buf = NULL;
        size_t len;

        f.n_data_for_testing = 1;
        f.data_for_testing = &blob;
        cr_assert_eq(ipc_frame_encode(&f, &buf, &len), 0);
        cr_assert_eq(len, IPC_FRAME_MAX_SIZE, "the frame with its prefix fills upstream's buffer exactly");
        free(buf);
        buf = NULL;
        blob.len++;
        cr_assert_eq(ipc_frame_encode(&f, &buf, &len), -EMSGSIZE);
        cr_assert_null(buf);
        free(blob.data);
}

Test(ipc_frame, garbage_payload_is_bad_message) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        /* length 3, then a field with wire type 7 (invalid). */
        static const uint8_t bad[] = { 3, 0, 0, 0, 0x0f, 0x01, 0x02 };

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, bad, sizeof(bad)), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), -EBADMSG);
        ipc_frame_decoder_done(&d);
}

Test(ipc_frame, bad_varint_is_bad_message) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        /* request_id (field 2, varint) with 11 continuation bytes. */
        static const uint8_t bad[] = { 12, 0, 0, 0, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, bad, sizeof(bad)), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), -EBADMSG);
        ipc_frame_decoder_done(&d);
}

Test(ipc_frame, truncated_nested_message_is_bad_message) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        /* msg_bind_service (field 3) claims 10 bytes but the frame has 2. */
        static const uint8_t bad[] = { 4, 0, 0, 0, 0x1a, 0x0a, 0x0a, 0x01 };

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, bad, sizeof(bad)), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), -EBADMSG);
        ipc_frame_decoder_done(&d);
}

Test(ipc_frame, truncated_stream_waits) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        uint8_t *buf;
        size_t len = encode_bind("ProducerPort", 9, &buf);

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, buf, len - 1), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 0);
        cr_assert_null(f);
        ipc_frame_decoder_done(&d);
        free(buf);
}

Test(ipc_frame, empty_frame_decodes_to_empty_message) {
        struct ipc_frame_decoder d;
        Perfetto__Protos__IPCFrame *f = NULL;
        static const uint8_t empty[] = { 0, 0, 0, 0 };

        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        cr_assert_eq(ipc_frame_decoder_feed(&d, empty, sizeof(empty)), 0);
        cr_assert_eq(ipc_frame_decoder_pop(&d, &f), 1);
        cr_assert_eq(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG__NOT_SET);
        perfetto__protos__ipcframe__free_unpacked(f, NULL);
        ipc_frame_decoder_done(&d);
}

/* Encoding in two steps (the length, then into a caller's buffer of that
 * length) gives the same bytes, and refuses a length the frame does not
 * fill. */
Test(ipc_frame, encode_in_two_steps_matches_encode) {
        uint8_t *buf;
        size_t len = encode_bind("ProducerPort", 1, &buf);
        Perfetto__Protos__IPCFrame__BindService b;
        Perfetto__Protos__IPCFrame f;
        bind_frame("ProducerPort", 1, &b, &f);
        uint8_t out[64];
        size_t n = 0;
        cr_assert_eq(ipc_frame_encoded_len(&f, &n), 0);
        cr_assert_eq(n, len);
        cr_assert_leq(n, sizeof(out));
        cr_assert_eq(ipc_frame_encode_to(&f, out, n), 0);
        cr_assert_arr_eq(out, buf, len);
        cr_assert_eq(ipc_frame_encode_to(&f, out, n + 1), -EINVAL, "a wrong length must not be written as the header");
        cr_assert_eq(ipc_frame_encode_to(&f, out, 2), -EINVAL);
        free(buf);
}
