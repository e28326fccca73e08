/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* traced: the tracing service daemon. */

#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "config.h"
#include "plugins.h"
#include "service.h"
#include "sockets.h"

#include <sys/socket.h>
#include <sys/un.h>

struct options {
        const char *producer_socket;
        const char *consumer_socket;
        const char *plugin_dir;
        const char *plugin_host;
        const char *config;
        bool no_plugins;
        enum log_target log_target;
};

static void help(void) {
        printf("Usage: traced [OPTIONS]\n"
               "\n"
               "The tracing service: accepts producers and consumers speaking the\n"
               "Perfetto tracing protocol on two UNIX sockets.\n"
               "\n"
               "  --producer-socket=PATH  producer socket when not socket-activated\n"
               "                          (default: $PERFETTO_PRODUCER_SOCK_NAME, else\n"
               "                          " TRACED_DEFAULT_PRODUCER_SOCKET ")\n"
               "  --consumer-socket=PATH  consumer socket when not socket-activated\n"
               "                          (default: $PERFETTO_CONSUMER_SOCK_NAME, else\n"
               "                          " TRACED_DEFAULT_CONSUMER_SOCKET ")\n"
               "  --plugin-dir=DIR        producer plugins to run (default: " PLUGINSDIR ")\n"
               "  --plugin-host=PATH      the plugin host binary (default: " LIBEXECDIR "/traced-plugin-host)\n"
               "  --no-plugins            run no plugins\n"
               "  --config=PATH           configuration file (default: " SYSCONFDIR "/traced/traced.conf)\n"
               "  --log-level=LEVEL       err, warning, notice, info (default), debug\n"
               "  --log-target=TARGET     auto (default), stderr, journal\n"
               "  -h --help               show this help\n"
               "  --version               show the version\n");
}

static int parse_argv(int argc, char **argv, struct options *o) {
        enum {
                ARG_PRODUCER = 0x100,
                ARG_CONSUMER,
                ARG_LOG_LEVEL,
                ARG_LOG_TARGET,
                ARG_VERSION,
                ARG_PLUGIN_DIR,
                ARG_PLUGIN_HOST,
                ARG_NO_PLUGINS,
                ARG_CONFIG,
        };
        static const struct option opts[] = {
                { "producer-socket", required_argument, NULL, ARG_PRODUCER },
                { "consumer-socket", required_argument, NULL, ARG_CONSUMER },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "plugin-dir", required_argument, NULL, ARG_PLUGIN_DIR },
                { "plugin-host", required_argument, NULL, ARG_PLUGIN_HOST },
                { "no-plugins", no_argument, NULL, ARG_NO_PLUGINS },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case ARG_PRODUCER:
                        o->producer_socket = optarg;
                        break;
                case ARG_CONSUMER:
                        o->consumer_socket = optarg;
                        break;
                case ARG_PLUGIN_DIR:
                        o->plugin_dir = optarg;
                        break;
                case ARG_PLUGIN_HOST:
                        o->plugin_host = optarg;
                        break;
                case ARG_NO_PLUGINS:
                        o->no_plugins = true;
                        break;
                case ARG_CONFIG:
                        o->config = optarg;
                        break;
                case ARG_LOG_LEVEL: {
                        int l = log_level_from_string(optarg);
                        if (l < 0)
                                return log_error_errno(EINVAL, "Unknown log level \"%s\".", optarg);
                        log_set_max_level(l);
                        break;
                }
                case ARG_LOG_TARGET:
                        if (strcmp(optarg, "stderr") == 0)
                                o->log_target = LOG_TARGET_STDERR;
                        else if (strcmp(optarg, "journal") == 0)
                                o->log_target = LOG_TARGET_JOURNAL;
                        else if (strcmp(optarg, "auto") == 0)
                                o->log_target = LOG_TARGET_AUTO;
                        else
                                return log_error_errno(EINVAL, "Unknown log target \"%s\".", optarg);
                        log_setup("traced", o->log_target);
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("traced %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        return -EINVAL;
                }
        }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument \"%s\".", argv[optind]);
        return 1;
}

static struct traced_service *the_service;
static struct plugins *the_plugins;

