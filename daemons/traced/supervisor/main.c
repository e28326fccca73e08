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

#include "basic/capability.h"
#include "basic/macro.h"
#include "log/log.h"
#include "supervisor/config.h"
#include "core/core.h"
#include "supervisor/in-process.h"
#include "supervisor/privileges.h"
#include "supervisor/sockets.h"
#include "supervisor/supervisor.h"

#include <sys/socket.h>
#include <sys/un.h>

struct options {
        const char *producer_socket;
        const char *consumer_socket;
        const char *relay_endpoints;
        const char *plugin_dir;
        const char *plugin_host;
        const char *config;
        const char *user;
        const char *plugin_user;
        const char *sessions_dir;
        bool no_plugins;
        bool plugins_in_process;
        int plugin_hosts_lazy; /* -1: traced.conf's hosts= */
        enum log_target log_target;
};

static void help(void) {
        printf("Usage: traced [OPTIONS]\n"
               "\n"
               "The tracing service: accepts producers and consumers speaking the\n"
               "Perfetto tracing protocol on two UNIX sockets.\n"
               "\n"
               "  --producer-socket=LIST  producer sockets when not socket-activated, comma-\n"
               "                          separated: PATH, @ABSTRACT, HOST:PORT, [V6]:PORT,\n"
               "                          vsock://CID:PORT (default: $PERFETTO_PRODUCER_SOCK_NAME,\n"
               "                          else " TRACED_DEFAULT_PRODUCER_SOCKET ")\n"
               "  --enable-relay-endpoint-on=LIST\n"
               "                          producer sockets (as written in --producer-socket)\n"
               "                          that offer the RelayPort to traced_relay\n"
               "  --consumer-socket=PATH  consumer socket when not socket-activated\n"
               "                          (default: $PERFETTO_CONSUMER_SOCK_NAME, else\n"
               "                          " TRACED_DEFAULT_CONSUMER_SOCKET ")\n"
               "  --plugin-dir=DIR        producer plugins to run (default: " PLUGINSDIR ")\n"
               "  --plugin-host=PATH      the plugin host binary (default: " LIBEXECDIR "/traced-plugin-host)\n"
               "  --no-plugins            run no plugins\n"
               "  --plugins-in-process    run the plugins as threads of traced, without\n"
               "                          isolation (debugging)\n"
               "  --plugin-hosts=eager|lazy\n"
               "                          start every plugin host with traced, or each when\n"
               "                          a session names one of its data sources (default:\n"
               "                          traced.conf's hosts=, else lazy)\n"
               "  --user=USER             the service core's user when started as root\n"
               "                          (default: traced, else nobody)\n"
               "  --plugin-user=USER      the plugin hosts' user when started as root\n"
               "                          (default: traced-plugin, else nobody)\n"
               "  --config=PATH           configuration file (default: " SYSCONFDIR "/traced/traced.conf)\n"
               "  --sessions-dir=DIR      resident sessions' TraceConfig files, NAME.cfg (default:\n"
               "                          traced.conf's sessions_directory, else\n"
               "                          " SYSCONFDIR "/traced/sessions.d; empty: none)\n"
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
                ARG_IN_PROCESS,
                ARG_USER,
                ARG_PLUGIN_USER,
                ARG_RELAY,
                ARG_SESSIONS_DIR,
                ARG_PLUGIN_HOSTS,
        };
        static const struct option opts[] = {
                { "producer-socket", required_argument, NULL, ARG_PRODUCER },
                { "consumer-socket", required_argument, NULL, ARG_CONSUMER },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "plugin-dir", required_argument, NULL, ARG_PLUGIN_DIR },
                { "plugin-host", required_argument, NULL, ARG_PLUGIN_HOST },
                { "no-plugins", no_argument, NULL, ARG_NO_PLUGINS },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "plugins-in-process", no_argument, NULL, ARG_IN_PROCESS },
                { "user", required_argument, NULL, ARG_USER },
                { "plugin-user", required_argument, NULL, ARG_PLUGIN_USER },
                { "enable-relay-endpoint-on", required_argument, NULL, ARG_RELAY },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "sessions-dir", required_argument, NULL, ARG_SESSIONS_DIR },
                { "plugin-hosts", required_argument, NULL, ARG_PLUGIN_HOSTS },
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
                case ARG_SESSIONS_DIR:
                        if (optarg[0] && optarg[0] != '/') {
                                log_error("--sessions-dir=%s: not an absolute path.", optarg);
                                return -EINVAL;
                        }
                        o->sessions_dir = optarg;
                        break;
                case ARG_NO_PLUGINS:
                        o->no_plugins = true;
                        break;
                case ARG_CONFIG:
                        o->config = optarg;
                        break;
                case ARG_IN_PROCESS:
                        o->plugins_in_process = true;
                        break;
                case ARG_PLUGIN_HOSTS:
                        if (strcmp(optarg, "eager") != 0 && strcmp(optarg, "lazy") != 0)
                                return log_error_errno(EINVAL, "--plugin-hosts=%s: not eager or lazy.", optarg);
                        o->plugin_hosts_lazy = optarg[0] == 'l';
                        break;
                case ARG_USER:
                        o->user = optarg;
                        break;
                case ARG_PLUGIN_USER:
                        o->plugin_user = optarg;
                        break;
                case ARG_RELAY:
                        o->relay_endpoints = optarg;
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

