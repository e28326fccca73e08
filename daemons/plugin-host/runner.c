/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/abi-struct.h"
#include "basic/macro.h"
#include "log/log.h"
#include "plugin-check.h"
#include "runner.h"
#include "traced/plugin.h"
#include "traced/producer.h"

/* What the plugin sees as its host. */
struct traced_host {
        sd_event *event;
        traced_producer *producer;
        const struct traced_plugin_descriptor *desc;
        void *state;
        bool created;
        char name[128];
        /* The most CPU one turn of the event loop took since a data
         * source last started: how long a flush or a stop can have waited
         * behind the plugin's other work, whatever else the machine ran. */
        uint64_t longest_turn_ns;
        bool turn_restart; /* a data source started in this turn: count from the next */
        /* plugin_runner_list_data_sources(): what create() registers is
         * written here instead of to a service. */
        FILE *listing;
};

struct plugin_runner {
        struct traced_host host;
        void *dl;
};

struct traced_source {
        sd_event_source *src;
        traced_fd_cb fd_cb;
        traced_timer_cb timer_cb;
        void *userdata;
        uint32_t period_ms;
};

static void host_log(struct traced_host *h, int level, const char *message) {
        log_full_errno(level, 0, "%s: %s", h->name, message);
}

/* The plugin's op, or NULL when its ops table (of an older minor) ends
 * before it. */
#define PLUGIN_OP(h, op)                                                                                       \
        ((h)->desc->ops->struct_size >= offsetof(struct traced_plugin_ops, op) + sizeof((h)->desc->ops->op) ? \
                 (h)->desc->ops->op :                                                                          \
                 NULL)

/* The data source flags a plugin of the given minor may pass: a bit its
 * header did not have is refused as it was then. */
static uint32_t known_ds_flags(uint32_t abi_minor) {
        uint32_t known = TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP | TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR;
        if (abi_minor >= 3)
                known |= TRACED_PLUGIN_DS_STALL_WHEN_FULL;
        return known;
}

static int32_t host_register(struct traced_host *h, const char *name, uint32_t flags) {
        int r = abi_check_flags(flags, known_ds_flags(h->desc->abi_minor));
        if (r < 0)
                return r;
        uint32_t f = (flags & TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP) ? TRACED_DS_WILL_NOTIFY_ON_STOP : 0;
        if (flags & TRACED_PLUGIN_DS_STALL_WHEN_FULL)
                f |= TRACED_DS_STALL_WHEN_FULL;
        if (flags & TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR) {
                if (!PLUGIN_OP(h, clear_incremental_state))
                        return -EINVAL; /* it promises what it has no callback for */
                f |= TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR;
        }
        if (h->listing) {
                if (!name || !name[0] || strpbrk(name, " \t\n"))
                        return -EINVAL;
                /* The descriptor's fields, by their names. */
                return fprintf(h->listing, "%s%s%s\n", name,
                               (f & TRACED_DS_WILL_NOTIFY_ON_STOP) ? " will_notify_on_stop" : "",
                               (f & TRACED_DS_HANDLES_INCREMENTAL_STATE_CLEAR) ? " handles_incremental_state_clear" :
                                                                                 "") < 0 ?
                               -EIO :
                               0;
        }
        return traced_producer_register_data_source(h->producer, name, f);
}

static int on_fd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct traced_source *src = userdata;
        src->fd_cb(fd, revents, src->userdata);
        return 0;
}

