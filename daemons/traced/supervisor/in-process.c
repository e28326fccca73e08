/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "supervisor/in-process.h"
#include "runner.h"
#include "core/service.h"

#define MAX_PLUGINS 64

struct plugin_thread {
        struct plugin_runner *runner;
        char *path;
        int socket_fd;
        int stop_fd;
        pthread_t thread;
        bool running;
};

struct in_process {
        struct plugin_thread threads[MAX_PLUGINS];
        size_t n;
};

static int on_stop(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static void *thread_main(void *arg) {
        struct plugin_thread *t = arg;
        sd_event *event = NULL;
        char why[512];
        int r;

        r = sd_event_new(&event);
        if (r >= 0)
                r = sd_event_add_io(event, NULL, t->stop_fd, EPOLLIN, on_stop, t);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the thread of plugin %s: %m", plugin_runner_name(t->runner));
                safe_close(t->socket_fd);
                goto out;
        }
        r = plugin_runner_start(t->runner, event, TAKE_FD(t->socket_fd), NULL, why, sizeof(why));
        if (r < 0) {
                log_error("Skipping plugin %s: %s.", plugin_runner_name(t->runner), why);
                goto out;
        }
        log_info("Plugin %s %s running in process (from %s).", plugin_runner_name(t->runner),
                 plugin_runner_version(t->runner), t->path);
        r = sd_event_loop(event);
        if (r != 0)
                log_warning("Plugin %s lost its connection to the service; it stays stopped.",
                            plugin_runner_name(t->runner));
out:
        t->runner = plugin_runner_free(t->runner);
        sd_event_unref(event);
        return NULL;
}

int in_process_start(sd_event *event, struct traced_service *svc, void *userdata) {
        struct in_process_options *o = userdata;
        char *paths[MAX_PLUGINS];
        char why[512];

        struct in_process *ip = calloc(1, sizeof(*ip));
        if (!ip)
                return -ENOMEM;
        o->state = ip;
        int n = plugins_scan(o->dir, o->disabled, o->n_disabled, paths, MAX_PLUGINS);
        if (n < 0) {
                log_notice_errno(n, "No plugin directory %s: %m", o->dir);
                return 0;
        }
        log_warning("Running %d plugin(s) inside traced: no isolation, for debugging only.", n);
        for (int i = 0; i < n; i++) {
                struct plugin_thread *t = &ip->threads[ip->n];
                *t = (struct plugin_thread) { .path = paths[i], .socket_fd = -EBADF, .stop_fd = -EBADF };
                int r = plugin_runner_load(paths[i], &t->runner, why, sizeof(why));
                if (r < 0) {
                        if (r == -ENOEXEC)
                                log_error("Refusing plugin %s: %s.", paths[i], why);
                        else
                                log_error_errno(r, "Failed to load plugin %s: %m", paths[i]);
                        free(paths[i]);
                        continue;
                }
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
                    (t->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
                        log_error_errno(errno, "Failed to connect plugin %s: %m", paths[i]);
                        t->runner = plugin_runner_free(t->runner);
                        free(paths[i]);
                        continue;
                }
                r = service_adopt_producer(svc, sv[0], getpid(), NULL);
                if (r < 0) {
                        log_error_errno(r, "Failed to serve plugin %s: %m", paths[i]);
                        safe_close(sv[1]);
                        safe_close(t->stop_fd);
                        t->runner = plugin_runner_free(t->runner);
                        free(paths[i]);
                        continue;
                }
                t->socket_fd = sv[1];
                r = -pthread_create(&t->thread, NULL, thread_main, t);
                if (r < 0) {
                        log_error_errno(r, "Failed to start the thread of plugin %s: %m", paths[i]);
                        safe_close(t->socket_fd);
                        safe_close(t->stop_fd);
                        t->runner = plugin_runner_free(t->runner);
                        free(paths[i]);
                        continue;
                }
                t->running = true;
                ip->n++;
        }
        return 0;
}

void in_process_stop(void *userdata) {
        struct in_process_options *o = userdata;
        struct in_process *ip = o->state;
        if (!ip)
                return;
        for (size_t i = 0; i < ip->n; i++)
                (void) eventfd_write(ip->threads[i].stop_fd, 1);
        for (size_t i = 0; i < ip->n; i++) {
                struct plugin_thread *t = &ip->threads[i];
                if (t->running)
                        (void) pthread_join(t->thread, NULL);
                safe_close(t->stop_fd);
                free(t->path);
        }
        free(ip);
        o->state = NULL;
}
