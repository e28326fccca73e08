/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.frozen_ftrace: the events already in the ring buffer of an existing
 * tracefs instance (FrozenFtraceConfig.instance_name), typically the
 * persistent buffer the kernel kept from the previous boot, written as
 * FtraceEventBundle packets. Nothing of the instance is set: no event
 * enabled, no clock, no size, tracing left off. Its per-CPU buffers are
 * read through trace_pipe_raw, so what is read is consumed, as with
 * traced_probes; at most one buffer's worth per CPU. Every event id met
 * is looked up in the instance's own events/ and decoded with its format.
 * The reading runs in slices on the plugin's loop and completes at stop
 * at the latest. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "event-index.h"
#include "ftrace-session.h"
#include "page.h"
#include "tracefs.h"

#define DS_NAME "linux.frozen_ftrace"
#define CONFIG_FIELD "frozen_ftrace_config.instance_name"
#define DS_CONFIG_FROZEN 136 /* DataSourceConfig.frozen_ftrace_config */
#define PAGES_PER_SLICE 64   /* per CPU and timer tick: the loop gets control back */
#define SLICE_PERIOD_MS 1

struct frozen {
        struct plugin_instance inst; /* first: the plugin's list, by instance id */
        struct ftrace_session *s;
        char instance[64];
        size_t *quota; /* per CPU: pages still to read */
        bool done;
        bool indexed;
        struct event_index index;
        uint64_t unknown_ids[65536 / 64]; /* ids with no format in the instance */
        uint64_t unknown_records;
};

static struct frozen *frozen_of(struct plugin_instance *i) {
        return (struct frozen *) i;
}

static bool id_unknown(const struct frozen *fz, uint16_t id) {
        return fz->unknown_ids[id / 64] & (UINT64_C(1) << (id % 64));
}

/* The format of an event id met in the buffer, read from the instance's
 * own events/ the first time. */
static struct event_format *load_format(void *userdata, uint16_t id) {
        struct frozen *fz = userdata;
        struct ftrace_session *s = fz->s;
        if (id_unknown(fz, id)) {
                fz->unknown_records++;
                return NULL;
        }
        if (!fz->indexed) {
                fz->indexed = true;
                int r = event_index_build(s->root, &fz->index);
                if (r < 0)
                        plugin_log(s->pl, TRACED_LOG_WARNING, DS_NAME " instance %llu: cannot list %s/events: %s",
                                   (unsigned long long) s->inst.id, s->root, strerror(-r));
        }
        const struct event_index_entry *e = event_index_find(&fz->index, id);
        char rel[256], text[8192];
        struct event_format *f = s->n_formats < MAX_EVENTS ? &s->formats[s->n_formats] : NULL;
        if (e)
                snprintf(rel, sizeof(rel), "events/%s/%s/format", e->group, e->name);
        if (!e || !f || tracefs_read(s->root, rel, text, sizeof(text)) < 0 || format_parse(text, e->group, f) < 0 ||
            f->id != id) {
                fz->unknown_ids[id / 64] |= UINT64_C(1) << (id % 64);
                fz->unknown_records++;
                return NULL;
        }
        ftrace_drain_add_format(s, s->n_formats++);
        return f;
}

/* Reads up to max_pages of each CPU that has some left; whether any has
 * more. A CPU is done when its buffer is empty (EAGAIN, or a read of
 * nothing), fails, or has given a buffer's worth. */
static bool read_slice(struct frozen *fz, size_t max_pages) {
        struct ftrace_session *s = fz->s;
        bool more = false;
        for (int cpu = 0; cpu < s->n_cpus; cpu++) {
                if (s->cpu_fds[cpu] < 0 || fz->quota[cpu] == 0)
                        continue;
                s->bundle_cpu = cpu;
                for (size_t k = 0; k < max_pages && fz->quota[cpu] > 0; k++) {
                        ssize_t n = read(s->cpu_fds[cpu], s->page, s->page_size);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0) {
                                if (n < 0 && errno != EAGAIN)
                                        s->parse_errors |= 1u << PAGE_STATUS_UNEXPECTED_READ_ERROR;
                                fz->quota[cpu] = 0;
                                break;
                        }
                        (void) ftrace_drain_page(s, s->page, (size_t) n);
                        fz->quota[cpu]--;
                }
                ftrace_drain_emit(s);
                more = more || fz->quota[cpu] > 0;
        }
        return more;
}

