/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "basic/macro.h"
#include "log/log.h"
#include "shared/control.h"
#include "shared/resident.h"
#include "core/core.h"
#include "core/ports/startup-hold.h"
#include "core/service.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/parked.h"
#include "core/sessions/session.h"
#include "perfetto/config/trace_config.pb-c.h"

struct core {
        const struct core_options *o;
        struct traced_service *svc;
        sd_event *event;
        bool shutting_down;
        uint64_t stop_started_usec; /* CLOCK_MONOTONIC */
        sd_event_source *stop_timer;
        /* Resident sessions that came while the start's hold was on
         * (startup-hold.h): started when it ends, with their data
         * sources registered. */
        struct resident_set pending_resident;
        bool has_pending_resident;
        bool pending_demanded; /* the hosts it names were asked for */
        int control_fd; /* to the supervisor (-EBADF: none) */
};

/* A session names a data source of a parked plugin: the supervisor starts
 * its host. */
static int start_plugin_host(struct traced_service *svc, const char *plugin) {
        struct core *c = svc->start_plugin_host_userdata;
        if (c->control_fd < 0)
                return -ENOTCONN;
        return control_send_start_plugin(c->control_fd, plugin);
}

/* Such a host served no session for a while: the supervisor stops it. */
static int stop_plugin_host(struct traced_service *svc, const char *plugin, pid_t pid) {
        struct core *c = svc->start_plugin_host_userdata;
        if (c->control_fd < 0)
                return -ENOTCONN;
        return control_send_stop_plugin(c->control_fd, plugin, pid);
}

/* How often a stopping core looks whether every session's end is
 * written and told. */
#define CORE_STOP_POLL_USEC (20u * 1000u)

static void notify_status(struct traced_service *svc) {
        size_t started = sessions_count_started(svc);
        (void) sd_notifyf(false, "STATUS=%zu producer(s), %zu session(s), %zu tracing", svc->n_producers,
                          svc->n_sessions, started);
}

/* Every session's end is written and told (or the time is up): the
 * plugins in this process stop, and the loop ends. */
static void finish_core(struct core *c) {
        c->stop_timer = sd_event_source_disable_unref(c->stop_timer);
        service_shutdown(c->svc); /* what is left, if anything */
        if (c->o->stopping)
                c->o->stopping(c->o->userdata);
        (void) sd_event_exit(c->event, 0);
}

static int on_stop_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        struct core *c = userdata;
        uint64_t t = usec;
        (void) sd_event_now(c->event, CLOCK_MONOTONIC, &t);
        uint64_t waited = t - c->stop_started_usec;

        if (service_stop_done(c->svc)) {
                log_info("Every session's trace is finished (%.1f s); exiting.", (double) waited / 1e6);
                finish_core(c);
                return 0;
        }
        if (waited >= (uint64_t) CORE_STOP_TIMEOUT_MS * 1000u) {
                log_warning("Sessions still ending after %u s: finishing their traces with what they hold.",
                            CORE_STOP_TIMEOUT_MS / 1000u);
                finish_core(c);
                return 0;
        }
        if (sd_event_source_set_time_relative(s, CORE_STOP_POLL_USEC) < 0 ||
            sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) < 0)
                finish_core(c);
        return 0;
}

/* The service stops: every session is flushed and finished (bounded by
 * CORE_STOP_TIMEOUT_MS), its consumer told, then the loop ends. */
static void shutdown_core(struct core *c, const char *why) {
        if (c->shutting_down) {
                /* Asked again: no more waiting. */
                if (c->stop_timer) {
                        log_notice("%s again: finishing every trace with what it holds now.", why);
                        finish_core(c);
                }
                return;
        }
        c->shutting_down = true;
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Finishing every session's trace");
        log_info("%s: flushing every session, finishing its trace and telling its consumer, then exiting.", why);
        service_begin_stop(c->svc);
        if (sd_event_now(c->event, CLOCK_MONOTONIC, &c->stop_started_usec) < 0) {
                finish_core(c);
                return;
        }
        if (sd_event_add_time_relative(c->event, &c->stop_timer, CLOCK_MONOTONIC, 0, 1000, on_stop_poll, c) < 0)
                finish_core(c);
}

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct core *c = userdata;
        char why[64];
        snprintf(why, sizeof(why), "Received %s", strsignal((int) si->ssi_signo));
        shutdown_core(c, why);
        return 0;
}

