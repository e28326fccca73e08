/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "test-scratch.h"
#include "traced-instance.h"

#ifndef TRACED_BINARY
#error "TRACED_BINARY must be defined"
#endif

static void sleep_ms(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

int traced_instance_start(struct traced_instance *t, bool socket_activated) {
        static const char *const no_plugins[] = { "--no-plugins", NULL };
        return traced_instance_start_args(t, socket_activated, no_plugins);
}

static int spawn_instance(struct traced_instance *t, bool socket_activated, const char *const *args);

/* After a start that failed: nothing of it stays, neither a process nor
 * the directory (a failed .init is not followed by the suite's .fini). */
static int instance_discard(struct traced_instance *t, int r) {
        if (t->pid > 0) {
                (void) kill(t->pid, SIGKILL);
                (void) waitpid(t->pid, NULL, 0);
        }
        t->pid = 0;
        if (t->dir[0]) {
                (void) rm_rf(t->dir);
                t->dir[0] = '\0';
        }
        return r;
}

int traced_instance_start_args(struct traced_instance *t, bool socket_activated, const char *const *args) {
        memset(t, 0, sizeof(*t));
        int r = test_mkdtemp(t->dir, sizeof(t->dir), "traced-test-");
        if (r < 0) {
                t->dir[0] = '\0';
                return r;
        }
        snprintf(t->producer_path, sizeof(t->producer_path), "%s/producer.sock", t->dir);
        snprintf(t->consumer_path, sizeof(t->consumer_path), "%s/consumer.sock", t->dir);
        snprintf(t->log_path, sizeof(t->log_path), "%s/traced.log", t->dir);
        /* traced's TMPDIR (where SaveTraceForBugreport writes), open to the
         * unprivileged service core like /tmp. */
        snprintf(t->tmp_dir, sizeof(t->tmp_dir), "%s/tmp", t->dir);
        if (chmod(t->dir, 0711) < 0 || mkdir(t->tmp_dir, 0755) < 0 || chmod(t->tmp_dir, 01777) < 0)
                return instance_discard(t, -errno);
        r = spawn_instance(t, socket_activated, args);
        if (r < 0)
                return instance_discard(t, r);
        return 0;
}

int traced_instance_restart(struct traced_instance *t, bool socket_activated, const char *const *args) {
        static const char *const no_plugins[] = { "--no-plugins", NULL };
        if (t->pid > 0)
                return -EBUSY;
        (void) unlink(t->producer_path);
        (void) unlink(t->consumer_path);
        return spawn_instance(t, socket_activated, args ? args : no_plugins);
}

int traced_instance_restart_conf(struct traced_instance *t, const char *conf, const char *const *args) {
        static const char *const no_plugins[] = { "--no-plugins", NULL };
        char path[400], arg[420];
        const char *argv[40];
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/traced.conf", t->dir);
        FILE *f = fopen(path, "we");
        if (!f)
                return -errno;
        fputs(conf, f);
        if (fclose(f) != 0)
                return -errno;
        snprintf(arg, sizeof(arg), "--config=%s", path);
        for (const char *const *a = args ? args : no_plugins; *a && n < 38; a++)
                argv[n++] = *a;
        argv[n++] = arg;
        argv[n] = NULL;
        return traced_instance_restart(t, true, argv);
}

/* Whether a UNIX socket bound at path is listening, from /proc/net/unix
 * (its flags carry __SO_ACCEPTCON, 0x10000, once listen() ran). Looking
 * does not connect: the service sees no client. */
static bool socket_listens(const char *path) {
        FILE *f = fopen("/proc/net/unix", "re");
        if (!f)
                return access(path, F_OK) == 0;
        char line[1024];
        bool found = false;
        size_t plen = strlen(path);
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long flags;
                char *sp = strrchr(line, ' ');
                if (!sp || sscanf(line, "%*s %*s %*s %lx", &flags) != 1)
                        continue;
                sp++;
                found = (flags & 0x10000) && strncmp(sp, path, plen) == 0 && (sp[plen] == '\n' || sp[plen] == '\0');
        }
        fclose(f);
        return found;
}

