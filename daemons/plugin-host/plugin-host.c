/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* traced-plugin-host: loads one producer plugin and connects it to the
 * tracing service as an ordinary producer with its own shared memory
 * buffer. traced starts one per plugin; a crash here costs only this
 * plugin. */

#include <dlfcn.h>
#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "plugin-check.h"
#include "traced/plugin.h"
#include "traced/producer.h"

/* Exit status for a plugin that must not be restarted (bad plugin). */
#define EXIT_PLUGIN_REFUSED 78

struct traced_host {
        sd_event *event;
        traced_producer *producer;
        const struct traced_plugin_descriptor *desc;
        void *state;
        char name[128];
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

static int32_t host_register(struct traced_host *h, const char *name, uint32_t flags) {
        uint32_t f = (flags & TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP) ? TRACED_DS_WILL_NOTIFY_ON_STOP : 0;
        return traced_producer_register_data_source(h->producer, name, f);
}

static int on_fd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct traced_source *src = userdata;
        src->fd_cb(fd, revents, src->userdata);
        return 0;
}

static int32_t host_add_fd(struct traced_host *h, int fd, uint32_t events, traced_fd_cb cb, void *userdata,
                           struct traced_source **ret) {
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

static int on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        struct traced_source *s = userdata;
        (void) sd_event_source_set_time_relative(es, (uint64_t) s->period_ms * 1000u);
        (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        s->timer_cb(s->userdata);
        return 0;
}

static int32_t host_add_timer(struct traced_host *h, uint32_t period_ms, traced_timer_cb cb, void *userdata,
                              struct traced_source **ret) {
        if (period_ms == 0)
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
        return traced_producer_notify_stopped(h->producer, instance_id);
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
};

static void on_start(traced_producer *p, uint64_t id, const char *ds, const uint8_t *cfg, size_t n, void *ud) {
        struct traced_host *h = ud;
        if (h->desc->ops->start)
                h->desc->ops->start(h->state, id, ds, cfg, n);
}

static void on_stop(traced_producer *p, uint64_t id, void *ud) {
        struct traced_host *h = ud;
        if (h->desc->ops->stop)
                h->desc->ops->stop(h->state, id);
}

static void on_flush(traced_producer *p, uint64_t id, void *ud) {
        struct traced_host *h = ud;
        if (h->desc->ops->flush)
                h->desc->ops->flush(h->state, id);
}

static void on_disconnected(traced_producer *p, void *ud) {
        struct traced_host *h = ud;
        log_warning("%s: the tracing service went away.", h->name);
        sd_event_exit(h->event, 1);
}

/* Keeps only the capabilities the plugin declared: everything else leaves
 * the bounding set, and the effective/permitted/inheritable sets. */
static int drop_capabilities(uint64_t keep) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2];

        for (unsigned cap = 0; cap < 64; cap++) {
                if (keep & ((uint64_t) 1 << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
                        return -errno;
        }
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -errno;
        uint64_t permitted = (uint64_t) data[0].permitted | ((uint64_t) data[1].permitted << 32);
        uint64_t mask = keep & permitted;
        data[0].effective = data[0].permitted = (uint32_t) mask;
        data[1].effective = data[1].permitted = (uint32_t) (mask >> 32);
        data[0].inheritable = data[1].inheritable = 0;
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        log_info("Plugin host keeps capabilities 0x%llx (requested 0x%llx).", (unsigned long long) mask,
                 (unsigned long long) keep);
        return 0;
}

static int run(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *socket_path = NULL;
        struct traced_host h = {};
        int c, r;

        log_setup("traced-plugin-host", LOG_TARGET_AUTO);
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        socket_path = optarg;
                        break;
                case 'h':
                        printf("Usage: traced-plugin-host [--socket PATH] PLUGIN.so\n"
                               "Loads one traced producer plugin and connects it to the service.\n");
                        return 0;
                default:
                        return -EINVAL;
                }
        }
        if (optind + 1 != argc) {
                log_error("Expected exactly one plugin path.");
                return -EINVAL;
        }
        const char *path = argv[optind];

        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                log_error("Refusing plugin %s: cannot load it: %s", path, dlerror());
                return EXIT_PLUGIN_REFUSED;
        }
        traced_plugin_entry_fn entry = (traced_plugin_entry_fn) dlsym(dl, TRACED_PLUGIN_ENTRY_SYMBOL);
        if (!entry) {
                log_error("Refusing plugin %s: no %s symbol.", path, TRACED_PLUGIN_ENTRY_SYMBOL);
                return EXIT_PLUGIN_REFUSED;
        }
        char why[256];
        h.desc = entry();
        if (plugin_check_descriptor(h.desc, why, sizeof(why)) < 0) {
                log_error("Refusing plugin %s: %s", path, why);
                return EXIT_PLUGIN_REFUSED;
        }
        snprintf(h.name, sizeof(h.name), "%s", h.desc->name);
        r = drop_capabilities(h.desc->capabilities);
        if (r < 0)
                return log_error_errno(r, "Failed to restrict the capabilities of plugin %s: %m", h.name);

        r = sd_event_default(&h.event);
        if (r < 0)
                return log_error_errno(r, "Failed to create the event loop: %m");
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(h.event, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(h.event, NULL, SIGINT, NULL, NULL);

        char producer_name[160];
        snprintf(producer_name, sizeof(producer_name), "traced.%s", h.desc->name);
        struct traced_producer_options o = {
                .struct_size = sizeof(o),
                .socket_path = socket_path,
                .name = producer_name,
                .smb_size_hint = 4u * 1024u * 1024u,
        };
        struct traced_producer_ops ops = {
                .struct_size = sizeof(ops),
                .start = on_start,
                .stop = on_stop,
                .flush = on_flush,
                .disconnected = on_disconnected,
        };
        r = traced_producer_connect(h.event, &o, &ops, &h, &h.producer);
        if (r < 0)
                return log_error_errno(r, "%s: cannot connect to the tracing service: %m", h.name);

        r = h.desc->ops->create(&host_api, &h, &h.state);
        if (r < 0) {
                log_error_errno(r, "Refusing plugin %s: its create() failed: %m", h.name);
                traced_producer_free(h.producer);
                return EXIT_PLUGIN_REFUSED;
        }
        log_info("Plugin %s %s loaded from %s.", h.desc->name, h.desc->version ? h.desc->version : "", path);
        r = sd_event_loop(h.event);
        if (h.desc->ops->destroy)
                h.desc->ops->destroy(h.state);
        traced_producer_free(h.producer);
        sd_event_unref(h.event);
        return r;
}

int main(int argc, char **argv) {
        int r = run(argc, argv);
        if (r == EXIT_PLUGIN_REFUSED)
                return EXIT_PLUGIN_REFUSED;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
