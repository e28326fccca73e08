/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Kernel records to FtraceEvent messages: typed messages for the hot
 * events, GenericFtraceEvent for any other. The table below maps each
 * event and its format fields to the messages and fields generated from
 * protos/perfetto/trace/ftrace/; which table entry and which format fields
 * an event uses is worked out once per event format and kept in it. */

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "encode.h"
#include "profiling/ksyms.h"
#include "traced/pbzero/perfetto/trace/ftrace/ftrace_event_bundle.pbw.h"

enum field_kind {
        K_INT,   /* varint (signed values sign-extended, as int32/int64) */
        K_STR,   /* string */
        K_U64S,  /* array of 64-bit values: one repeated varint each */
        K_ADDR,  /* kernel address: an iid of kernel_symbols when symbolizing */
};

struct typed_field {
        const char *name;
        uint32_t number;
        enum field_kind kind;
};

struct typed_event {
        const char *group, *name;
        uint32_t oneof; /* the FtraceEvent field */
        struct typed_field fields[8];
};

/* A row of the table: the event's FtraceEvent field E, and F(name, kind)
 * for each field of its message M (named as in the kernel's format). */
#define EV(group, name, E) group, name, FtraceEvent_FIELD_##E
#define F(M, name, kind) { #name, M##_FIELD_##name, kind }

static const struct typed_event typed[] = {
        { EV("ftrace", "print", print), { F(PrintFtraceEvent, ip, K_INT), F(PrintFtraceEvent, buf, K_STR) } },
        { EV("sched", "sched_switch", sched_switch),
          { F(SchedSwitchFtraceEvent, prev_comm, K_STR), F(SchedSwitchFtraceEvent, prev_pid, K_INT),
            F(SchedSwitchFtraceEvent, prev_prio, K_INT), F(SchedSwitchFtraceEvent, prev_state, K_INT),
            F(SchedSwitchFtraceEvent, next_comm, K_STR), F(SchedSwitchFtraceEvent, next_pid, K_INT),
            F(SchedSwitchFtraceEvent, next_prio, K_INT) } },
        { EV("sched", "sched_wakeup", sched_wakeup),
          { F(SchedWakeupFtraceEvent, comm, K_STR), F(SchedWakeupFtraceEvent, pid, K_INT),
            F(SchedWakeupFtraceEvent, prio, K_INT), F(SchedWakeupFtraceEvent, success, K_INT),
            F(SchedWakeupFtraceEvent, target_cpu, K_INT) } },
        { EV("sched", "sched_waking", sched_waking),
          { F(SchedWakingFtraceEvent, comm, K_STR), F(SchedWakingFtraceEvent, pid, K_INT),
            F(SchedWakingFtraceEvent, prio, K_INT), F(SchedWakingFtraceEvent, success, K_INT),
            F(SchedWakingFtraceEvent, target_cpu, K_INT) } },
        { EV("sched", "sched_wakeup_new", sched_wakeup_new),
          { F(SchedWakeupNewFtraceEvent, comm, K_STR), F(SchedWakeupNewFtraceEvent, pid, K_INT),
            F(SchedWakeupNewFtraceEvent, prio, K_INT), F(SchedWakeupNewFtraceEvent, success, K_INT),
            F(SchedWakeupNewFtraceEvent, target_cpu, K_INT) } },
        { EV("task", "task_newtask", task_newtask),
          { F(TaskNewtaskFtraceEvent, pid, K_INT), F(TaskNewtaskFtraceEvent, comm, K_STR),
            F(TaskNewtaskFtraceEvent, clone_flags, K_INT), F(TaskNewtaskFtraceEvent, oom_score_adj, K_INT) } },
        { EV("task", "task_rename", task_rename),
          { F(TaskRenameFtraceEvent, pid, K_INT), F(TaskRenameFtraceEvent, oldcomm, K_STR),
            F(TaskRenameFtraceEvent, newcomm, K_STR), F(TaskRenameFtraceEvent, oom_score_adj, K_INT) } },
        { EV("sched", "sched_process_exit", sched_process_exit),
          { F(SchedProcessExitFtraceEvent, comm, K_STR), F(SchedProcessExitFtraceEvent, pid, K_INT),
            F(SchedProcessExitFtraceEvent, tgid, K_INT), F(SchedProcessExitFtraceEvent, prio, K_INT) } },
        { EV("sched", "sched_process_fork", sched_process_fork),
          { F(SchedProcessForkFtraceEvent, parent_comm, K_STR), F(SchedProcessForkFtraceEvent, parent_pid, K_INT),
            F(SchedProcessForkFtraceEvent, child_comm, K_STR), F(SchedProcessForkFtraceEvent, child_pid, K_INT) } },
        { EV("sched", "sched_process_free", sched_process_free),
          { F(SchedProcessFreeFtraceEvent, comm, K_STR), F(SchedProcessFreeFtraceEvent, pid, K_INT),
            F(SchedProcessFreeFtraceEvent, prio, K_INT) } },
        /* Interrupts. */
        { EV("irq", "irq_handler_entry", irq_handler_entry),
          { F(IrqHandlerEntryFtraceEvent, irq, K_INT), F(IrqHandlerEntryFtraceEvent, name, K_STR) } },
        { EV("irq", "irq_handler_exit", irq_handler_exit),
          { F(IrqHandlerExitFtraceEvent, irq, K_INT), F(IrqHandlerExitFtraceEvent, ret, K_INT) } },
        { EV("irq", "softirq_entry", softirq_entry), { F(SoftirqEntryFtraceEvent, vec, K_INT) } },
        { EV("irq", "softirq_exit", softirq_exit), { F(SoftirqExitFtraceEvent, vec, K_INT) } },
        { EV("irq", "softirq_raise", softirq_raise), { F(SoftirqRaiseFtraceEvent, vec, K_INT) } },
        /* Power. */
        { EV("power", "cpu_frequency", cpu_frequency),
          { F(CpuFrequencyFtraceEvent, state, K_INT), F(CpuFrequencyFtraceEvent, cpu_id, K_INT) } },
        { EV("power", "cpu_idle", cpu_idle), { F(CpuIdleFtraceEvent, state, K_INT), F(CpuIdleFtraceEvent, cpu_id, K_INT) } },
        /* System calls. */
        { EV("raw_syscalls", "sys_enter", sys_enter),
          { F(SysEnterFtraceEvent, id, K_INT), F(SysEnterFtraceEvent, args, K_U64S) } },
        { EV("raw_syscalls", "sys_exit", sys_exit), { F(SysExitFtraceEvent, id, K_INT), F(SysExitFtraceEvent, ret, K_INT) } },
        /* Workqueues: the work item and its function. */
        { EV("workqueue", "workqueue_activate_work", workqueue_activate_work),
          { F(WorkqueueActivateWorkFtraceEvent, work, K_ADDR), F(WorkqueueActivateWorkFtraceEvent, function, K_ADDR) } },
        { EV("workqueue", "workqueue_execute_end", workqueue_execute_end),
          { F(WorkqueueExecuteEndFtraceEvent, work, K_ADDR), F(WorkqueueExecuteEndFtraceEvent, function, K_ADDR) } },
        { EV("workqueue", "workqueue_execute_start", workqueue_execute_start),
          { F(WorkqueueExecuteStartFtraceEvent, work, K_ADDR),
            F(WorkqueueExecuteStartFtraceEvent, function, K_ADDR) } },
        { EV("workqueue", "workqueue_queue_work", workqueue_queue_work),
          { F(WorkqueueQueueWorkFtraceEvent, work, K_ADDR), F(WorkqueueQueueWorkFtraceEvent, function, K_ADDR),
            F(WorkqueueQueueWorkFtraceEvent, req_cpu, K_INT), F(WorkqueueQueueWorkFtraceEvent, cpu, K_INT),
            F(WorkqueueQueueWorkFtraceEvent, workqueue, K_STR) } },
};

