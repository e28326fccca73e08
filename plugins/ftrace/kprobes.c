/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kprobes.h"
#include "tracefs.h"

static bool valid_symbol(const char *s) {
        if (!s[0] || strlen(s) > 100)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                      *p == '.'))
                        return false;
        return true;
}

/* Event names may not contain dots (e.g. do_sys_open.isra.0). */
static void event_name(const char *func, const char *suffix, char *buf, size_t size) {
        snprintf(buf, size, "%s%s", func, suffix);
        for (char *p = buf; *p; p++)
                if (*p == '.')
                        *p = '_';
}

int kprobe_add(const char *tracefs, const char *group, const char *func, enum kprobe_kind kind,
               char names[2][256]) {
        char ev[128], line[384];
        int n = 0, r;

        if (!valid_symbol(func))
                return -EINVAL;
        if (kind == KPROBE_ENTRY || kind == KPROBE_BOTH) {
                event_name(func, "_entry", ev, sizeof(ev));
                snprintf(line, sizeof(line), "p:%s/%s %s\n", group, ev, func);
                r = tracefs_append(tracefs, "kprobe_events", line);
                if (r < 0)
                        return r;
                if (snprintf(names[n], 256, "%s/%s", group, ev) >= 256)
                        return -ENAMETOOLONG;
                n++;
        }
        if (kind == KPROBE_RETURN || kind == KPROBE_BOTH) {
                event_name(func, "_return", ev, sizeof(ev));
                snprintf(line, sizeof(line), "r:%s/%s %s\n", group, ev, func);
                r = tracefs_append(tracefs, "kprobe_events", line);
                if (r < 0)
                        return n > 0 ? n : r;
                if (snprintf(names[n], 256, "%s/%s", group, ev) >= 256)
                        return -ENAMETOOLONG;
                n++;
        }
        return n;
}

/* Calls fn for each "group/event" of kprobe_events whose group starts with
 * our prefix. */
static int for_each_ours(const char *tracefs, int (*fn)(const char *tracefs, const char *group, const char *event,
                                                          void *userdata),
                         void *userdata) {
        static char text[65536];
        int r = tracefs_read(tracefs, "kprobe_events", text, sizeof(text));
        if (r < 0)
                return r;
        int count = 0;
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                /* "p:group/event symbol" */
                char *colon = strchr(line, ':'), *slash, *space;
                if (!colon || !(slash = strchr(colon, '/')) || !(space = strchr(slash, ' ')))
                        continue;
                *slash = *space = '\0';
                const char *group = colon + 1, *event = slash + 1;
                if (strncmp(group, KPROBE_GROUP_PREFIX, strlen(KPROBE_GROUP_PREFIX)) != 0)
                        continue;
                if (fn(tracefs, group, event, userdata) > 0)
                        count++;
        }
        return count;
}

static int remove_if_group(const char *tracefs, const char *group, const char *event, void *userdata) {
        const char *want = userdata;
        if (want && strcmp(group, want) != 0)
                return 0;
        if (!want) {
                /* traced_kp_<pid>_<n>: stale when that process is gone. */
                long pid = strtol(group + strlen(KPROBE_GROUP_PREFIX), NULL, 10);
                if (pid > 0 && (kill((pid_t) pid, 0) == 0 || errno != ESRCH))
                        return 0;
        }
        char line[300];
        snprintf(line, sizeof(line), "-:%s/%s\n", group, event);
        return tracefs_append(tracefs, "kprobe_events", line) == 0 ? 1 : 0;
}

int kprobe_remove_group(const char *tracefs, const char *group) {
        return for_each_ours(tracefs, remove_if_group, (void *) group);
}

int kprobe_remove_stale(const char *tracefs) {
        return for_each_ours(tracefs, remove_if_group, NULL);
}
