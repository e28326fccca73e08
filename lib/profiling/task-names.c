/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>

#include "basic/hash.h"
#include "task-names.h"

/* TracePacket */
#define PACKET_PROCESS_TREE 2
#define PACKET_TIMESTAMP 8
#define PACKET_TIMESTAMP_CLOCK_ID 58
/* ProcessTree, its Process and Thread */
#define TREE_PROCESSES 1
#define TREE_THREADS 2
#define PROCESS_PID 1
#define PROCESS_CMDLINE 3
#define PROCESS_CMDLINE_IS_COMM 9
#define THREAD_TID 1
#define THREAD_NAME 2
#define THREAD_TGID 3

bool task_names_changed(struct task_names *t, int32_t tid, const char *comm) {
        size_t len = strnlen(comm, TASK_NAMES_COMM_MAX);
        if (len == 0)
                return false;
        /* 0 is what an absent entry would compare with: never a hash kept */
        uint64_t h = fnv1a64(comm, len) | 1;
        uint64_t was;
        if (hashmap_get(&t->seen, (uint32_t) tid, &was) && was == h)
                return false;
        if (hashmap_size(&t->seen) >= TASK_NAMES_BOUND)
                hashmap_clear(&t->seen);
        /* Out of memory: not remembered, so named again next time. */
        (void) hashmap_put(&t->seen, (uint32_t) tid, h);
        return true;
}

void task_names_done(struct task_names *t) {
        hashmap_clear(&t->seen);
}

void task_names_packet(struct pbw *pkt, int32_t pid, int32_t tid, const char *comm, uint64_t ts, uint32_t clock_id) {
        struct pbw tree = {}, proc = {}, thread = {};
        size_t len = strnlen(comm, TASK_NAMES_COMM_MAX);
        pbw_reset(pkt);
        if (pid == tid) {
                pbw_varint(&proc, PROCESS_PID, (uint32_t) pid);
                pbw_bytes(&proc, PROCESS_CMDLINE, comm, len);
                pbw_varint(&proc, PROCESS_CMDLINE_IS_COMM, 1);
                pbw_message(&tree, TREE_PROCESSES, &proc);
        }
        pbw_varint(&thread, THREAD_TID, (uint32_t) tid);
        pbw_bytes(&thread, THREAD_NAME, comm, len);
        pbw_varint(&thread, THREAD_TGID, (uint32_t) pid);
        pbw_message(&tree, TREE_THREADS, &thread);
        pbw_varint(pkt, PACKET_TIMESTAMP, ts);
        pbw_varint(pkt, PACKET_TIMESTAMP_CLOCK_ID, clock_id);
        pbw_message(pkt, PACKET_PROCESS_TREE, &tree);
        pbw_done(&tree);
        pbw_done(&proc);
        pbw_done(&thread);
}