static void resolve(struct event_format *f) {
        f->enc_state = 1;
        for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); i++)
                if (strcmp(typed[i].name, f->name) == 0 && strcmp(typed[i].group, f->group) == 0) {
                        f->enc_state = 2;
                        f->enc_typed = (uint8_t) i;
                        for (size_t k = 0; k < 8; k++)
                                f->enc_fields[k] = typed[i].fields[k].name ? format_field(f, typed[i].fields[k].name)
                                                                           : NULL;
                        return;
                }
}

static void put_u64s(struct traced_pb_msg *m, uint32_t number, const struct format_field *ff, const uint8_t *rec,
                     size_t len) {
        if ((size_t) ff->offset + ff->size > len)
                return;
        for (size_t k = 0; k + 8 <= ff->size; k += 8) {
                uint64_t v;
                memcpy(&v, rec + ff->offset + k, 8);
                traced_pb_msg_varint(m, number, v);
        }
}

/* A kernel address: as it is, or its iid in kt. */
static uint64_t addr_value(const struct format_field *ff, const uint8_t *rec, size_t len, struct kaddr_table *kt) {
        uint64_t v = (uint64_t) format_read_int(ff, rec, len);
        if (ff->size == 4)
                v &= UINT32_MAX;
        return kt && v ? kaddr_intern(kt, v) : v;
}

void ftrace_encode_event(FtraceEventBundle *b, struct event_format *f, uint64_t ts, const uint8_t *rec, size_t len) {
        ftrace_encode_event_ksyms(b, f, ts, rec, len, NULL);
}