static void apply_resident(struct core *c, const struct resident_set *set) {
        _cleanup_free_ struct resident_entry *v = calloc(set->n ? set->n : 1, sizeof(*v));
        if (!v) {
                log_error("Out of memory applying the resident sessions.");
                return;
        }
        for (size_t i = 0; i < set->n; i++)
                v[i] = (struct resident_entry) {
                        .name = set->v[i].name,
                        .path = set->v[i].path,
                        .config = set->v[i].config,
                        .size = set->v[i].size,
                };
        sessions_set_resident(c->svc, v, set->n);
}

static void log_resident_error(const char *message, void *userdata) {
        log_error("Resident session file %s", message);
}

static void plugins_ready(struct traced_service *svc, void *userdata);

/* hosts=lazy: the hosts of the plugins the resident sessions name are
 * asked for, and the hold is on until they registered their data sources,
 * so that a resident session starts with them, as a consumer's session
 * does, and a snapshot or query right after its start finds them. */
static void demand_resident_hosts(struct core *c, const struct resident_set *set) {
        for (size_t i = 0; i < set->n; i++) {
                Perfetto__Protos__TraceConfig *cfg =
                        perfetto__protos__trace_config__unpack(NULL, set->v[i].size, set->v[i].config);
                for (size_t k = 0; cfg && k < cfg->n_data_sources; k++) {
                        const Perfetto__Protos__TraceConfig__DataSource *ds = cfg->data_sources[k];
                        const char *plugin = ds->config && ds->config->name ? parked_request(c->svc, ds->config->name)
                                                                             : NULL;
                        if (plugin && startup_hold_demand(c->svc, plugin) < 0)
                                log_warning("Resident session %s: failed to wait for the host of plugin %s; its data "
                                            "sources join the session when they register.",
                                            set->v[i].name, plugin);
                }
                if (cfg)
                        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
        }
}

/* The set now, or when the hold (the start's, or the one its plugin hosts
 * bring) ends. Takes set. */
static void take_resident(struct core *c, struct resident_set *set) {
        /* During the start's hold the plugins are not all known to be
         * parked yet: asked for when it ends (plugins_ready). */
        bool demanded = !startup_hold_active(c->svc);
        if (demanded)
                demand_resident_hosts(c, set);
        if (startup_hold_when_done(c->svc, plugins_ready, c)) {
                resident_set_done(&c->pending_resident);
                c->pending_resident = *set;
                c->has_pending_resident = true;
                c->pending_demanded = demanded;
                *set = (struct resident_set) {};
                return;
        }
        apply_resident(c, set);
        resident_set_done(set);
}

/* Without a supervisor: the core reads the sessions directory itself, at
 * start and on SIGHUP. */
static void load_resident(struct core *c) {
        struct resident_set set = {};
        int r = resident_load_dir(c->o->sessions_dir, &set, log_resident_error, NULL);
        if (r < 0) {
                log_error_errno(r, "Failed to read the sessions directory %s: %m", c->o->sessions_dir);
                return;
        }
        take_resident(c, &set);
}

static int on_reload(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct core *c = userdata;
        (void) sd_notify(false, "RELOADING=1");
        log_info("Reloading: reading the sessions directory %s again.", c->o->sessions_dir);
        load_resident(c);
        (void) sd_notify(false, "READY=1");
        return 0;
}

/* The plugin hosts started with the service registered their data
 * sources (or the hold's bound passed): the service is ready. */
