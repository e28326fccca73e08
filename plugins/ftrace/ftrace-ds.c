/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.ftrace: per-CPU raw pages of a tracefs instance drained
 * periodically into FtraceEventBundle packets. Like upstream's
 * traced_probes, a config without instance_name records in the top-level
 * (root) instance, one with instance_name in instances/<name>; what the
 * session changed there is put back when it ends. When the root is already
 * taken (by another session of ours, in this or another traced), the
 * session records in a private instance of its own instead. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "ftrace-session.h"
#include "kprobes.h"
#include "root-journal.h"
#include "subbuf.h"
#include "tracefs.h"
#include "ftrace-wake.h"

#define MAX_CPUS 1024
#define DEFAULT_BUFFER_KB 2048u
/* Without drain_period_ms: drained when a CPU's buffer is half full
 * (ftrace-wake.h) and at least this often; where the kernel cannot wake a
 * reader at a fill level, every DEFAULT_DRAIN_MS. */
#define WAKE_DRAIN_MS 1000u
#define DEFAULT_DRAIN_MS 100u
_Static_assert(FTRACE_WAKE_PERCENT == 50, "the start's log line says half full");
/* "mmap": map each CPU's buffer where the kernel offers it (Linux 6.10
 * and later) instead of read(): no copy, but on the kernels measured so far
 * (6.18) each sub-buffer the reader is handed costs the kernel a walk over
 * its events with the reader lock held, more than the copy read() makes
 * (bench/sched-recording.sh --readers), so read() is the default. */
#define READ_MODE_ENV "TRACED_FTRACE_READ"

/* The list holds struct plugin_instance, each the first member of a session. */
static struct ftrace_session *session_of(struct plugin_instance *i) {
        return (struct ftrace_session *) i;
}

/* The value to write back for a tracefs file read as text: the selected
 * clock of trace_clock, the size of buffer_size_kb, "0" for an event
 * filter that was "none". */
static char *restore_value(const char *rel, char *text) {
        text[strcspn(text, "\n")] = '\0';
        const char *base = strrchr(rel, '/');
        base = base ? base + 1 : rel;
        if (strcmp(base, "trace_clock") == 0) {
                char *a = strchr(text, '['), *b = a ? strchr(a, ']') : NULL;
                if (!a || !b)
                        return NULL;
                *b = '\0';
                return strdup(a + 1);
        }
        if (strcmp(base, "buffer_size_kb") == 0) {
                /* "7 (expanded: 1408)": not allocated yet; the size it
                 * would have grown to is the one to give back. */
                char *exp = strstr(text, "expanded: ");
                if (exp)
                        text = exp + strlen("expanded: ");
                text[strspn(text, "0123456789")] = '\0';
                return text[0] ? strdup(text) : NULL;
        }
        if (strcmp(base, "filter") == 0 && strcmp(text, "none") == 0)
                return strdup("0");
        return strdup(text);
}

/* Writes a file of the session's instance. In an instance that is not ours
 * alone (the root, or a named one that existed), the file's value before
 * the first write is kept, to be put back when the session ends. */
int ftrace_session_write(struct ftrace_session *s, const char *rel, const char *value) {
        if (s->in_root || s->keep_instance) {
                bool seen = false;
                for (size_t i = 0; i < s->n_saved && !seen; i++)
                        seen = strcmp(s->saved[i].rel, rel) == 0;
                char text[4096];
                if (!seen && tracefs_read(s->root, rel, text, sizeof(text)) >= 0) {
                        char *v = restore_value(rel, text);
                        struct saved_file *a = v ? realloc(s->saved, (s->n_saved + 1) * sizeof(*a)) : NULL;
                        char *r = a ? strdup(rel) : NULL;
                        if (a)
                                s->saved = a;
                        if (!r) {
                                free(v);
                                return -ENOMEM;
                        }
                        s->saved[s->n_saved++] = (struct saved_file) { .rel = r, .value = v };
                        /* On disk before the change, so that a successor
                         * can undo it if this process dies. */
                        int j = s->in_root ? root_journal_save(ROOT_JOURNAL_PATH, s->saved, s->n_saved) : 0;
                        if (j < 0 && !s->journal_failed) {
                                s->journal_failed = true;
                                plugin_log(s->pl, TRACED_LOG_WARNING,
                                           "cannot write %s (%s): the root ftrace instance's state is not put back "
                                           "if this process dies",
                                           ROOT_JOURNAL_PATH, strerror(-j));
                        }
                }
        }
        return tracefs_write(s->root, rel, value);
}