/* The fields of a typed event into its message m (the table's). */
static void encode_typed(struct traced_pb_msg *m, const struct event_format *f, const uint8_t *rec, size_t len,
                         struct kaddr_table *kt) {
        const struct typed_event *t = &typed[f->enc_typed];
        char str[4096];
        for (size_t i = 0; i < 8 && t->fields[i].name; i++) {
                const struct format_field *ff = f->enc_fields[i];
                if (!ff)
                        continue;
                switch (t->fields[i].kind) {
                case K_STR:
                        format_read_str(ff, rec, len, str, sizeof(str));
                        traced_pb_msg_string(m, t->fields[i].number, str);
                        break;
                case K_U64S:
                        put_u64s(m, t->fields[i].number, ff, rec, len);
                        break;
                case K_ADDR:
                        traced_pb_msg_varint(m, t->fields[i].number, addr_value(ff, rec, len, kt));
                        break;
                default:
                        traced_pb_msg_varint(m, t->fields[i].number, (uint64_t) format_read_int(ff, rec, len));
                }
        }
}

/* A probe of ours (see kprobes.c): KprobeEvent { name, type } where the
 * event name ends in _entry or _return. */
static void encode_kprobe(FtraceEvent *ev, const struct event_format *f) {
        size_t n = strlen(f->name);
        bool ret = n > 7 && strcmp(f->name + n - 7, "_return") == 0;
        bool entry = n > 6 && strcmp(f->name + n - 6, "_entry") == 0;
        KprobeEvent kp;
        FtraceEvent_begin_kprobe_event(ev, &kp);
        KprobeEvent_set_name_n(&kp, f->name, n - (ret ? 7 : entry ? 6 : 0));
        KprobeEvent_set_type(&kp, ret     ? KprobeEvent_KPROBE_TYPE_END
                                  : entry ? KprobeEvent_KPROBE_TYPE_BEGIN
                                          : KprobeEvent_KPROBE_TYPE_INSTANT);
        FtraceEvent_end_kprobe_event(ev, &kp);
}

static void encode_generic(FtraceEvent *ev, const struct event_format *f, const uint8_t *rec, size_t len,
                           struct kaddr_table *kt) {
        char str[4096];
        GenericFtraceEvent g;
        FtraceEvent_begin_generic(ev, &g);
        GenericFtraceEvent_set_event_name(&g, f->name);
        for (size_t i = 0; i < f->n_fields; i++) {
                const struct format_field *ff = &f->fields[i];
                GenericFtraceEvent_Field field;
                GenericFtraceEvent_begin_field(&g, &field);
                GenericFtraceEvent_Field_set_name(&field, ff->name);
                if (ff->is_string || ff->is_data_loc) {
                        format_read_str(ff, rec, len, str, sizeof(str));
                        GenericFtraceEvent_Field_set_str_value(&field, str);
                } else if (ff->is_kaddr)
                        GenericFtraceEvent_Field_set_uint_value(&field, addr_value(ff, rec, len, kt));
                else if (ff->is_signed)
                        GenericFtraceEvent_Field_set_int_value(&field, format_read_int(ff, rec, len));
                else
                        GenericFtraceEvent_Field_set_uint_value(&field, (uint64_t) format_read_int(ff, rec, len));
                GenericFtraceEvent_end_field(&g, &field);
        }
        FtraceEvent_end_generic(ev, &g);
}

void ftrace_encode_event_ksyms(FtraceEventBundle *b, struct event_format *f, uint64_t ts, const uint8_t *rec,
                               size_t len, struct kaddr_table *kt) {
        FtraceEvent ev;

        if (f->enc_state == 0)
                resolve(f);
        FtraceEventBundle_begin_event(b, &ev);
        FtraceEvent_set_timestamp(&ev, ts);
        if (f->common_pid_offset >= 0 && (size_t) f->common_pid_offset + 4 <= len) {
                int32_t pid;
                memcpy(&pid, rec + f->common_pid_offset, 4);
                FtraceEvent_set_pid(&ev, (uint32_t) pid);
        }
        if (f->common_flags_offset >= 0 && (size_t) f->common_flags_offset < len)
                FtraceEvent_set_common_flags(&ev, rec[f->common_flags_offset]);

        if (f->enc_state == 2) {
                struct traced_pb_msg body;
                traced_pb_msg_begin_nested(&ev.msg, typed[f->enc_typed].oneof, &body);
                encode_typed(&body, f, rec, len, kt);
                traced_pb_msg_end_nested(&ev.msg, &body);
        } else if (strncmp(f->group, "traced_kp_", 10) == 0)
                encode_kprobe(&ev, f);
        else
                encode_generic(&ev, f, rec, len, kt);
        FtraceEventBundle_end_event(b, &ev);
}
