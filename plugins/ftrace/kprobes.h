/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Kernel probes of one session: created in tracefs' (global) kprobe_events
 * under a group of our own, traced_kp_<pid>_<instance>, as <func>_entry
 * (kprobe) and <func>_return (kretprobe) events; removed when the session
 * ends, and those of processes that are gone are removed at start. */

#include <stddef.h>

#define KPROBE_GROUP_PREFIX "traced_kp_"

enum kprobe_kind {
        KPROBE_ENTRY = 1,  /* FtraceConfig.KprobeEvent.KPROBE_TYPE_KPROBE */
        KPROBE_RETURN = 2, /* KPROBE_TYPE_KRETPROBE */
        KPROBE_BOTH = 3,   /* KPROBE_TYPE_BOTH */
};

/* Adds probes on function func to group; writes the events' names
 * ("<group>/<func>_entry", ...) into names (up to 2). Returns how many. */
int kprobe_add(const char *tracefs, const char *group, const char *func, enum kprobe_kind kind,
               char names[2][256]);
/* Removes every probe of group. */
int kprobe_remove_group(const char *tracefs, const char *group);
/* Removes the probes of groups whose process is gone. */
int kprobe_remove_stale(const char *tracefs);