/* Puts back what session_write changed, newest first (so tracing_on,
 * changed first, is restored last). */
static void session_restore(struct ftrace_session *s) {
        while (s->n_saved > 0) {
                struct saved_file *f = &s->saved[--s->n_saved];
                (void) tracefs_write(s->root, f->rel, f->value);
                free(f->rel);
                free(f->value);
        }
        free(s->saved);
        s->saved = NULL;
        if (s->in_root)
                (void) unlink(ROOT_JOURNAL_PATH);
}

void ftrace_session_free(struct ftrace_session *s) {
        struct plugin *pl = s->pl;
        if (s->timer)
                pl->api->remove_source(pl->host, s->timer);
        ftrace_wake_stop(s);
        /* Unmapped first: the kernel refuses to size a mapped buffer back. */
        ftrace_drain_unmap(s);
        for (int i = 0; s->cpu_fds && i < s->n_cpus; i++)
                safe_close(s->cpu_fds[i]);
        if (s->in_root || s->keep_instance)
                session_restore(s);
        else if (s->name[0])
                (void) tracefs_instance_remove(pl->tracefs, s->name);
        safe_close(s->root_lock_fd);
        ftrace_stats_free(s);
        /* Only once no instance records them may the probes go. */
        if (s->kprobe_group[0])
                (void) kprobe_remove_group(pl->tracefs, s->kprobe_group);
        if (s->writer) {
                (void) pl->api->flush_writer(s->writer);
                pl->api->free_writer(s->writer);
        }
        ftrace_drain_free(s);
        free(s->pid_field);
        free(s->redescribe);
        ksyms_free(s->ksyms);
        free(s->cpu_fds);
        free(s->formats);
        free(s->page);
        free(s);
}

/* The CPUs read one way, as ranges: "0-3,6"; "none". */
static void cpu_list(const struct ftrace_session *s, enum ftrace_reader how, char *buf, size_t size) {
        size_t n = 0;
        buf[0] = '\0';
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                if (s->cpu_fds[cpu] < 0 || ftrace_drain_reader(s, cpu) != how)
                        continue;
                int last = cpu;
                while (last + 1 < s->n_cpus && s->cpu_fds[last + 1] >= 0 && ftrace_drain_reader(s, last + 1) == how)
                        last++;
                int w = last > cpu ? snprintf(buf + n, size - n, "%s%d-%d", n ? "," : "", cpu, last)
                                   : snprintf(buf + n, size - n, "%s%d", n ? "," : "", cpu);
                if (w < 0 || (size_t) w >= size - n)
                        break; /* cut short */
                n += (size_t) w;
                cpu = last;
        }
        if (n == 0)
                snprintf(buf, size, "none");
}

/* Sub-buffers larger than a page (buffer_subbuf_size_kb, Linux 6.8 and
 * later) are read whole, one read each: a read of a page gets what fits
 * (with a header of its own) and leaves the rest to the next ones. */
int ftrace_session_use_subbuf_size(struct ftrace_session *s) {
        char text[32];
        if (tracefs_read(s->root, "buffer_subbuf_size_kb", text, sizeof(text)) < 0)
                return 0; /* an older kernel: pages */
        unsigned long kb = strtoul(text, NULL, 10);
        if (kb * 1024 <= s->page_size || kb > 1024)
                return 0;
        uint8_t *p = realloc(s->page, kb * 1024);
        if (!p)
                return -ENOMEM;
        s->page = p;
        s->page_size = kb * 1024;
        return 0;
}

/* Sub-buffers of SUBBUF_DEFAULT_KB (or TRACED_FTRACE_SUBBUF_KB) where the
 * kernel lets them be sized, as a file of the instance (put back like the
 * others; the change drops what the buffer held, so not with
 * preserve_ftrace_buffer); then read whole, whoever chose their size. */
