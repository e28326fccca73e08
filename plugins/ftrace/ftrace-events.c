/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace's events: the ftrace_events of the config (one event, a
 * group or a name in every group), the system calls of syscall_events as
 * filtered raw_syscalls, kprobe_events as probes of the session's own, and
 * the kernel symbols for symbolize_ksyms. Each event's format is read as
 * it is enabled. */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "ftrace-session.h"
#include "kprobes.h"
#include "syscalls.h"
#include "tracefs.h"

static int add_event(struct ftrace_session *s, const char *group, const char *name) {
        char rel[256], text[8192];
        if (s->n_formats >= MAX_EVENTS)
                return -ENOSPC;
        for (size_t i = 0; i < s->n_formats; i++)
                if (strcmp(s->formats[i].group, group) == 0 && strcmp(s->formats[i].name, name) == 0)
                        return 0;
        snprintf(rel, sizeof(rel), "events/%s/%s/format", group, name);
        if (tracefs_read(s->pl->tracefs, rel, text, sizeof(text)) < 0)
                return -ENOENT;
        struct event_format *f = &s->formats[s->n_formats];
        if (format_parse(text, group, f) < 0)
                return -EINVAL;
        snprintf(rel, sizeof(rel), "events/%s/%s/enable", group, name);
        int r = ftrace_session_write(s, rel, "1");
        /* ftrace's own records (print, bprint) have no switch: they are
         * always recorded. */
        if (r == -ENOENT && strcmp(group, "ftrace") == 0)
                r = 0;
        if (r < 0)
                return r;
        s->n_formats++;
        return 0;
}

/* "group/name", "group/ *" (every event of a group) or a bare "name"
 * (searched in every group). */
int ftrace_add_event_spec(struct ftrace_session *s, const char *spec) {
        char group[128] = "", name[128];
        const char *slash = strchr(spec, '/');
        if (slash) {
                snprintf(group, sizeof(group), "%.*s", (int) (slash - spec), spec);
                snprintf(name, sizeof(name), "%s", slash + 1);
        } else
                snprintf(name, sizeof(name), "%s", spec);

        char dir[512];
        int added = 0;
        if (group[0] && strcmp(name, "*") != 0)
                return add_event(s, group, name);
        snprintf(dir, sizeof(dir), "%s/events", s->pl->tracefs);
        DIR *d = opendir(dir);
        if (!d)
                return negative_errno();
        struct dirent *g;
        while ((g = readdir(d))) {
                if (g->d_name[0] == '.' || (group[0] && strcmp(g->d_name, group) != 0))
                        continue;
                if (strcmp(name, "*") != 0) {
                        if (add_event(s, g->d_name, name) == 0)
                                added++;
                        continue;
                }
                char sub[768];
                snprintf(sub, sizeof(sub), "%s/%s", dir, g->d_name);
                DIR *e = opendir(sub);
                if (!e)
                        continue;
                struct dirent *ev;
                while ((ev = readdir(e)))
                        if (ev->d_name[0] != '.' && ev->d_type == DT_DIR && add_event(s, g->d_name, ev->d_name) == 0)
                                added++;
                closedir(e);
        }
        closedir(d);
        return added > 0 ? 0 : -ENOENT;
}

#define MAX_SYSCALL_NAMES 512

/* FtraceConfig.syscall_events: raw_syscalls sys_enter/sys_exit, filtered
 * in our instance to the named calls. A name this architecture does not
 * have is reported and skipped. */