/* The user a process of traced runs as when traced starts as root (what:
 * its role, for the log): the configured one must exist; the default
 * falls back to nobody. */
static int service_user(const char *what, const char *configured, const char *fallback, uid_t *ret_uid,
                        gid_t *ret_gid) {
        int r;
        if (configured) {
                r = privileges_lookup_user(configured, ret_uid, ret_gid);
                if (r < 0)
                        return log_error_errno(r, "Unknown user \"%s\" for %s.", configured, what);
                return 0;
        }
        r = privileges_lookup_user(fallback, ret_uid, ret_gid);
        if (r >= 0)
                return 0;
        r = privileges_lookup_user("nobody", ret_uid, ret_gid);
        if (r >= 0) {
                log_notice("No user \"%s\" (see sysusers.d/traced.conf); %s runs as nobody.", fallback, what);
                return 0;
        }
        *ret_uid = 65534;
        *ret_gid = 65534;
        log_notice("No user \"%s\" or nobody; %s runs as uid 65534.", fallback, what);
        return 0;
}

/* Started as root outside systemd, traced would hold every capability:
 * keep only the supervisor's own and those its plugins declare (under
 * systemd the unit's CapabilityBoundingSet= is the outer limit; this is
 * the inner one). */
static int limit_supervisor(struct plugins_options *po, bool plugins) {
        uint64_t keep = PRIVILEGES_SUPERVISOR_CAPS, declared = 0, kept = 0;
        int r;

        if (plugins) {
                r = plugins_declared_capabilities(po, &declared);
                if (r < 0)
                        log_debug_errno(r, "No plugin directory %s: %m", po->dir);
                keep |= declared;
        }
        r = privileges_limit(keep, &kept);
        if (r < 0)
                return log_error_errno(r, "Failed to limit the supervisor's capabilities: %m");
        char names[512];
        log_info("Supervisor keeps capabilities 0x%llx (%s); its plugins declare 0x%llx.",
                 (unsigned long long) kept, capability_mask_names(kept, names, sizeof(names)),
                 (unsigned long long) declared);
        return 0;
}