static int subbuf_setup(struct ftrace_session *s, uint32_t buffer_kb) {
        char text[32];
        if (tracefs_read(s->root, "buffer_subbuf_size_kb", text, sizeof(text)) < 0)
                return 0; /* before Linux 6.8: a sub-buffer is a page */
        const char *want = getenv(SUBBUF_ENV);
        int kb = subbuf_choose_kb(want, buffer_kb, (uint32_t) (s->page_size / 1024));
        if (kb < 0) {
                plugin_log(s->pl, TRACED_LOG_WARNING, "%s=%s is not a size in KiB; the kernel's sub-buffers are kept",
                           SUBBUF_ENV, want);
                kb = 0;
        }
        if (kb > 0 && atoi(text) != kb && !s->preserve_buffer) {
                char val[16];
                snprintf(val, sizeof(val), "%d", kb);
                int r = ftrace_session_write(s, "buffer_subbuf_size_kb", val);
                if (r < 0)
                        plugin_log(s->pl, TRACED_LOG_INFO, "cannot make the sub-buffers %d KiB: %s; keeping %s KiB",
                                   kb, strerror(-r), text);
        }
        return ftrace_session_use_subbuf_size(s);
}

/* With the root's flock held: puts back what a session whose process died
 * left changed in the root instance. */
static void root_recover_locked(struct plugin *pl) {
        int r = root_journal_replay(ROOT_JOURNAL_PATH, pl->tracefs);
        if (r > 0)
                plugin_log(pl, TRACED_LOG_INFO,
                           "put back %d root ftrace settings a session that ended abnormally had changed", r);
        else if (r < 0)
                plugin_log(pl, TRACED_LOG_WARNING, "cannot put back the root ftrace settings from %s: %s",
                           ROOT_JOURNAL_PATH, strerror(-r));
}

void ftrace_root_recover(struct plugin *pl) {
        if (!pl->tracefs[0])
                return;
        int fd = open(pl->tracefs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                root_recover_locked(pl); /* else a live session holds it and keeps the journal */
        safe_close(fd);
}

/* FtraceConfig.instance_name (25): that instance, created if missing. No
 * name: the root instance, if no other session of ours holds it (an
 * exclusive flock on the tracefs directory, shared by every traced on the
 * machine); else a private instance. */
static int choose_instance(struct ftrace_session *s, const struct pbr_field *fc) {
        struct plugin *pl = s->pl;
        struct pbr_field f;
        int r;

        if (fc && pbr_get(fc->data, fc->len, 25, false, &f) && f.wire_type == 2 && f.len > 0) {
                char name[64];
                if (f.len >= sizeof(name)) {
                        plugin_log(pl, TRACED_LOG_ERR, "instance_name is longer than %zu bytes", sizeof(name) - 1);
                        return -EINVAL;
                }
                snprintf(name, sizeof(name), "%.*s", (int) f.len, (const char *) f.data);
                if (!tracefs_instance_name_valid(name)) {
                        plugin_log(pl, TRACED_LOG_ERR, "instance_name \"%s\" is not a tracefs instance name", name);
                        return -EINVAL;
                }
                snprintf(s->root, sizeof(s->root), "%s/instances/%s", pl->tracefs, name);
                s->named = true;
                if (mkdir(s->root, 0700) < 0) {
                        if (errno != EEXIST) {
                                r = negative_errno();
                                plugin_log(pl, TRACED_LOG_ERR, "cannot create ftrace instance %s: %s", name,
                                           strerror(-r));
                                return r;
                        }
                        s->keep_instance = true; /* someone else's: restored, not removed */
                } else
                        snprintf(s->name, sizeof(s->name), "%s", name);
                return 0;
        }

        s->root_lock_fd = open(pl->tracefs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->root_lock_fd >= 0 && flock(s->root_lock_fd, LOCK_EX | LOCK_NB) == 0) {
                root_recover_locked(pl);
                s->in_root = true;
                snprintf(s->root, sizeof(s->root), "%s", pl->tracefs);
                return 0;
        }
        s->root_lock_fd = safe_close(s->root_lock_fd);
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.ftrace instance %llu: the root ftrace instance is in use by another session; "
                   "recording in a private instance",
                   (unsigned long long) s->inst.id);
        snprintf(s->name, sizeof(s->name), TRACEFS_INSTANCE_PREFIX "%d_%llu", (int) getpid(),
                 (unsigned long long) s->inst.id);
        r = tracefs_instance_create(pl->tracefs, s->name, s->root, sizeof(s->root));
        if (r < 0) {
                plugin_log(pl, TRACED_LOG_ERR, "cannot create ftrace instance %s: %s", s->name, strerror(-r));
                s->name[0] = '\0';
        }
        return r;
}