static int32_t host_add_fd(struct traced_host *h, int fd, uint32_t events, traced_fd_cb cb, void *userdata,
                           struct traced_source **ret) {
        if (!cb || !ret)
                return -EINVAL;
        struct traced_source *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd_cb = cb;
        s->userdata = userdata;
        int r = sd_event_add_io(h->event, &s->src, fd, events, on_fd, s);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

/* The next expiry is a period after the one just due, not after now: a
 * late callback (the loop busy, the timer's 1 ms slack) does not stretch
 * every period. Only a timer that fell a whole period behind starts anew
 * from now, rather than firing in a burst. */
static int on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        struct traced_source *s = userdata;
        uint64_t period = (uint64_t) s->period_ms * 1000u, now = 0;
        (void) sd_event_now(sd_event_source_get_event(es), CLOCK_MONOTONIC, &now);
        (void) sd_event_source_set_time(es, usec + period > now ? usec + period : now + period);
        (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        s->timer_cb(s->userdata);
        return 0;
}

static int32_t host_add_timer(struct traced_host *h, uint32_t period_ms, traced_timer_cb cb, void *userdata,
                              struct traced_source **ret) {
        if (period_ms == 0 || !cb || !ret)
                return -EINVAL;
        struct traced_source *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->timer_cb = cb;
        s->userdata = userdata;
        s->period_ms = period_ms;
        int r = sd_event_add_time_relative(h->event, &s->src, CLOCK_MONOTONIC, (uint64_t) period_ms * 1000u, 1000,
                                           on_timer, s);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static void host_remove(struct traced_host *h, struct traced_source *s) {
        if (!s)
                return;
        sd_event_source_disable_unref(s->src);
        free(s);
}

static int32_t host_new_writer(struct traced_host *h, uint64_t instance_id, struct traced_writer **ret) {
        if (!h->producer)
                return -ENOTCONN;
        return traced_producer_new_writer(h->producer, instance_id, (traced_trace_writer **) ret);
}
static int32_t host_write(struct traced_writer *w, const void *packet, size_t size) {
        return traced_trace_writer_write_packet((traced_trace_writer *) w, packet, size);
}
static int32_t host_flush(struct traced_writer *w) {
        return traced_trace_writer_flush((traced_trace_writer *) w);
}
static void host_free_writer(struct traced_writer *w) {
        traced_trace_writer_free((traced_trace_writer *) w);
}
static int32_t host_notify_stopped(struct traced_host *h, uint64_t instance_id) {
        if (!h->producer)
                return -ENOTCONN;
        return traced_producer_notify_stopped(h->producer, instance_id);
}

static int32_t host_report_error(struct traced_host *h, uint64_t instance_id, const char *field,
                                 const char *message) {
        if (!h->producer)
                return -ENOTCONN;
        return traced_producer_report_error(h->producer, instance_id, field, message);
}

static int32_t host_begin_packet(struct traced_writer *w, struct traced_pb_msg *root) {
        return traced_trace_writer_begin_pb_packet((traced_trace_writer *) w, root);
}
static int32_t host_end_packet(struct traced_writer *w, struct traced_pb_msg *root) {
        return traced_trace_writer_end_pb_packet((traced_trace_writer *) w, root);
}

static const struct traced_host_api host_api = {
        .struct_size = sizeof(struct traced_host_api),
        .abi_minor = TRACED_PLUGIN_ABI_MINOR,
        .log = host_log,
        .register_data_source = host_register,
        .add_fd = host_add_fd,
        .add_timer = host_add_timer,
        .remove_source = host_remove,
        .new_writer = host_new_writer,
        .write_packet = host_write,
        .flush_writer = host_flush,
        .free_writer = host_free_writer,
        .notify_stopped = host_notify_stopped,
        .report_error = host_report_error,
        .begin_packet = host_begin_packet,
        .end_packet = host_end_packet,
};

static void on_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t n, void *ud) {
        struct traced_host *h = ud;
        h->turn_restart = true;
        if (h->desc->ops->start)
                h->desc->ops->start(h->state, id, ds, cfg, n);
}

static void on_stop(traced_producer *p, uint64_t id, void *ud) {
        struct traced_host *h = ud;
        log_info("%s: instance %llu stops; the longest turn of the host's event loop since it started took %.1f ms "
                 "of CPU.",
                 h->name, (unsigned long long) id, (double) h->longest_turn_ns / 1e6);
        if (h->desc->ops->stop)
                h->desc->ops->stop(h->state, id);
}

static void on_flush(traced_producer *p, uint64_t id, void *ud) {
        struct traced_host *h = ud;
        if (PLUGIN_OP(h, flush))
                h->desc->ops->flush(h->state, id);
}

static void on_clear_incremental_state(traced_producer *p, uint64_t id, void *ud) {
        struct traced_host *h = ud;
        if (PLUGIN_OP(h, clear_incremental_state))
                h->desc->ops->clear_incremental_state(h->state, id);
}

static void on_disconnected(traced_producer *p, void *ud) {
        struct traced_host *h = ud;
        log_warning("%s: the tracing service went away.", h->name);
        sd_event_exit(h->event, 1);
}

int plugin_runner_load(const char *path, struct plugin_runner **ret, char *why, size_t why_size) {
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                snprintf(why, why_size, "cannot load it: %s", dlerror());
                return -ENOEXEC;
        }
        traced_plugin_entry_fn entry = (traced_plugin_entry_fn) dlsym(dl, TRACED_PLUGIN_ENTRY_SYMBOL);
        if (!entry) {
                snprintf(why, why_size, "no %s symbol", TRACED_PLUGIN_ENTRY_SYMBOL);
                dlclose(dl);
                return -ENOEXEC;
        }
        const struct traced_plugin_descriptor *desc = entry();
        if (plugin_check_descriptor(desc, why, why_size) < 0) {
                dlclose(dl);
                return -ENOEXEC;
        }
        struct plugin_runner *r = calloc(1, sizeof(*r));
        if (!r) {
                dlclose(dl);
                return -ENOMEM;
        }
        r->dl = dl;
        r->host.desc = desc;
        snprintf(r->host.name, sizeof(r->host.name), "%s", desc->name);
        *ret = r;
        return 0;
}