static void plugins_ready(struct traced_service *svc, void *userdata) {
        struct core *c = userdata;
        if (c->shutting_down)
                return;
        if (c->has_pending_resident) {
                if (!c->pending_demanded) {
                        c->pending_demanded = true;
                        demand_resident_hosts(c, &c->pending_resident);
                        if (startup_hold_when_done(svc, plugins_ready, c))
                                return; /* back here once they registered */
                }
                apply_resident(c, &c->pending_resident);
                resident_set_done(&c->pending_resident);
                c->has_pending_resident = false;
        }
        (void) sd_notify(false, "READY=1");
        notify_status(svc);
}

static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct core *c = userdata;

        for (;;) {
                struct control_msg msg;
                int pfd = -EBADF;
                int r = control_recv_next(fd, "the supervisor", &msg, &pfd);
                if (r == -EAGAIN)
                        return 0;
                if (r <= 0) {
                        if (r < 0)
                                log_warning_errno(r, "Failed to read from the supervisor: %m");
                        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                        shutdown_core(c, "The supervisor went away");
                        return 0;
                }
                if (msg.kind == CONTROL_TRACE_DIRECTORY) {
                        service_set_retention(c->svc, msg.max_use, msg.keep_free);
                        r = service_set_trace_directory(c->svc, msg.path, pfd);
                        if (r < 0)
                                log_warning_errno(r, "Failed to set the trace directory: %m");
                        else if (pfd >= 0)
                                log_info("Trace files by output_path go into %s.", msg.path);
                        else
                                log_debug("No trace directory: output_path is refused.");
                        continue;
                }
                if (msg.kind == CONTROL_RESIDENT_SESSIONS) {
                        _cleanup_close_ int mfd = pfd;
                        struct resident_set set = {};
                        r = mfd < 0 ? -EBADMSG : resident_set_from_fd(mfd, &set);
                        if (r < 0) {
                                log_warning_errno(r, "Failed to read the resident sessions from the supervisor: %m");
                                continue;
                        }
                        take_resident(c, &set);
                        continue;
                }
                if (msg.kind == CONTROL_PLUGIN_PARKED) {
                        r = parked_set(c->svc, msg.name, msg.path, msg.idle_usec);
                        if (r < 0)
                                log_warning_errno(r, "Bad data source list of parked plugin %s from the supervisor: %m",
                                                  msg.name);
                        else
                                log_debug("Plugin %s is parked: its host starts when a session needs it.", msg.name);
                        continue;
                }
                if (msg.kind == CONTROL_START_PLUGIN || msg.kind == CONTROL_STOP_PLUGIN) {
                        log_warning("Ignoring a request to start a plugin host from the supervisor.");
                        continue;
                }
                if (msg.kind == CONTROL_PLUGINS_LAUNCHED) {
                        startup_hold_all_launched(c->svc);
                        continue;
                }
                if (msg.kind == CONTROL_PLUGIN_EXITED) {
                        startup_hold_host_exited(c->svc, msg.pid, msg.name);
                        parked_host_exited(c->svc, msg.name, msg.pid);
                        /* Stopped with the service: not a failure. */
                        if (msg.exit.stopping || c->shutting_down)
                                continue;
                        char cause[400];
                        control_exit_describe(&msg.exit, cause, sizeof(cause));
                        sessions_host_exited(c->svc, msg.pid, msg.name, cause, msg.exit.refused, msg.exit.reason);
                        continue;
                }
                if (pfd < 0) {
                        log_warning("The supervisor sent no connection for plugin %s.", msg.name);
                        continue;
                }
                uint64_t conn_id = 0;
                r = service_adopt_producer(c->svc, pfd, msg.pid, &conn_id);
                if (r < 0)
                        log_warning_errno(r, "Failed to serve plugin %s (host %d): %m", msg.name, (int) msg.pid);
                else {
                        log_debug("Serving plugin %s (host %d).", msg.name, (int) msg.pid);
                        startup_hold_expect(c->svc, conn_id, msg.pid, msg.name);
                        parked_host_adopted(c->svc, msg.name, msg.pid);
                }
        }
}