struct ftrace_session *ftrace_session_new(struct plugin *pl, uint64_t instance_id) {
        struct ftrace_session *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->pl = pl;
        s->inst.id = instance_id;
        s->root_lock_fd = -EBADF;
        s->formats = calloc(MAX_EVENTS, sizeof(*s->formats));
        s->splice_pipe[0] = s->splice_pipe[1] = -EBADF;
        s->page_size = (size_t) sysconf(_SC_PAGESIZE);
        s->page = malloc(s->page_size);
        if (!s->formats || !s->page) {
                ftrace_session_free(s);
                return NULL;
        }
        return s;
}

int ftrace_session_open_cpus(struct ftrace_session *s) {
        long ncpus = sysconf(_SC_NPROCESSORS_CONF);
        s->n_cpus = (int) MIN(MAX(ncpus, 1), MAX_CPUS);
        s->cpu_fds = calloc((size_t) s->n_cpus, sizeof(int));
        if (!s->cpu_fds)
                return -ENOMEM;
        int opened = 0;
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                char rel[640];
                snprintf(rel, sizeof(rel), "%s/per_cpu/cpu%d/trace_pipe_raw", s->root, cpu);
                s->cpu_fds[cpu] = open(rel, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                opened += s->cpu_fds[cpu] >= 0;
        }
        return opened;
}