static void notify_status(struct traced_service *svc) {
        size_t started = 0;
        for (struct session *s = svc->sessions; s; s = s->next)
                if (s->state == SESSION_STARTED)
                        started++;
        (void) sd_notifyf(false, "STATUS=%zu producer(s), %zu session(s), %zu tracing", svc->n_producers,
                          svc->n_sessions, started);
}

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct traced_service *svc = userdata;

        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down");
        log_info("Received %s, shutting down.", strsignal((int) si->ssi_signo));
        /* Finish open trace files, then leave the loop. */
        service_shutdown(svc);
        plugins_stop(the_plugins);
        the_plugins = NULL;
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int run(int argc, char **argv) {
        struct options o = { .log_target = LOG_TARGET_AUTO };
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        struct listen_sockets ls = { .producer_fd = -EBADF, .consumer_fd = -EBADF };
        int r;

        log_setup("traced", LOG_TARGET_AUTO);
        r = parse_argv(argc, argv, &o);
        if (r <= 0)
                return r;

        /* A bad configuration file is an error naming its line and field;
         * a missing one means the defaults. */
        struct traced_config cfg;
        _cleanup_free_ char *cfg_error = NULL;
        r = traced_config_load(o.config ? o.config : SYSCONFDIR "/traced/traced.conf", &cfg, &cfg_error);
        if (r < 0) {
                if (cfg_error)
                        log_error("%s", cfg_error);
                return log_error_errno(r, "Failed to load the configuration: %m");
        }

        if (!o.producer_socket)
                o.producer_socket = getenv("PERFETTO_PRODUCER_SOCK_NAME");
        if (!o.producer_socket)
                o.producer_socket = TRACED_DEFAULT_PRODUCER_SOCKET;
        if (!o.consumer_socket)
                o.consumer_socket = getenv("PERFETTO_CONSUMER_SOCK_NAME");
        if (!o.consumer_socket)
                o.consumer_socket = TRACED_DEFAULT_CONSUMER_SOCKET;

        /* A consumer or producer going away mid-write must not kill us. */
        (void) signal(SIGPIPE, SIG_IGN);

        r = sd_event_default(&event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate event loop: %m");

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");

        r = listen_sockets_open(o.producer_socket, o.consumer_socket, &ls);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the listening sockets (%s, %s): %m", o.producer_socket,
                                       o.consumer_socket);

        r = service_new(event, &the_service);
        if (r < 0) {
                listen_sockets_close(&ls);
                return log_error_errno(r, "Failed to create the service: %m");
        }
        the_service->state_changed = notify_status;

        /* Plugin hosts connect to the producer socket by its path. */
        char producer_path[sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1] = "";
        struct sockaddr_un sa;
        socklen_t salen = sizeof(sa);
        if (getsockname(ls.producer_fd, (struct sockaddr *) &sa, &salen) == 0 && sa.sun_family == AF_UNIX &&
            salen > offsetof(struct sockaddr_un, sun_path) + 1 && sa.sun_path[0] != '\0')
                snprintf(producer_path, sizeof(producer_path), "%.*s",
                         (int) (salen - offsetof(struct sockaddr_un, sun_path)), sa.sun_path);

        r = service_attach_listeners(the_service, TAKE_FD(ls.producer_fd), TAKE_FD(ls.consumer_fd));
        if (r < 0) {
                the_service = service_free(the_service);
                return log_error_errno(r, "Failed to listen: %m");
        }

        (void) sd_event_add_signal(event, NULL, SIGTERM, on_terminate, the_service);
        (void) sd_event_add_signal(event, NULL, SIGINT, on_terminate, the_service);
        /* Sends WATCHDOG=1 on its own when WATCHDOG_USEC is set. */
        r = sd_event_set_watchdog(event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog: %m");

        if (ls.from_systemd)
                log_info("Serving on sockets passed by systemd.");
        else
                log_info("Serving producers on %s and consumers on %s.", o.producer_socket, o.consumer_socket);
        if (!o.no_plugins && cfg.plugins_enabled) {
                if (!producer_path[0])
                        log_warning("The producer socket has no path; plugins are not started.");
                else {
                        r = plugins_start(event,
                                          o.plugin_dir ? o.plugin_dir : cfg.plugin_dir ? cfg.plugin_dir : PLUGINSDIR,
                                          o.plugin_host ? o.plugin_host : LIBEXECDIR "/traced-plugin-host",
                                          producer_path, cfg.disabled, cfg.n_disabled, &the_plugins);
                        if (r < 0)
                                log_warning_errno(r, "Failed to start the plugins: %m");
                }
        }
        (void) sd_notify(false, "READY=1");
        notify_status(the_service);

        r = sd_event_loop(event);
        traced_config_done(&cfg);
        plugins_stop(the_plugins);
        the_plugins = NULL;
        the_service = service_free(the_service);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}

int main(int argc, char **argv) {
        int r = run(argc, argv);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