static void finish(struct frozen *fz) {
        struct ftrace_session *s = fz->s;
        if (fz->done)
                return;
        fz->done = true;
        if (s->timer) {
                s->pl->api->remove_source(s->pl->host, s->timer);
                s->timer = NULL;
        }
        ftrace_stats_emit(s, FtraceStats_END_OF_TRACE);
        (void) s->pl->api->flush_writer(s->writer);
        plugin_log(s->pl, TRACED_LOG_INFO,
                   DS_NAME " instance %llu: read %llu events of %zu kinds from %llu pages of ftrace instance %s "
                           "(%llu lost, %llu records of events it has no format for)",
                   (unsigned long long) s->inst.id, (unsigned long long) s->events, s->n_formats,
                   (unsigned long long) s->pages, fz->instance, (unsigned long long) s->lost,
                   (unsigned long long) fz->unknown_records);
}

static void on_slice(void *userdata) {
        struct frozen *fz = userdata;
        if (!read_slice(fz, PAGES_PER_SLICE))
                finish(fz);
}

static void frozen_free(struct frozen *fz) {
        if (fz->s)
                ftrace_session_free(fz->s);
        event_index_done(&fz->index);
        free(fz->quota);
        free(fz);
}

/* The instance's buffer size in pages (sub-buffers) per CPU, the most a
 * reader takes from each CPU (what is written while it reads is not its
 * to take). */
static size_t buffer_pages(const struct ftrace_session *s) {
        char text[128];
        if (tracefs_read(s->root, "buffer_size_kb", text, sizeof(text)) < 0)
                return SIZE_MAX;
        const char *exp = strstr(text, "expanded: "); /* "7 (expanded: 1408)": not allocated */
        unsigned long long kb = strtoull(exp ? exp + strlen("expanded: ") : text, NULL, 10);
        return kb ? (size_t) (kb * 1024 / s->page_size) + 1 : SIZE_MAX;
}

/* FrozenFtraceConfig.instance_name, checked: 0, or -errno once reported. */
static int instance_path(struct plugin *pl, uint64_t id, const uint8_t *config, size_t size, char *name,
                         size_t name_size, char *root, size_t root_size) {
        struct pbr_field fc, f;
        if (!(pbr_get(config, size, DS_CONFIG_FROZEN, false, &fc) && fc.wire_type == 2 &&
              pbr_get(fc.data, fc.len, 1, false, &f) && f.wire_type == 2 && f.len > 0)) {
                plugin_report(pl, DS_NAME, id, CONFIG_FIELD,
                              "not set: name the tracefs instance to read (e.g. \"boot_mapped\")");
                return -EINVAL;
        }
        snprintf(name, name_size, "%.*s", (int) f.len, (const char *) f.data);
        if (f.len >= name_size || memchr(f.data, '\0', f.len) || !tracefs_instance_name_valid(name)) {
                plugin_report(pl, DS_NAME, id, CONFIG_FIELD, "\"%s\" is not a tracefs instance name", name);
                return -EINVAL;
        }
        snprintf(root, root_size, "%s/instances/%s", pl->tracefs, name);
        struct stat st;
        int r = stat(root, &st) < 0 ? negative_errno() : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        if (r < 0) {
                plugin_report(pl, DS_NAME, id, CONFIG_FIELD,
                              "no ftrace instance \"%s\" (%s: %s); a persistent one is made at boot, e.g. with "
                              "reserve_mem=20M:2M:trace trace_instance=%s^traceoff@trace on the kernel command line",
                              name, root, strerror(-r), name);
                return r;
        }
        char on[16];
        if (tracefs_read(root, "tracing_on", on, sizeof(on)) >= 0 && on[0] == '1') {
                plugin_report(pl, DS_NAME, id, CONFIG_FIELD,
                              "ftrace instance \"%s\" is still recording (tracing_on is 1), and reading it would "
                              "take events from that recording; stop it first: echo 0 > %s/tracing_on",
                              name, root);
                return -EBUSY;
        }
        return 0;
}