int ftrace_session_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        struct pbr_field fc, f;
        uint32_t buffer_kb = DEFAULT_BUFFER_KB, drain_ms = 0;
        char val[64];
        int r;

        if (!pl->tracefs[0]) {
                plugin_log(pl, TRACED_LOG_ERR, "tracefs is not available; linux.ftrace cannot start");
                return -ENOENT;
        }
        struct ftrace_session *s = ftrace_session_new(pl, instance_id);
        if (!s)
                return -ENOMEM;
        if (pbr_get(config, size, 4, false, &f) && f.wire_type == 0)
                s->tracing_session_id = f.varint;
        bool have_cfg = pbr_get(config, size, 100, false, &fc) && fc.wire_type == 2;
        if (have_cfg) {
                if (pbr_get(fc.data, fc.len, 10, false, &f) && f.varint > 0 && f.varint < 1024 * 1024)
                        buffer_kb = (uint32_t) f.varint;
                if (pbr_get(fc.data, fc.len, 11, false, &f) && f.varint >= 1 && f.varint <= 60000)
                        drain_ms = (uint32_t) f.varint;
        }

        r = choose_instance(s, have_cfg ? &fc : NULL);
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        if (have_cfg && pbr_get(fc.data, fc.len, 23, false, &f) && f.wire_type == 0 && f.varint)
                s->preserve_buffer = true;
        /* A private instance stays off while it is set up. The root is
         * shared: when it already records, others' trace_marker writes would
         * fail with EBADF while it is off, and nothing below needs it off
         * (the kernel resizes and clears a running buffer), so it is left on. */
        if (!s->in_root)
                (void) ftrace_session_write(s, "tracing_on", "0");
        if (ftrace_session_write(s, "trace_clock", "boot") < 0)
                plugin_log(pl, TRACED_LOG_WARNING, "trace_clock boot unavailable; timestamps may not line up");
        snprintf(val, sizeof(val), "%u", buffer_kb);
        (void) ftrace_session_write(s, "buffer_size_kb", val);
        r = subbuf_setup(s, buffer_kb);
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        s->max_pages_per_drain = (size_t) buffer_kb * 1024u / s->page_size + 16;
        if (have_cfg && (pbr_count(fc.data, fc.len, 2) > 0 || pbr_count(fc.data, fc.len, 3) > 0))
                s->atrace_error = "atrace_categories/atrace_apps: atrace is Android's; traced records ftrace events only";

        bool want_print = false;
        size_t pos = 0;
        while (have_cfg && pbr_next(fc.data, fc.len, &pos, &f) > 0) {
                if (f.number != 1 || f.wire_type != 2 || f.len == 0 || f.len >= 128)
                        continue;
                char spec[128];
                snprintf(spec, sizeof(spec), "%.*s", (int) f.len, (const char *) f.data);
                if (strcmp(spec, "ftrace/print") == 0 || strcmp(spec, "print") == 0)
                        want_print = true;
                r = ftrace_add_event_spec(s, spec);
                if (r < 0) {
                        char field[160];
                        snprintf(field, sizeof(field), "ftrace_events \"%s\"", spec);
                        if (r == -ENOENT)
                                plugin_report(pl, "linux.ftrace", instance_id, field,
                                              "no such event (see %s/available_events)", pl->tracefs);
                        else
                                plugin_report(pl, "linux.ftrace", instance_id, field, "cannot be enabled: %s",
                                              strerror(-r));
                        ftrace_stats_note_event(s, spec, r);
                }
        }
        if (have_cfg) {
                r = ftrace_add_syscalls(s, &fc);
                if (r >= 0)
                        r = ftrace_add_kprobes(s, &fc);
                if (r < 0) {
                        ftrace_session_free(s);
                        return r;
                }
        }
        if (have_cfg && pbr_get(fc.data, fc.len, 13, false, &f) && f.wire_type == 0 && f.varint)
                ftrace_load_ksyms(s);
        /* compact_sched: on whenever sched_switch is recorded unless the
         * config sets enabled: false, as upstream since v42 (sched_waking
         * alone stays one event each: its compact form takes the waker
         * from the switches). */
        bool compact = true;
        if (have_cfg && pbr_get(fc.data, fc.len, 12, false, &f) && f.wire_type == 2) {
                struct pbr_field en;
                if (pbr_get(f.data, f.len, 1, false, &en))
                        compact = en.varint != 0;
        }
        ftrace_drain_init(s);
        s->compact = compact && s->switch_fmt;
        s->pid_field = calloc(MAX_EVENTS, sizeof(*s->pid_field));
        if (!s->pid_field) {
                ftrace_session_free(s);
                return -ENOMEM;
        }
        static const struct {
                const char *group, *name, *field;
        } pid_fields[] = {
                { "sched", "sched_switch", "next_pid" },        { "sched", "sched_waking", "pid" },
                { "sched", "sched_wakeup", "pid" },             { "sched", "sched_wakeup_new", "pid" },
                { "sched", "sched_process_fork", "child_pid" }, { "task", "task_newtask", "pid" },
                { "task", "task_rename", "pid" },               { "sched", "sched_process_exec", "pid" },
        };
        s->redescribe = calloc(MAX_EVENTS, sizeof(*s->redescribe));
        if (!s->redescribe) {
                ftrace_session_free(s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s->n_formats; i++)
                for (size_t k = 0; k < ELEMENTSOF(pid_fields); k++)
                        if (strcmp(s->formats[i].group, pid_fields[k].group) == 0 &&
                            strcmp(s->formats[i].name, pid_fields[k].name) == 0) {
                                s->pid_field[i] = format_field(&s->formats[i], pid_fields[k].field);
                                s->redescribe[i] = strcmp(pid_fields[k].name, "task_rename") == 0 ||
                                                   strcmp(pid_fields[k].name, "sched_process_exec") == 0;
                        }
        if (s->compact && !(s->intern = calloc(MAX_INTERN, sizeof(*s->intern)))) {
                ftrace_session_free(s);
                return -ENOMEM;
        }
        /* A private instance gets the top-level trace_marker's writes
         * copied; the root has them, a named instance has its own. */
        if (want_print && !s->in_root && !s->keep_instance && !s->named &&
            tracefs_write(s->root, "options/copy_trace_marker", "1") < 0)
                plugin_log(pl, TRACED_LOG_WARNING,
                           "this kernel cannot copy trace_marker writes into instances; print events come only "
                           "from this instance's own trace_marker");

        r = ftrace_session_open_cpus(s);
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        r = pl->api->new_writer(pl->host, instance_id, &s->writer);
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        /* What others left in a shared buffer is not this trace's, unless
         * asked to keep it (preserve_ftrace_buffer); cleared once every
         * event and filter is set, since a root left on records meanwhile
         * (an event enabled before its filter). */
        if ((s->in_root || s->keep_instance) && !s->preserve_buffer)
                (void) tracefs_write(s->root, "trace", "");
        const char *how = getenv(READ_MODE_ENV);
        enum ftrace_reader want = !how || !*how || strcmp(how, "splice") == 0 ? FTRACE_READER_SPLICE
                                  : strcmp(how, "mmap") == 0                   ? FTRACE_READER_MMAP
                                  : strcmp(how, "read") == 0                   ? FTRACE_READER_READ
                                                                               : 0;
        if (want == 0) {
                plugin_log(pl, TRACED_LOG_WARNING, "%s=%s: not splice, read or mmap; splice is used", READ_MODE_ENV, how);
                want = FTRACE_READER_SPLICE;
        }
        r = ftrace_drain_choose(s, want);
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        ftrace_stats_emit(s, FtraceStats_START_OF_TRACE);
        r = ftrace_session_write(s, "tracing_on", "1");
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        r = ftrace_wake_start(s);
        if (r == -ENOMEM) {
                ftrace_session_free(s);
                return r;
        }
        if (r < 0)
                plugin_log(pl, TRACED_LOG_INFO,
                           "linux.ftrace instance %llu: the kernel cannot wake a reader at a fill level (%s/buffer_percent: "
                           "%s); the buffers are read on a timer only",
                           (unsigned long long) instance_id, s->root, strerror(-r));
        if (drain_ms == 0)
                drain_ms = s->cpu_wake ? WAKE_DRAIN_MS : DEFAULT_DRAIN_MS;
        r = pl->api->add_timer(pl->host, drain_ms, ftrace_on_timer, s, &s->timer);
        if (r < 0) {
                ftrace_session_free(s);
                return r;
        }
        plugin_instance_add(&pl->sessions, &s->inst);
        char spliced[128], mapped[128], read_cpus[128];
        cpu_list(s, FTRACE_READER_SPLICE, spliced, sizeof(spliced));
        cpu_list(s, FTRACE_READER_MMAP, mapped, sizeof(mapped));
        cpu_list(s, FTRACE_READER_READ, read_cpus, sizeof(read_cpus));
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.ftrace instance %llu: %zu events, %u KiB per CPU in %zu KiB sub-buffers, "
                   "drained %s%u ms%s, in %s; buffers spliced on CPUs %s, mapped on CPUs %s, read() on CPUs %s%s%s%s",
                   (unsigned long long) instance_id, s->n_formats, buffer_kb, s->page_size / 1024,
                   s->cpu_wake ? "when a CPU's buffer is half full and at least every " : "every ", drain_ms,
                   s->compact ? ", compact sched" : "", s->in_root ? "the root instance" : s->root, spliced, mapped,
                   read_cpus, how ? " (" READ_MODE_ENV "=" : "", how ? how : "", how ? ")" : "");
        return 0;
}

void ftrace_session_flush(struct plugin *pl, uint64_t instance_id) {
        struct ftrace_session *s = session_of(plugin_instance_find(pl->sessions, instance_id));
        if (!s)
                return;
        ftrace_drain(s, true);
        (void) pl->api->flush_writer(s->writer);
}

void ftrace_session_stop(struct plugin *pl, uint64_t instance_id) {
        struct ftrace_session *s = session_of(plugin_instance_take(&pl->sessions, instance_id));
        if (!s)
                return;
        (void) ftrace_session_write(s, "tracing_on", "0");
        ftrace_drain(s, true);
        ftrace_stats_emit(s, FtraceStats_END_OF_TRACE);
        plugin_log(pl, TRACED_LOG_INFO, "linux.ftrace instance %llu stopped: %llu events, %llu pages, %llu lost",
                   (unsigned long long) instance_id, (unsigned long long) s->events, (unsigned long long) s->pages,
                   (unsigned long long) s->lost);
        ftrace_session_free(s);
        /* Registered with will_notify_on_stop: the service waits for this,
         * so the last pages make it in. */
        (void) pl->api->notify_stopped(pl->host, instance_id);
}

void ftrace_sessions_free(struct plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->sessions)))
                ftrace_session_free(session_of(i));
}
