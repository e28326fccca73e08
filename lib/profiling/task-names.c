/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>

#include "basic/hash.h"
#include "task-names.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

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

void task_names_packet(struct TracePacket *pkt, int32_t pid, int32_t tid, const char *comm, uint64_t ts,
                       uint32_t clock_id) {
        size_t len = strnlen(comm, TASK_NAMES_COMM_MAX);
        ProcessTree tree;
        TracePacket_set_timestamp(pkt, ts);
        TracePacket_set_timestamp_clock_id(pkt, clock_id);
        TracePacket_begin_process_tree(pkt, &tree);
        if (pid == tid) {
                ProcessTree_Process proc;
                ProcessTree_begin_processes(&tree, &proc);
                ProcessTree_Process_set_pid(&proc, pid);
                ProcessTree_Process_add_cmdline_n(&proc, comm, len);
                ProcessTree_Process_set_cmdline_is_comm(&proc, true);
                ProcessTree_end_processes(&tree, &proc);
        }
        ProcessTree_Thread thread;
        ProcessTree_begin_threads(&tree, &thread);
        ProcessTree_Thread_set_tid(&thread, tid);
        ProcessTree_Thread_set_name_n(&thread, comm, len);
        ProcessTree_Thread_set_tgid(&thread, pid);
        ProcessTree_end_threads(&tree, &thread);
        TracePacket_end_process_tree(pkt, &tree);
}
