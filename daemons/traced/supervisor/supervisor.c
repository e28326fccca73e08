/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "basic/macro.h"
#include "log/log.h"
#include "shared/control.h"
#include "shared/resident.h"
#include "supervisor/privileges.h"
#include "supervisor/selinux-label.h"
#include "supervisor/supervisor.h"

struct supervisor {
        struct supervisor_options *o;
        sd_event *event;
        pid_t core_pid;
        int control_fd;
        struct plugins *plugins;
        bool stopping;
        int exit_status;
        sd_event_source *core_kill; /* stopping: the core's time is up */
};

static int handoff(int fd, pid_t host_pid, const char *plugin, void *userdata) {
        struct supervisor *s = userdata;
        _cleanup_close_ int owned = fd;
        struct control_msg msg = { .pid = host_pid };
        snprintf(msg.name, sizeof(msg.name), "%s", plugin);
        return control_send_producer(s->control_fd, &msg, owned);
}

/* The core stops waiting for a plugin host that died before it
 * registered its data sources (its connection may close later, or never
 * have been used), and names how it ended to the sessions that lose its
 * data sources, or keeps why it refused its plugin. */
static void host_exited(pid_t host_pid, const char *plugin, const struct control_exit *how, void *userdata) {
        struct supervisor *s = userdata;
        if (s->core_pid <= 0)
                return;
        int r = control_send_plugin_exited(s->control_fd, host_pid, plugin, how);
        if (r < 0)
                log_debug_errno(r, "Failed to tell the service core that plugin host %d exited: %m", (int) host_pid);
}

/* [plugins] hosts=lazy: the core learns which data sources a plugin whose
 * host is not running offers. */
static void host_parked(const char *plugin, const char *data_sources, void *userdata) {
        struct supervisor *s = userdata;
        int r = control_send_plugin_parked(s->control_fd, plugin, data_sources, s->o->plugin.idle_usec);
        if (r < 0)
                log_warning_errno(r, "Failed to tell the service core the data sources of plugin %s: %m", plugin);
}

/* What the core asks: only that the host of a plugin we know starts. */
static int on_control(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct supervisor *s = userdata;
        for (;;) {
                struct control_msg msg;
                int pfd = -EBADF;
                int r = control_recv_next(fd, "the service core", &msg, &pfd);
                if (r == -EAGAIN)
                        return 0;
                if (r <= 0) {
                        /* The core's end: its exit is handled as a child's. */
                        (void) sd_event_source_set_enabled(src, SD_EVENT_OFF);
                        return 0;
                }
                safe_close(pfd);
                if (msg.kind == CONTROL_STOP_PLUGIN) {
                        r = plugins_stop_host(s->plugins, msg.name, msg.pid);
                        if (r < 0)
                                log_debug("Not stopping plugin host %d (%s) for the service core: not one started "
                                          "for a session, or gone already.",
                                          (int) msg.pid, msg.name);
                        continue;
                }
                if (msg.kind != CONTROL_START_PLUGIN) {
                        log_warning("Ignoring a message of kind %d from the service core: it may only ask to start or "
                                    "stop a plugin host.",
                                    msg.kind);
                        continue;
                }
                r = s->plugins ? plugins_start_host(s->plugins, msg.name) : -ENOENT;
                if (r == -ENOENT)
                        log_warning("The service core asked for the host of plugin \"%s\", which traced does not "
                                    "run; ignoring it.",
                                    msg.name);
                else if (r < 0)
                        log_warning_errno(r, "Failed to start the host of plugin %s for the service core: %m",
                                          msg.name);
                if (r == -ENOENT || r == -EPERM) {
                        /* The core stops waiting for it. */
                        struct control_exit how = { .code = CLD_EXITED, .status = CONTROL_EXIT_PLUGIN_REFUSED,
                                                    .refused = true };
                        snprintf(how.reason, sizeof(how.reason), "%s",
                                 r == -ENOENT ? "traced runs no such plugin" : "traced refused it");
                        host_exited(0, msg.name, &how, s);
                }
        }
}

static void stop_plugins(struct supervisor *s) {
        plugins_stop(s->plugins);
        s->plugins = NULL;
}

static int on_core_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        struct supervisor *s = userdata;

        s->core_pid = 0;
        if (si->si_code == CLD_EXITED && si->si_status == 0 && s->stopping)
                s->exit_status = EXIT_SUCCESS;
        else {
                if (si->si_code == CLD_EXITED)
                        log_error("The service core exited with status %d%s.", si->si_status,
                                  s->stopping ? "" : " unexpectedly");
                else
                        log_error("The service core died (signal %d).", si->si_status);
                s->exit_status = EXIT_FAILURE;
        }
        s->stopping = true;
        stop_plugins(s);
        return sd_event_exit(s->event, 0);
}