int core_run(const struct core_options *o) {
        /* Declared first, closed last: the loop goes before its fds. */
        _cleanup_close_ int producer_fd = o->producer_fd, consumer_fd = o->consumer_fd, control_fd = o->control_fd;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        struct core c = { .o = o, .control_fd = o->control_fd };
        int r;

        /* A consumer or producer going away mid-write must not kill us. */
        (void) signal(SIGPIPE, SIG_IGN);
        r = sd_event_new(&event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate event loop: %m");
        c.event = event;

        r = service_new(event, &c.svc);
        if (r < 0)
                return log_error_errno(r, "Failed to create the service: %m");
        c.svc->state_changed = notify_status;
        c.svc->start_plugin_host = start_plugin_host;
        c.svc->stop_plugin_host = stop_plugin_host;
        c.svc->start_plugin_host_userdata = &c;
        c.svc->trusted_names = o->trusted_names;
        c.svc->n_trusted_names = o->n_trusted_names;
        c.svc->trusted_uids = o->trusted_uids;
        c.svc->n_trusted_uids = o->n_trusted_uids;
        r = service_attach_listeners(c.svc, TAKE_FD(producer_fd), o->producer_relay, TAKE_FD(consumer_fd));
        for (size_t i = 0; i < o->n_extra; i++) {
                int fd = o->extra[i].fd;
                if (r >= 0)
                        r = ipc_host_add_listener_flags(c.svc->producer_host, fd,
                                                        o->extra[i].relay ? IPC_LISTENER_RELAY : 0);
                else
                        safe_close(fd);
        }
        if (r < 0) {
                c.svc = service_free(c.svc);
                return log_error_errno(r, "Failed to listen: %m");
        }
        if (control_fd < 0)
                service_set_retention(c.svc, o->max_use, o->keep_free);
        if (control_fd < 0 && o->trace_dir) {
                int dfd = open(o->trace_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0)
                        log_notice_errno(errno, "No trace directory %s (output_path is refused): %m", o->trace_dir);
                else
                        (void) service_set_trace_directory(c.svc, o->trace_dir, dfd);
        }
        if (control_fd >= 0) {
                r = sd_event_add_io(event, NULL, control_fd, EPOLLIN, on_control, &c);
                if (r < 0) {
                        c.svc = service_free(c.svc);
                        return log_error_errno(r, "Failed to watch the supervisor: %m");
                }
        }

        (void) sd_event_add_signal(event, NULL, SIGTERM, on_terminate, &c);
        (void) sd_event_add_signal(event, NULL, SIGINT, on_terminate, &c);
        /* Sends WATCHDOG=1 on its own when WATCHDOG_USEC is set for us. */
        r = sd_event_set_watchdog(event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog: %m");

        if (o->from_systemd)
                log_info("Serving on sockets passed by systemd.");
        else
                log_info("Serving producers on %s and consumers on %s.", o->producer_path, o->consumer_path);
        if (o->started) {
                r = o->started(event, c.svc, o->userdata);
                if (r < 0)
                        log_warning_errno(r, "Failed to start the plugins: %m");
        }
        /* Under a supervisor that starts plugin hosts, sessions wait for
         * their data sources (startup-hold.h); READY=1 once they are in.
         * Without one the core reads the sessions directory itself (the
         * hold, if any, has ended by then). */
        r = startup_hold_begin(c.svc, control_fd >= 0 ? o->plugin_start_timeout_usec : 0, plugins_ready, &c);
        if (r < 0)
                log_warning_errno(r, "Failed to hold sessions until the plugins are in: %m");
        if (control_fd < 0 && o->sessions_dir) {
                load_resident(&c);
                (void) sd_event_add_signal(event, NULL, SIGHUP, on_reload, &c);
        }

        r = sd_event_loop(event);
        if (!c.shutting_down && o->stopping)
                o->stopping(o->userdata);
        c.stop_timer = sd_event_source_disable_unref(c.stop_timer);
        c.svc = service_free(c.svc);
        resident_set_done(&c.pending_resident);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}
