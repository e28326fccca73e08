/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* traced-plugin-host: loads one producer plugin and connects it to the
 * tracing service as an ordinary producer with its own shared memory
 * buffer. traced's supervisor starts one per plugin, hands it its end of a
 * socketpair to the service and a pipe to show it is alive; a crash or a
 * hang here costs only this plugin. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "basic/capability.h"
#include "basic/macro.h"
#include "log/log.h"
#include "runner.h"

/* Exit status for a plugin that must not be restarted (bad plugin). */
#define EXIT_PLUGIN_REFUSED 78

/* Keeps only the capabilities the plugin declared (as this kernel grants
 * them): everything else leaves the bounding set (when this host may
 * change it: started as root) and the effective, permitted, inheritable
 * and ambient sets. Started by traced as the plugin hosts' user, the host
 * holds just those already, as ambient capabilities, and keeps them so. */
static int drop_capabilities(uint64_t declared, bool quiet) {
        uint64_t keep = capability_for_kernel(declared), mask = 0;

        for (unsigned cap = 0; cap < 64; cap++) {
                if (keep & ((uint64_t) 1 << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
                        return -errno;
        }
        /* Inheritable as permitted: the ambient set keeps them. */
        int r = capability_keep(keep, &mask);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (quiet)
                return 0;
        char held[512], missing[512];
        if (keep & ~mask)
                log_warning("Plugin host runs as uid %u without %s, which its plugin declares (traced does not run "
                            "as root, or does not hold them: see traced(8), PRIVILEGES).",
                            (unsigned) getuid(), capability_mask_names(keep & ~mask, missing, sizeof(missing)));
        log_info("Plugin host runs as uid %u, gid %u, with capabilities 0x%llx (%s).", (unsigned) getuid(),
                 (unsigned) getgid(), (unsigned long long) mask, capability_mask_names(mask, held, sizeof(held)));
        return 0;
}

/* From this watchdog period on, a beat every half of it (a quarter below). */
#define HEARTBEAT_HALF_FROM_USEC (10u * 1000000u)

struct heartbeat {
        int fd;
        uint64_t period_usec;
};

static void beat(struct heartbeat *hb) {
        /* A full pipe means the supervisor has not read yet: it knows we
         * are alive. */
        ssize_t k = write(hb->fd, "", 1);
        (void) k;
}

/* Refuses the plugin: the log says why, and so does the heartbeat pipe,
 * for the supervisor to tell the service (which names the plugin to a
 * consumer asking for a data source nobody offers). */
static int refuse(const struct heartbeat *hb, const char *plugin, const char *why) {
        log_error("Refusing plugin %s: %s.", plugin, why);
        if (hb && hb->fd >= 0) {
                ssize_t k = write(hb->fd, why, strlen(why));
                (void) k;
        }
        return EXIT_PLUGIN_REFUSED;
}

static int on_heartbeat(sd_event_source *s, uint64_t usec, void *userdata) {
        struct heartbeat *hb = userdata;
        beat(hb);
        (void) sd_event_source_set_time_relative(s, hb->period_usec);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int parse_fd(const char *s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || *end || v < 3 || v > 1 << 20)
                return -EINVAL;
        return (int) v;
}

static int run(int argc, char **argv) {
        enum { ARG_SOCKET_FD = 0x100, ARG_WATCHDOG_FD, ARG_WATCHDOG_USEC, ARG_PRINT_CAPS, ARG_PLUGIN_FD, ARG_CHECK, ARG_PRINT_DS };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "socket-fd", required_argument, NULL, ARG_SOCKET_FD },
                { "watchdog-fd", required_argument, NULL, ARG_WATCHDOG_FD },
                { "watchdog-usec", required_argument, NULL, ARG_WATCHDOG_USEC },
                { "print-capabilities", no_argument, NULL, ARG_PRINT_CAPS },
                { "plugin-fd", required_argument, NULL, ARG_PLUGIN_FD },
                { "check", no_argument, NULL, ARG_CHECK },
                { "print-data-sources", no_argument, NULL, ARG_PRINT_DS },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *socket_path = NULL;
        int socket_fd = -EBADF, plugin_fd = -EBADF;
        struct heartbeat hb = { .fd = -EBADF };
        bool print_caps = false, check = false, print_ds = false;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        char why[512];
        int c, r;

        log_setup("traced-plugin-host", LOG_TARGET_AUTO);
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        socket_path = optarg;
                        break;
                case ARG_SOCKET_FD:
                        socket_fd = parse_fd(optarg);
                        if (socket_fd < 0)
                                return log_error_errno(EINVAL, "Bad --socket-fd \"%s\".", optarg);
                        break;
                case ARG_WATCHDOG_FD:
                        hb.fd = parse_fd(optarg);
                        if (hb.fd < 0)
                                return log_error_errno(EINVAL, "Bad --watchdog-fd \"%s\".", optarg);
                        break;
                case ARG_WATCHDOG_USEC: {
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(optarg, &end, 10);
                        if (errno || *end || v < 1000)
                                return log_error_errno(EINVAL, "Bad --watchdog-usec \"%s\".", optarg);
                        /* Half the watchdog's time between beats leaves
                         * the supervisor seconds of slack for a loop held
                         * up by a loaded machine; a short watchdog beats
                         * at a quarter, so the slack stays over half a
                         * second down to 2 s. */
                        hb.period_usec = v >= HEARTBEAT_HALF_FROM_USEC ? v / 2 : v / 4;
                        break;
                }
                case ARG_PRINT_CAPS:
                        print_caps = true;
                        break;
                case ARG_CHECK:
                        check = true;
                        break;
                case ARG_PRINT_DS:
                        print_ds = true;
                        break;
                case ARG_PLUGIN_FD:
                        plugin_fd = parse_fd(optarg);
                        if (plugin_fd < 0)
                                return log_error_errno(EINVAL, "Bad --plugin-fd \"%s\".", optarg);
                        break;
                case 'h':
                        printf("Usage: traced-plugin-host [--socket PATH | --socket-fd FD]\n"
                               "                          [--watchdog-fd FD --watchdog-usec USEC]\n"
                               "                          [--plugin-fd FD] PLUGIN.so\n"
                               "       traced-plugin-host --print-capabilities [--plugin-fd FD] PLUGIN.so\n"
                               "       traced-plugin-host --check [--plugin-fd FD] PLUGIN.so\n"
                               "       traced-plugin-host --print-data-sources [--plugin-fd FD] PLUGIN.so\n"
                               "Loads one traced producer plugin and connects it to the service, or\n"
                               "prints the capabilities it declares (hexadecimal bits) and exits, or\n"
                               "loads it as it would to serve it and exits (0: it loaded), or\n"
                               "initializes it as it would to serve it, prints the data sources it\n"
                               "registers (NAME and the descriptor's flags set, one a line) and exits.\n"
                               "With --plugin-fd the plugin is the file open on FD (PLUGIN.so names it).\n");
                        return 0;
                default:
                        return -EINVAL;
                }
        }
        if (optind + 1 != argc)
                return log_error_errno(EINVAL, "Expected exactly one plugin path.");
        const char *path = argv[optind];
        /* The file traced's supervisor opened and checked (the plugin
         * directory may be out of this user's reach). */
        char fd_path[64];
        const char *load = path;
        if (plugin_fd >= 0) {
                (void) fcntl(plugin_fd, F_SETFD, FD_CLOEXEC);
                snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", plugin_fd);
                load = fd_path;
        }
        if ((int) print_caps + (int) check + (int) print_ds > 1)
                return log_error_errno(EINVAL, "--print-capabilities, --check and --print-data-sources exclude "
                                               "each other.");
        if (print_caps || check || print_ds) {
                /* traced's supervisor asks, before it limits itself, what
                 * the plugin declares: loaded holding nothing, answered.
                 * Or (--check) whether a host started as this one was
                 * (its user, its capabilities) can load the plugin:
                 * loaded as below, then nothing more. Or
                 * (--print-data-sources, for a plugin whose host starts
                 * when a session needs it) which data sources it offers:
                 * initialized as its host would do it, keeping only what
                 * it declares, then destroyed. */
                if (print_caps) {
                        r = drop_capabilities(0, true);
                        if (r < 0)
                                return log_error_errno(r, "Failed to drop capabilities: %m");
                }
                _cleanup_(plugin_runner_freep) struct plugin_runner *q = NULL;
                r = plugin_runner_load(load, &q, why, sizeof(why));
                if (r == -ENOEXEC)
                        return refuse(NULL, path, why);
                if (r < 0)
                        return log_error_errno(r, "Failed to load plugin %s: %m", path);
                if (check)
                        return 0;
                if (print_ds) {
                        r = drop_capabilities(plugin_runner_capabilities(q), true);
                        if (r < 0)
                                return log_error_errno(r, "Failed to restrict the capabilities of plugin %s: %m",
                                                       path);
                        r = sd_event_new(&event);
                        if (r < 0)
                                return log_error_errno(r, "Failed to create the event loop: %m");
                        r = plugin_runner_list_data_sources(q, event, stdout, why, sizeof(why));
                        if (r == -ENOEXEC)
                                return refuse(NULL, plugin_runner_name(q), why);
                        if (r < 0)
                                return log_error_errno(r, "Failed to list the data sources of plugin %s: %m", path);
                        return 0;
                }
                printf("%llx\n", (unsigned long long) plugin_runner_capabilities(q));
                return fflush(stdout) == 0 ? 0 : -EIO;
        }
        if (hb.fd >= 0) {
                (void) fcntl(hb.fd, F_SETFL, O_NONBLOCK);
                (void) fcntl(hb.fd, F_SETFD, FD_CLOEXEC);
                beat(&hb);
        }
        if (socket_fd >= 0)
                (void) fcntl(socket_fd, F_SETFD, FD_CLOEXEC);

        _cleanup_(plugin_runner_freep) struct plugin_runner *runner = NULL;
        r = plugin_runner_load(load, &runner, why, sizeof(why));
        if (r == -ENOEXEC)
                return refuse(&hb, path, why);
        if (r < 0)
                return log_error_errno(r, "Failed to load plugin %s: %m", path);
        r = drop_capabilities(plugin_runner_capabilities(runner), false);
        if (r < 0)
                return log_error_errno(r, "Failed to restrict the capabilities of plugin %s: %m",
                                       plugin_runner_name(runner));

        r = sd_event_default(&event);
        if (r < 0)
                return log_error_errno(r, "Failed to create the event loop: %m");
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        /* Started by traced (handed its connection): a SIGHUP for the
         * whole service (systemctl kill -s HUP) is the supervisor's
         * reload, not an end for the plugin. */
        if (socket_fd >= 0)
                sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
        if (hb.fd >= 0 && hb.period_usec > 0) {
                r = sd_event_add_time_relative(event, NULL, CLOCK_MONOTONIC, hb.period_usec, 0, on_heartbeat, &hb);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the heartbeat: %m");
        }

        r = plugin_runner_start(runner, event, TAKE_FD(socket_fd), socket_path, why, sizeof(why));
        if (r == -ENOEXEC)
                return refuse(&hb, plugin_runner_name(runner), why);
        if (r < 0)
                return log_error_errno(r, "%s: %s", plugin_runner_name(runner), why);
        log_info("Plugin %s %s loaded from %s.", plugin_runner_name(runner), plugin_runner_version(runner), path);
        r = plugin_runner_loop(runner, event);
        runner = plugin_runner_free(runner);
        safe_close(hb.fd);
        return r;
}

int main(int argc, char **argv) {
        int r = run(argc, argv);
        if (r == EXIT_PLUGIN_REFUSED)
                return EXIT_PLUGIN_REFUSED;
        return r < 0 ? EXIT_FAILURE : r > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