static int spawn_instance(struct traced_instance *t, bool socket_activated, const char *const *args) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int fd = open(t->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        dup2(fd, STDOUT_FILENO);
                        dup2(fd, STDERR_FILENO);
                }
                unsetenv("JOURNAL_STREAM");
                unsetenv("NOTIFY_SOCKET");
                char *argv[40];
                size_t n = 0;
                char l1[320], l2[320], tmpdir[340];
                snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", t->tmp_dir);
                setenv("TMPDIR", t->tmp_dir, 1);
                if (socket_activated) {
                        snprintf(l1, sizeof(l1), "--listen=%s", t->producer_path);
                        snprintf(l2, sizeof(l2), "--listen=%s", t->consumer_path);
                        argv[n++] = (char *) "systemd-socket-activate";
                        argv[n++] = l1;
                        argv[n++] = l2;
                        argv[n++] = (char *) "--fdname=producer:consumer";
                        argv[n++] = (char *) "-E";
                        argv[n++] = (char *) "TRACED_LOG_LEVEL=debug";
                        argv[n++] = (char *) "-E";
                        argv[n++] = tmpdir;
                        /* The activator passes on only what it is told to:
                         * the ftrace plugin's reader and sub-buffer
                         * switches, when set. */
                        if (getenv("TRACED_FTRACE_READ")) {
                                argv[n++] = (char *) "-E";
                                argv[n++] = (char *) "TRACED_FTRACE_READ";
                        }
                        if (getenv("TRACED_FTRACE_SUBBUF_KB")) {
                                argv[n++] = (char *) "-E";
                                argv[n++] = (char *) "TRACED_FTRACE_SUBBUF_KB";
                        }
                        /* The heap plugin's directory (state page and
                         * socket) of a test that has its own. */
                        if (getenv("TRACED_HEAP_DIR")) {
                                argv[n++] = (char *) "-E";
                                argv[n++] = (char *) "TRACED_HEAP_DIR";
                        }
                        argv[n++] = (char *) TRACED_BINARY;
                } else {
                        snprintf(l1, sizeof(l1), "--producer-socket=%s", t->producer_path);
                        snprintf(l2, sizeof(l2), "--consumer-socket=%s", t->consumer_path);
                        argv[n++] = (char *) TRACED_BINARY;
                        argv[n++] = l1;
                        argv[n++] = l2;
                        argv[n++] = (char *) "--log-level=debug";
                }
                argv[n++] = (char *) "--log-target=stderr";
                /* No resident sessions from the machine's directory: a
                 * test that wants some names its own (later wins). */
                argv[n++] = (char *) "--sessions-dir=";
                for (size_t i = 0; args && args[i] && n < 38; i++)
                        argv[n++] = (char *) args[i];
                argv[n] = NULL;
                execvp(argv[0], argv);
                _exit(127);
        }
        t->pid = pid;

        /* Wait until both sockets listen (made by the activator or by
         * traced itself): a socket's file exists from its bind(), and a
         * connect() before its listen() is refused. */
        for (int i = 0; i < 500; i++) {
                if (socket_listens(t->producer_path) && socket_listens(t->consumer_path))
                        return 0;
                if (!traced_instance_alive(t))
                        return -ECHILD;
                sleep_ms(10);
        }
        return -ETIMEDOUT;
}

bool traced_instance_alive(struct traced_instance *t) {
        int status;
        if (t->pid <= 0)
                return false;
        pid_t r = waitpid(t->pid, &status, WNOHANG);
        if (r == t->pid) {
                t->pid = -(int) (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) - 1;
                return false;
        }
        return r == 0;
}

bool traced_instance_was_activated(const struct traced_instance *t) {
        char line[1024];
        bool found = false;
        FILE *f = fopen(t->log_path, "r");
        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, "Execing") != NULL || strstr(line, "traced:") != NULL;
        fclose(f);
        return found;
}

