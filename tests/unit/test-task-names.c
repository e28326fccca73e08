/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <string.h>

#include "test-packets.h"
#include "perfetto/trace/trace_packet.pb-c.h"
#include "profiling/task-names.h"

Test(task_names, new_and_changed_comms_only) {
        struct task_names t = {};
        cr_assert(task_names_changed(&t, 10, "sh"));
        cr_assert_not(task_names_changed(&t, 10, "sh"));
        cr_assert(task_names_changed(&t, 10, "python3"));
        cr_assert(task_names_changed(&t, 11, "python3"));
        cr_assert_not(task_names_changed(&t, 12, ""));
        task_names_done(&t);
        cr_assert(task_names_changed(&t, 10, "python3"), "forgotten after done");
        task_names_done(&t);
}

Test(task_names, bounded) {
        struct task_names t = {};
        for (uint32_t i = 0; i <= TASK_NAMES_BOUND; i++)
                (void) task_names_changed(&t, (int32_t) i, "x");
        cr_assert_leq(hashmap_size(&t.seen), TASK_NAMES_BOUND);
        task_names_done(&t);
}

static Perfetto__Protos__TracePacket *packet(int32_t pid, int32_t tid, const char *comm) {
        struct test_packet w = {};
        task_names_packet(test_packet_begin(&w), pid, tid, comm, 1234, 6);
        ssize_t n = test_packet_end(&w);
        cr_assert_geq(n, 0);
        Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, (size_t) n, w.buf);
        test_packet_done(&w);
        cr_assert_not_null(p);
        cr_assert(p->has_timestamp && p->timestamp == 1234);
        cr_assert(p->has_timestamp_clock_id && p->timestamp_clock_id == 6);
        cr_assert_eq(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE);
        return p;
}

Test(task_names, a_main_thread_names_its_process) {
        Perfetto__Protos__TracePacket *p = packet(42, 42, "python3");
        const Perfetto__Protos__ProcessTree *t = p->process_tree;
        cr_assert_eq(t->n_processes, 1);
        cr_assert_eq(t->processes[0]->pid, 42);
        cr_assert_eq(t->processes[0]->n_cmdline, 1);
        cr_assert_str_eq(t->processes[0]->cmdline[0], "python3");
        cr_assert(t->processes[0]->has_cmdline_is_comm && t->processes[0]->cmdline_is_comm);
        cr_assert_eq(t->n_threads, 1);
        cr_assert_eq(t->threads[0]->tid, 42);
        cr_assert_eq(t->threads[0]->tgid, 42);
        cr_assert_str_eq(t->threads[0]->name, "python3");
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

Test(task_names, another_thread_names_itself_only) {
        /* A comm of 16 bytes without its NUL is cut at 15. */
        char comm[16];
        memset(comm, 'a', sizeof(comm));
        Perfetto__Protos__TracePacket *p = packet(42, 43, comm);
        const Perfetto__Protos__ProcessTree *t = p->process_tree;
        cr_assert_eq(t->n_processes, 0);
        cr_assert_eq(t->n_threads, 1);
        cr_assert_eq(t->threads[0]->tid, 43);
        cr_assert_eq(t->threads[0]->tgid, 42);
        cr_assert_eq(strlen(t->threads[0]->name), 15);
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
}
