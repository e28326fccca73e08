/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl: the command-line consumer of traced. */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "tracectl.h"

#define DEFAULT_CONSUMER_SOCKET "/run/traced/consumer.sock"

static void help(void) {
        printf("Usage: tracectl [--socket PATH] COMMAND [ARGS...]\n"
               "\n"
               "Drives the traced tracing service (any Perfetto-protocol service).\n"
               "\n"
               "Commands:\n"
               "  record       record a trace into a file (from a config or quick flags)\n"
               "  attach KEY   wait for a detached session to end\n"
               "  stop KEY     stop a detached session\n"
               "  trigger NAME... activate triggers (sessions with trigger_config react)\n"
               "  query        list producers, data sources and sessions\n"
               "  snapshot NAME  write what a running session holds now into a file\n"
               "  capabilities show what the service supports\n"
               "  print FILE   dump a trace, one packet per line\n"
               "  summary FILE summarise a trace\n"
               "  report FILE  profile: top functions, folded stacks, flamegraph\n"
               "\n"
               "The consumer socket is --socket, else $PERFETTO_CONSUMER_SOCK_NAME,\n"
               "else " DEFAULT_CONSUMER_SOCKET ".\n"
               "'tracectl COMMAND --help' describes each command.\n"
               "\n"
               "Exit codes: 0 ok, 2 usage, 3 config error, 4 service unreachable,\n"
               "5 session failed, 1 anything else.\n");
}

/* Whether process pid's command line says it listens at path: an argument
 * names path, or none names a socket and path is in /run/traced (the
 * defaults). */
static bool cmdline_serves(const char *pid, const char *path) {
        char file[300], buf[4096];
        snprintf(file, sizeof(file), "/proc/%s/cmdline", pid);
        FILE *f = fopen(file, "re");
        if (!f)
                return false;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        bool names_socket = false;
        for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
                if (strstr(buf + i, path))
                        return true;
                names_socket = names_socket || strstr(buf + i, "-socket=");
        }
        return !names_socket && strncmp(path, "/run/traced/", 12) == 0;
}

/* Whether a traced process (or the systemd-socket-activate that will
 * start one) runs that will listen at path (one started a moment ago may
 * not yet). */
static bool traced_starting_at(const char *path) {
        DIR *d = opendir("/proc");
        if (!d)
                return false;
        bool found = false;
        for (struct dirent *e; !found && (e = readdir(d));) {
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                char file[300], comm[32] = "";
                snprintf(file, sizeof(file), "/proc/%s/comm", e->d_name);
                FILE *f = fopen(file, "re");
                if (!f)
                        continue;
                if (fgets(comm, sizeof(comm), f))
                        comm[strcspn(comm, "\n")] = '\0';
                fclose(f);
                /* systemd-socket-activate (its comm cut to 15 characters)
                 * binds the sockets itself, then execs traced. */
                found = (strcmp(comm, "traced") == 0 || strcmp(comm, "lt-traced") == 0 ||
                         strcmp(comm, "systemd-socket-") == 0) &&
                        cmdline_serves(e->d_name, path);
        }
        closedir(d);
        return found;
}

/* Why a connection to path failed, and what to do about it. */
static void connect_failed(const char *path, int r) {
        fprintf(stderr, "tracectl: cannot connect to the tracing service at %s: %s\n", path, strerror(-r));
        if (r == -ENOENT || r == -ECONNREFUSED)
                fprintf(stderr,
                        "tracectl: no service listens there: start it (systemctl start traced.socket), or name "
                        "its socket (tracectl --socket PATH)\n");
        else if (r == -EACCES || r == -EPERM)
                fprintf(stderr,
                        "tracectl: recording needs membership of group \"traced\" (usermod -aG traced USER, "
                        "then log in again) or root\n");
}

int tracectl_connect_port(struct tracectl *t, const char *path, const char *port) {
        int r = sd_event_default(&t->event);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot create an event loop: %s\n", strerror(-r));
                return EXIT_OTHER;
        }
        /* A service started a moment ago may not listen yet: while a traced
         * process that will listen there runs, wait for its socket up to
         * TRACECTL_CONNECT_WAIT_MS. */
        for (unsigned waited = 0;; waited += 100) {
                r = ipc_client_connect(t->event, path, &t->client);
                if (r >= 0 || (r != -ENOENT && r != -ECONNREFUSED) || waited >= TRACECTL_CONNECT_WAIT_MS ||
                    !traced_starting_at(path))
                        break;
                if (waited == 0)
                        fprintf(stderr, "tracectl: waiting for the tracing service at %s\n", path);
                (void) usleep(100 * 1000);
        }
        if (r < 0) {
                connect_failed(path, r);
                t->event = sd_event_unref(t->event);
                return EXIT_UNREACHABLE;
        }
        r = ipc_client_bind_sync(t->client, port, 10 * 1000000u);
        if (r < 0) {
                fprintf(stderr, "tracectl: %s does not offer %s: %s\n", path, port, strerror(-r));
                tracectl_disconnect(t);
                return EXIT_UNREACHABLE;
        }
        return 0;
}

int tracectl_connect(struct tracectl *t) {
        return tracectl_connect_port(t, t->socket, "ConsumerPort");
}

void tracectl_disconnect(struct tracectl *t) {
        t->client = ipc_client_free(t->client);
        t->event = sd_event_unref(t->event);
}

int tracectl_call(struct tracectl *t, const char *method, const ProtobufCMessage *args,
                  const ProtobufCMessageDescriptor *reply_desc, int fd, ProtobufCMessage **ret_reply, unsigned timeout_ms) {
        return consumer_call(t->event, t->client, method, args, reply_desc, fd, ret_reply, timeout_ms);
}

int main(int argc, char **argv) {
        struct tracectl t = {};
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        int c;

        /* Options before the command only. */
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        t.socket = optarg;
                        break;
                case 'h':
                        help();
                        return EXIT_OK;
                case 'V':
                        printf("tracectl %s\n", PACKAGE_VERSION);
                        return EXIT_OK;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                help();
                return EXIT_USAGE;
        }
        if (!t.socket)
                t.socket = getenv("PERFETTO_CONSUMER_SOCK_NAME");
        if (!t.socket)
                t.socket = DEFAULT_CONSUMER_SOCKET;
        (void) signal(SIGPIPE, SIG_IGN);

        const char *cmd = argv[optind];
        int sub_argc = argc - optind;
        char **sub_argv = argv + optind;
        optind = 0; /* reset getopt for the command */

        if (strcmp(cmd, "record") == 0)
                return cmd_record(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "attach") == 0)
                return cmd_attach(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "stop") == 0)
                return cmd_stop(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "trigger") == 0)
                return cmd_trigger(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "snapshot") == 0)
                return cmd_snapshot(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "query") == 0)
                return cmd_query(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "capabilities") == 0)
                return cmd_capabilities(&t, sub_argc, sub_argv);
        if (strcmp(cmd, "print") == 0)
                return cmd_print(sub_argc, sub_argv);
        if (strcmp(cmd, "summary") == 0)
                return cmd_summary(sub_argc, sub_argv);
        if (strcmp(cmd, "report") == 0)
                return cmd_report(sub_argc, sub_argv);
        if (strcmp(cmd, "help") == 0) {
                help();
                return EXIT_OK;
        }
        fprintf(stderr, "tracectl: unknown command \"%s\"; see tracectl --help\n", cmd);
        return EXIT_USAGE;
}
