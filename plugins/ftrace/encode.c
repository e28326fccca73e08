/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Kernel records to FtraceEvent messages: typed messages (Perfetto field
 * numbers) for the hot events, GenericFtraceEvent for any other. Which
 * table entry and which format fields an event uses is worked out once
 * per event format and kept in it. */

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "basic/pbw.h"
#include "format.h"
#include "encode.h"
#include "profiling/ksyms.h"

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
        uint32_t oneof; /* FtraceEvent field number */
        struct typed_field fields[8];
};

static const struct typed_event typed[] = {
        { "ftrace", "print", 3, { { "ip", 1, K_INT }, { "buf", 2, K_STR } } },
        { "sched", "sched_switch", 4,
          { { "prev_comm", 1, K_STR }, { "prev_pid", 2, K_INT }, { "prev_prio", 3, K_INT }, { "prev_state", 4, K_INT },
            { "next_comm", 5, K_STR }, { "next_pid", 6, K_INT }, { "next_prio", 7, K_INT } } },
        { "sched", "sched_wakeup", 17,
          { { "comm", 1, K_STR }, { "pid", 2, K_INT }, { "prio", 3, K_INT }, { "success", 4, K_INT }, { "target_cpu", 5, K_INT } } },
        { "sched", "sched_waking", 20,
          { { "comm", 1, K_STR }, { "pid", 2, K_INT }, { "prio", 3, K_INT }, { "success", 4, K_INT }, { "target_cpu", 5, K_INT } } },
        { "sched", "sched_wakeup_new", 114,
          { { "comm", 1, K_STR }, { "pid", 2, K_INT }, { "prio", 3, K_INT }, { "success", 4, K_INT }, { "target_cpu", 5, K_INT } } },
        { "task", "task_newtask", 235,
          { { "pid", 1, K_INT }, { "comm", 2, K_STR }, { "clone_flags", 3, K_INT }, { "oom_score_adj", 4, K_INT } } },
        { "task", "task_rename", 236,
          { { "pid", 1, K_INT }, { "oldcomm", 2, K_STR }, { "newcomm", 3, K_STR }, { "oom_score_adj", 4, K_INT } } },
        { "sched", "sched_process_exit", 238,
          { { "comm", 1, K_STR }, { "pid", 2, K_INT }, { "tgid", 3, K_INT }, { "prio", 4, K_INT } } },
        { "sched", "sched_process_fork", 239,
          { { "parent_comm", 1, K_STR }, { "parent_pid", 2, K_INT }, { "child_comm", 3, K_STR }, { "child_pid", 4, K_INT } } },
        { "sched", "sched_process_free", 240, { { "comm", 1, K_STR }, { "pid", 2, K_INT }, { "prio", 3, K_INT } } },
        /* Interrupts. */
        { "irq", "irq_handler_entry", 36, { { "irq", 1, K_INT }, { "name", 2, K_STR } } },
        { "irq", "irq_handler_exit", 37, { { "irq", 1, K_INT }, { "ret", 2, K_INT } } },
        { "irq", "softirq_entry", 24, { { "vec", 1, K_INT } } },
        { "irq", "softirq_exit", 25, { { "vec", 1, K_INT } } },
        { "irq", "softirq_raise", 26, { { "vec", 1, K_INT } } },
        /* Power. */
        { "power", "cpu_frequency", 11, { { "state", 1, K_INT }, { "cpu_id", 2, K_INT } } },
        { "power", "cpu_idle", 13, { { "state", 1, K_INT }, { "cpu_id", 2, K_INT } } },
        /* System calls. */
        { "raw_syscalls", "sys_enter", 329, { { "id", 1, K_INT }, { "args", 2, K_U64S } } },
        { "raw_syscalls", "sys_exit", 330, { { "id", 1, K_INT }, { "ret", 2, K_INT } } },
        /* Workqueues: the work item and its function. */
        { "workqueue", "workqueue_activate_work", 56, { { "work", 1, K_ADDR }, { "function", 2, K_ADDR } } },
        { "workqueue", "workqueue_execute_end", 57, { { "work", 1, K_ADDR }, { "function", 2, K_ADDR } } },
        { "workqueue", "workqueue_execute_start", 58, { { "work", 1, K_ADDR }, { "function", 2, K_ADDR } } },
        { "workqueue", "workqueue_queue_work", 59,
          { { "work", 1, K_ADDR }, { "function", 2, K_ADDR }, { "req_cpu", 4, K_INT }, { "cpu", 5, K_INT },
            { "workqueue", 6, K_STR } } },
};

#define FTRACE_EVENT_GENERIC 327
#define FTRACE_EVENT_KPROBE 542

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