static int on_core_stop_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct supervisor *s = userdata;
        if (s->core_pid > 0) {
                log_error("The service core did not stop within %u s; killing it.", CORE_STOP_KILL_MS / 1000u);
                (void) kill(s->core_pid, SIGKILL);
        }
        return 0;
}

static int on_terminate(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        struct supervisor *s = userdata;

        if (!s->stopping)
                log_info("Received %s: the service core finishes every session, then the plugins stop.",
                         strsignal((int) si->ssi_signo));
        s->stopping = true;
        /* The plugins keep serving while the core flushes and stops their
         * data sources and finishes the trace files (not restarted when
         * they exit meanwhile); they are stopped once the core exited. A
         * second signal is passed on: the core then ends at once. */
        plugins_stop_restarting(s->plugins);
        if (s->core_pid > 0) {
                (void) kill(s->core_pid, SIGTERM);
                if (!s->core_kill &&
                    sd_event_add_time_relative(s->event, &s->core_kill, CLOCK_MONOTONIC,
                                               (uint64_t) CORE_STOP_KILL_MS * 1000u, 100000, on_core_stop_timeout,
                                               s) < 0)
                        log_warning("Failed to bound the service core's stop: systemd's TimeoutStopSec does.");
        }
        return 0;
}

/* Tells the core where output_path may point: an O_PATH fd opened here
 * (the core may lack search permission on the way to it). */
static void send_trace_directory(struct supervisor *s) {
        const char *dir = s->o->config ? traced_config_trace_directory(s->o->config) : TRACED_CONFIG_DEFAULT_TRACE_DIR;
        _cleanup_close_ int fd = -EBADF;
        if (dir) {
                fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        log_notice_errno(errno, "No trace directory %s (output_path is refused): %m", dir);
        }
        int r = control_send_trace_directory(s->control_fd, dir ? dir : "", fd,
                                             s->o->config ? s->o->config->max_use : 0,
                                             s->o->config ? s->o->config->keep_free : 0);
        if (r < 0)
                log_warning_errno(r, "Failed to send the trace directory to the service core: %m");
}

static void log_resident_error(const char *message, void *userdata) {
        log_error("Resident session file %s", message);
}

/* Reads the sessions directory and sends the whole set to the core,
 * which starts, stops and restarts sessions to match it. */
static void send_resident_sessions(struct supervisor *s) {
        const char *dir = s->o->sessions_dir                     ? (s->o->sessions_dir[0] ? s->o->sessions_dir : NULL)
                          : s->o->config                         ? traced_config_sessions_directory(s->o->config)
                                                                 : TRACED_CONFIG_DEFAULT_SESSIONS_DIR;
        struct resident_set set = {};
        _cleanup_close_ int fd = -EBADF;
        int r = dir ? resident_load_dir(dir, &set, log_resident_error, NULL) : 0;
        if (r < 0) {
                log_error_errno(r, "Failed to read the sessions directory %s; resident sessions stay as they are: %m",
                                dir);
                return;
        }
        if (dir && set.n)
                log_info("Resident sessions from %s: %zu%s.", dir, set.n, r > 0 ? " (and bad files skipped)" : "");
        r = resident_set_to_memfd(&set, &fd);
        resident_set_done(&set);
        if (r >= 0)
                r = control_send_resident(s->control_fd, fd);
        if (r < 0)
                log_warning_errno(r, "Failed to send the resident sessions to the service core: %m");
}