int ftrace_add_syscalls(struct ftrace_session *s, const struct pbr_field *fc) {
        const char *names[MAX_SYSCALL_NAMES];
        char store[MAX_SYSCALL_NAMES][64];
        size_t n = 0, pos = 0, unknown = 0;
        struct pbr_field f;
        bool unfiltered = false;

        while (pbr_next(fc->data, fc->len, &pos, &f) > 0) {
                if (f.number == 1 && f.wire_type == 2 && f.len >= 12 && memcmp(f.data, "raw_syscalls", 12) == 0)
                        unfiltered = true; /* asked for all of them as plain events */
                if (f.number != 18 || f.wire_type != 2 || f.len == 0 || f.len >= 64 || n == MAX_SYSCALL_NAMES)
                        continue;
                snprintf(store[n], sizeof(store[n]), "%.*s", (int) f.len, (const char *) f.data);
                names[n] = store[n];
                n++;
        }
        if (n == 0)
                return 0;
        char filter[8192], first[64] = "";
        int used = syscall_filter(names, n, filter, sizeof(filter), &unknown, first, sizeof(first));
        if (used < 0) {
                plugin_log(s->pl, TRACED_LOG_ERR, "syscall_events: too many system calls for one filter");
                return used;
        }
        if (unknown)
                plugin_log(s->pl, TRACED_LOG_WARNING,
                           "syscall_events: %zu name(s) unknown on this architecture, skipped (first: \"%s\")", unknown,
                           first);
        if (used == 0)
                return 0;
        static const char *const events[] = {"sys_enter", "sys_exit"};
        for (size_t i = 0; i < 2; i++) {
                int r = add_event(s, "raw_syscalls", events[i]);
                if (r < 0) {
                        plugin_log(s->pl, TRACED_LOG_ERR, "syscall_events: raw_syscalls/%s unavailable: %s", events[i],
                                   strerror(-r));
                        return r;
                }
                if (unfiltered)
                        continue;
                char rel[128];
                snprintf(rel, sizeof(rel), "events/raw_syscalls/%s/filter", events[i]);
                r = ftrace_session_write(s, rel, filter);
                if (r < 0) {
                        plugin_log(s->pl, TRACED_LOG_ERR, "syscall_events: cannot set the filter \"%s\": %s", filter,
                                   strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* FtraceConfig.kprobe_events: { probe: "function" type: KPROBE | KRETPROBE
 * | BOTH }. A probe the kernel refuses (no such function) is reported and
 * skipped. */
int ftrace_add_kprobes(struct ftrace_session *s, const struct pbr_field *fc) {
        size_t pos = 0;
        struct pbr_field f;

        while (pbr_next(fc->data, fc->len, &pos, &f) > 0) {
                if (f.number != 30 || f.wire_type != 2)
                        continue;
                struct pbr_field probe, type;
                if (!pbr_get(f.data, f.len, 1, false, &probe) || probe.wire_type != 2 || probe.len == 0 ||
                    probe.len >= 100) {
                        plugin_log(s->pl, TRACED_LOG_WARNING, "kprobe_events: an entry without a probe, skipped");
                        continue;
                }
                char func[100];
                snprintf(func, sizeof(func), "%.*s", (int) probe.len, (const char *) probe.data);
                enum kprobe_kind kind = KPROBE_ENTRY;
                if (pbr_get(f.data, f.len, 2, false, &type) && type.varint >= 1 && type.varint <= 3)
                        kind = (enum kprobe_kind) type.varint;
                if (!s->kprobe_group[0])
                        snprintf(s->kprobe_group, sizeof(s->kprobe_group), KPROBE_GROUP_PREFIX "%d_%llu",
                                 (int) getpid(), (unsigned long long) s->inst.id);
                char names[2][256];
                int n = kprobe_add(s->pl->tracefs, s->kprobe_group, func, kind, names);
                char field[160];
                snprintf(field, sizeof(field), "kprobe_events \"%s\"", func);
                /* To the consumer, as a missing event is: the trace would
                 * otherwise just lack it. */
                if (n < 0) {
                        plugin_report(s->pl, "linux.ftrace", s->inst.id, field, "cannot be probed: %s%s",
                                      strerror(-n),
                                      n == -ENOENT   ? " (no kprobe_events in tracefs: a kernel without CONFIG_KPROBES?)"
                                      : n == -EINVAL ? " (not a function the kernel can probe?)"
                                                     : "");
                        continue;
                }
                for (int i = 0; i < n; i++) {
                        char *slash = strchr(names[i], '/');
                        *slash = '\0';
                        int r = add_event(s, names[i], slash + 1);
                        if (r < 0)
                                plugin_report(s->pl, "linux.ftrace", s->inst.id, field, "%s/%s cannot be enabled: %s",
                                              names[i], slash + 1, strerror(-r));
                }
        }
        return 0;
}

/* symbolize_ksyms: without the symbols (kernel pointers hidden from us),
 * the session goes on with the addresses as they are. */
void ftrace_load_ksyms(struct ftrace_session *s) {
        FILE *f = fopen("/proc/kallsyms", "re");
        int r = f ? ksyms_load(f, &s->ksyms) : negative_errno();
        if (f)
                fclose(f);
        if (r >= 0) {
                s->kt = malloc(sizeof(*s->kt));
                if (!s->kt)
                        r = -ENOMEM;
                else
                        kaddr_reset(s->kt);
        }
        if (r < 0)
                plugin_log(s->pl, TRACED_LOG_WARNING,
                           "symbolize_ksyms: kernel symbols unavailable (%s%s); addresses left as they are",
                           strerror(-r), r == -EPERM ? ": kptr_restrict or no CAP_SYSLOG" : "");
        else
                plugin_log(s->pl, TRACED_LOG_INFO, "symbolize_ksyms: %zu kernel text symbols", ksyms_count(s->ksyms));
}