int frozen_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        if (!pl->tracefs[0]) {
                plugin_report(pl, DS_NAME, instance_id, NULL, "tracefs is not available");
                return -ENOENT;
        }
        struct frozen *fz = calloc(1, sizeof(*fz));
        if (!fz)
                return -ENOMEM;
        fz->inst.id = instance_id;
        fz->s = ftrace_session_new(pl, instance_id);
        if (!fz->s) {
                frozen_free(fz);
                return -ENOMEM;
        }
        struct ftrace_session *s = fz->s;
        int r = instance_path(pl, instance_id, config, size, fz->instance, sizeof(fz->instance), s->root,
                              sizeof(s->root));
        if (r < 0) {
                frozen_free(fz);
                return r;
        }
        struct pbr_field f;
        if (pbr_get(config, size, 4, false, &f) && f.wire_type == 0)
                s->tracing_session_id = f.varint;
        /* The events were before the trace began: trace_processor keeps
         * them when the first FtraceStats says so. */
        s->preserve_buffer = true;
        s->format_miss = load_format;
        s->format_miss_userdata = fz;
        ftrace_drain_init(s);
        r = ftrace_session_open_cpus(s);
        if (r == 0) {
                plugin_report(pl, DS_NAME, instance_id, CONFIG_FIELD,
                              "cannot read the ring buffer of ftrace instance \"%s\" (%s/per_cpu/cpu*/trace_pipe_raw)",
                              fz->instance, s->root);
                r = -EIO;
        }
        if (r < 0) {
                frozen_free(fz);
                return r;
        }
        r = ftrace_session_use_subbuf_size(s);
        if (r < 0) {
                frozen_free(fz);
                return r;
        }
        size_t pages = buffer_pages(s);
        fz->quota = calloc((size_t) s->n_cpus, sizeof(*fz->quota));
        r = fz->quota ? pl->api->new_writer(pl->host, instance_id, &s->writer) : -ENOMEM;
        if (r < 0) {
                frozen_free(fz);
                return r;
        }
        for (int cpu = 0; cpu < s->n_cpus; cpu++)
                fz->quota[cpu] = s->cpu_fds[cpu] >= 0 ? pages : 0;
        ftrace_stats_emit(s, FtraceStats_START_OF_TRACE);
        r = pl->api->add_timer(pl->host, SLICE_PERIOD_MS, on_slice, fz, &s->timer);
        if (r < 0) {
                frozen_free(fz);
                return r;
        }
        plugin_instance_add(&pl->frozen, &fz->inst);
        plugin_log(pl, TRACED_LOG_INFO, DS_NAME " instance %llu: reading ftrace instance %s", (unsigned long long) instance_id,
                   s->root);
        return 0;
}

void frozen_flush(struct plugin *pl, uint64_t instance_id) {
        struct frozen *fz = frozen_of(plugin_instance_find(pl->frozen, instance_id));
        if (fz)
                (void) pl->api->flush_writer(fz->s->writer);
}

bool frozen_stop(struct plugin *pl, uint64_t instance_id) {
        struct frozen *fz = frozen_of(plugin_instance_take(&pl->frozen, instance_id));
        if (!fz)
                return false;
        /* Stopped before the slices got through: the rest now, so the
         * trace has the whole buffer. */
        while (!fz->done && read_slice(fz, SIZE_MAX))
                ;
        finish(fz);
        frozen_free(fz);
        (void) pl->api->notify_stopped(pl->host, instance_id);
        return true;
}

void frozen_free_all(struct plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->frozen)))
                frozen_free(frozen_of(i));
}