int traced_instance_stop(struct traced_instance *t) {
        int status = 0;
        if (t->pid > 0) {
                kill(t->pid, SIGTERM);
                /* traced finishes every session first: a flush waits up to
                 * 5 s for a producer of this process that is not served
                 * meanwhile, and the stop of its data sources as long. */
                for (int i = 0; i < 3000; i++) {
                        pid_t r = waitpid(t->pid, &status, WNOHANG);
                        if (r == t->pid)
                                break;
                        if (i == 2999) {
                                kill(t->pid, SIGKILL);
                                waitpid(t->pid, &status, 0);
                                return -ETIMEDOUT;
                        }
                        sleep_ms(10);
                }
                t->pid = 0;
                if (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM && !traced_instance_was_activated(t))
                        return 0; /* the activator, waiting for a first connection */
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        return t->pid < 0 ? -t->pid - 1 : 0;
}

pid_t traced_instance_core_pid(const struct traced_instance *t) {
        char path[64];
        int pid = -1;
        if (t->pid <= 0)
                return -1;
        /* The supervisor's children: the core, started first, then the
         * plugin hosts. */
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) t->pid, (int) t->pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        if (fscanf(f, "%d", &pid) != 1)
                pid = -1;
        fclose(f);
        return pid;
}

void traced_instance_dump_log(const struct traced_instance *t) {
        FILE *f = fopen(t->log_path, "r");
        char line[1024];
        if (!f)
                return;
        fprintf(stderr, "---- traced log (%s)\n", t->log_path);
        while (fgets(line, sizeof(line), f))
                fputs(line, stderr);
        fclose(f);
}

int traced_instance_destroy(struct traced_instance *t) {
        if (!t->dir[0])
                return 0;
        int st = traced_instance_stop(t);
        if (st != 0)
                traced_instance_dump_log(t);
        int r = test_scratch_remove(t->dir);
        if (r < 0)
                fprintf(stderr, "could not remove %s: %s\n", t->dir, strerror(-r));
        t->dir[0] = '\0';
        return st;
}

bool traced_test_setup(struct traced_instance *t, sd_event **ret_event) {
        if (sd_event_new(ret_event) < 0)
                return false;
        if (traced_instance_start(t, true) < 0) {
                *ret_event = sd_event_unref(*ret_event);
                return false;
        }
        return true;
}

bool traced_test_teardown(struct traced_instance *t, sd_event **event) {
        int st = traced_instance_destroy(t);
        *event = sd_event_unref(*event);
        return st == 0;
}

unsigned test_free_tcp_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(sa);
        unsigned port = 0;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return 0;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 && getsockname(fd, (struct sockaddr *) &sa, &l) == 0)
                port = ntohs(sa.sin_port);
        close(fd);
        return port;
}

int traced_instance_start_tcp(struct traced_instance *t, unsigned *ret_port) {
        static char prod[700];
        int r = -EADDRINUSE;
        /* A free port may be taken by others before traced binds it. */
        for (int attempt = 0; attempt < 5 && r == -EADDRINUSE; attempt++) {
                unsigned port = test_free_tcp_port();
                if (port == 0)
                        return -EADDRNOTAVAIL;
                /* The UNIX path is only known once the directory is made:
                 * start once to learn it. */
                const char *const args0[] = { "--no-plugins", NULL };
                r = traced_instance_start_args(t, false, args0);
                if (r < 0)
                        return r;
                (void) traced_instance_stop(t);
                snprintf(prod, sizeof(prod), "--producer-socket=%s,127.0.0.1:%u", t->producer_path, port);
                const char *const args[] = { "--no-plugins", prod, NULL };
                r = traced_instance_restart(t, false, args);
                if (r >= 0)
                        *ret_port = port;
                else {
                        /* This try's directory goes with it. */
                        (void) instance_discard(t, r);
                        r = -EADDRINUSE;
                }
        }
        return r;
}
