/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc-arena.h"
#include "ipc/ipc-frame.h"
#include "ipc/ipc.h"
#include "perfetto/common/commit_data_request.pb-c.h"

/* A CommitData request of n chunks, packed. */
static uint8_t *pack_commit(size_t n, size_t *ret_len) {
        Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
        Perfetto__Protos__CommitDataRequest__ChunksToMove *moves = calloc(n, sizeof(*moves));
        Perfetto__Protos__CommitDataRequest__ChunksToMove **ptrs = calloc(n, sizeof(*ptrs));
        cr_assert(moves && ptrs);
        for (size_t i = 0; i < n; i++) {
                perfetto__protos__commit_data_request__chunks_to_move__init(&moves[i]);
                moves[i].has_page = moves[i].has_chunk = moves[i].has_target_buffer = true;
                moves[i].page = (uint32_t) i;
                moves[i].chunk = (uint32_t) (i % 4);
                moves[i].target_buffer = 7;
                ptrs[i] = &moves[i];
        }
        req.n_chunks_to_move = n;
        req.chunks_to_move = ptrs;
        size_t len = perfetto__protos__commit_data_request__get_packed_size(&req);
        uint8_t *buf = malloc(len);
        cr_assert_not_null(buf);
        cr_assert_eq(perfetto__protos__commit_data_request__pack(&req, buf), len);
        free(moves);
        free(ptrs);
        *ret_len = len;
        return buf;
}

static void check_commit(const Perfetto__Protos__CommitDataRequest *r, size_t n) {
        cr_assert_not_null(r);
        cr_assert_eq(r->n_chunks_to_move, n);
        for (size_t i = 0; i < n; i++) {
                cr_assert_eq(r->chunks_to_move[i]->page, i);
                cr_assert_eq(r->chunks_to_move[i]->target_buffer, 7);
        }
}

Test(ipc_arena, pieces_are_aligned_and_apart) {
        struct ipc_arena a;
        ipc_arena_init(&a);
        for (int round = 0; round < 2; round++) {
                uint8_t *prev = NULL;
                for (size_t size = 1; size < 200; size += 7) {
                        uint8_t *p = a.allocator.alloc(a.allocator.allocator_data, size);
                        cr_assert_not_null(p);
                        cr_assert_eq((uintptr_t) p % 16, 0, "%zu bytes at a misaligned address", size);
                        memset(p, 0xa5, size); /* under ASan: in bounds */
                        cr_assert_neq(p, prev);
                        prev = p;
                }
                ipc_arena_reset(&a);
        }
        ipc_arena_done(&a);
}

/* The same frame again and again: once the block fits it, unpacking
 * allocates nothing. */
Test(ipc_arena, steady_frames_allocate_nothing) {
        struct ipc_arena a;
        size_t len;
        uint8_t *buf = pack_commit(29, &len);
        ipc_arena_init(&a);
        Perfetto__Protos__CommitDataRequest *r = perfetto__protos__commit_data_request__unpack(&a.allocator, len, buf);
        check_commit(r, 29);
        cr_assert_gt(a.mallocs, 0, "the first frame went nowhere");
        ipc_arena_reset(&a);
        uint64_t warm = a.mallocs;
        for (int i = 0; i < 100; i++) {
                r = perfetto__protos__commit_data_request__unpack(&a.allocator, len, buf);
                check_commit(r, 29);
                /* Freeing through the allocator is harmless: the reset
                 * reclaims it. */
                protobuf_c_message_free_unpacked(&r->base, &a.allocator);
                ipc_arena_reset(&a);
        }
        cr_assert_eq(a.mallocs, warm, "%llu mallocs for 100 frames of one size",
                     (unsigned long long) (a.mallocs - warm));
        ipc_arena_done(&a);
        free(buf);
}

/* A larger frame spills to malloc once, then the block grows to fit it;
 * beyond IPC_ARENA_KEEP_MAX nothing is kept, and every spill is freed at
 * the reset (a leak fails this under ASan). */
Test(ipc_arena, grows_to_the_largest_frame_within_its_bound) {
        struct ipc_arena a;
        ipc_arena_init(&a);
        size_t small_len, big_len;
        uint8_t *small = pack_commit(4, &small_len), *big = pack_commit(400, &big_len);
        check_commit(perfetto__protos__commit_data_request__unpack(&a.allocator, small_len, small), 4);
        ipc_arena_reset(&a);
        size_t cap_small = a.cap;
        check_commit(perfetto__protos__commit_data_request__unpack(&a.allocator, big_len, big), 400);
        ipc_arena_reset(&a);
        cr_assert_gt(a.cap, cap_small);
        uint64_t warm = a.mallocs;
        check_commit(perfetto__protos__commit_data_request__unpack(&a.allocator, big_len, big), 400);
        ipc_arena_reset(&a);
        check_commit(perfetto__protos__commit_data_request__unpack(&a.allocator, small_len, small), 4);
        ipc_arena_reset(&a);
        cr_assert_eq(a.mallocs, warm);

        size_t huge = IPC_ARENA_KEEP_MAX + 1;
        void *p = a.allocator.alloc(a.allocator.allocator_data, huge);
        cr_assert_not_null(p);
        memset(p, 1, huge);
        ipc_arena_reset(&a);
        cr_assert_leq(a.cap, IPC_ARENA_KEEP_MAX);
        ipc_arena_done(&a);
        cr_assert_eq(a.cap, 0);
        free(small);
        free(big);
}

/* A frame popped into an arena is the same frame. */
Test(ipc_arena, frame_popped_into_an_arena) {
        Perfetto__Protos__IPCFrame__BindService b = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
        uint8_t *buf;
        size_t len;
        b.service_name = (char *) "ProducerPort";
        f.has_request_id = true;
        f.request_id = 9;
        f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        f.msg_bind_service = &b;
        cr_assert_eq(ipc_frame_encode(&f, &buf, &len), 0);

        struct ipc_arena a;
        struct ipc_frame_decoder d;
        ipc_arena_init(&a);
        ipc_frame_decoder_init(&d, IPC_FRAME_MAX_SIZE);
        for (int i = 0; i < 3; i++) {
                Perfetto__Protos__IPCFrame *got = NULL;
                cr_assert_eq(ipc_frame_decoder_feed(&d, buf, len), 0);
                cr_assert_eq(ipc_frame_decoder_pop_into(&d, &a.allocator, &got), 1);
                cr_assert_eq(got->request_id, 9);
                cr_assert_str_eq(got->msg_bind_service->service_name, "ProducerPort");
                ipc_arena_reset(&a);
        }
        ipc_frame_decoder_done(&d);
        ipc_arena_done(&a);
        free(buf);
}