static bool streq_null(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int on_reload(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        struct supervisor *s = userdata;
        struct supervisor_options *o = s->o;
        _cleanup_free_ char *error = NULL;
        struct traced_config next;

        if (!o->config_path || !o->config)
                return 0;
        (void) sd_notify(false, "RELOADING=1");
        int r = traced_config_load(o->config_path, &next, &error);
        if (r < 0) {
                log_error("Not reloading: %s; the previous configuration stays.", error ? error : strerror(-r));
                (void) sd_notify(false, "READY=1");
                return 0;
        }
        struct traced_config *cur = o->config;
        bool plugins_same = next.plugins_enabled == cur->plugins_enabled && next.plugins_in_process == cur->plugins_in_process &&
                            streq_null(next.plugin_dir, cur->plugin_dir) && next.n_disabled == cur->n_disabled;
        for (unsigned i = 0; plugins_same && i < next.n_disabled; i++)
                plugins_same = strcmp(next.disabled[i], cur->disabled[i]) == 0;
        if (!plugins_same || !streq_null(next.user, cur->user) || !streq_null(next.plugin_user, cur->plugin_user) ||
            next.plugin_user_required != cur->plugin_user_required)
                log_notice("Reloaded %s: the plugin set and the users of the core and the plugin hosts change at the next start of traced.",
                           o->config_path);
        else
                log_info("Reloaded %s.", o->config_path);
        plugins_set_watchdog(s->plugins, (uint64_t) next.watchdog_sec * 1000000u);
        traced_config_done(cur);
        *cur = next;
        send_trace_directory(s);
        send_resident_sessions(s);
        (void) sd_notify(false, "READY=1");
        return 0;
}

/* In the forked child: become the service core. Never returns. */
_Noreturn static void run_core(struct supervisor_options *o, int control_fd, pid_t supervisor) {
        int r;

        /* sd_event_set_watchdog() checks that WATCHDOG_PID names us. */
        if (getenv("WATCHDOG_USEC")) {
                char pid[32];
                snprintf(pid, sizeof(pid), "%d", (int) getpid());
                (void) setenv("WATCHDOG_PID", pid, 1);
        }
        r = selinux_label_enter_core();
        if (r < 0) {
                log_error_errno(r, "Failed to enter the service core's SELinux domain: %m");
                _exit(EXIT_FAILURE);
        }
        r = privileges_drop(o->drop_user ? o->uid : getuid(), o->drop_user ? o->gid : getgid());
        if (r < 0) {
                log_error_errno(r, "Failed to drop the service core's privileges: %m");
                _exit(EXIT_FAILURE);
        }
        /* The core follows the supervisor out (also when the control
         * socket's end of file is missed). Set after the switch of user,
         * which clears it. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
                log_warning_errno(errno, "Failed to tie the core to the supervisor: %m");
        if (getppid() != supervisor)
                _exit(EXIT_FAILURE);
        log_info("Service core %d running as uid %d, gid %d, with no capabilities.", (int) getpid(),
                 (int) getuid(), (int) getgid());
        o->core.control_fd = control_fd;
        r = core_run(&o->core);
        _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

int supervisor_run(struct supervisor_options *o) {
        struct supervisor s = { .o = o, .control_fd = -EBADF, .exit_status = EXIT_FAILURE };
        int ctl[2], r;

        r = control_pair(ctl);
        if (r < 0) {
                log_error_errno(r, "Failed to create the control channel: %m");
                goto fail;
        }
        pid_t self = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                log_error_errno(errno, "Failed to start the service core: %m");
                safe_close(ctl[0]);
                safe_close(ctl[1]);
                goto fail;
        }
        if (pid == 0) {
                safe_close(ctl[0]);
                run_core(o, ctl[1], self);
        }
        safe_close(ctl[1]);
        s.control_fd = ctl[0];
        s.core_pid = pid;
        /* The listening sockets are the core's now. */
        o->core.producer_fd = safe_close(o->core.producer_fd);
        o->core.consumer_fd = safe_close(o->core.consumer_fd);
        for (size_t i = 0; i < o->core.n_extra; i++)
                o->core.extra[i].fd = safe_close(o->core.extra[i].fd);

        r = sd_event_new(&s.event);
        if (r >= 0)
                r = sd_event_add_child(s.event, NULL, pid, WEXITED, on_core_exit, &s);
        if (r >= 0)
                r = sd_event_add_signal(s.event, NULL, SIGTERM, on_terminate, &s);
        if (r >= 0)
                r = sd_event_add_signal(s.event, NULL, SIGINT, on_terminate, &s);
        if (r >= 0)
                r = sd_event_add_signal(s.event, NULL, SIGHUP, on_reload, &s);
        if (r >= 0)
                r = sd_event_add_io(s.event, NULL, s.control_fd, EPOLLIN, on_control, &s);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the supervisor: %m");
                (void) kill(pid, SIGTERM);
                (void) waitpid(pid, NULL, 0);
                goto done;
        }
        send_trace_directory(&s);
        send_resident_sessions(&s);
        if (o->plugins) {
                o->plugin.handoff = handoff;
                o->plugin.exited = host_exited;
                o->plugin.parked = host_parked;
                o->plugin.userdata = &s;
                r = plugins_start(s.event, &o->plugin, &s.plugins);
                if (r < 0)
                        log_warning_errno(r, "Failed to start the plugins: %m");
        }
        /* Every plugin host of the start is handed over: the core holds
         * sessions until these registered their data sources. */
        r = control_send_plugins_launched(s.control_fd);
        if (r < 0)
                log_warning_errno(r, "Failed to tell the service core the plugins are started: %m");
        r = sd_event_loop(s.event);
        if (r < 0)
                log_error_errno(r, "Supervisor event loop failed: %m");
        stop_plugins(&s);
        if (s.core_pid > 0) {
                (void) kill(s.core_pid, SIGTERM);
                (void) waitpid(s.core_pid, NULL, 0);
        }
done:
        sd_event_source_disable_unref(s.core_kill);
        sd_event_unref(s.event);
        safe_close(s.control_fd);
        return s.exit_status;
fail:
        o->core.producer_fd = safe_close(o->core.producer_fd);
        o->core.consumer_fd = safe_close(o->core.consumer_fd);
        for (size_t i = 0; i < o->core.n_extra; i++)
                o->core.extra[i].fd = safe_close(o->core.extra[i].fd);
        return EXIT_FAILURE;
}