static int run(int argc, char **argv) {
        struct options o = { .log_target = LOG_TARGET_AUTO, .plugin_hosts_lazy = -1 };
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
                o.producer_socket = cfg.producer_sockets;
        if (!o.producer_socket)
                o.producer_socket = TRACED_DEFAULT_PRODUCER_SOCKET;
        if (!o.relay_endpoints)
                o.relay_endpoints = cfg.relay_endpoint_on;
        if (!o.consumer_socket)
                o.consumer_socket = getenv("PERFETTO_CONSUMER_SOCK_NAME");
        if (!o.consumer_socket)
                o.consumer_socket = TRACED_DEFAULT_CONSUMER_SOCKET;
        (void) signal(SIGPIPE, SIG_IGN);

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
                r = log_error_errno(errno, "Failed to block signals: %m");
                goto out;
        }

        bool in_process = o.plugins_in_process || cfg.plugins_in_process;
        bool plugins = !o.no_plugins && cfg.plugins_enabled;
        const char *plugin_dir = o.plugin_dir ? o.plugin_dir : cfg.plugin_dir ? cfg.plugin_dir : PLUGINSDIR;
        struct supervisor_options so = {
                .config_path = o.config ? o.config : SYSCONFDIR "/traced/traced.conf",
                .config = &cfg,
                .sessions_dir = o.sessions_dir,
                .plugins = plugins,
                .plugin = {
                        .dir = plugin_dir,
                        .host_binary = o.plugin_host ? o.plugin_host : LIBEXECDIR "/traced-plugin-host",
                        .disabled = cfg.disabled,
                        .n_disabled = cfg.n_disabled,
                        .watchdog_usec = (uint64_t) cfg.watchdog_sec * 1000000u,
                        .lazy = o.plugin_hosts_lazy >= 0 ? o.plugin_hosts_lazy : cfg.plugin_hosts_lazy,
                        .idle_usec = (uint64_t) cfg.idle_stop_sec * 1000000u,
                },
        };
        if (!in_process && geteuid() == 0) {
                r = service_user("the service core", o.user ? o.user : cfg.user, TRACED_USER, &so.uid, &so.gid);
                if (r < 0)
                        goto out;
                so.drop_user = true;
        }
        if (!in_process && plugins && geteuid() == 0) {
                r = service_user("every plugin host", o.plugin_user ? o.plugin_user : cfg.plugin_user,
                                 TRACED_PLUGIN_USER, &so.plugin.host_uid, &so.plugin.host_gid);
                if (r < 0)
                        goto out;
                /* A plugin user of uid 0 (plugin_user=root) keeps today's
                 * hosts: root with their plugins' capabilities. */
                so.plugin.switch_user = so.plugin.host_uid != 0;
                so.plugin.user_required = cfg.plugin_user_required;
        }

        const char *bad = NULL;
        r = listen_sockets_open_list(o.producer_socket, o.consumer_socket, o.relay_endpoints, &ls, &bad);
        if (r < 0) {
                if (bad)
                        log_error_errno(r, "Failed to listen on \"%s\": %m", bad);
                else
                        log_error_errno(r, "Failed to set up the listening sockets (%s, %s): %m",
                                        o.producer_socket, o.consumer_socket);
                goto out;
        }
        if (!in_process && geteuid() == 0) {
                r = limit_supervisor(&so.plugin, plugins);
                if (r < 0)
                        goto out;
        }
        so.core = (struct core_options) {
                .producer_fd = TAKE_FD(ls.producer_fd),
                .producer_relay = ls.producer_relay,
                .n_extra = ls.n_extra,
                .consumer_fd = TAKE_FD(ls.consumer_fd),
                .from_systemd = ls.from_systemd,
                .producer_path = o.producer_socket,
                .consumer_path = o.consumer_socket,
                .control_fd = -EBADF,
                .trace_dir = traced_config_trace_directory(&cfg),
                .sessions_dir = o.sessions_dir ? (o.sessions_dir[0] ? o.sessions_dir : NULL)
                                               : traced_config_sessions_directory(&cfg),
                .max_use = cfg.max_use,
                .keep_free = cfg.keep_free,
                .trusted_uids = cfg.trusted_uids,
                .n_trusted_uids = cfg.n_trusted_uids,
                /* In-process plugins are not waited for. */
                .plugin_start_timeout_usec = plugins && !in_process ? (uint64_t) cfg.start_timeout_sec * 1000000u : 0,
        };
        for (size_t i = 0; i < ls.n_extra; i++) {
                so.core.extra[i] = ls.extra[i];
                ls.extra[i].fd = -EBADF;
        }
        ls.n_extra = 0;
        static const char *const default_trusted[] = TRACED_CONFIG_DEFAULT_TRUSTED_DATA_SOURCES;
        if (cfg.trusted_data_sources_set) {
                so.core.trusted_names = (const char *const *) cfg.trusted_data_sources;
                so.core.n_trusted_names = cfg.n_trusted_data_sources;
        } else {
                so.core.trusted_names = default_trusted;
                so.core.n_trusted_names = ELEMENTSOF(default_trusted);
        }

        if (in_process) {
                struct in_process_options ipo = {
                        .dir = plugin_dir,
                        .disabled = cfg.disabled,
                        .n_disabled = cfg.n_disabled,
                };
                if (plugins) {
                        so.core.started = in_process_start;
                        so.core.stopping = in_process_stop;
                        so.core.userdata = &ipo;
                }
                r = core_run(&so.core);
        } else
                r = supervisor_run(&so) == EXIT_SUCCESS ? 0 : -EIO;
        if (!ls.from_systemd)
                listen_sockets_remove_files(o.producer_socket, o.consumer_socket);
out:
        traced_config_done(&cfg);
        return r;
}

int main(int argc, char **argv) {
        int r = run(argc, argv);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
