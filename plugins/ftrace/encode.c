/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Kernel records to FtraceEvent messages: typed messages (Perfetto field
 * numbers) for the hot events, GenericFtraceEvent for any other. */

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "basic/pbw.h"
#include "format.h"
#include "encode.h"

struct typed_field {
        const char *name;
        uint32_t number;
        bool is_string;
};

struct typed_event {
        const char *group, *name;
        uint32_t oneof; /* FtraceEvent field number */
        struct typed_field fields[8];
};

static const struct typed_event typed[] = {
        { "ftrace", "print", 3, { { "ip", 1, false }, { "buf", 2, true } } },
        { "sched", "sched_switch", 4,
          { { "prev_comm", 1, true }, { "prev_pid", 2, false }, { "prev_prio", 3, false }, { "prev_state", 4, false },
            { "next_comm", 5, true }, { "next_pid", 6, false }, { "next_prio", 7, false } } },
        { "sched", "sched_wakeup", 17,
          { { "comm", 1, true }, { "pid", 2, false }, { "prio", 3, false }, { "success", 4, false }, { "target_cpu", 5, false } } },
        { "sched", "sched_waking", 20,
          { { "comm", 1, true }, { "pid", 2, false }, { "prio", 3, false }, { "success", 4, false }, { "target_cpu", 5, false } } },
        { "sched", "sched_wakeup_new", 114,
          { { "comm", 1, true }, { "pid", 2, false }, { "prio", 3, false }, { "success", 4, false }, { "target_cpu", 5, false } } },
        { "task", "task_newtask", 235,
          { { "pid", 1, false }, { "comm", 2, true }, { "clone_flags", 3, false }, { "oom_score_adj", 4, false } } },
        { "task", "task_rename", 236,
          { { "pid", 1, false }, { "oldcomm", 2, true }, { "newcomm", 3, true }, { "oom_score_adj", 4, false } } },
        { "sched", "sched_process_exit", 238,
          { { "comm", 1, true }, { "pid", 2, false }, { "tgid", 3, false }, { "prio", 4, false } } },
        { "sched", "sched_process_fork", 239,
          { { "parent_comm", 1, true }, { "parent_pid", 2, false }, { "child_comm", 3, true }, { "child_pid", 4, false } } },
        { "sched", "sched_process_free", 240, { { "comm", 1, true }, { "pid", 2, false }, { "prio", 3, false } } },
};

#define FTRACE_EVENT_GENERIC 327

static const struct typed_event *find_typed(const struct event_format *f) {
        for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); i++)
                if (strcmp(typed[i].name, f->name) == 0 && strcmp(typed[i].group, f->group) == 0)
                        return &typed[i];
        return NULL;
}

void ftrace_encode_event(struct pbw *w, const struct event_format *f, uint64_t ts, const uint8_t *rec, size_t len) {
        struct pbw ev = {}, body = {};
        char str[4096];

        pbw_varint(&ev, 1, ts);
        if (f->common_pid_offset >= 0 && (size_t) f->common_pid_offset + 4 <= len) {
                int32_t pid;
                memcpy(&pid, rec + f->common_pid_offset, 4);
                pbw_varint(&ev, 2, (uint32_t) pid);
        }
        if (f->common_flags_offset >= 0 && (size_t) f->common_flags_offset < len)
                pbw_varint(&ev, 5, rec[f->common_flags_offset]);

        const struct typed_event *t = find_typed(f);
        if (t) {
                for (size_t i = 0; i < 8 && t->fields[i].name; i++) {
                        const struct format_field *ff = format_field(f, t->fields[i].name);
                        if (!ff)
                                continue;
                        if (t->fields[i].is_string) {
                                format_read_str(ff, rec, len, str, sizeof(str));
                                pbw_string(&body, t->fields[i].number, str);
                        } else
                                pbw_varint(&body, t->fields[i].number, (uint64_t) format_read_int(ff, rec, len));
                }
                pbw_message(&ev, t->oneof, &body);
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
                        } else if (ff->is_signed)
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