static void put_u64s(struct pbw *w, uint32_t number, const struct format_field *ff, const uint8_t *rec, size_t len) {
        if ((size_t) ff->offset + ff->size > len)
                return;
        for (size_t k = 0; k + 8 <= ff->size; k += 8) {
                uint64_t v;
                memcpy(&v, rec + ff->offset + k, 8);
                pbw_varint(w, number, v);
        }
}

/* A kernel address: as it is, or its iid in kt. */
static uint64_t addr_value(const struct format_field *ff, const uint8_t *rec, size_t len, struct kaddr_table *kt) {
        uint64_t v = (uint64_t) format_read_int(ff, rec, len);
        if (ff->size == 4)
                v &= UINT32_MAX;
        return kt && v ? kaddr_intern(kt, v) : v;
}

void ftrace_encode_event(struct pbw *w, struct event_format *f, uint64_t ts, const uint8_t *rec, size_t len) {
        ftrace_encode_event_ksyms(w, f, ts, rec, len, NULL);
}

void ftrace_encode_event_ksyms(struct pbw *w, struct event_format *f, uint64_t ts, const uint8_t *rec, size_t len,
                               struct kaddr_table *kt) {
        struct pbw ev = {}, body = {};
        char str[4096];

        if (f->enc_state == 0)
                resolve(f);
        pbw_varint(&ev, 1, ts);
        if (f->common_pid_offset >= 0 && (size_t) f->common_pid_offset + 4 <= len) {
                int32_t pid;
                memcpy(&pid, rec + f->common_pid_offset, 4);
                pbw_varint(&ev, 2, (uint32_t) pid);
        }
        if (f->common_flags_offset >= 0 && (size_t) f->common_flags_offset < len)
                pbw_varint(&ev, 5, rec[f->common_flags_offset]);

        if (f->enc_state == 2) {
                const struct typed_event *t = &typed[f->enc_typed];
                for (size_t i = 0; i < 8 && t->fields[i].name; i++) {
                        const struct format_field *ff = f->enc_fields[i];
                        if (!ff)
                                continue;
                        switch (t->fields[i].kind) {
                        case K_STR:
                                format_read_str(ff, rec, len, str, sizeof(str));
                                pbw_string(&body, t->fields[i].number, str);
                                break;
                        case K_U64S:
                                put_u64s(&body, t->fields[i].number, ff, rec, len);
                                break;
                        case K_ADDR:
                                pbw_varint(&body, t->fields[i].number, addr_value(ff, rec, len, kt));
                                break;
                        default:
                                pbw_varint(&body, t->fields[i].number, (uint64_t) format_read_int(ff, rec, len));
                        }
                }
                pbw_message(&ev, t->oneof, &body);
        } else if (strncmp(f->group, "traced_kp_", 10) == 0) {
                /* A probe of ours (see kprobes.c): KprobeEvent { name, type }
                 * where the event name ends in _entry or _return. */
                size_t n = strlen(f->name);
                bool ret = n > 7 && strcmp(f->name + n - 7, "_return") == 0;
                bool entry = n > 6 && strcmp(f->name + n - 6, "_entry") == 0;
                char name[64];
                snprintf(name, sizeof(name), "%.*s", (int) (n - (ret ? 7 : entry ? 6 : 0)), f->name);
                pbw_string(&body, 1, name);
                pbw_varint(&body, 2, ret ? 2 : entry ? 1 : 3); /* BEGIN, END, INSTANT */
                pbw_message(&ev, FTRACE_EVENT_KPROBE, &body);
        } else {
                char name[160];
                snprintf(name, sizeof(name), "%s", f->name);
                pbw_string(&body, 1, name);
                for (size_t i = 0; i < f->n_fields; i++) {
                        const struct format_field *ff = &f->fields[i];
                        struct pbw field = {};
                        pbw_string(&field, 1, ff->name);
                        if (ff->is_string || ff->is_data_loc) {
                                format_read_str(ff, rec, len, str, sizeof(str));
                                pbw_string(&field, 3, str);
                        } else if (ff->is_kaddr)
                                pbw_varint(&field, 5, addr_value(ff, rec, len, kt));
                        else if (ff->is_signed)
                                pbw_varint(&field, 4, (uint64_t) format_read_int(ff, rec, len));
                        else
                                pbw_varint(&field, 5, (uint64_t) format_read_int(ff, rec, len));
                        pbw_message(&body, 2, &field);
                        pbw_done(&field);
                }
                pbw_message(&ev, FTRACE_EVENT_GENERIC, &body);
        }
        pbw_message(w, 2, &ev); /* FtraceEventBundle.event */
        pbw_done(&body);
        pbw_done(&ev);
}