const char *plugin_runner_name(const struct plugin_runner *r) {
        return r->host.name;
}

const char *plugin_runner_version(const struct plugin_runner *r) {
        return r->host.desc->version ? r->host.desc->version : "";
}

uint64_t plugin_runner_capabilities(const struct plugin_runner *r) {
        return r->host.desc->capabilities;
}

int plugin_runner_start(struct plugin_runner *r, sd_event *event, int socket_fd, const char *socket_path,
                        char *why, size_t why_size) {
        struct traced_host *h = &r->host;
        int k;

        h->event = sd_event_ref(event);
        char producer_name[160];
        snprintf(producer_name, sizeof(producer_name), "traced.%s", h->desc->name);
        struct traced_producer_options o = {
                .struct_size = sizeof(o),
                .socket_path = socket_path,
                .name = producer_name,
                .smb_size_hint = 4u * 1024u * 1024u,
                /* Pages of 32 KiB, as upstream's traced_probes asks for:
                 * a poller's packets fill a chunk in several ticks rather
                 * than one, so it commits (and wakes the service) several
                 * times less often; fewer chunk headers per byte for the
                 * busy plugins. */
                .page_size_hint = 32u * 1024u,
                .socket_fd = socket_fd,
                .flags = socket_fd >= 0 ? TRACED_PRODUCER_SOCKET_FD : 0,
        };
        struct traced_producer_ops ops = {
                .struct_size = sizeof(ops),
                .start = on_start,
                .stop = on_stop,
                .flush = on_flush,
                .disconnected = on_disconnected,
                .clear_incremental_state = on_clear_incremental_state,
        };
        k = traced_producer_connect(event, &o, &ops, h, &h->producer);
        if (k < 0) {
                snprintf(why, why_size, "cannot connect to the tracing service: %s", strerror(-k));
                return k;
        }
        k = h->desc->ops->create(&host_api, h, &h->state);
        if (k < 0) {
                snprintf(why, why_size, "its create() failed: %s", strerror(k < -4095 ? EINVAL : -k));
                h->producer = traced_producer_free(h->producer);
                return -ENOEXEC;
        }
        h->created = true;
        /* create() registered the plugin's data sources: a Sync after them
         * tells traced, which holds the sessions of its first moments
         * until every plugin host it started said so (startup-hold.c). */
        k = traced_producer_sync(h->producer, NULL, NULL);
        if (k < 0)
                log_debug_errno(k, "%s: cannot tell the service the data sources are registered: %m", h->name);
        return 0;
}

int plugin_runner_list_data_sources(struct plugin_runner *r, sd_event *event, FILE *out, char *why, size_t why_size) {
        struct traced_host *h = &r->host;
        h->event = sd_event_ref(event);
        h->listing = out;
        int k = h->desc->ops->create(&host_api, h, &h->state);
        if (k < 0) {
                h->listing = NULL;
                snprintf(why, why_size, "its create() failed: %s", strerror(k < -4095 ? EINVAL : -k));
                return -ENOEXEC;
        }
        h->created = true;
        if (h->desc->ops->destroy)
                h->desc->ops->destroy(h->state);
        h->created = false;
        h->listing = NULL;
        return fflush(out) == 0 ? 0 : -EIO;
}

struct plugin_runner *plugin_runner_free(struct plugin_runner *r) {
        if (!r)
                return NULL;
        if (r->host.created && r->host.desc->ops->destroy)
                r->host.desc->ops->destroy(r->host.state);
        traced_producer_free(r->host.producer);
        sd_event_unref(r->host.event);
        /* The plugin's code stays mapped: a thread or atexit handler it
         * left behind must not jump into unmapped memory. */
        free(r);
        return NULL;
}

static uint64_t thread_cpu_ns(void) {
        struct timespec ts;
        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

int plugin_runner_loop(struct plugin_runner *r, sd_event *event) {
        /* One read of the thread's CPU clock per turn (a system call, not
         * the vDSO): a turn's end is the next one's start. */
        uint64_t before = thread_cpu_ns();
        while (sd_event_get_state(event) != SD_EVENT_FINISHED) {
                int k = sd_event_run(event, UINT64_MAX);
                uint64_t after = thread_cpu_ns(), spent = after - before;
                before = after;
                /* The start's own turn (loading BPF programs, say) is
                 * not counted: what follows it is. */
                if (r->host.turn_restart) {
                        r->host.turn_restart = false;
                        r->host.longest_turn_ns = 0;
                } else if (spent > r->host.longest_turn_ns)
                        r->host.longest_turn_ns = spent;
                if (k < 0)
                        return k;
        }
        int code = 0;
        int k = sd_event_get_exit_code(event, &code);
        return k < 0 ? k : code;
}
